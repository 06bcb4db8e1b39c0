'use strict'
// One breaker for a group of processes (the `group` option; issue 23). The
// core's member (src/group.rs, core/src/group/) decides everything: when to
// exchange, what to send, what the group's answer does to the breaker; a
// registry's members (src/registry_group.rs, core/src/group/keyed.rs) do
// the same for each of its names. This file does the I/O: one script call
// (`EVALSHA`, through the user's ioredis client) per exchange (a
// registry's names due, up to 100 a call), in the background, with a
// timeout. No call of the
// breaker ever waits for Redis or fails because of it: a store that fails
// or is late leaves the process deciding alone ('groupDegraded') until it
// answers again ('groupRecovered').

const { groupKeys, groupScript } = require('../native.js')
const { readRaw } = require('./clock.js')
const { fromNative, typeError, warnCallback } = require('./errors.js')
const { publish } = require('./events.js')
const { checkName } = require('./options.js')
const { randomHex64 } = require('./platform.js')

/** The ioredis command each client gets, defined once per client: the number of keys first. */
const COMMAND = 'halfopenGroupExchanges'
const DEFINED = new WeakSet()

/** The link of each breaker (or registry) in a group. */
const LINKS = new WeakMap()

const NUMBER_OPTIONS = { flushIntervalMs: 'ms', storeTimeoutMs: 'ms', leaseMs: 'ms', memberTtlMs: 'ms', quorum: 'count' }

/**
 * The native options of a `group` option (checked here for type; the core
 * checks ranges), for member id `member` (16 hex digits).
 */
function groupOptions(group, member) {
  if (group === null || typeof group !== 'object') throw typeError('group', 'an object { redis, name, ... }', group)
  const { redis, name } = group
  if (redis === null || typeof redis !== 'object' || typeof redis.defineCommand !== 'function') {
    throw typeError('group.redis', 'an ioredis client (Redis or Cluster)', redis)
  }
  checkName(name, 'group.name')
  if (name === '') throw typeError('group.name', 'a non-empty string', name)
  for (const key of Object.keys(group)) {
    if (key !== 'redis' && key !== 'name' && !Object.hasOwn(NUMBER_OPTIONS, key)) {
      const err = new TypeError(`unknown option group.${key}`)
      err.option = `group.${key}`
      throw err
    }
  }
  const options = { member }
  for (const [key, kind] of Object.entries(NUMBER_OPTIONS)) {
    const value = group[key]
    if (value === undefined) continue
    const whole = kind === 'count' ? Number.isInteger(value) && value >= 0 && value <= 2 ** 32 - 1 : Number.isFinite(value) && value >= 0
    if (typeof value !== 'number') throw typeError(`group.${key}`, 'a number', value)
    if (!whole) {
      const err = new RangeError(`option group.${key} must be ${kind === 'count' ? 'a whole number from 1' : 'a finite number of ms from 0'}, got ${value}`)
      err.option = `group.${key}`
      err.problem = Number.isFinite(value) ? 'out_of_range' : 'not_finite'
      throw err
    }
    options[key] = value
  }
  return { redis, name, options }
}

/** What a link does with a breaker (`CircuitBreaker`). */
const BREAKER = {
  join(b, name, options) {
    const keys = groupKeys(name)
    b._native.groupJoin(options)
    return keys
  },
  /** The call due (keys and arguments), or null. */
  request(b, now, keys) {
    // Successes batched under the licence count in the running totals
    // (handing them over may cause a transition: published first).
    // (The breaker's time never goes back: its latest reading.)
    const l = b._lic
    if (l._flush(l._last)) l._transitions(l._last)
    const args = b._native.groupRequest(now)
    return args === null || args === undefined ? null : { keys, args }
  },
  /** Applies the reply: -1 if it is not the script's. */
  apply(b, reply, at) {
    let code = 0
    b._manual(() => {
      code = b._native.groupApply(reply, at)
      return code > 0
    })
    return code
  },
  /** The exchange failed: the breaker decides alone (its limit its own again). */
  failed(b, at) {
    alone(b, at, () => b._native.groupFailed(at))
  },
  leave(b) {
    alone(b, b._last, () => b._native.groupLeave())
  },
}

