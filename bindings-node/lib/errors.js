'use strict'
// The package's error classes, the one decoder of the addon's structured
// errors, and the one channel for errors thrown by user callbacks.

const { emitWarning } = require('./platform.js')

/**
 * Thrown (as a rejection) when the breaker does not admit a call; `fn` is not
 * called. `reason` says why, in the core's words: `'open'` (the open time
 * has not ended), `'probes_busy'` (half-open, every probe slot taken),
 * `'limit_full'` (the concurrency limit is full: `state` is then `'CLOSED'`
 * or `'HALF_OPEN'`) or `'held'` (forced open until released). It carries no
 * stack trace: capturing one is half the cost of a rejection, and it would
 * only point into the breaker.
 */
class CircuitBreakerOpenError extends Error {
  constructor(breakerName, state, retryAfterMs, reason) {
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super()
    Error.stackTraceLimit = limit
    this.breakerName = breakerName
    this.state = state
    this.retryAfterMs = retryAfterMs
    this.reason = reason
  }

  // Written when read: most rejections are handled without reading it.
  get message() {
    const what = this.reason === 'limit_full' ? `at its concurrency limit (${this.state})` : this.state
    return `CircuitBreaker[${this.breakerName}] is ${what}; retry in ${this.retryAfterMs} ms`
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

/** A call refused because the registry is full and no breaker in it is idle. */
class RegistryFullError extends Error {
  constructor(breakerName) {
    super(`registry full: no idle breaker to evict for ${breakerName}`)
    this.name = 'RegistryFullError'
    this.breakerName = breakerName
  }
}

/**
 * A message a `Dispatcher` could not take: a bound (`maxMessages`,
 * `maxBytes`) is reached. Nothing of it is held.
 */
class RetentionFullError extends Error {
  constructor(dispatcherName) {
    super(`Dispatcher[${dispatcherName}] is full: the message was not taken`)
    this.name = 'RetentionFullError'
    this.dispatcherName = dispatcherName
  }
}

/**
 * A message a `Dispatcher` gave up: `reason` is `'attempts'` (it failed
 * `maxAttempts` times), `'age'` (older than `maxAgeMs`), `'refused'` (`send`
 * failed with an error `isFailure` says is not the upstream's health: sending
 * it again cannot help) or `'dropped'` (`overflow: 'dropOldest'` made room
 * for newer ones). `payload` is the message, `attempts` its sends.
 */
class DeadLetterError extends Error {
  constructor(dispatcherName, message, reason, attempts) {
    super(`Dispatcher[${dispatcherName}] gave a message up (${reason}) after ${attempts} send(s)`)
    this.name = 'DeadLetterError'
    this.dispatcherName = dispatcherName
    this.payload = message
    this.reason = reason
    this.attempts = attempts
  }
}

/**
 * An event an `Outbox` did not store: Redis refused it (`ambiguous` false:
 * it is not stored) or did not answer in time (`ambiguous` true: it may be;
 * submit it again with the same key, and the partner deduplicates). `cause`
 * is Redis's error.
 */
class StoreUnavailableError extends Error {
  constructor(partner, cause, ambiguous) {
    const why = cause instanceof Error ? cause.message : String(cause)
    super(`Outbox[${partner}]: the event was not stored${ambiguous ? ' (Redis did not say: it may be)' : ''}: ${why}`)
    this.name = 'StoreUnavailableError'
    this.code = 'HALFOPEN_STORE_UNAVAILABLE'
    this.partner = partner
    this.ambiguous = ambiguous
    this.cause = cause
  }
}

/** A snapshot that cannot be restored; `kind` says why. */
class SnapshotError extends Error {
  constructor(kind, message) {
    super(message)
    this.name = 'SnapshotError'
    this.kind = kind
  }
}

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Whether `text` is well-formed UTF-16 (`String.prototype.isWellFormed`, which Node 18 lacks). */
function wellFormed(text) {
  return !LONE_SURROGATE.test(text)
}

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'number') return String(value)
  return typeof value
}

/** A TypeError naming `option`. */
function typeError(option, expected, value) {
  const err = new TypeError(`${option} must be ${expected}, got ${describe(value)}`)
  err.option = option
  return err
}

/**
 * A RangeError naming `option`: `words` say what is wrong, `problem` is the
 * core's code for it (`Problem::code`: `'zero'`, `'out_of_range'`, …).
 */
function rangeError(option, words, problem) {
  const err = new RangeError(`option ${option} ${words}`)
  err.option = option
  err.problem = problem
  return err
}

// Core field -> the option that sets it.
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
  concurrency_limit: 'concurrencyLimit',
  adaptive_limit_min: 'adaptiveLimitMin',
  adaptive_limit_max: 'adaptiveLimitMax',
  preset: 'preset',
  max_messages: 'maxMessages',
  max_bytes: 'maxBytes',
  max_attempts: 'maxAttempts',
  max_age: 'maxAgeMs',
  release_rate: 'releaseRate',
  overflow: 'overflow',
  probe: 'probe',
  flush_interval: 'flushIntervalMs',
  quorum: 'quorum',
  store_timeout: 'storeTimeoutMs',
  lease: 'leaseMs',
  member_ttl: 'memberTtlMs',
}

