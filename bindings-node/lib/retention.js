'use strict'
// `RetentionQueue`: the core's retaining dispatcher (seed 001) as a sans-IO
// object, as `tryAcquire`/`record` are for a breaker: `submit` a message,
// send what it (or `next()`) hands out, `report` how each send went. The
// messages stay here, by sequence number; every decision is the core's.
// `Dispatcher` (lib/dispatcher.js) drives one with a `send` function,
// promises and timers.

const { NativeDispatcher } = require('../native.js')
const { read, readToReport } = require('./clock.js')
const { SnapshotError, fromNative, output, snapshotText, typeError } = require('./errors.js')
const { drain, enqueue, enqueueTransitions, STATE_OF } = require('./events.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { EventEmitter, nativeBytes } = require('./platform.js')
const { nextOf, OUTCOME_CODES, reportedOf, submitted } = require('./wire.js')

const OVERFLOW = { reject: 'reject', dropOldest: 'drop_oldest' }
const PROBE = { oldest: 'oldest', newMessage: 'new_message' }

/**
 * A message's size in bytes by default (tests/conformance/README.md, "A
 * message's size"): UTF-8 of a string, a binary's length, else its compact
 * JSON's UTF-8; a value with no JSON form is a TypeError naming `size`.
 */
function defaultSize(message) {
  if (typeof message === 'string') return utf8Length(message)
  let json
  let cause
  try {
    if (ArrayBuffer.isView(message)) return message.byteLength
    if (message instanceof ArrayBuffer) return message.byteLength
    if (typeof SharedArrayBuffer === 'function' && message instanceof SharedArrayBuffer) return message.byteLength
    // A Map, a Set or a promise writes as `{}`: its JSON is not it.
    if (!(message instanceof Map || message instanceof Set || message instanceof WeakMap || message instanceof WeakSet || message instanceof Promise)) {
      json = JSON.stringify(message)
    }
  } catch (err) {
    cause = err // a cycle, a BigInt, a toJSON that throws, a revoked proxy
  }
  if (json === undefined) {
    const err = new TypeError(`size: the message (${typeof message}) has no JSON form; give a size function to say how many bytes it is`)
    err.option = 'size'
    if (cause !== undefined) err.cause = cause
    throw err
  }
  return utf8Length(json)
}

/** UTF-8 bytes of `text`, without encoding it: a surrogate pair 4, a lone surrogate 3 (its replacement character). */
function utf8Length(text) {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4
      i += 1
    } else bytes += 3
  }
  return bytes
}

/** The native half's retention options from the given ones (types checked here, ranges by the core). */
function retentionOptions(given) {
  const native = Object.create(null)
  const numbers = { maxMessages: 'maxMessages', maxBytes: 'maxBytes', maxAttempts: 'maxAttempts', maxAgeMs: 'maxAgeMs' }
  for (const [option, field] of Object.entries(numbers)) {
    const value = given[option]
    if (value === undefined) continue
    if (typeof value !== 'number') throw typeError(option, 'a number', value)
    native[field] = value
  }
  if (given.overflow !== undefined) {
    if (!Object.hasOwn(OVERFLOW, given.overflow)) throw typeError('overflow', '"reject" or "dropOldest"', given.overflow)
    native.overflow = OVERFLOW[given.overflow]
  }
  if (given.probe !== undefined) {
    if (!Object.hasOwn(PROBE, given.probe)) throw typeError('probe', '"oldest" or "newMessage"', given.probe)
    native.probe = PROBE[given.probe]
  }
  const rate = given.releaseRate
  if (rate !== undefined) {
    if (rate === null || typeof rate !== 'object') throw typeError('releaseRate', 'an object { perSecond, burst }', rate)
    const { perSecond, burst } = Object.assign(Object.create(null), rate)
    // Named `releaseRate`, as the core names the rate's range errors.
    if (typeof perSecond !== 'number') throw typeError('releaseRate', 'an object whose perSecond is a number', perSecond)
    if (typeof burst !== 'number') throw typeError('releaseRate', 'an object whose burst is a number', burst)
    native.releasePerSecond = perSecond
    native.releaseBurst = burst
  }
  if (given.size !== undefined && typeof given.size !== 'function') throw typeError('size', 'a function', given.size)
  return native
}

