'use strict'
// `CircuitBreaker`: the drop-in for seed 000's class. Every decision is the
// core's (the addon); its hot path is its licence holder's (lib/licence.js).

const { NativeBreaker } = require('../native.js')
const { execute } = require('./call.js')
const { GroupLink, linkOf } = require('./group.js')
const { read } = require('./clock.js')
const { CircuitBreakerOpenError, fromNative, output, snapshotText, typeError } = require('./errors.js')
const { drain, enqueueTransitions, listenable, publish, STATE_OF } = require('./events.js')
const { Holder } = require('./licence.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { nativeBytes } = require('./platform.js')
const { OUTCOME_CODES, retryOf, TRANSITION_PENDING, UNKNOWN } = require('./wire.js')

const STATES = ['CLOSED', 'HALF_OPEN', 'OPEN']

/** Permits handed out by `tryAcquire()` and not yet reported, to their breaker. */
const OUTSTANDING = new WeakMap()

/** The metrics object as documented: upper-case state, `null` for what is not measured. */
const OPTIONAL_METRICS = ['concurrencyLimit', 'meanTimeOpenMs', 'errorRate', 'latencyCount', 'latencyP50Ms', 'latencyP95Ms', 'latencyP99Ms', 'latencyMaxMs']
function metricsOf(m) {
  m.state = STATE_OF[m.state]
  // Own properties only: an accessor on Object.prototype with the same name
  // must neither stand in for an absent metric nor run (define, not assign).
  for (const key of OPTIONAL_METRICS) {
    if (!Object.hasOwn(m, key)) Object.defineProperty(m, key, { value: null, writable: true, enumerable: true, configurable: true })
  }
  return m
}

/**
 * Validates `record()`'s arguments; returns the permit's data, or throws a
 * TypeError. `owner` issued it (a breaker, or a registry with `name`).
 */
function takePermit(owner, permit, outcome, name) {
  const code = OUTCOME_CODES[Object.hasOwn(OUTCOME_CODES, outcome) ? outcome : '']
  if (code === undefined) throw typeError('outcome', '"success", "failure", "ignored" or "cancelled"', outcome)
  const data = permit !== null && typeof permit === 'object' ? OUTSTANDING.get(permit) : undefined
  if (data === undefined || data.owner !== owner || data.name !== name) {
    throw typeError('permit', 'an unreported permit from this breaker\'s tryAcquire()', permit)
  }
  OUTSTANDING.delete(permit)
  return { code, data }
}

/** A permit object for `tryAcquire()`, remembered until reported. */
function issuePermit(owner, generation, issuedAtMs, name) {
  const permit = Object.freeze({ admitted: true, generation, issuedAtMs })
  OUTSTANDING.set(permit, { owner, name, generation, issuedAtMs })
  return permit
}

/**
 * A circuit breaker for one upstream (seed 000's class, same options and
 * methods, plus the rest of the core's).
 */
class CircuitBreaker {
  constructor(options) {
    const t = translate(options, 'breaker')
    this.name = t.name
    this._sharedClock = t.sharedClock
    try {
      this._native = new NativeBreaker(t.native, t.latencyHistogram)
    } catch (err) {
      throw fromNative(err, { options })
    }
    checkName(this.name, 'name', this._native.maxNameBytes())
    this._lic = new Holder(this, this, t.name, this._native, t) // its licence and call path
    this._queue = null // events (lib/events.js)
    this._heard = false // whether 'success' has listeners (lib/events.js's `listenable`)
    this._heardCount = this._eventsCount // and its count of events then (the platform's prototype's)
    if (t.given.group !== undefined) new GroupLink(this, t.given.group)
  }

  // Its clock, as lib/clock.js reads it (its holder's), for its group's link.
  get _clock() {
    return this._lic._clock
  }
  get _last() {
    return this._lic._last
  }
  set _last(t) {
    this._lic._last = t
  }

  /** Runs `fn` if the breaker admits it; settles exactly as `fn` does. */
  execute(fn, options) {
    return execute(this._lic, fn, options)
  }

  /** The state now, counting elapsed time: "CLOSED" | "OPEN" | "HALF_OPEN". */
  getState() {
    const l = this._lic
    const now = read(l)
    l._flush(now)
    l._relicense(now)
    return STATES[l._gauge]
  }

  /**
   * Asks for leave to make one call, without running anything, through the
   * core (no licence): a permit `{ admitted: true, generation, issuedAtMs }`
   * to hand back to `record` once, or `{ admitted: false, state, retryAfterMs, reason }`.
   */
  tryAcquire() {
    const now = read(this._lic)
    const generation = this._acquire(this._lic, now)
    if (generation < 0) {
      const { state, retryAfterMs, reason } = this._refused(this._lic)
      return { admitted: false, state, retryAfterMs, reason }
    }
    return issuePermit(this, generation, now)
  }

  /**
   * Reports how a permitted call ended: "success", "failure", "ignored" or
   * "cancelled". A permit is reported once: a reported or unknown one is a TypeError.
   */
  record(permit, outcome) {
    const { code, data } = takePermit(this, permit, outcome)
    this._lic._settle(data, code)
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    return this._native.mode(read(this._lic)).toUpperCase()
  }

  /** When (on the breaker's clock, ms) it next changes by itself, or null. */
  pollTimeoutMs() {
    return this._native.pollTimeoutMs()
  }

  /** Applies the timed changes due now (emitting their events). */
  handleTimeout() {
    this._manual((now) => this._native.handleTimeout(now))
  }

  /** Whether a call would be admitted now (consumes nothing). */
  isCallPermitted() {
    return this.retryAfterMs() === 0
  }

  /** Milliseconds until a call is worth trying: 0 now, Infinity while held open. */
  retryAfterMs() {
    const now = read(this._lic)
    this._lic._flush(now)
    return this._native.retryAfter(now)
  }

  /** Holds the breaker open for `ms`, or until `forceClose`/`release` without it. */
  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._manual((now) => this._native.forceOpen(now, ms))
  }

  /**
   * Holds the breaker open for at least `ms` (an upstream's Retry-After),
   * never shortening an open period in force: of two hints, the longer holds.
   */
  forceOpenAtLeast(ms) {
    checkAtLeastMs(ms)
    this._manual((now) => this._native.forceOpenAtLeast(now, ms))
  }

  /** Closes now, forgetting the failures counted and the backoff reached. */
  forceClose() {
    this._manual((now) => this._native.forceClose(now))
  }

  /** Admits and counts every call, never trips, until `release`. */
  disable() {
    this._manual((now) => this._native.disable(now))
  }

  /** Ends `forceOpen` (probes follow) or `disable`. */
  release() {
    this._manual((now) => this._native.release(now))
  }

  /** Back to a new breaker's state (metrics are kept). */
  reset() {
    this._manual((now) => this._native.reset(now))
  }

  /**
   * With the `group` option: `{ member, degraded, phase }` (its member id,
   * whether it decides alone because the store failed, the group's phase as
   * last answered: "closed", "open", "half_open" or null); else (also after
   * `leaveGroup()`) null.
   */
  groupStatus() {
    return linkOf(this)?.status() ?? null
  }

  /**
   * With the `group` option: opens every process's breaker for `ms` (a
   * throttle webhook that reached this one): this breaker at once, the
   * others at their next exchange (within a flush interval); sent again
   * until Redis answers. Then the group probes, as after any open period.
   */
  groupForceOpen(ms) {
    checkAtLeastMs(ms, 'groupForceOpen')
    const link = linkOf(this)
    if (link === undefined) throw new TypeError('groupForceOpen needs the group option (and a breaker still in its group)')
    this._manual((now) => this._native.groupForceOpen(now, ms))
    link.poke()
  }

  /**
   * With the `group` option: closes every process's breaker and forgets
   * the group's failures and backoff (an operator's force-close): this
   * breaker at once, the others at their next exchange; sent again until
   * Redis answers. `groupReset()` does the same with each breaker reset.
   */
  groupForceClose() {
    this._groupClose(false)
  }

  /** With the `group` option: resets every process's breaker (see `groupForceClose`). */
  groupReset() {
    this._groupClose(true)
  }

  _groupClose(reset) {
    const link = linkOf(this)
    if (link === undefined) throw new TypeError(`group${reset ? 'Reset' : 'ForceClose'} needs the group option (and a breaker still in its group)`)
    this._manual((now) => this._native.groupForceClose(now, reset))
    link.poke()
  }

  /** Stops exchanging with the group (the breaker goes on alone). */
  leaveGroup() {
    linkOf(this)?.close()
  }

  /** Counters, times, error rate and (if kept) latency quantiles, as a plain object. */
  metrics() {
    const now = read(this._lic)
    this._lic._flush(now)
    return metricsOf(this._native.metrics(now))
  }

  /** The Prometheus text exposition of this breaker. */
  prometheus() {
    const now = read(this._lic)
    this._lic._flush(now)
    return output(() => this._native.prometheus(this.name, now))
  }

  /** The breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    const now = read(this._lic)
    this._lic._flush(now)
    return JSON.parse(output(() => this._native.snapshotJson(now)))
  }

  /** The breaker's state as compact bytes. */
  toBytes() {
    const now = read(this._lic)
    this._lic._flush(now)
    return output(() => this._native.snapshotBytes(now))
  }

  /** A breaker built from `options` with the state of `snapshot` (from `toJSON`, or its JSON text). */
  static fromJSON(options, snapshot) {
    const text = snapshotText(snapshot)
    const breaker = new CircuitBreaker(options)
    breaker._restore(text, null)
    return breaker
  }

  /** A breaker built from `options` with the state of `bytes` (from `toBytes`). */
  static fromBytes(options, bytes) {
    if (!(bytes instanceof Uint8Array)) throw typeError('bytes', 'a Buffer or Uint8Array', bytes)
    const breaker = new CircuitBreaker(options)
    breaker._restore(null, nativeBytes(bytes))
    return breaker
  }

  _restore(json, bytes) {
    const now = read(this._lic)
    try {
      this._native.restore(json, bytes, now, this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    }
    this._lic._relicense(now)
  }

  // Its licence holder's owner's part (lib/licence.js).

  /** A generation from the core's admission for `l` (its holder), or -1 (the rejection is kept there). */
  _acquire(l, now) {
    l._flush(now)
    const code = this._native.acquire(now)
    if (code >= TRANSITION_PENDING) {
      l._transitions(now)
      return code - TRANSITION_PENDING
    }
    // A licence changes only with a transition (taken above), or with a
    // limit's room; ask for the first one here.
    if (l._kind === UNKNOWN || l._limited) l._relicense(now)
    if (code < 0) {
      l._refusalMs = retryOf(code)
      // Why, in the core's words (the binding does not infer it), and in
      // which state (before a listener of the transitions below changes it).
      l._refusalReason = this._native.refusalReason()
      l._refusalGauge = l._gauge
      // An open time that ended, then a full limit: the rejection observed
      // a transition (the licence, asked again with a limit, says so).
      if (l._pending) this._publishTransitions()
      return -1
    }
    return code
  }

  _rejectionError(l) {
    const err = new CircuitBreakerOpenError(this.name, STATES[l._refusalGauge], l._refusalMs, l._refusalReason)
    if (this.listenerCount('reject') > 0) publish(this, 'reject', err)
    return err
  }

  _refused(l) {
    const refusal = { breakerName: this.name, state: STATES[l._refusalGauge], retryAfterMs: l._refusalMs, reason: l._refusalReason }
    // (Read first: a listener may change the breaker.)
    if (this.listenerCount('reject') > 0) this._rejectionError(l)
    return refusal
  }

  _manual(op) {
    const l = this._lic
    const now = read(l)
    const pending = l._flush(now)
    const changed = op(now)
    l._relicense(now)
    if (pending || changed) this._publishTransitions()
  }

  _publishTransitions() {
    enqueueTransitions(this, this._native.takeTransitions())
    drain(this)
    // A transition may ask for an exchange with the group sooner.
    linkOf(this)?.poke()
  }
}

listenable(CircuitBreaker)

module.exports = {
  CircuitBreaker,
  STATES,
  issuePermit,
  metricsOf,
  takePermit,
}
