'use strict'
// `CircuitBreaker`: the drop-in for seed 000's class. Every decision is the
// core's (the addon); this class keeps the hot path off the native boundary,
// where a call costs ~0.5 µs, only as far as the core's licence allows
// (core/src/licence.rs):
// - under "admit until T", a call read before T is admitted without asking;
//   the admissions are handed over in one count, and its success, if read
//   before T (all such readings fall in one window bucket), joins a batch of
//   successes handed over at once (before any other native call, and at 256);
// - under "reject until T", a call read before T is rejected without asking,
//   and the rejections are counted in batches;
// - with a concurrency limit, "admit" holds only while the licence's room
//   lasts: each call admitted under it takes one, each batched success gives
//   one back; at none left, calls cross;
// - every other call, and every other outcome, crosses at once.
// The licence is asked again after anything that can change it: a
// transition, a manual operation, a restore, or its time running out; with
// a concurrency limit, also after every call and report that crosses.
//
// With the default clock, no slow-call threshold, no rate threshold and no
// concurrency limit (a success's window bucket then changes nothing a call
// is told: the licence's `bucketDecides`), a success under "admit until T"
// reads no clock: an unref'd timer at T (platform.js's `afterMs`) ends its
// batching, and until it fires a success counts as read at the latest
// reading taken (the first admission of a batch reads one), which lies in
// T's window bucket. A timer fires late by as long as the event loop does
// not run timers (a long synchronous task, a chain of promises): a success
// settled meanwhile counts in T's bucket, which only the window's metrics
// (calls, error rate) can see, never a state, an event or a refusal. Where
// no timer is trusted (halfopen-wasm: workerd, browsers) every such success
// reads the clock.

