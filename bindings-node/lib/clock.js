'use strict'
// Readings of a breaker's clock (`host._clock`, ms). Time never goes
// backwards for the core, so a reading earlier than one already seen is
// taken as that one (`host._last`, 0 before the first: the core's origin). A reading that is not a finite number
// is refused: a TypeError naming `clock` where a call can be refused, and,
// when a call that already ran must still be reported, the latest good
// reading with a warning.

const { warnCallback } = require('./errors.js')
const { performance } = require('./platform.js')

function clockError(value, cause) {
  const got = cause !== undefined ? 'an exception' : value === null ? 'null' : typeof value === 'number' ? String(value) : typeof value
  const err = new TypeError(
    `clock must return a finite number of milliseconds up to 2^53 - 1, got ${got}`,
    cause === undefined ? undefined : { cause },
  )
  err.option = 'clock'
  return err
}

/**
 * The current reading; throws a TypeError (option `clock`) for a bad one.
 * A reading is what the core sees: rounded to the microsecond, and never
 * before the origin (0) — so that the comparisons made here with the core's
 * times (a licence's end) agree with the core's own.
 */
function read(host) {
  // The default clock (performance.now) read directly.
  const t = host._monotonic === true ? performance.now() : undefined
  // (Checked as any clock's reading: performance.now may be replaced.)
  if (typeof t === 'number' && t >= 0 && t <= Number.MAX_SAFE_INTEGER) {
    const now = quantize(t)
    if (now > host._last) host._last = now
  } else readRaw(host)
  return host._last
}

/**
 * The current reading as the clock gives it, checked as `read` checks it but
 * not held to the latest (a group's member needs a step back to see it: its
 * exchanges keep their pace through one); the latest is still noted.
 */
function readRaw(host) {
  let t
  try {
    t = host._clock()
  } catch (err) {
    throw clockError(undefined, err)
  }
  if (typeof t !== 'number' || !Number.isFinite(t) || t > Number.MAX_SAFE_INTEGER) throw clockError(t)
  const now = quantize(t)
  if (now > host._last) host._last = now
  return now
}

/** `ms` as the core holds it: whole microseconds (rounded to the nearest), ≥ 0. */
function quantize(ms) {
  if (!(ms > 0)) return 0
  const whole = Math.trunc(ms)
  return whole + Math.round((ms - whole) * 1000) / 1000
}

/** `until - now` in ms, exact to the microsecond (both are quantized readings or core times). */
function between(now, until) {
  return until === Infinity ? Infinity : Math.round((until - now) * 1000) / 1000
}

/** The current reading, or the latest good one (with a warning) if the clock fails. */
function readToReport(host) {
  try {
    return read(host)
  } catch (err) {
    warnCallback(err.cause ?? err, 'the clock')
    return host._last
  }
}

module.exports = { between, read, readRaw, readToReport }