/**
 * Applies `op` (the breaker goes on alone: its limit may change) at `at`,
 * a time already read, then asks for the licence again.
 */
function alone(b, at, op) {
  const pending = b._lic._flush(at)
  op()
  b._lic._relicense(at)
  if (pending) b._publishTransitions()
}

/** What a link does with a `Registry`: the names due, up to 100 a call (the core's rule). */
const REGISTRY = {
  join(r, name, options) {
    groupKeys(name)
    r._native.groupJoin(name, options)
    return null
  },
  request(r, now) {
    // What the names did under their licences counts in the running totals.
    r._handOverAll(r._last)
    return r._native.groupRequest(now) ?? null
  },
  apply(r, reply, at) {
    r._handOverAll(r._last)
    let code
    try {
      code = r._native.groupApply(reply, at)
    } finally {
      r._revokeAll()
    }
    if (code > 0) r._publishTransitions()
    return code
  },
  failed(r, at) {
    r._handOverAll(r._last)
    try {
      r._native.groupFailed(at)
    } finally {
      r._revokeAll()
    }
  },
  leave(r) {
    r._handOverAll(r._last)
    try {
      r._native.groupLeave()
    } finally {
      r._revokeAll()
    }
  },
}

/** The exchanges of a breaker (or of a registry's names) with their group's store. */
class GroupLink {
  /**
   * `owner`: a `CircuitBreaker`, or a `Registry` with `registry` true;
   * `member`: its member id (random per process; the conformance runner
   * numbers its simulated processes).
   */
  constructor(owner, group, registry = false, member = randomHex64()) {
    if (typeof owner._native.groupJoin !== 'function' || typeof groupScript !== 'function') {
      throw typeError('group', 'absent: the WebAssembly backend has no group mode (it needs the native addon)', group)
    }
    const { redis, name, options } = groupOptions(group, member)
    this._host = registry ? REGISTRY : BREAKER
    let keys
    try {
      keys = this._host.join(owner, name, options)
    } catch (err) {
      const e = fromNative(err)
      if (typeof e.option === 'string' && !e.option.startsWith('group.')) {
        e.message = e.message.replace(`option ${e.option}`, `option group.${e.option}`)
        e.option = `group.${e.option}`
      }
      throw e
    }
    if (!DEFINED.has(redis)) {
      redis.defineCommand(COMMAND, { lua: groupScript() })
      DEFINED.add(redis)
    }
    this.member = options.member
    this._owner = owner
    this._redis = redis
    this._keys = keys
    this._timeoutMs = owner._native.groupStoreTimeoutMs()
    this._timer = null
    this._inFlight = false
    this._closed = false
    this._lastError = null
    LINKS.set(owner, this)
    this._start()
  }

  /**
   * The first exchange: once the client is connected, or as soon as it
   * says it cannot connect ('error', 'end': a Redis that is down is an
   * outage at once; ioredis reports a connection that hangs at its
   * `connectTimeout`). A process starting does not report its client's
   * connection as an outage, however slow the start (no timer decides).
   */
  _start() {
    const r = this._redis
    // (A lazy client, 'wait', connects at its first command.)
    if (r.status === undefined || r.status === 'ready' || r.status === 'wait' || typeof r.once !== 'function') {
      return this._schedule()
    }
    const events = ['ready', 'error', 'end']
    const start = () => {
      for (const e of events) r.removeListener?.(e, start)
      this._schedule()
    }
    for (const e of events) r.once(e, start)
  }

  /** Sets the timer for the next exchange the member asks for. */
  _schedule() {
    if (this._closed || this._inFlight) return
    if (this._timer !== null) clearTimeout(this._timer)
    const b = this._owner
    let delay
    try {
      // A clock that fails is the exchange's failure (reported there); the
      // member's own backoff then sets the retry, from the latest good reading.
      // Readings as the clock gives them (a step back included: the
      // member keeps its pace through one).
      let now
      try {
        now = readRaw(b)
      } catch {
        now = b._last
      }
      delay = Math.min(Math.max(0, b._native.groupNextMs(now) - now), 2 ** 31 - 1)
    } catch (err) {
      warnCallback(err, this._label())
      delay = 1000
    }
    this._timer = setTimeout(() => {
      this._timer = null
      this._exchange().catch((err) => warnCallback(err, this._label()))
    }, delay)
    this._timer.unref?.()
  }

