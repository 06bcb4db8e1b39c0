'use strict'
// halfopen for Node.js: a drop-in for the seed's TypeScript CircuitBreaker.
//
// Every decision is made by the Rust core (native.js loads it). This file
// translates options, errors and events, and keeps the hot path off the
// native boundary, where a call costs ~0.5 µs:
// - while the core says it "admits freely" (closed, no slow-call threshold,
//   no latency histogram), calls are admitted without asking and their
//   successes are handed over in batches (`recordBatch`), flushed before
//   any other native call and at 256 (a batch counts in the window at the
//   time of its first success: one clock read per batch);
// - while the core has rejected with a known retry time, calls are rejected
//   until then without asking, and the rejections are counted in batches;
// - failures always cross at once (they can trip the breaker);
// - the clock is read only when a call crosses, or a batch starts; time never
//   goes backwards for the core, so a clock reading earlier than one already
//   seen is taken as that one here too.

const { EventEmitter } = require('node:events')
const { performance } = require('node:perf_hooks')
const { NativeBreaker, NativeRegistry } = require('./native.js')

const STATES = ['CLOSED', 'HALF_OPEN', 'OPEN']
const STATE_OF = { closed: 'CLOSED', half_open: 'HALF_OPEN', open: 'OPEN' }
const EVENT_OF = { closed: 'close', half_open: 'halfOpen', open: 'open' }
const TRANSITION_PENDING = 4294967296
const BATCH = 256
const SUCCESS = 0
const FAILURE = 1
const IGNORED = 2
const CANCELLED = 3
const OUTCOMES = { success: SUCCESS, failure: FAILURE, ignored: IGNORED, cancelled: CANCELLED }
/** The default clock: monotonic milliseconds (one function for every breaker). */
const monotonic = () => performance.now()

// Options: camelCase name -> [native key, kind]. Kinds: 'number' (finite or
// not: the core says which are valid), 'nullable' (a policy; null unsets it).
const NUMERIC_OPTIONS = {
  failureThreshold: ['failureThreshold', 'nullable'],
  windowMs: ['windowMs', 'number'],
  windowCalls: ['windowCalls', 'number'],
  consecutiveFailures: ['consecutiveFailures', 'nullable'],
  failureRateThreshold: ['failureRateThreshold', 'nullable'],
  minimumCalls: ['minimumCalls', 'number'],
  slowCallMs: ['slowCallMs', 'nullable'],
  slowCallRateThreshold: ['slowCallRateThreshold', 'nullable'],
  openTimeoutMs: ['openTimeoutMs', 'number'],
  backoffFactor: ['backoffFactor', 'number'],
  maxOpenTimeoutMs: ['maxOpenTimeoutMs', 'number'],
  jitter: ['jitter', 'number'],
  jitterSeed: ['jitterSeed', 'number'],
  halfOpenMaxAttempts: ['halfOpenMaxAttempts', 'number'],
  halfOpenSuccesses: ['halfOpenSuccesses', 'number'],
  probeTimeoutMs: ['probeTimeoutMs', 'number'],
}
const OTHER_OPTIONS = ['name', 'isFailure', 'clock', 'timeoutMs', 'latencyHistogram', 'capacity']

// Core field -> the option that sets it (for error messages).
const OPTION_OF_FIELD = {
  failure_threshold: 'failureThreshold',
  window: 'windowMs',
  consecutive_failures: 'consecutiveFailures',
  failure_rate_threshold: 'failureRateThreshold',
  minimum_calls: 'minimumCalls',
  slow_call_duration: 'slowCallMs',
  slow_call_rate_threshold: 'slowCallRateThreshold',
  open_timeout: 'openTimeoutMs',
  backoff_factor: 'backoffFactor',
  max_open_timeout: 'maxOpenTimeoutMs',
  jitter: 'jitter',
  jitter_seed: 'jitterSeed',
  half_open_max_attempts: 'halfOpenMaxAttempts',
  half_open_successes: 'halfOpenSuccesses',
  probe_timeout: 'probeTimeoutMs',
}

/**
 * Thrown (as a rejection) when the breaker does not admit a call; `fn` is not
 * called. It carries no stack trace: capturing one is half the cost of a
 * rejection, and it would only point into the breaker.
 */
class CircuitBreakerOpenError extends Error {
  constructor(breakerName, state, retryAfterMs) {
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super()
    Error.stackTraceLimit = limit
    this.breakerName = breakerName
    this.state = state
    this.retryAfterMs = retryAfterMs
  }

