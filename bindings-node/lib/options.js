'use strict'
// Options: type checks and the translation to the addon's numbers. Ranges
// and defaults are the core's: a value of the right type goes through, and
// the core refuses what no configuration can hold, naming the option.

const { rangeError, typeError, wellFormed } = require('./errors.js')
const { performance } = require('./platform.js')

// camelCase option -> kind: 'number', or 'nullable' (a policy; null unsets it).
const CORE_OPTIONS = {
  failureThreshold: 'nullable',
  windowMs: 'number',
  windowCalls: 'number',
  consecutiveFailures: 'nullable',
  failureRateThreshold: 'nullable',
  minimumCalls: 'number',
  slowCallMs: 'nullable',
  slowCallRateThreshold: 'nullable',
  openTimeoutMs: 'number',
  backoffFactor: 'number',
  maxOpenTimeoutMs: 'number',
  jitter: 'number',
  jitterSeed: 'number',
  halfOpenMaxAttempts: 'number',
  halfOpenSuccesses: 'number',
  probeTimeoutMs: 'number',
  concurrencyLimit: 'nullable',
  adaptiveLimitMin: 'number',
  adaptiveLimitMax: 'number',
}
// A retaining queue's own options (their checks: lib/retention.js).
const RETENTION_OPTIONS = ['maxMessages', 'maxBytes', 'overflow', 'probe', 'maxAttempts', 'maxAgeMs', 'releaseRate', 'size']
// A dispatcher's, beside those (lib/dispatcher.js).
const DISPATCHER_OPTIONS = ['send', 'isFailure', 'timeoutMs', 'store']
// Options of the JavaScript side, by where they are allowed.
const OWN_OPTIONS = {
  breaker: ['name', 'isFailure', 'fallback', 'clock', 'sharedClock', 'timeoutMs', 'latencyHistogram', 'group'],
  registry: ['isFailure', 'fallback', 'clock', 'sharedClock', 'timeoutMs', 'capacity', 'group'],
  configure: [],
  // RetentionQueue and Dispatcher (lib/retention.js, lib/dispatcher.js).
  retention: ['name', 'clock', 'sharedClock', 'latencyHistogram', ...RETENTION_OPTIONS],
  dispatcher: ['name', 'clock', 'sharedClock', 'latencyHistogram', ...RETENTION_OPTIONS, ...DISPATCHER_OPTIONS],
}
// The core's presets (Config::PRESETS), as JavaScript spells them.
const PRESETS = { whatsappGateway: 'whatsapp_gateway', partnerWebhook: 'partner_webhook', sender: 'sender' }
/** The longest delay `setTimeout` keeps (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1

/** The default clock: monotonic milliseconds (one function for every breaker). */
const monotonic = () => performance.now()

/**
 * Throws a TypeError unless `name` is a string of well-formed UTF-16 (no
 * lone surrogates), a RangeError if it is longer than `maxBytes` in UTF-8
 * (the core's MAX_NAME_BYTES, which the native half gives).
 */
function checkName(name, what = 'name', maxBytes = Infinity) {
  if (typeof name !== 'string') throw typeError(what, 'a string', name)
  if (!wellFormed(name)) throw typeError(what, 'a well-formed string (it has a lone surrogate)', name)
  // A UTF-16 unit is at most 3 bytes of UTF-8: most names need no count.
  if (name.length * 3 > maxBytes) {
    const bytes = utf8Length(name)
    if (bytes > maxBytes) {
      const err = new RangeError(`${what} must be at most ${maxBytes} bytes in UTF-8, got ${bytes}`)
      err.option = what
      err.problem = 'too_large'
      throw err
    }
  }
}

/** The length of well-formed `text` in UTF-8. */
function utf8Length(text) {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c < 0xdc00) {
      bytes += 4 // a surrogate pair: one code point
      i += 1
    } else bytes += 3
  }
  return bytes
}

/**
 * The addon's options and the JavaScript side's settings for `where`
 * ('breaker', 'registry' or 'configure'), or a TypeError naming the option.
 */
