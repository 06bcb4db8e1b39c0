'use strict'
// Readings of a breaker's clock (`host._clock`, ms). Time never goes
// backwards for the core, so a reading earlier than one already seen is
// taken as that one (`host._last`). A reading that is not a finite number
// is refused: a TypeError naming `clock` where a call can be refused, and,
// when a call that already ran must still be reported, the latest good
// reading with a warning.

const { warnCallback } = require('./errors.js')

function clockError(value, cause) {
  const got = cause !== undefined ? 'an exception' : value === null ? 'null' : typeof value === 'number' ? String(value) : typeof value
  const err = new TypeError(`clock must return a finite number of milliseconds, got ${got}`, cause === undefined ? undefined : { cause })
  err.option = 'clock'
  return err
}

/** The current reading; throws a TypeError (option `clock`) for a bad one. */
function read(host) {
  let t
  try {
    t = host._clock()
  } catch (err) {
    throw clockError(undefined, err)
  }
  if (typeof t !== 'number' || !Number.isFinite(t)) throw clockError(t)
  if (t > host._last) host._last = t
  return host._last
}

/** The current reading, or the latest good one (with a warning) if the clock fails. */
function readToReport(host) {
  try {
    return read(host)
  } catch (err) {
    warnCallback(err.cause ?? err, 'the clock')
    return host._last === -Infinity ? 0 : host._last
  }
}

module.exports = { read, readToReport }