  // Written when read: most rejections are handled without reading it.
  get message() {
    return `CircuitBreaker[${this.breakerName}] is ${this.state}; retry in ${this.retryAfterMs} ms`
  }
}
CircuitBreakerOpenError.prototype.name = 'CircuitBreakerOpenError'

/** Thrown when a call exceeds `timeoutMs`; it counts as a failure. */
class CircuitBreakerTimeoutError extends Error {
  constructor(breakerName, timeoutMs) {
    super(`CircuitBreaker[${breakerName}] call timed out after ${timeoutMs} ms`)
    this.name = 'CircuitBreakerTimeoutError'
    this.breakerName = breakerName
  }
}

function typeError(option, expected, value) {
  const err = new TypeError(`option ${option} must be ${expected}, got ${value === null ? 'null' : typeof value}`)
  err.option = option
  return err
}

/** The native options and the JS-side settings, or a TypeError naming the option. */
function translate(options, registry = false) {
  if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options)
  const native = {}
  for (const key of Object.keys(options)) {
    if (!(key in NUMERIC_OPTIONS) && !OTHER_OPTIONS.includes(key)) {
      const err = new TypeError(`unknown option ${key}`)
      err.option = key
      throw err
    }
  }
  for (const [option, [nativeKey, kind]] of Object.entries(NUMERIC_OPTIONS)) {
    const value = options[option]
    if (value === undefined) continue
    if (value === null && kind === 'nullable') {
      if (option === 'failureThreshold') native.noFailureThreshold = true
      continue
    }
    if (typeof value !== 'number') throw typeError(option, 'a number', value)
    native[nativeKey] = value
  }
  if (native.windowMs !== undefined && native.windowCalls !== undefined) {
    const err = new TypeError('options windowMs and windowCalls exclude each other')
    err.option = 'windowCalls'
    throw err
  }
  const { name, isFailure, clock, timeoutMs, latencyHistogram, capacity } = options
  if (registry) {
    if (name !== undefined) throw typeError('name', 'absent (a registry names its breakers by key)', name)
    if (capacity !== undefined && typeof capacity !== 'number') throw typeError('capacity', 'a number', capacity)
    if (latencyHistogram !== undefined) throw typeError('latencyHistogram', 'absent in a registry', latencyHistogram)
  } else {
    if (typeof name !== 'string' || name === '') throw typeError('name', 'a non-empty string', name)
    if (capacity !== undefined) throw typeError('capacity', 'absent (it is a registry option)', capacity)
  }
  if (isFailure !== undefined && typeof isFailure !== 'function') throw typeError('isFailure', 'a function', isFailure)
  if (clock !== undefined && typeof clock !== 'function') throw typeError('clock', 'a function', clock)
  if (latencyHistogram !== undefined && typeof latencyHistogram !== 'boolean') {
    throw typeError('latencyHistogram', 'a boolean', latencyHistogram)
  }
  if (timeoutMs !== undefined) {
    if (typeof timeoutMs !== 'number') throw typeError('timeoutMs', 'a number', timeoutMs)
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
      const err = new RangeError(`option timeoutMs must be a finite number above 0, got ${timeoutMs}`)
      err.option = 'timeoutMs'
      throw err
    }
  }
  return { native, name, isFailure, clock, timeoutMs, latencyHistogram: latencyHistogram === true, capacity }
}

/** Turns a native "field|problem" into a RangeError naming the option. */
function nativeError(err, options) {
  const [field, problem] = String(err.message).split('|')
  if (problem === undefined) return err
  let option = OPTION_OF_FIELD[field] || field
  if (field === 'window' && options.windowCalls !== undefined) option = 'windowCalls'
  const out = new RangeError(`option ${option} ${problem}`)
  out.option = option
  return out
}

const OPTIONAL_METRICS = ['meanTimeOpenMs', 'errorRate', 'latencyCount', 'latencyP50Ms', 'latencyP95Ms', 'latencyP99Ms', 'latencyMaxMs']

/** The addon's metrics object as documented: upper-case state, `null` for what is not measured. */
function metricsOf(m) {
  m.state = STATE_OF[m.state]
  for (const key of OPTIONAL_METRICS) if (m[key] === undefined) m[key] = null
  return m
}