/**
 * A queue in front of a circuit breaker that holds what the breaker does not
 * admit and hands it out again in order, paced (see index.d.ts).
 */
class RetentionQueue extends EventEmitter {
  constructor(options, where = 'retention') {
    super()
    const t = translate(options, where)
    this.name = t.name
    this._clock = t.clock
    this._sharedClock = t.sharedClock
    this._last = 0
    this._size = t.given.size || defaultSize
    this._queue = null // events (lib/events.js)
    this._deferred = 0 // > 0: events are queued, not emitted (a Dispatcher's submit)
    /** Messages held (retained or in flight), by sequence number. */
    this._messages = new Map()
    const retention = retentionOptions(t.given)
    try {
      this._native = new NativeDispatcher(t.native, t.latencyHistogram, retention)
    } catch (err) {
      throw fromNative(err, { options })
    }
    checkName(this.name, 'name', this._native.maxNameBytes())
  }

  /** The size of `message` as `size` says: a whole number of bytes, or a TypeError. */
  _bytes(message) {
    const bytes = this._size(message)
    if (typeof bytes !== 'number' || !Number.isInteger(bytes) || bytes < 0 || bytes > Number.MAX_SAFE_INTEGER) {
      throw typeError('size', 'a function returning a whole number of bytes from 0 to 2^53 - 1', bytes)
    }
    return bytes
  }

  /**
   * Submits `message`: `{ status: 'send', seq }` (send it now, then
   * `report`), `{ status: 'retained', seq }` (`next()` hands it out later)
   * or `{ status: 'refused' }` (a bound is reached: it is not held).
   */
  submit(message) {
    const bytes = this._bytes(message)
    const now = read(this)
    const { status, seq, events } = submitted(this._native.submit(bytes, now))
    let result
    if (status === 'refused') {
      result = { status }
    } else {
      this._messages.set(seq, message)
      result = { status, seq }
    }
    this._emitEvents(events)
    return result
  }

  /** Every retained message that may be sent now, oldest first: `[{ seq, message }]`. */
  next() {
    const { seqs, events } = nextOf(this._native.next(read(this)))
    const out = seqs.map((seq) => ({ seq, message: this._messages.get(seq) }))
    this._emitEvents(events)
    return out
  }

  /**
   * Reports the send of `seq`: `'delivered'` (no longer held), `'retained'`
   * (back in the queue), `'dead'` (given up: a `dead` event has it) or
   * `'unknown'` (not in flight: reported already, or never handed out).
   */
  report(seq, outcome) {
    const code = OUTCOME_CODES[Object.hasOwn(OUTCOME_CODES, outcome) ? outcome : '']
    if (code === undefined) throw typeError('outcome', '"success", "failure", "ignored" or "cancelled"', outcome)
    if (typeof seq !== 'number') throw typeError('seq', 'a number', seq)
    const { result, events } = reportedOf(this._native.report(seq, code, readToReport(this)))
    if (events) this._collect()
    if (result === 'delivered') {
      const message = this._messages.get(seq)
      this._messages.delete(seq)
      enqueue(this, 'delivered', { seq, message })
    }
    drain(this)
    return result
  }

  /** Applies what is due now: the breaker's timed change, messages aged out. */
  handleTimeout() {
    this._emitEvents(this._native.handleTimeout(read(this)))
  }

  /** When `next()` may hand out something it cannot now, or a message ages out (ms on the clock); null: not by time. */
  pollTimeoutMs() {
    return this._native.pollTimeoutMs() ?? null
  }

  /** The message held as `seq` (retained or in flight), or undefined. */
  message(seq) {
    return this._messages.get(seq)
  }

  /** Every message held, `[seq, message]` in submission order. */
  held() {
    return [...this._messages].sort((a, b) => a[0] - b[0])
  }

  /** The breaker's state: 'CLOSED', 'OPEN' or 'HALF_OPEN'. */
  getState() {
    return STATE_OF[this._native.state(read(this))]
  }

  /** What it holds (`retained`, `inFlight`, `bytes`) and did (counters). */
  stats() {
    return this._native.stats()
  }

