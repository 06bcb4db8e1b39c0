'use strict'
// `Registry`: one breaker per name (seed 000's `breakerFor`), bounded, and
// its keyed breakers. A name's calls take the licence's fast path
// (lib/licence.js) through its `KeyState`, one per name JavaScript has seen
// the breaker of, kept in `_keys`; `KeyedBreaker`s (made by `get(name)`)
// are handles to it. The core evicts an idle breaker only inside a native
// call that can make one (a name's first call, `configure`, a manual
// operation, a restore, a group exchange), and counts as idle a breaker with
// no call in flight that it knows of. So:
// - before any of these calls, everything done under every name's licence
//   is handed over (`_handOverAll`): the core knows every call in flight,
//   and never evicts a breaker with one;
// - after it, the licences are asked again, each at its name's next call
//   (`_revokeAll`), and if a breaker was evicted (or a restore replaced
//   them), every KeyState is dropped: a name's next call starts a new one.
//   A dropped KeyState holds no licence again; the calls it admitted
//   report their outcomes one by one.
// In a registry at its capacity that evicts for every new name, every name
// therefore asks again after each eviction: the fast path serves names that
// stay.

const { NativeRegistry } = require('../native.js')
const { issuePermit, metricsOf, STATES, takePermit } = require('./breaker.js')
const { initLicence, Licensed, licensed } = require('./licence.js')
const { execute } = require('./call.js')
const { GroupLink, linkOf } = require('./group.js')
const { read } = require('./clock.js')
const { CircuitBreakerOpenError, fromNative, output, RegistryFullError, snapshotText } = require('./errors.js')
const { drain, enqueueTransitions, publish } = require('./events.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { EventEmitter } = require('./platform.js')
const { REGISTRY_FULL, registryRefusalOf, TRANSITION_PENDING, UNKNOWN } = require('./wire.js')

/**
 * One breaker per name, made on first use, at most `capacity` (default
 * 10,000): beyond it the least recently used *idle* breaker is evicted (never
 * an open, half-open, forced, failing or busy one); if none is idle the call
 * is rejected with `RegistryFullError`. Events are emitted here, with the
 * breaker's `name` in each.
 */
class Registry extends EventEmitter {
  constructor(options = {}) {
    super()
    const t = translate(options, 'registry')
    this._isFailure = t.isFailure
    this._fallback = t.fallback
    this._clock = t.clock
    this._monotonic = t.monotonic
    this._sharedClock = t.sharedClock
    this._timeoutMs = t.timeoutMs
    this._timed = new Map() // name -> its calls with a timeout (lib/call.js)
    this._last = 0
    this._queue = null
    this._keys = new Map() // name -> its KeyState, while the core holds its breaker
    this._evictionsSeen = 0 // the core's evictions when `_keys` was last checked
    try {
      this._native = new NativeRegistry(t.native, t.capacity)
    } catch (err) {
      throw fromNative(err, { options })
    }
    this._maxNameBytes = this._native.maxNameBytes()
    // Each name's breaker a group of its own, all exchanged in one script call.
    if (t.given.group !== undefined) new GroupLink(this, t.given.group, true)
  }

  /**
   * With the `group` option: `{ member, degraded, names, answered }` (the
   * member id of this process, whether some names decide alone because
   * the store failed them, how many names are in the group: a name joins at the
   * next regular exchange after its breaker is made, and how many of them
   * Redis answered); else (also after `leaveGroup()`) null.
   */
  groupStatus() {
    return linkOf(this)?.status() ?? null
  }

  /** Stops exchanging with the group (every name goes on alone). */
  leaveGroup() {
    linkOf(this)?.close()
  }

  /** The breaker for `name` (made on its first call). */
  get(name) {
    checkName(name, 'name', this._maxNameBytes)
    return new KeyedBreaker(this, name)
  }

  /**
   * Gives `name` its own core options: the Registry's, changed by
   * `options` (for at most `capacity` names; the core's rule: an option
   * given replaces the Registry's, a window or a limit whole, `null` unsets
   * it, a `preset` starts from that preset). A breaker `name` has is
   * replaced by a closed one; if it was not closed, 'close' and
   * 'stateChange' are emitted with reason 'reconfigured'.
   */
  configure(name, options) {
    checkName(name, 'name', this._maxNameBytes)
    const t = translate(options, 'configure')
    const now = read(this)
    this._handOverAll(now)
    let changed
    try {
      changed = this._native.configure(name, t.native, now)
    } catch (err) {
      throw fromNative(err, { options, name })
    } finally {
      this._revokeAll()
    }
    if (changed) this._transitions()
  }

  /** The names of every breaker held. */
  names() {
    return output(() => this._native.names())
  }

  /** Whether `name` has a breaker now. */
  has(name) {
    checkName(name, 'name', this._maxNameBytes)
    return this._native.has(name)
  }

  /** Breakers held. */
  get size() {
    return this._native.size
  }

  /** Idle breakers evicted so far. */
  get evictions() {
    return this._native.evictions
  }

  /** The Prometheus text exposition of every breaker. */
  prometheus() {
    const now = read(this)
    this._handOverAll(now)
    return output(() => this._native.prometheus(now))
  }

  /** Every breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    const now = read(this)
    this._handOverAll(now)
    return JSON.parse(output(() => this._native.snapshotJson(now)))
  }

  /**
   * Replaces every breaker with those of `snapshot` (from `toJSON`, or its
   * JSON text). Calls in flight stay in flight (the name is not evicted);
   * their late reports reach no breaker.
   */
  restore(snapshot) {
    const text = snapshotText(snapshot)
    const now = read(this)
    this._handOverAll(now)
    let changed
    try {
      changed = this._native.restoreJson(text, now, this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    } finally {
      // Every breaker may be another now.
      this._revokeAll(true)
    }
    // Each breaker whose state the snapshot changed: reason 'restored'.
    if (changed) this._transitions()
  }

  /**
   * Hands everything done under every name's licence to the core (before
   * a native call that may evict a breaker, or that reads them all).
   */
  _handOverAll(now) {
    let pending = false
    for (const state of this._keys.values()) {
      if (state._flush(now)) {
        pending = true
        state._revoke()
      }
    }
    if (pending) this._transitions()
  }

  /**
   * After a native call that may have changed any name's breaker: each
   * licence is asked again at its name's next call; if a breaker was
   * evicted (or `replaced`: every one), every KeyState is dropped.
   */
  _revokeAll(replaced = false) {
    const evictions = this._native.evictions
    const drop = replaced || evictions !== this._evictionsSeen
    this._evictionsSeen = evictions
    for (const state of this._keys.values()) {
      state._revoke()
      if (drop) state._dropped = true
    }
    if (drop) this._keys.clear()
  }

  /** The KeyState of `name`: its own, or a new one (not kept until its breaker is made). */
  _key(name) {
    return this._keys.get(name) ?? new KeyState(this, name)
  }

  _transitions() {
    enqueueTransitions(this, this._native.takeTransitions())
    drain(this)
    // A transition may ask for an exchange with the group sooner.
    linkOf(this)?.poke()
  }
}

/** Where a key's refusal is decoded (one for every key: each read at once). */
const SCRATCH = [0, 0, '', false]

/** What a KeyState asks the registry's addon, as a breaker's own (lib/licence.js). */
class KeyNative {
  constructor(native, name) {
    this._n = native
    this._name = name
  }
  licence(now) {
    return this._n.licence(this._name, now)
  }
  handOver(admitted, firstMs, generation, successes, atMs) {
    return this._n.handOver(this._name, admitted, firstMs, generation, successes, atMs)
  }
  countRejections(count, now) {
    this._n.countRejections(this._name, count, now)
  }
  record(generation, issuedAtMs, outcome, now) {
    return this._n.record(this._name, generation, issuedAtMs, outcome, now)
  }
  takeTransitions() {
    return this._n.takeTransitions()
  }
}

/**
 * One name's licence and call path (lib/call.js's host): made with its
 * breaker (`_made`: kept in the registry's `_keys`), until dropped.
 */
class KeyState {
  constructor(registry, name) {
    this.name = name
    this._registry = registry
    this._native = new KeyNative(registry._native, name)
    this._emitter = registry
    // (The registry's, as own fields: read on every call.)
    this._clock = registry._clock
    this._monotonic = registry._monotonic
    this._isFailure = registry._isFailure
    this._fallback = registry._fallback
    this._timeoutMs = registry._timeoutMs
    this._last = registry._last
    initLicence(this)
    this._made = false // whether its breaker is made and it is the registry's KeyState for it
    this._dropped = false // whether it no longer is (see the top)
    this._full = false // whether the latest refusal was the registry's: full of busy breakers
  }

  // The name's calls with a timeout (lib/call.js), kept by the registry, so
  // that a KeyState dropped with some out leaves them to its successor.
  get _timed() {
    const timed = this._registry._timed
    return timed.size === 0 ? undefined : timed.get(this.name)
  }
  set _timed(calls) {
    if (calls === undefined) this._registry._timed.delete(this.name)
    else this._registry._timed.set(this.name, calls)
  }

  /** A generation from the core's admission, or -1 (the rejection is kept). */
  _acquire(now) {
    const r = this._registry
    // A name without a breaker gets one here, which may evict another's.
    if (!this._made) r._handOverAll(now)
    this._flush(now)
    const code = r._native.acquire(this.name, now)
    this._full = code === REGISTRY_FULL
    if (this._full) return -1
    if (!this._made) this._join()
    if (code < 0) {
      // One crossing: the code carries the whole refusal (src/wire.rs),
      // decoded into a scratch record (no allocation per refusal).
      registryRefusalOf(code, SCRATCH)
      this._refusalGauge = SCRATCH[0]
      // (Past 4.46 years, past what the code holds exactly: asked for.)
      this._refusalMs = Number.isNaN(SCRATCH[1]) ? r._native.retryAfter(this.name, now) : SCRATCH[1]
      this._refusalReason = SCRATCH[2]
      if (SCRATCH[3]) this._transitions(now)
      else if (this._kind === UNKNOWN || this._limited) this._relicense(now)
      return -1
    }
    if (code >= TRANSITION_PENDING) {
      this._transitions(now)
      return code - TRANSITION_PENDING
    }
    // A licence changes only with a transition (taken above), or with a
    // limit's room; ask for the first one here.
    if (this._kind === UNKNOWN || this._limited) this._relicense(now)
    return code
  }

  /** Its breaker was just made (or found): it becomes the name's KeyState. */
  _join() {
    const r = this._registry
    this._made = true
    // An eviction made room: every other KeyState is dropped.
    if (r._native.evictions !== r._evictionsSeen) r._revokeAll()
    r._keys.set(this.name, this)
  }

  _relicense(now) {
    if (this._made && !this._dropped) Licensed.prototype._relicense.call(this, now)
    else this._revoke()
  }

  _rejectionError() {
    const r = this._registry
    const err = this._full
      ? new RegistryFullError(this.name)
      : new CircuitBreakerOpenError(this.name, STATES[this._refusalGauge], this._refusalMs, this._refusalReason)
    if (r.listenerCount('reject') > 0) publish(r, 'reject', err)
    return err
  }

  _refused() {
    const refusal = this._full
      ? { breakerName: this.name, state: 'CLOSED', retryAfterMs: Infinity, reason: 'registry_full' }
      : { breakerName: this.name, state: STATES[this._refusalGauge], retryAfterMs: this._refusalMs, reason: this._refusalReason }
    // (Read first: a listener may change the breaker.)
    if (this._registry.listenerCount('reject') > 0) this._rejectionError()
    return refusal
  }

  _publishTransitions() {
    this._registry._transitions()
  }

  /**
   * Applies `op(now)` (true if a transition waits) to its breaker, which
   * it makes if there is none (and may evict another's for it).
   */
  _manual(op) {
    const r = this._registry
    const now = read(this)
    let pending = false
    if (this._made) pending = this._flush(now)
    else r._handOverAll(now)
    let changed
    try {
      changed = op(r, now)
    } finally {
      if (this._made) this._relicense(now)
      else r._revokeAll()
    }
    if (pending || changed) r._transitions()
  }
}

licensed(KeyState)

/** A registry's breaker for one name: the `CircuitBreaker` methods that make sense per key. */
class KeyedBreaker {
  constructor(registry, name) {
    this._registry = registry
    this.name = name
    this._state = undefined // its name's KeyState, once it has one
  }

  /** Its name's KeyState (kept while it is the registry's). */
  _key() {
    const state = this._state
    if (state !== undefined && !state._dropped) return state
    const found = this._registry._key(this.name)
    this._state = found._made ? found : undefined
    return found
  }

  /** Runs `fn` if this name's breaker admits it (see `CircuitBreaker.execute`). */
  execute(fn, options) {
    return execute(this._key(), fn, options)
  }

  /** A permit, or `{ admitted: false, state, retryAfterMs, reason, error }` (never throws but for a broken clock). */
  tryAcquire() {
    const state = this._key()
    const now = read(state)
    const generation = state._acquire(now)
    if (generation < 0) {
      const error = state._rejectionError()
      const full = error instanceof RegistryFullError
      const refused = full ? 'CLOSED' : error.state
      return { admitted: false, state: refused, retryAfterMs: full ? Infinity : error.retryAfterMs, reason: full ? 'registry_full' : error.reason, error }
    }
    return issuePermit(this._registry, generation, now, this.name)
  }

  /** Reports how a permitted call ended (once per permit). */
  record(permit, outcome) {
    const { code, data } = takePermit(this._registry, permit, outcome, this.name)
    this._key()._settle(data, code)
  }

  getState() {
    const state = this._key()
    const now = read(state)
    if (state._made) {
      state._flush(now)
      state._relicense(now)
      return STATES[state._gauge]
    }
    const licence = this._registry._native.licence(this.name, now)
    return licence === null || licence === undefined ? 'CLOSED' : STATES[licence.gauge]
  }

  /** Milliseconds until a call is worth trying (Infinity: held open, or the registry is full of busy breakers). */
  retryAfterMs() {
    const state = this._key()
    const now = read(state)
    if (state._made && state._flush(now)) state._transitions(now)
    return this._registry._native.retryAfter(this.name, now)
  }

  isCallPermitted() {
    return this.retryAfterMs() === 0
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    const state = this._key()
    return this._registry._native.mode(this.name, read(state)).toUpperCase()
  }

  metrics() {
    const state = this._key()
    const now = read(state)
    if (state._made && state._flush(now)) state._transitions(now)
    const m = this._registry._native.metrics(this.name, now)
    return m ? metricsOf(m) : null
  }

  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._manual('force_open', ms)
  }

  forceOpenAtLeast(ms) {
    checkAtLeastMs(ms)
    this._manual('force_open_at_least', ms)
  }

  forceClose() {
    this._manual('force_close')
  }

  disable() {
    this._manual('disable')
  }

  release() {
    this._manual('release')
  }

  reset() {
    this._manual('reset')
  }

  handleTimeout() {
    this._manual('handle_timeout')
  }

  /**
   * With the registry's `group` option: opens this name's breaker in every
   * process for `ms` (see `CircuitBreaker.groupForceOpen`).
   */
  groupForceOpen(ms) {
    checkAtLeastMs(ms, 'groupForceOpen')
    this._groupManual('groupForceOpen', (r, now) => r._native.groupForceOpen(this.name, now, ms))
  }

  /** With the registry's `group` option: closes this name's breaker in every process (see `CircuitBreaker.groupForceClose`). */
  groupForceClose() {
    this._groupManual('groupForceClose', (r, now) => r._native.groupForceClose(this.name, now, false))
  }

  /** With the registry's `group` option: resets this name's breaker in every process. */
  groupReset() {
    this._groupManual('groupReset', (r, now) => r._native.groupForceClose(this.name, now, true))
  }

  _groupManual(method, op) {
    const link = linkOf(this._registry)
    if (link === undefined) throw new TypeError(`${method} needs the registry's group option (and a registry still in its group)`)
    this._key()._manual((r, now) => {
      try {
        return op(r, now)
      } catch (err) {
        throw fromNative(err, { name: this.name })
      }
    })
    link.poke()
  }

  _manual(name, ms) {
    this._key()._manual((r, now) => {
      try {
        return r._native.manual(this.name, name, now, ms)
      } catch (err) {
        throw fromNative(err, { name: this.name })
      }
    })
  }
}

module.exports = { Registry, RegistryFullError }
