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

module.exports = { EventEmitter, emitWarning, nativeBytes, performance, randomHex64 }