/** `forceOpen`'s duration: absent, or a finite number of ms >= 0. */
function checkForceOpenMs(ms) {
  if (ms !== undefined && (typeof ms !== 'number' || !(ms >= 0) || !Number.isFinite(ms))) {
    throw new RangeError(`forceOpen(ms): ms must be a finite number >= 0, got ${ms}`)
  }
}

/** Reads `owner._clock`, never earlier than its latest reading (`owner._last`). */
function latestReading(owner) {
  const now = owner._clock()
  if (now > owner._last) owner._last = now
  return owner._last
}

function snapshotError(err) {
  const [tag, kind, message] = String(err.message).split('|')
  if (tag !== 'snapshot') return err
  const out = new Error(message)
  out.name = 'SnapshotError'
  out.kind = kind
  return out
}

/**
 * A circuit breaker for one upstream (seed 000's class, same options and
 * methods, plus the rest of the core's).
 */
class CircuitBreaker {
  constructor(options) {
    const t = translate(options)
    this.name = t.name
    this._isFailure = t.isFailure
    this._clock = t.clock || monotonic
    this._timeoutMs = t.timeoutMs
    this._latency = t.latencyHistogram
    try {
      this._native = new NativeBreaker(t.native, t.latencyHistogram)
    } catch (err) {
      throw nativeError(err, options)
    }
    this._batch = 0 // successes admitted freely, not yet handed over
    this._batchGeneration = 0
    this._batchAt = 0 // when the batch's first success came
    this._last = -Infinity // the latest clock reading
    this._rejections = 0 // rejections without asking, not yet counted
    this._openUntil = -Infinity // rejecting without asking until then
    this._refresh(this._now())
  }

  _now() {
    return latestReading(this)
  }

  /** Runs `fn` if the breaker admits it; resolves/rejects exactly as `fn` does. */
  execute(fn, options) {
    if (typeof fn !== 'function') return Promise.reject(typeError('fn', 'a function', fn))
    if (options !== undefined || this._timeoutMs !== undefined) return this._executeGuarded(fn, options)
    if (this._free) {
      const generation = this._generation
      let result
      try {
        result = fn()
      } catch (err) {
        return Promise.reject(this._failed(err, generation, undefined))
      }
      return Promise.resolve(result).then(
        (value) => {
          this._succeeded(generation)
          return value
        },
        (err) => {
          throw this._failed(err, generation, undefined)
        },
      )
    }
    const now = this._now()
    const generation = this._admit(now)
    if (generation < 0) return Promise.reject(this._rejection(now))
    let result
    try {
      result = fn()
    } catch (err) {
      return Promise.reject(this._failed(err, generation, now))
    }
    return Promise.resolve(result).then(
      (value) => {
        this._report(generation, now, SUCCESS)
        this._emitResult('success', value)
        return value
      },
      (err) => {
        throw this._failed(err, generation, now)
      },
    )
  }

  /** The state now, counting elapsed time: "CLOSED" | "OPEN" | "HALF_OPEN". */
  getState() {
    const now = this._now()
    this._flush(now)
    return STATES[this._native.status(now) & 7]
  }

  /**
   * Asks for leave to make one call, without running anything: a permit
   * `{ admitted: true, generation, issuedAtMs }` to hand back to `record`, or
   * `{ admitted: false, state, retryAfterMs }`. Never throws.
   */
  tryAcquire() {
    const now = this._now()
    const generation = this._admit(now)
    if (generation < 0) {
      const { state, retryAfterMs } = this._rejection(now)
      return { admitted: false, state, retryAfterMs }
    }
    return { admitted: true, generation, issuedAtMs: now }
  }

  /** Reports how a permitted call ended: "success", "failure", "ignored" or "cancelled". */
  record(permit, outcome) {
    const code = OUTCOMES[outcome]
    if (code === undefined) throw typeError('outcome', '"success", "failure", "ignored" or "cancelled"', outcome)
    if (!permit || permit.admitted !== true) throw typeError('permit', 'a permit from tryAcquire()', permit)
    this._report(permit.generation, permit.issuedAtMs, code)
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    return this._native.mode(this._now()).toUpperCase()
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
    const now = this._now()
    if (this._free) return true
    if (now < this._openUntil) return false
    return this._native.retryAfter(now) === 0
  }

  /** Milliseconds until a call may be admitted: 0 now, Infinity while held open. */
  retryAfterMs() {
    return this._native.retryAfter(this._now())
  }

  /** Holds the breaker open for `ms`, or until `forceClose`/`release` without it. */
  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._manual((now) => this._native.forceOpen(now, ms))
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