/**
 * The addon's structured error (`{kind, field?, problem?, message}` as its
 * message) as the package's error: a RangeError naming the option (and the
 * core's `problem` code), a
 * SnapshotError, a RegistryFullError (for `name`). Anything else is returned
 * as it is.
 */
function fromNative(err, { options = {}, name } = {}) {
  let e
  try {
    e = JSON.parse(err.message)
  } catch {
    return err
  }
  switch (e.kind) {
    case 'config': {
      let option = OPTION_OF_FIELD[e.field] || e.field
      if (e.field === 'window' && options.windowCalls !== undefined) option = 'windowCalls'
      return rangeError(option, e.message, e.problem)
    }
    case 'snapshot':
      return new SnapshotError(e.problem, e.message)
    case 'registry_full':
      return new RegistryFullError(name)
    case 'name': {
      const out = new RangeError(e.message)
      out.option = 'name'
      out.problem = 'too_large'
      return out
    }
    case 'too_many_configured':
    case 'capacity': {
      const out = new RangeError(e.message)
      out.option = 'capacity'
      out.problem = e.kind === 'capacity' ? 'out_of_range' : 'too_large'
      return out
    }
    case 'out_of_memory': {
      // As the engine's own "Array buffer allocation failed": a RangeError.
      const out = new RangeError(e.message)
      out.code = 'HALFOPEN_OUT_OF_MEMORY'
      return out
    }
    default:
      return err
  }
}

/** `produce()`'s output (an exposition, a snapshot), with a native error translated. */
function output(produce) {
  try {
    return produce()
  } catch (err) {
    throw fromNative(err)
  }
}

/**
 * Reports an error thrown by a user callback (a listener, `isFailure`, the
 * clock) without letting it change the call, the breaker or later events:
 * the platform's warning (Node: `process.emitWarning`) with code `HALFOPEN_CALLBACK_ERROR` and the error as
 * `cause`.
 */
function warnCallback(err, what) {
  try {
    const warning = new Error(`halfopen: ${what} threw: ${printable(err)}`)
    warning.name = 'HalfopenCallbackWarning'
    warning.code = 'HALFOPEN_CALLBACK_ERROR'
    warning.cause = err
    emitWarning(warning)
  } catch {
    // Nothing a callback throws may escape, not even through its warning.
  }
}

/** `err`'s message, or a stand-in when reading it throws. */
function printable(err) {
  try {
    return err instanceof Error ? String(err.message) : String(err)
  } catch {
    return 'a value that cannot be printed'
  }
}

/**
 * The JSON text of a snapshot argument (an object from `toJSON`, or its
 * text): a TypeError for anything else, a `malformed` SnapshotError for text
 * that is not valid Unicode (a lone surrogate would reach the native half
 * as U+FFFD, so a name in it would change silently).
 */
function snapshotText(snapshot) {
  if (snapshot === null || (typeof snapshot !== 'object' && typeof snapshot !== 'string')) {
    throw typeError('snapshot', 'an object or a JSON string', snapshot)
  }
  const text = typeof snapshot === 'string' ? snapshot : JSON.stringify(snapshot)
  if (typeof text !== 'string') {
    throw new SnapshotError('malformed', 'malformed snapshot: the object has no JSON form (its toJSON gave none)')
  }
  if (!wellFormed(text)) {
    throw new SnapshotError('malformed', 'malformed snapshot: the text is not valid Unicode (a lone surrogate)')
  }
  return text
}

// The mark of a refusal, the same in every copy of the package (the Node
// package and halfopen-wasm, or two versions in one app).
const REFUSAL = Symbol.for('halfopen.refusal')
CircuitBreakerOpenError.prototype[REFUSAL] = true
RegistryFullError.prototype[REFUSAL] = true

/**
 * Whether `err` is a breaker's refusal (`CircuitBreakerOpenError`, or a
 * Registry's `RegistryFullError`, from any copy of the package): the call
 * never reached the upstream, so a retry library should stop (`p-retry`'s
 * `shouldRetry`, `async-retry`'s `bail`) and the caller requeue at
 * `retryAfterMs`, not retry at once.
 */
function isRefusal(err) {
  if (err === null || (typeof err !== 'object' && typeof err !== 'function')) return false
  try {
    return err[REFUSAL] === true
  } catch {
    return false // (a Proxy that throws on reads is no refusal of ours)
  }
}

module.exports = {
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  DeadLetterError,
  RegistryFullError,
  RetentionFullError,
  SnapshotError,
  StoreUnavailableError,
  fromNative,
  isRefusal,
  output,
  snapshotText,
  rangeError,
  typeError,
  warnCallback,
  wellFormed,
}