  /** The breaker's metrics (as `CircuitBreaker.metrics()`). */
  metrics() {
    const m = this._native.metrics(read(this))
    m.state = STATE_OF[m.state]
    for (const key of ['concurrencyLimit', 'meanTimeOpenMs', 'errorRate', 'latencyCount', 'latencyP50Ms', 'latencyP95Ms', 'latencyP99Ms', 'latencyMaxMs']) {
      if (m[key] === undefined) m[key] = null
    }
    return m
  }

  /** The Prometheus text of the breaker and of the retention. */
  prometheus() {
    return output(() => this._native.prometheus(this.name, read(this)))
  }

  /** Holds the breaker open for `ms`, or until `release()` (a throttle webhook, say). */
  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._emitEvents(this._native.forceOpen(read(this), ms))
  }

  /** Holds the breaker open for at least `ms` (the partner's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms) {
    checkAtLeastMs(ms)
    this._emitEvents(this._native.forceOpenAtLeast(read(this), ms))
  }

  /** Ends `forceOpen()`; call `next()` after. */
  release() {
    this._emitEvents(this._native.release(read(this)))
  }

  /** The queue's state as a plain object (not the messages: keep them with `held()`). */
  toJSON() {
    return JSON.parse(output(() => this._native.snapshotJson(read(this))))
  }

  /** The queue's state as compact bytes. */
  toBytes() {
    return output(() => this._native.snapshotBytes(read(this)))
  }

  /**
   * A queue from `options` with the state of `snapshot` (from `toJSON`, or
   * its text) and `messages` (`[seq, message]` pairs, or a Map, as `held()`
   * gave): a send in flight then is retained again. A snapshot naming a
   * message not given is a `corrupt` SnapshotError: it would be lost.
   */
  static fromJSON(options, snapshot, messages) {
    return RetentionQueue._restored(options, snapshotText(snapshot), null, messages)
  }

  /** As `fromJSON`, from `toBytes()`. */
  static fromBytes(options, bytes, messages) {
    if (!(bytes instanceof Uint8Array)) throw typeError('bytes', 'a Buffer or Uint8Array', bytes)
    return RetentionQueue._restored(options, null, nativeBytes(bytes), messages)
  }

  static _restored(options, json, bytes, messages, where) {
    const queue = new RetentionQueue(options, where)
    queue._restore(json, bytes, messages)
    return queue
  }

  _restore(json, bytes, messages) {
    const held = new Map()
    if (messages === null || typeof messages !== 'object' || typeof messages[Symbol.iterator] !== 'function') {
      throw typeError('messages', 'a Map or an iterable of [seq, message] pairs', messages)
    }
    for (const pair of messages) {
      if (!Array.isArray(pair) || pair.length !== 2 || !Number.isSafeInteger(pair[0]) || pair[0] < 0) {
        throw typeError('messages', 'an iterable of [seq, message] pairs (seq: a whole number)', pair)
      }
      if (held.has(pair[0])) throw typeError('messages', 'pairs with distinct sequence numbers', pair[0])
      held.set(pair[0], pair[1])
    }
    const now = read(this)
    try {
      this._native.load(json, bytes, [...held.keys()], now, this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    }
    for (const seq of this._native.held()) this._messages.set(seq, held.get(seq))
    if (this._messages.size !== held.size) {
      const extra = [...held.keys()].filter((seq) => !this._messages.has(seq))
      throw new SnapshotError('corrupt', `corrupt snapshot: it does not hold the messages given as ${extra.slice(0, 5).join(', ')}: they would be lost`)
    }
  }

  /** Emits the native half's events if `pending` says some wait. */
  _emitEvents(pending) {
    if (pending) {
      this._collect()
      // A Dispatcher defers them until the message just submitted is in place.
      if (this._deferred === 0) drain(this)
    }
  }

  /** Queues the native half's events in its order, with their messages (emitted by the next `drain`). */
  _collect() {
    for (const e of this._native.takeEvents()) {
      if (e.kind === 'transition') {
        enqueueTransitions(this, [e.transition])
        continue
      }
      const message = this._messages.get(e.seq)
      this._messages.delete(e.seq)
      if (e.kind === 'dead') enqueue(this, 'dead', { seq: e.seq, message, reason: e.reason, attempts: e.attempts })
      else enqueue(this, 'dropped', { seq: e.seq, message })
    }
  }
}

module.exports = { RetentionQueue }