  /** Counters, times, error rate and (if kept) latency quantiles, as a plain object. */
  metrics() {
    const now = this._now()
    this._flush(now)
    return metricsOf(this._native.metrics(now))
  }

  /** The Prometheus text exposition of this breaker. */
  prometheus() {
    const now = this._now()
    this._flush(now)
    return this._native.prometheus(this.name, now)
  }

  /** The breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    const now = this._now()
    this._flush(now)
    return JSON.parse(this._native.snapshotJson(now))
  }

  /** The breaker's state as compact bytes. */
  toBytes() {
    const now = this._now()
    this._flush(now)
    return this._native.snapshotBytes(now)
  }

  /** A breaker built from `options` with the state of `snapshot` (from `toJSON`, or its JSON text). */
  static fromJSON(options, snapshot) {
    const breaker = new CircuitBreaker(options)
    const text = typeof snapshot === 'string' ? snapshot : JSON.stringify(snapshot)
    breaker._restore(text, null)
    return breaker
  }

  /** A breaker built from `options` with the state of `bytes` (from `toBytes`). */
  static fromBytes(options, bytes) {
    if (!(bytes instanceof Uint8Array)) throw typeError('bytes', 'a Buffer or Uint8Array', bytes)
    const breaker = new CircuitBreaker(options)
    breaker._restore(null, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    return breaker
  }

  _restore(json, bytes) {
    const now = this._now()
    try {
      this._native.restore(json, bytes, now)
    } catch (err) {
      throw snapshotError(err)
    }
    this._refresh(now)
  }

  // Admission through the core: a generation (>= 0), or -1 if rejected (then
  // `_openUntil` holds the core's retry time).
  _admit(now) {
    if (now < this._openUntil) {
      this._rejections += 1
      return -1
    }
    this._flush(now)
    const code = this._native.acquire(now)
    if (code < 0) {
      this._openUntil = code === -Infinity ? Infinity : now + (-1 - code)
      // The core's state for this rejection (and the local ones until then).
      this._refresh(now)
      return -1
    }
    if (code >= TRANSITION_PENDING) {
      this._transitions(now)
      return code - TRANSITION_PENDING
    }
    return code
  }

  _rejection(now) {
    const retryAfterMs = this._openUntil === Infinity ? Infinity : Math.max(0, this._openUntil - now)
    const err = new CircuitBreakerOpenError(this.name, STATES[this._state], retryAfterMs)
    if (this.listenerCount('reject') > 0) this.emit('reject', err)
    return err
  }

  _succeeded(generation) {
    if (this._batch > 0 && generation !== this._batchGeneration) this._flush()
    if (this._batch === 0) {
      this._batchGeneration = generation
      this._batchAt = this._now()
    }
    this._batch += 1
    if (this._batch >= BATCH) this._flush()
    this._emitResult('success')
  }

  _failed(err, generation, issuedAt) {
    let outcome = FAILURE
    if (this._isFailure !== undefined) {
      try {
        outcome = this._isFailure(err) ? FAILURE : IGNORED
      } catch {
        outcome = FAILURE
      }
    }
    // The failure is told first, then the transition it caused.
    if (outcome === FAILURE) this._emitResult('failure', err)
    const now = this._now()
    if (issuedAt === undefined) {
      // Admitted without asking: the core counts the admission now.
      this._flush(now)
      if (this._native.recordBatch(generation, outcome, 1, now)) this._transitions(now)
    } else {
      this._report(generation, issuedAt, outcome, now)
    }
    return err
  }

  _report(generation, issuedAt, outcome, now = this._now()) {
    this._flush(now)
    this._openUntil = -Infinity
    if (this._native.record(generation, issuedAt, outcome, now)) this._transitions(now)
  }

  _emitResult(event, value) {
    if (this.listenerCount(event) > 0) this.emit(event, value)
  }

  _flush(now = this._now()) {
    if (this._batch > 0) {
      const count = this._batch
      this._batch = 0
      if (this._native.recordBatch(this._batchGeneration, SUCCESS, count, this._batchAt)) this._transitions(now)
    }
    if (this._rejections > 0) {
      this._native.countRejections(this._rejections, now)
      this._rejections = 0
    }
  }

  _manual(op) {
    const now = this._now()
    this._flush(now)
    this._openUntil = -Infinity
    if (op(now)) this._transitions(now)
    else this._refresh(now)
  }

  _refresh(now) {
    const status = this._native.status(now)
    this._state = status & 7
    this._free = (status & 8) !== 0 && !this._latency
    this._generation = Math.floor(status / 16)
  }

  _transitions(now) {
    this._refresh(now)
    for (const t of this._native.takeTransitions()) {
      const event = { from: STATE_OF[t.from], to: STATE_OF[t.to], reason: t.reason, atMs: t.atMs }
      this.emit(EVENT_OF[t.to], event)
      this.emit('stateChange', event)
    }
  }

  // The slow path: a call with an AbortSignal and/or a timeout. The permit is
  // always taken from the core (no batching), so cancellation and timing are exact.
  _executeGuarded(fn, options) {
    const signal = options && options.signal
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      return Promise.reject(typeError('signal', 'an AbortSignal', signal))
    }
    if (signal && signal.aborted) return Promise.reject(signal.reason)
    const now = this._now()
    const generation = this._admit(now)
    if (generation < 0) return Promise.reject(this._rejection(now))
    const controller = new AbortController()
    return new Promise((resolve, reject) => {
      let settled = false
      let timer
      const finish = (outcome, settle) => {
        if (settled) return
        settled = true
        if (timer !== undefined) clearTimeout(timer)
        if (signal) signal.removeEventListener('abort', onAbort)
        settle()
        return outcome
      }
      const onAbort = () =>
        finish(CANCELLED, () => {
          controller.abort(signal.reason)
          this._report(generation, now, CANCELLED)
          reject(signal.reason)
        })
      if (signal) signal.addEventListener('abort', onAbort, { once: true })
      if (this._timeoutMs !== undefined) {
        timer = setTimeout(() => {
          finish(FAILURE, () => {
            const err = new CircuitBreakerTimeoutError(this.name, this._timeoutMs)
            controller.abort(err)
            this._emitResult('failure', err)
            this._report(generation, now, FAILURE)
            reject(err)
          })
        }, this._timeoutMs)
      }
      let result
      try {
        result = fn(controller.signal)
      } catch (err) {
        result = Promise.reject(err)
      }
      Promise.resolve(result).then(
        (value) =>
          finish(SUCCESS, () => {
            this._report(generation, now, SUCCESS)
            this._emitResult('success', value)
            resolve(value)
          }),
        (err) =>
          finish(FAILURE, () => {
            reject(this._failed(err, generation, now))
          }),
      )
    })
  }
}