  /** One exchange, if the member says one is due. */
  async _exchange() {
    const b = this._owner
    if (this._closed || this._inFlight) return
    let call
    let now
    try {
      now = readRaw(b)
    } catch (err) {
      // No exchange without a time to send it at: the process decides
      // alone ('groupDegraded' carries the clock's TypeError) and retries
      // with the member's backoff, as after a store failure.
      return this._failedWith(err)
    }
    try {
      call = this._host.request(b, now, this._keys)
    } catch (err) {
      // Anything that stops an exchange is its failure, said with the error.
      return this._failedWith(err)
    }
    if (call === null) return this._schedule()
    this._inFlight = true
    let reply
    let failure = null
    let timer
    try {
      const late = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the group store did not answer within ${this._timeoutMs} ms`)), this._timeoutMs)
      })
      // (One array: ioredis flattens it; a registry's call can hold more
      // arguments than a spread may.)
      reply = await Promise.race([this._redis[COMMAND](call.keys.length, call.keys.concat(call.args)), late])
    } catch (err) {
      failure = err
    } finally {
      clearTimeout(timer)
      this._inFlight = false
    }
    if (this._closed) return
    if (failure === null && !(Array.isArray(reply) && reply.every((v) => typeof v === 'string'))) {
      failure = new Error('the group store answered something its script cannot have')
    }
    try {
      let at = b._last
      if (failure === null) {
        try {
          at = readRaw(b)
        } catch (err) {
          failure = err
        }
      }
      if (failure === null) {
        const code = this._host.apply(b, reply, at)
        if (code < 0) failure = new Error('the group store answered something its script cannot have')
      } else {
        this._host.failed(b, at)
      }
    } catch (err) {
      // The clock failed between the readings (or the breaker threw):
      // the exchange failed, and says why.
      return this._failedWith(err)
    }
    if (failure !== null) this._lastError = failure
    this._events()
    this._schedule()
  }

  /** The exchange failed because of `err`: the process decides alone ('groupDegraded' carries it). */
  _failedWith(err) {
    const b = this._owner
    this._lastError = err
    try {
      this._host.failed(b, b._last)
    } catch (e) {
      warnCallback(e, this._label())
    }
    this._events()
    this._schedule()
  }

  /** What warnings call the link. */
  _label() {
    return this._host === BREAKER ? `the group of '${this._owner.name}'` : 'the group of a Registry'
  }

  /** Emits the link's changes on its owner. */
  _events() {
    const b = this._owner
    // (A breaker's events name it; a registry's are about every name.)
    const who = this._host === BREAKER ? { name: b.name } : {}
    for (let event = b._native.groupEvent(); event !== null; event = b._native.groupEvent()) {
      if (event === 'degraded') publish(b, 'groupDegraded', { ...who, error: this._lastError })
      else publish(b, 'groupRecovered', { ...who })
    }
  }

  /** A state changed: a member may want an exchange sooner. */
  poke() {
    if (!this._inFlight) this._schedule()
  }

  /** Stops exchanging (the breaker, or each name, goes on alone, in no group). */
  close() {
    this._host.leave(this._owner)
    this._closed = true
    if (this._timer !== null) clearTimeout(this._timer)
    this._timer = null
    LINKS.delete(this._owner)
  }

  /**
   * What the link knows: the member id, whether it decides alone, and the
   * group's phase as last answered (a breaker's), or the names in the
   * group and those its store answered (a registry's).
   */
  status() {
    const n = this._owner._native
    if (this._host === REGISTRY) {
      return { member: this.member, degraded: n.groupDegraded(), names: n.groupSize(), answered: n.groupAnswered() }
    }
    return { member: this.member, degraded: n.groupDegraded(), phase: n.groupPhase() }
  }
}

/** The link of `owner` (a breaker or a registry), if it is in a group. */
function linkOf(owner) {
  return LINKS.get(owner)
}

module.exports = { COMMAND, GroupLink, linkOf }