function translate(given, where) {
  if (given === null || typeof given !== 'object') throw typeError('options', 'an object', given)
  // Own properties only, as for the unknown-option check below: a property
  // inherited (from a polluted Object.prototype, say) is not an option.
  const options = Object.assign(Object.create(null), given)
  const own = OWN_OPTIONS[where]
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(CORE_OPTIONS, key) && key !== 'preset' && !own.includes(key)) {
      let why = `unknown option ${key}`
      if (where === 'configure' && OWN_OPTIONS.registry.includes(key)) {
        why = `option ${key} cannot be set per name (set it on the Registry)`
      } else if ((where === 'registry' || where === 'configure') && OWN_OPTIONS.breaker.includes(key)) {
        why = `option ${key} is for a single CircuitBreaker, not a Registry`
      }
      const err = new TypeError(why)
      err.option = key
      throw err
    }
  }
  // No prototype: the addon reads every field by name.
  const native = Object.create(null)
  if (options.preset !== undefined) {
    const preset = Object.hasOwn(PRESETS, options.preset) ? PRESETS[options.preset] : undefined
    if (preset === undefined) {
      if (typeof options.preset !== 'string') throw typeError('preset', 'a string', options.preset)
      const names = Object.keys(PRESETS).map((p) => `"${p}"`)
      throw rangeError('preset', `must be one of ${names.join(', ')}, got ${JSON.stringify(options.preset)}`, 'out_of_range')
    }
    native.preset = preset
  }
  for (const [option, kind] of Object.entries(CORE_OPTIONS)) {
    const value = options[option]
    if (value === undefined) continue
    if (value === null && kind === 'nullable') {
      native.unset = native.unset || []
      native.unset.push(option)
      continue
    }
    if (typeof value !== 'number') throw typeError(option, 'a number', value)
    native[option] = value
  }
  if (native.windowMs !== undefined && native.windowCalls !== undefined) {
    const err = new TypeError('options windowMs and windowCalls exclude each other')
    err.option = 'windowCalls'
    throw err
  }
  const { name, isFailure, fallback, clock, sharedClock, timeoutMs, latencyHistogram, capacity } = options
  if (where !== 'registry' && where !== 'configure') {
    checkName(name)
    if (name === '') throw typeError('name', 'a non-empty string', name)
  }
  if (capacity !== undefined && typeof capacity !== 'number') throw typeError('capacity', 'a number', capacity)
  if (isFailure !== undefined && typeof isFailure !== 'function') throw typeError('isFailure', 'a function', isFailure)
  if (fallback !== undefined && typeof fallback !== 'function') throw typeError('fallback', 'a function', fallback)
  if (clock !== undefined && typeof clock !== 'function') throw typeError('clock', 'a function', clock)
  if (sharedClock !== undefined && typeof sharedClock !== 'boolean') throw typeError('sharedClock', 'a boolean', sharedClock)
  if (sharedClock === true && clock === undefined) {
    // The default clock counts from this process's start: no other process shares it.
    throw typeError('sharedClock', 'false without a clock of your own (such as Date.now)', sharedClock)
  }
  if (latencyHistogram !== undefined && typeof latencyHistogram !== 'boolean') {
    throw typeError('latencyHistogram', 'a boolean', latencyHistogram)
  }
  // null: no timeout (a Dispatcher's default is the core's; see lib/dispatcher.js).
  if (timeoutMs !== undefined && timeoutMs !== null) {
    if (typeof timeoutMs !== 'number') throw typeError('timeoutMs', 'a number or null', timeoutMs)
    if (!(timeoutMs > 0) || !(timeoutMs <= MAX_TIMER_MS)) {
      const err = new RangeError(`option timeoutMs must be a number above 0 and at most ${MAX_TIMER_MS} (a timer's limit), got ${timeoutMs}`)
      err.option = 'timeoutMs'
      err.problem = numberProblem(timeoutMs, MAX_TIMER_MS)
      throw err
    }
  }
  return {
    native,
    // The options given (own properties only), for the caller's own ones.
    given: options,
    name,
    isFailure,
    fallback,
    clock: clock || monotonic,
    // The default clock never goes backwards, so a reading it skips cannot
    // change the breaker's latest time (see lib/breaker.js).
    monotonic: clock === undefined,
    // Whether a restore counts the time since its snapshot was taken: the
    // clock's readings mean the same in the process that took it.
    sharedClock: sharedClock === true,
    timeoutMs: timeoutMs ?? undefined,
    latencyHistogram: latencyHistogram === true,
    // Absent: the core's default (DEFAULT_CAPACITY).
    capacity,
  }
}

/** `forceOpen`'s duration: absent, or a number of ms from 0 to 2^53 - 1. */
function checkForceOpenMs(ms) {
  if (ms !== undefined && typeof ms !== 'number') throw typeError('ms', 'a number of ms (or nothing: until release())', ms)
  if (ms !== undefined) checkMsRange('forceOpen', ms)
}

/** `forceOpenAtLeast`'s (or `groupForceOpen`'s) duration: a number of ms from 0 to 2^53 - 1. */
function checkAtLeastMs(ms, method = 'forceOpenAtLeast') {
  if (typeof ms !== 'number') throw typeError('ms', 'a number of ms', ms)
  checkMsRange(method, ms)
}

function checkMsRange(method, ms) {
  if (!(ms >= 0) || !(ms <= Number.MAX_SAFE_INTEGER)) {
    const err = new RangeError(`${method}(ms): ms must be a number from 0 to 2^53 - 1, got ${ms}`)
    err.option = 'ms'
    err.problem = numberProblem(ms, Number.MAX_SAFE_INTEGER)
    throw err
  }
}

/** The core's code for a number refused as out of `[0, max]` (the rule of src/options.rs `whole_problem`). */
function numberProblem(value, max) {
  if (!Number.isFinite(value)) return 'not_finite'
  return value > max ? 'too_large' : 'out_of_range'
}

module.exports = { MAX_TIMER_MS, checkAtLeastMs, checkForceOpenMs, checkName, numberProblem, translate }