// An EventEmitter (instanceof, on/once/off/emit...) whose listener table is
// made on the first `on`: Node's EventEmitter methods create it lazily, and
// skipping its constructor saves ~260 bytes per breaker that has no listener.
Object.setPrototypeOf(CircuitBreaker.prototype, EventEmitter.prototype)
Object.setPrototypeOf(CircuitBreaker, EventEmitter)

/** A call refused because the registry is full and no breaker in it is idle. */
class RegistryFullError extends Error {
  constructor(breakerName) {
    super(`registry full: no idle breaker to evict for ${breakerName}`)
    this.name = 'RegistryFullError'
    this.breakerName = breakerName
  }
}

/**
 * One breaker per name (seed 000's `breakerFor`), made on first use, at most
 * `capacity` (default 10,000): beyond it the least recently used *idle*
 * breaker is evicted, never an open, half-open, forced or failing one; if none
 * is idle the call is rejected with `RegistryFullError`. Events are emitted
 * here, with the breaker's `name` in each.
 *
 * Calls through a registry always cross into the addon (no batching yet).
 */
class Registry extends EventEmitter {
  constructor(options = {}) {
    super()
    const t = translate(options, true)
    this._isFailure = t.isFailure
    this._clock = t.clock || monotonic
    this._last = -Infinity
    const capacity = t.capacity === undefined ? 10000 : t.capacity
    try {
      this._native = new NativeRegistry(t.native, capacity)
    } catch (err) {
      const [field, problem] = String(err.message).split('|')
      if (field === 'capacity') {
        const out = new RangeError(`option capacity ${problem}`)
        out.option = 'capacity'
        throw out
      }
      throw nativeError(err, options)
    }
  }

  /** The breaker for `name` (made on its first call). */
  get(name) {
    if (typeof name !== 'string') throw typeError('name', 'a string', name)
    return new KeyedBreaker(this, name)
  }

  /** Gives `name` its own options (numbers only; replacing a breaker it has). */
  configure(name, options) {
    const t = translate({ ...options, name }, false)
    try {
      this._native.configure(name, t.native)
    } catch (err) {
      throw nativeError(err, options)
    }
  }

