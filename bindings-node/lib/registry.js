'use strict'
// `Registry`: one breaker per name (seed 000's `breakerFor`), bounded, and
// its keyed breakers. Every call crosses into the addon (no licence per key
// yet) through the registry's own acquire/record, so a breaker with a call
// in flight is never evicted.

const { NativeRegistry } = require('../native.js')
const { enqueueTransitions, issuePermit, metricsOf, STATES, takePermit } = require('./breaker.js')
const { execute } = require('./call.js')
const { GroupLink, linkOf } = require('./group.js')
const { read, readToReport } = require('./clock.js')
const { CircuitBreakerOpenError, fromNative, output, RegistryFullError, snapshotText } = require('./errors.js')
const { drain, enqueue, publish } = require('./events.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { EventEmitter } = require('./platform.js')
const { REGISTRY_FULL, registryRefusalOf, TRANSITION_PENDING } = require('./wire.js')

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
    this._sharedClock = t.sharedClock
    this._timeoutMs = t.timeoutMs
    this._timed = new Map() // name -> its calls with a timeout (lib/call.js)
    this._last = 0
    this._queue = null
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
    let changed
    try {
      changed = this._native.configure(name, t.native, now)
    } catch (err) {
      throw fromNative(err, { options, name })
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
    return output(() => this._native.prometheus(read(this)))
  }

  /** Every breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    return JSON.parse(output(() => this._native.snapshotJson(read(this))))
  }

  /**
   * Replaces every breaker with those of `snapshot` (from `toJSON`, or its
   * JSON text). Calls in flight stay in flight (the name is not evicted);
   * their late reports reach no breaker.
   */
  restore(snapshot) {
    const text = snapshotText(snapshot)
    let changed
    try {
      changed = this._native.restoreJson(text, read(this), this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    }
    // Each breaker whose state the snapshot changed: reason 'restored'.
    if (changed) this._transitions()
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

/** A registry's breaker for one name: the `CircuitBreaker` methods that make sense per key. */
class KeyedBreaker {
  constructor(registry, name) {
    this._registry = registry
    this.name = name
    this._refusal = [0, 0, false, 'open'] // the latest: [gauge, retryAfterMs, full, reason]
  }

  // The clock, `isFailure` and `timeoutMs` are the registry's.
  get _clock() {
    return this._registry._clock
  }
  get _last() {
    return this._registry._last
  }
  set _last(t) {
    this._registry._last = t
  }
  get _isFailure() {
    return this._registry._isFailure
  }
  get _fallback() {
    return this._registry._fallback
  }
  get _timeoutMs() {
    return this._registry._timeoutMs
  }
  // The name's calls with a timeout (lib/call.js), kept by the registry: a
  // handle is made per get().
  get _timed() {
    return this._registry._timed.get(this.name)
  }
  set _timed(calls) {
    if (calls === undefined) this._registry._timed.delete(this.name)
    else this._registry._timed.set(this.name, calls)
  }

  /** Runs `fn` if this name's breaker admits it (see `CircuitBreaker.execute`). */
  execute(fn, options) {
    return execute(this, fn, options)
  }

  /** A permit, or `{ admitted: false, state, retryAfterMs, reason, error }` (never throws but for a broken clock). */
  tryAcquire() {
    const permit = this._admit()
    if (permit === null) {
      const error = this._rejectionError()
      const full = error instanceof RegistryFullError
      const state = full ? 'CLOSED' : error.state
      return { admitted: false, state, retryAfterMs: full ? Infinity : error.retryAfterMs, reason: full ? 'registry_full' : error.reason, error }
    }
    return issuePermit(this._registry, permit.generation, permit.issuedAtMs, this.name)
  }

  /** Reports how a permitted call ended (once per permit). */
  record(permit, outcome) {
    const { code, data } = takePermit(this._registry, permit, outcome, this.name)
    this._settle(data, code)
  }

  getState() {
    const r = this._registry
    const licence = r._native.licence(this.name, read(this))
    return licence === null || licence === undefined ? 'CLOSED' : STATES[licence.gauge]
  }

  /** Milliseconds until a call is worth trying (Infinity: held open, or the registry is full of busy breakers). */
  retryAfterMs() {
    return this._registry._native.retryAfter(this.name, read(this))
  }

  isCallPermitted() {
    return this.retryAfterMs() === 0
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    return this._registry._native.mode(this.name, read(this)).toUpperCase()
  }

  metrics() {
    const m = this._registry._native.metrics(this.name, read(this))
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
    const r = this._registry
    const link = linkOf(r)
    if (link === undefined) throw new TypeError(`${method} needs the registry's group option (and a registry still in its group)`)
    let changed
    try {
      changed = op(r, read(this))
    } catch (err) {
      throw fromNative(err, { name: this.name })
    }
    if (changed) r._transitions()
    link.poke()
  }

  // The call path's host methods (lib/call.js).

  _admit() {
    const now = read(this)
    const r = this._registry
    const code = r._native.acquire(this.name, now)
    if (code === REGISTRY_FULL) {
      this._refusal[2] = true
      return null
    }
    if (code < 0) {
      // One crossing: the code carries the whole refusal (src/wire.rs),
      // decoded into a scratch record (no allocation per refusal).
      registryRefusalOf(code, SCRATCH)
      this._refusal[0] = SCRATCH[0]
      // (Past 4.46 years, past what the code holds exactly: asked for.)
      this._refusal[1] = Number.isNaN(SCRATCH[1]) ? r._native.retryAfter(this.name, now) : SCRATCH[1]
      this._refusal[2] = false
      this._refusal[3] = SCRATCH[2]
      if (SCRATCH[3]) r._transitions()
      return null
    }
    if (code >= TRANSITION_PENDING) {
      r._transitions()
      return { generation: code - TRANSITION_PENDING, issuedAtMs: now }
    }
    return { generation: code, issuedAtMs: now }
  }

  _rejectionError() {
    const r = this._registry
    const [gauge, retryAfterMs, full, reason] = this._refusal
    const err = full ? new RegistryFullError(this.name) : new CircuitBreakerOpenError(this.name, STATES[gauge], retryAfterMs, reason)
    if (r.listenerCount('reject') > 0) publish(r, 'reject', err)
    return err
  }

  _refused() {
    const [gauge, retryAfterMs, full, reason] = this._refusal
    const refusal = full
      ? { breakerName: this.name, state: 'CLOSED', retryAfterMs: Infinity, reason: 'registry_full' }
      : { breakerName: this.name, state: STATES[gauge], retryAfterMs, reason }
    // (Read first: a listener may change the breaker.)
    if (this._registry.listenerCount('reject') > 0) this._rejectionError()
    return refusal
  }

  _settle(permit, outcome, event, payload) {
    const r = this._registry
    const pending = r._native.record(this.name, permit.generation, permit.issuedAtMs, outcome, readToReport(this))
    if (event !== undefined && r.listenerCount(event) > 0) enqueue(r, event, payload)
    if (pending) r._transitions()
    else drain(r)
  }

  _manual(op, ms) {
    const r = this._registry
    let changed
    try {
      changed = r._native.manual(this.name, op, read(this), ms)
    } catch (err) {
      throw fromNative(err, { name: this.name })
    }
    if (changed) r._transitions()
  }
}

module.exports = { Registry, RegistryFullError }