const { NativeBreaker } = require('../native.js')
const { execute, settlers } = require('./call.js')
const { GroupLink, linkOf } = require('./group.js')
const { between, read, readToReport } = require('./clock.js')
const { CircuitBreakerOpenError, fromNative, output, snapshotText, typeError } = require('./errors.js')
const { drain, enqueue, publish } = require('./events.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { EventEmitter, afterMs, cancel, nativeBytes, performance } = require('./platform.js')
const { ADMIT, OUTCOME_CODES, REFUSAL_REASONS, REJECT, retryOf, SUCCESS, TRANSITION_PENDING, UNKNOWN } = require('./wire.js')

const STATES = ['CLOSED', 'HALF_OPEN', 'OPEN']
const STATE_OF = { closed: 'CLOSED', half_open: 'HALF_OPEN', open: 'OPEN' }
const EVENT_OF = { closed: 'close', half_open: 'halfOpen', open: 'open' }
const BATCH = 256
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The licence timers of breakers, cancelled if their breaker is collected
 * first; only where the platform has timers for it (halfopen-wasm has none,
 * and workerd may have no FinalizationRegistry). (Under fake timers whose
 * ids start again, as after node:test's `mock.timers.reset()`, a late
 * finalizer may cancel a newer timer of the same id.)
 */
const WATCHES = afterMs === undefined ? undefined : new FinalizationRegistry((handle) => cancel(handle))

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

/** The event payload of a native transition. */
function transitionEvent(t) {
  const event = { from: STATE_OF[t.from], to: STATE_OF[t.to], reason: t.reason, atMs: t.atMs }
  if (t.name !== undefined && t.name !== null) return { name: t.name, ...event }
  return event
}

/** Queues each transition the addon held, in its order, on `emitter`. */
function enqueueTransitions(emitter, transitions) {
  for (const t of transitions) {
    const event = transitionEvent(t)
    enqueue(emitter, EVENT_OF[t.to], event)
    enqueue(emitter, 'stateChange', event)
  }
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
    this._isFailure = t.isFailure
    this._fallback = t.fallback
    this._clock = t.clock
    this._monotonic = t.monotonic
    this._sharedClock = t.sharedClock
    this._timeoutMs = t.timeoutMs
    this._timed = undefined // its calls with a timeout (lib/call.js), while there are some
    try {
      this._native = new NativeBreaker(t.native, t.latencyHistogram)
    } catch (err) {
      throw fromNative(err, { options })
    }
    checkName(this.name, 'name', this._native.maxNameBytes())
    this._last = 0 // the latest clock reading (readings are never below 0)
    this._kind = UNKNOWN // the licence
    this._generation = 0
    this._until = -1 // when the licence ends (-1: no licence to act on)
    this._gauge = 0 // the state as of the licence
    this._admitted = 0 // admissions under the licence, not yet handed over
    this._admittedAt = 0
    this._batch = 0 // successes under the licence, not yet handed over
    this._batchAt = 0
    this._rejections = 0 // rejections under the licence, not yet counted
    this._refusalMs = 0 // the latest rejection's retry time
    this._licensed = null // the permit of calls admitted under the licence
    this._slowAfter = 0 // under "admit": a success slower than this is a failure (set with the licence)
    this._room = Infinity // under "admit": calls that may still be admitted without asking
    this._limited = false // whether a concurrency limit is configured (set with the licence)
    this._pending = false // whether transitions waited when the licence was asked
    this._watched = false // under "admit": whether successes need no clock reading (see the top)
    this._watchTimer = undefined // the timer at the licence's end, until it fires: { until, handle }
    this._refusalReason = 'open' // the latest rejection's reason
    this._refusalGauge = 0 // and its state
    this._licenceRefusal = 'open' // under "reject": why (the licence says)
    this._queue = null // events (lib/events.js)
    if (t.given.group !== undefined) new GroupLink(this, t.given.group)
  }

  /** Runs `fn` if the breaker admits it; settles exactly as `fn` does. */
  execute(fn, options) {
    return execute(this, fn, options)
  }

  /** The state now, counting elapsed time: "CLOSED" | "OPEN" | "HALF_OPEN". */
  getState() {
    const now = read(this)
    this._flush(now)
    this._relicense(now)
    return STATES[this._gauge]
  }

  /**
   * Asks for leave to make one call, without running anything, through the
   * core (no licence): a permit `{ admitted: true, generation, issuedAtMs }`
   * to hand back to `record` once, or `{ admitted: false, state, retryAfterMs, reason }`.
   */
  tryAcquire() {
    const now = read(this)
    const generation = this._acquire(now)
    if (generation < 0) {
      const { state, retryAfterMs, reason } = this._refused()
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
    this._settle(data, code)
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    return this._native.mode(read(this)).toUpperCase()
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
    const now = read(this)
    this._flush(now)
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
    const now = read(this)
    this._flush(now)
    return metricsOf(this._native.metrics(now))
  }

  /** The Prometheus text exposition of this breaker. */
  prometheus() {
    const now = read(this)
    this._flush(now)
    return output(() => this._native.prometheus(this.name, now))
  }

  /** The breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    const now = read(this)
    this._flush(now)
    return JSON.parse(output(() => this._native.snapshotJson(now)))
  }

  /** The breaker's state as compact bytes. */
  toBytes() {
    const now = read(this)
    this._flush(now)
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
    const now = read(this)
    try {
      this._native.restore(json, bytes, now, this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    }
    this._relicense(now)
  }

  // The call path's host methods (lib/call.js).

  /**
   * A permit for `execute`: under the licence, or from the core; null if
   * rejected. A closed breaker admits every call until its next transition,
   * so an admission under "admit" reads the default clock only for the
   * first of a batch (whose reading the core's metrics start from) or for a
   * slow-call threshold; a clock of the user's, which may go backwards, is
   * read as the plain protocol would, so that the latest reading is the same.
   */
  _admit() {
    if (this._kind === ADMIT && this._room > 0) {
      this._room -= 1
      const slow = this._slowAfter !== Infinity
      if (slow || !this._monotonic || this._admitted === 0) {
        const now = read(this)
        // A reading past the licence's end ends its watch, if its timer has
        // not (a timer replaced, or faked and not advanced).
        if (!(now < this._until)) this._watched = false
        if (this._admitted === 0) this._admittedAt = now
        this._admitted += 1
        // With a slow-call threshold, the call's latency needs its start.
        return slow ? { generation: this._generation, issuedAtMs: now, licensed: true, settlers: undefined } : this._licensed
      }
      this._admitted += 1
      return this._licensed
    }
    const now = read(this)
    if (this._kind === REJECT && now < this._until) {
      this._rejections += 1
      this._refusalMs = between(now, this._until)
      this._refusalReason = this._licenceRefusal
      this._refusalGauge = this._gauge
      return null
    }
    const generation = this._acquire(now)
    return generation < 0 ? null : { generation, issuedAtMs: now, licensed: false }
  }

  /**
   * Reports `outcome` to the core, then emits `event` and the transitions it
   * caused. A success admitted under the licence that still holds joins the
   * batch if its reading is before the licence's end and it was not slow (a
   * success within 2 µs of the threshold is left to the core, whose
   * microseconds decide). No reading at all while the licence is watched
   * (see the top: the default clock, and no bucket, latency or limit that
   * decides), until its end (Infinity, or its timer's).
   */
  _settle(permit, outcome, event, payload) {
    let now
    if (outcome === SUCCESS && permit.licensed === true && permit.generation === this._generation && this._kind === ADMIT) {
      const slowAfter = this._slowAfter
      now = this._watched ? this._last : readToReport(this)
      if (now < this._until && (slowAfter === Infinity || now - permit.issuedAtMs <= slowAfter - 0.002)) {
        this._batch += 1
        this._batchAt = now
        this._room += 1
        if (this._batch >= BATCH) {
          if (this._flush(now)) this._transitions(now)
        }
        if (event !== undefined && this.listenerCount(event) > 0) publish(this, event, payload)
        return
      }
    } else {
      now = readToReport(this)
    }
    let pending = this._flush(now)
    pending = this._native.record(permit.generation, permit.issuedAtMs, outcome, now) || pending
    if (event !== undefined && this.listenerCount(event) > 0) enqueue(this, event, payload)
    if (pending || this._limited || (this._kind === ADMIT && !(now < this._until))) this._relicense(now)
    if (pending) enqueueTransitions(this, this._native.takeTransitions())
    drain(this)
  }

  // Internals.

  /** A generation from the core's admission, or -1 (the rejection is kept). */
  _acquire(now) {
    this._flush(now)
    const code = this._native.acquire(now)
    if (code >= TRANSITION_PENDING) {
      this._transitions(now)
      return code - TRANSITION_PENDING
    }
    // A licence changes only with a transition (taken above), or with a
    // limit's room; ask for the first one here.
    if (this._kind === UNKNOWN || this._limited) this._relicense(now)
    if (code < 0) {
      this._refusalMs = retryOf(code)
      // Why, in the core's words (the binding does not infer it), and in
      // which state (before a listener of the transitions below changes it).
      this._refusalReason = this._native.refusalReason()
      this._refusalGauge = this._gauge
      // An open time that ended, then a full limit: the rejection observed
      // a transition (the licence, asked again with a limit, says so).
      if (this._pending) this._publishTransitions()
      return -1
    }
    return code
  }

  _rejectionError() {
    const err = new CircuitBreakerOpenError(this.name, STATES[this._refusalGauge], this._refusalMs, this._refusalReason)
    if (this.listenerCount('reject') > 0) publish(this, 'reject', err)
    return err
  }

  _refused() {
    const refusal = { breakerName: this.name, state: STATES[this._refusalGauge], retryAfterMs: this._refusalMs, reason: this._refusalReason }
    // (Read first: a listener may change the breaker.)
    if (this.listenerCount('reject') > 0) this._rejectionError()
    return refusal
  }

  /** Hands everything done under the licence to the core; true if a transition waits. */
  _flush(now) {
    let pending = false
    if (this._admitted > 0 || this._batch > 0) {
      const admitted = this._admitted
      const successes = this._batch
      this._admitted = 0
      this._batch = 0
      // One crossing; the core orders the admissions and the successes. A
      // batch is only of the licence's generation: every change of licence
      // follows a native call, and every native call a flush.
      pending = this._native.handOver(admitted, this._admittedAt, this._generation, successes, this._batchAt)
    }
    if (this._rejections > 0) {
      const count = this._rejections
      this._rejections = 0
      this._native.countRejections(count, now)
    }
    return pending
  }

  _relicense(now) {
    const licence = this._native.licence(now)
    const until = licence.kind === ADMIT || licence.kind === REJECT ? licence.untilMs : -1
    const watchable = licence.kind === ADMIT && this._monotonic && licence.slowAfterMs === Infinity && !licence.bucketDecides
    // (A timer not wanted now stays until it fires, harmless: a licence to
    // admit with the same end, after a trip and a forceClose, keeps it.)
    this._watched = watchable && this._watch(until)
    this._kind = licence.kind
    this._generation = licence.generation
    this._until = until
    this._gauge = licence.gauge
    this._slowAfter = licence.slowAfterMs
    this._room = licence.room
    this._limited = licence.limited
    this._pending = licence.pending
    this._licenceRefusal = REFUSAL_REASONS[licence.refusal] // why, under "reject" (the core's word)
    // Without a slow-call threshold, one permit serves every call admitted
    // under this licence (no allocation per call).
    if (licence.kind === ADMIT && (this._licensed === null || this._licensed.generation !== licence.generation)) {
      const permit = { generation: licence.generation, issuedAtMs: now, licensed: true, settlers: undefined }
      // (Its calls' reactions, made once: none per call.)
      permit.settlers = settlers(this, permit)
      this._licensed = permit
    }
  }

  /**
   * Watches `until`, the end of a licence to admit (before `_until` is set
   * to it): true if its successes need no reading. An end already watched
   * keeps its timer.
   */
  _watch(until) {
    if (until === Infinity) {
      this._unwatch()
      return true
    }
    if (this._watchTimer !== undefined && until === this._watchTimer.until) return true
    this._unwatch()
    const delay = until - performance.now()
    // An end already reached (the licence was asked at an earlier reading):
    // read. No timer where the platform has none.
    if (!(delay > 0) || afterMs === undefined) return false
    // (A weak reference: a breaker no one holds is not kept for its timer,
    // and the timer of one collected is cancelled.)
    const self = new WeakRef(this)
    const timer = { until, handle: undefined }
    this._watchTimer = timer
    // Whole milliseconds, rounded up (Node keeps a list per duration; a
    // success counted up to 1 ms late in its bucket is a timer's lateness),
    // at most setTimeout's longest delay, 2^31 − 1 ms, past which Node
    // fires at once with a warning (a timer that fires early only brings
    // the readings back).
    const handle = afterMs(Math.min(Math.ceil(delay), MAX_TIMER_MS), () => self.deref()?._watchEnded(timer))
    // A setTimeout that called back at once, or none set: nothing is watched.
    if (this._watchTimer !== timer || handle === undefined) {
      if (this._watchTimer === timer) this._watchTimer = undefined
      return false
    }
    timer.handle = handle
    WATCHES.register(this, handle, timer)
    return true
  }

  /** Cancels the timer at the licence's end, if any. */
  _unwatch() {
    const timer = this._watchTimer
    if (timer !== undefined) {
      this._watchTimer = undefined
      cancel(timer.handle)
      WATCHES.unregister(timer)
    }
  }

  /** The licence's end came (`timer`'s): successes read the clock again. */
  _watchEnded(timer) {
    if (this._watchTimer !== timer) return
    this._watchTimer = undefined
    this._watched = false
    WATCHES.unregister(timer)
  }

  _manual(op) {
    const now = read(this)
    const pending = this._flush(now)
    const changed = op(now)
    this._relicense(now)
    if (pending || changed) this._publishTransitions()
  }

  /** A transition waits: ask for the licence again, then publish. */
  _transitions(now) {
    this._relicense(now)
    this._publishTransitions()
  }

  _publishTransitions() {
    enqueueTransitions(this, this._native.takeTransitions())
    drain(this)
    // A transition may ask for an exchange with the group sooner.
    linkOf(this)?.poke()
  }
}

// An EventEmitter (instanceof, on/once/off/emit...) whose listener table is
// made on the first `on`: Node's EventEmitter methods create it lazily, and
// skipping its constructor saves ~260 bytes per breaker that has no listener.
Object.setPrototypeOf(CircuitBreaker.prototype, EventEmitter.prototype)
Object.setPrototypeOf(CircuitBreaker, EventEmitter)

module.exports = {
  CircuitBreaker,
  STATES,
  issuePermit,
  enqueueTransitions,
  metricsOf,
  takePermit,
}
