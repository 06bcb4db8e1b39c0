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
 * returns what `cancel` takes. A breaker's licence ends on it, so that its
 * successes need no clock reading (lib/breaker.js). Node fires a timer late
 * only by the event loop's own lateness. (The global `setTimeout`, looked up
 * at each call: test runners' fake timers replace it.)
 */
function afterMs(ms, callback) {
  const timer = setTimeout(callback, ms)
  // (A replaced setTimeout may answer a number.)
  if (typeof timer?.unref === 'function') timer.unref()
  return timer
}

/** Cancels an `afterMs`. */
const cancel = (timer) => clearTimeout(timer)

module.exports = { EventEmitter, afterMs, cancel, emitWarning, nativeBytes, performance, randomHex64 }
