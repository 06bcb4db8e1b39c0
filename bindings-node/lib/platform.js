'use strict'
// What the JavaScript half takes from its platform, in one place: Node's
// here; the wasm package (bindings-wasm) brings its own for workerd and
// browsers. An event emitter, a monotonic clock, bytes in the form the
// native half takes, random bits, and where callback failures are reported.

const { randomBytes } = require('node:crypto')
const { EventEmitter } = require('node:events')
const { performance } = require('node:perf_hooks')

/** 64 random bits as 16 hex digits (node:crypto: Node 18 has no global `crypto`). */
const randomHex64 = () => randomBytes(8).toString('hex')

/** `bytes` (a Uint8Array) as the native half's bytes: a Buffer over the same memory. */
const nativeBytes = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** Reports a warning (an Error with `code`) the way the platform does. */
const emitWarning = (warning) => process.emitWarning(warning)

/**
 * Calls `callback` once, `ms` from now, without keeping the process alive;
 * returns what `cancel` takes, or undefined if no timer could be set. A
 * breaker's licence ends on it, so that its successes need no clock reading
 * (lib/licence.js), which reads them again without one. Node fires a timer
 * late only by the event loop's own lateness. (The global `setTimeout`,
 * looked up at each call: test runners' fake timers replace it, and a
 * replaced one may throw, or answer a number.)
 */
function afterMs(ms, callback) {
  try {
    const timer = setTimeout(callback, ms)
    if (typeof timer?.unref === 'function') timer.unref()
    return timer ?? undefined
  } catch {
    return undefined
  }
}

/** Cancels an `afterMs` (a replaced clearTimeout that throws changes nothing: the callback checks its timer). */
function cancel(timer) {
  try {
    clearTimeout(timer)
  } catch {}
}

module.exports = { EventEmitter, afterMs, cancel, emitWarning, nativeBytes, performance, randomHex64 }