  /** The names of every breaker held. */
  names() {
    return this._native.names()
  }

  /** Whether `name` has a breaker now. */
  has(name) {
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
    return this._native.prometheus(this._now())
  }

  /** Every breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    return JSON.parse(this._native.snapshotJson(this._now()))
  }

  /** Replaces every breaker with those of `snapshot` (from `toJSON`). */
  restore(snapshot) {
    const text = typeof snapshot === 'string' ? snapshot : JSON.stringify(snapshot)
    try {
      this._native.restoreJson(text, this._now())
    } catch (err) {
      throw snapshotError(err)
    }
  }

  _now() {
    return latestReading(this)
  }

  _transitions() {
    for (const t of this._native.takeTransitions()) {
      const event = { name: t.name, from: STATE_OF[t.from], to: STATE_OF[t.to], reason: t.reason, atMs: t.atMs }
      this.emit(EVENT_OF[t.to], event)
      this.emit('stateChange', event)
    }
  }
}

/** A registry's breaker for one name: the `CircuitBreaker` methods that make sense per key. */
class KeyedBreaker {
  constructor(registry, name) {
    this._registry = registry
    this.name = name
  }

  /** Runs `fn` if this name's breaker admits it (see `CircuitBreaker.execute`). */
  execute(fn, options) {
    if (typeof fn !== 'function') return Promise.reject(typeError('fn', 'a function', fn))
    const signal = options && options.signal
    if (signal && signal.aborted) return Promise.reject(signal.reason)
    const permit = this.tryAcquire()
    if (!permit.admitted) return Promise.reject(permit.error)
    let result
    try {
      result = fn(signal)
    } catch (err) {
      result = Promise.reject(err)
    }
    return Promise.resolve(result).then(
      (value) => {
        this.record(permit, 'success')
        this._registry.emit('success', value)
        return value
      },
      (err) => {
        if (signal && signal.aborted) {
          this.record(permit, 'cancelled')
          throw err
        }
        const failure = this._registry._isFailure === undefined || this._registry._isFailure(err)
        if (failure) this._registry.emit('failure', err)
        this.record(permit, failure ? 'failure' : 'ignored')
        throw err
      },
    )
  }

  /** A permit, or `{ admitted: false, state, retryAfterMs, error }` (never throws). */
  tryAcquire() {
    const r = this._registry
    const now = r._now()
    const code = r._native.acquire(this.name, now)
    if (code === -0.5) {
      return { admitted: false, state: 'OPEN', retryAfterMs: Infinity, error: new RegistryFullError(this.name) }
    }
    if (code < 0) {
      const retryAfterMs = code === -Infinity ? Infinity : -1 - code
      const state = STATES[r._native.state(this.name, now)]
      const error = new CircuitBreakerOpenError(this.name, state, retryAfterMs)
      if (r.listenerCount('reject') > 0) r.emit('reject', error)
      return { admitted: false, state, retryAfterMs, error }
    }
    const pending = code >= TRANSITION_PENDING
    if (pending) r._transitions()
    return { admitted: true, generation: pending ? code - TRANSITION_PENDING : code, issuedAtMs: now }
  }

  /** Reports how a permitted call ended. */
  record(permit, outcome) {
    const code = OUTCOMES[outcome]
    if (code === undefined) throw typeError('outcome', '"success", "failure", "ignored" or "cancelled"', outcome)
    const r = this._registry
    if (r._native.record(this.name, permit.generation, permit.issuedAtMs, code, r._now())) r._transitions()
  }

  getState() {
    const state = this._registry._native.state(this.name, this._registry._now())
    return state < 0 ? 'CLOSED' : STATES[state]
  }

  retryAfterMs() {
    return this._registry._native.retryAfter(this.name, this._registry._now())
  }

  isCallPermitted() {
    return this.retryAfterMs() === 0
  }

  metrics() {
    const m = this._registry._native.metrics(this.name, this._registry._now())
    return m ? metricsOf(m) : null
  }

  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._manual('force_open', ms)
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

  _manual(op, ms) {
    const r = this._registry
    let changed
    try {
      changed = r._native.manual(this.name, op, r._now(), ms)
    } catch (err) {
      if (String(err.message).startsWith('full|')) throw new RegistryFullError(this.name)
      throw err
    }
    if (changed) r._transitions()
  }
}

module.exports = {
  CircuitBreaker,
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  Registry,
  RegistryFullError,
}
