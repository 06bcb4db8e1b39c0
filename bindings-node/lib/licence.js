'use strict'
// The licence's fast path (core/src/licence.rs), shared by a `CircuitBreaker`
// and each name of a `Registry` (lib/registry.js): every decision is the
// core's; this keeps the hot path off the native boundary, where a call costs
// ~0.5 µs, only as far as the core's licence allows:
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
//
// A `Holder` is the call path's host (lib/call.js) for one breaker or one
// registry name: one class for both, so that the hot path's inline caches
// see one shape in a process that uses both. What differs is its owner's
// (the `CircuitBreaker`, or the `Registry`): asking the core for a call
// (`_acquire`), building a refusal, publishing transitions.

const { settlers } = require('./call.js')
const { between, read, readToReport } = require('./clock.js')
const { drain, enqueue, enqueueTransitions, heard, publish } = require('./events.js')
const { afterMs, cancel, performance } = require('./platform.js')
const { ADMIT, REFUSAL_REASONS, REJECT, SUCCESS, UNKNOWN } = require('./wire.js')

const BATCH = 256
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The licence timers of holders, cancelled if their holder is collected
 * first; only where the platform has timers for it (halfopen-wasm has none,
 * and workerd may have no FinalizationRegistry). (Under fake timers whose
 * ids start again, as after node:test's `mock.timers.reset()`, a late
 * finalizer may cancel a newer timer of the same id.)
 */
const WATCHES = afterMs === undefined ? undefined : new FinalizationRegistry((handle) => cancel(handle))

/** Whether a holder may take a licence: a breaker's always, a registry name's while its own (lib/registry.js). */
const OWN = 0
const NEW = 1
const DROPPED = 2

/**
 * The licence and the call path of one breaker (or registry name):
 * `native` asks its core (`licence(now)`, `handOver`, `countRejections`,
 * `record`, `takeTransitions`), `emitter` gets its events, `t` is its
 * options as translated (clock, isFailure, fallback, timeoutMs).
 */
class Holder {
  constructor(owner, emitter, name, native, t, status = OWN) {
    this.name = name
    this._owner = owner
    this._emitter = emitter
    this._native = native
    this._status = status // OWN, NEW (a registry name whose breaker is not made yet) or DROPPED
    this._isFailure = t.isFailure
    this._fallback = t.fallback
    this._clock = t.clock
    this._monotonic = t.monotonic
    this._timeoutMs = t.timeoutMs
    this._timed = undefined // its calls with a timeout (lib/call.js), while there are some
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
  }

  // The owner's part.

  /** A generation from the core's admission, or -1 (the rejection is kept). */
  _acquire(now) {
    return this._owner._acquire(this, now)
  }

  /** The error for the rejection just made (emits 'reject'). */
  _rejectionError() {
    return this._owner._rejectionError(this)
  }

  /** The rejection just made, as a plain object (emits 'reject' with its error, if listened to). */
  _refused() {
    return this._owner._refused(this)
  }

  _publishTransitions() {
    this._owner._publishTransitions()
  }

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
        // (A success's event: whether it is heard is known without a lookup.)
        if (event !== undefined && (event === 'success' ? heard(this._emitter) : this._emitter.listenerCount(event) > 0)) {
          publish(this._emitter, event, payload)
        }
        return
      }
    } else {
      now = readToReport(this)
    }
    // A registry name's holder dropped with calls out: they report through
    // the name's own holder, if it has one (after what it holds, and so that
    // it learns of the transitions they cause).
    if (this._status === DROPPED) {
      const own = this._owner._ownHolder(this.name)
      if (own !== undefined) {
        own._settle(permit, outcome, event, payload)
        return
      }
    }
    let pending = this._flush(now)
    pending = this._native.record(permit.generation, permit.issuedAtMs, outcome, now) || pending
    const emitter = this._emitter
    if (event !== undefined && emitter.listenerCount(event) > 0) enqueue(emitter, event, payload)
    if (pending || this._limited || (this._kind === ADMIT && !(now < this._until))) this._relicense(now)
    if (pending) enqueueTransitions(emitter, this._native.takeTransitions())
    drain(emitter)
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
    // (A registry name's holder, not its name's own (see lib/registry.js): none.)
    if (this._status !== OWN) {
      this._revoke()
      return
    }
    const licence = this._native.licence(now)
    // (None: a registry's name without a breaker. Asked again at its next call.)
    if (licence === null || licence === undefined) {
      this._revoke()
      return
    }
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

  /** A transition waits: ask for the licence again, then publish. */
  _transitions(now) {
    this._relicense(now)
    this._publishTransitions()
  }

  /** No licence to act on: every call asks, until the licence is asked again. */
  _revoke() {
    this._kind = UNKNOWN
    this._until = -1
    this._watched = false
    this._unwatch()
  }
}

module.exports = { DROPPED, Holder, NEW, OWN }
