'use strict'
// `Dispatcher`: seed 001's promise to partners. `submit(message)` sends it
// through the user's `send` when the breaker admits, else holds it and sends
// it later, in order and paced; the promise it returns settles when the
// message is delivered (fulfilled) or given up (rejected with a
// DeadLetterError). A full queue rejects at once (RetentionFullError): no
// message is lost silently. It drives a RetentionQueue (lib/retention.js):
// every decision is the core's; here are the sends, their timeouts, the
// timer that wakes the queue, and the store that keeps messages across a
// restart.
//
// Decisions: a submit promise nobody awaits does not crash the process when
// its message dies (it is marked handled; the 'dead' event and the counters
// say so). `send` failing with an error `isFailure` says is not the
// upstream's health dead-letters the message at once (sending it again
// cannot help). The timer is not unref'd while messages are held: a process
// does not exit with messages it promised to deliver.
//
// A send has `timeoutMs` (the core's default, 10 s, unless `null`): then its
// signal aborts, and its outcome is what it settles with (a send that ends
// well after all was delivered); a send that ignores its signal and has not
// settled after as long again is reported as failed, with a warning (its
// retry may then overlap it). So with `concurrencyLimit: 1` a retry starts
// only after the attempt before it ended. A send that rejects after its
// timeout failed (the partner's failure, whatever `isFailure` says of the
// abort's error). A send that fulfils with an Error object (a forgotten
// `throw`) failed as if it had thrown it; any other value is a delivery —
// `false` too: Node APIs such as `writable.write()` fulfil with false for
// "buffered", not for a failure (throw to fail).
//
// Delivery is at least once: a send whose outcome is ambiguous (the partner
// answered after the timeout, the connection reset after the partner
// recorded the event, a crash before the outcome was stored) is sent again.
// So every message has a key, handed to `send` with it, that a partner can
// deduplicate by: the same on every attempt and, with a store, across
// restarts (the store keeps it beside the message; after a crash the
// messages come back under new sequence numbers, never new keys). It is the
// caller's (`submit(message, { key })`) or, by default, `<origin>-<seq>`,
// where the origin is random per Dispatcher, so keys of a process that
// started again never repeat those of the one before.

const { classify } = require('./call.js')
const { read } = require('./clock.js')
const {
  CircuitBreakerTimeoutError,
  DeadLetterError,
  RetentionFullError,
  snapshotText,
  typeError,
  warnCallback,
} = require('./errors.js')
const { drain, enqueue, publish } = require('./events.js')
const { MAX_TIMER_MS } = require('./options.js')
const { EventEmitter, randomHex64 } = require('./platform.js')
const { RetentionQueue } = require('./retention.js')
const { CANCELLED, FAILURE, OUTCOMES, SUCCESS } = require('./wire.js')

const FORWARDED = ['open', 'close', 'halfOpen', 'stateChange', 'delivered', 'dead', 'dropped']
const STORE_METHODS = ['add', 'remove', 'save', 'load', 'clear']

/** A message sender in front of a fragile upstream (see index.d.ts). */
class Dispatcher extends EventEmitter {
  constructor(options) {
    super()
    if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options)
    const { send, isFailure, timeoutMs, store } = Object.assign(Object.create(null), options)
    if (typeof send !== 'function') throw typeError('send', 'a function', send)
    if (isFailure !== undefined && typeof isFailure !== 'function') throw typeError('isFailure', 'a function', isFailure)
    if (store !== undefined) {
      const missing = STORE_METHODS.find((m) => store === null || typeof store[m] !== 'function')
      if (missing !== undefined) throw typeError('store', `an object with ${STORE_METHODS.join(', ')} methods`, store)
    }
    // Checks the options (timeoutMs among them: a TypeError or RangeError naming it).
    this.queue = new RetentionQueue(options, 'dispatcher')
    this.name = this.queue.name
    this._queue = null // events (lib/events.js)
    this._send = send
    this._isFailure = isFailure
    // null: none; absent: the core's default.
    this._timeoutMs = timeoutMs === null ? undefined : (timeoutMs ?? this.queue._native.defaultSendTimeoutMs())
    this._store = store
    this._storeOps = 0 // store operations not yet done
    this._storeIdle = [] // resolvers of `persisted()`
    /** Promises of messages held, by sequence number. */
    this._pending = new Map()
    /** The keys of messages held, by sequence number. */
    this._keys = new Map()
    this._origin = randomHex64()
    this._timer = null
    this._timerAt = null // the clock reading `_timer` is for
    this._pumping = false
    this._again = false
    this._closing = false
    this._idle = [] // resolvers of `drained()`: nothing held
    this._opening = false // `Dispatcher.open` has not resolved: events wait for its caller's listeners
    this._quiet = [] // resolvers of `close()`: nothing in flight
    // null, or whether a send may start now (an Outbox's lease): a message
    // handed out when it may not goes back to its place, not an attempt.
    this._mayStart = null
    this._listen(this.queue)
  }

  /**
   * A dispatcher from `options` that takes back what its `store` kept: the
   * state saved by `close()` with its messages (then forgotten in the store,
   * so that a later crash cannot reuse it), or, after a crash (no state
   * saved), the messages stored, submitted again in their order. Nothing is
   * sent and the store is not changed unless every message is taken back.
   */
  static async open(options) {
    const dispatcher = new Dispatcher(options)
    const store = dispatcher._store
    if (store === undefined) return dispatcher
    dispatcher._opening = true
    const { snapshot, messages } = loaded(await store.load())
    if (snapshot !== null && snapshot !== undefined) {
      const pairs = messages.map(([seq, message]) => [seq, message])
      dispatcher._adopt(RetentionQueue._restored(options, snapshotText(snapshot), null, pairs, 'dispatcher'))
      const keys = new Map(messages.map(([seq, , key]) => [seq, key]))
      for (const [seq, message] of dispatcher.queue.held()) {
        dispatcher._promise(seq)
        const key = keys.get(seq)
        if (key !== undefined) {
          dispatcher._keys.set(seq, key)
        } else {
          // Stored without its key (by a version before keys): it gets one
          // now, stored too, so that it keeps it from here on.
          dispatcher._keys.set(seq, dispatcher._newKey(seq))
          dispatcher._stored((s) => s.add(seq, message, dispatcher._keys.get(seq)))
        }
      }
      dispatcher._stored((s) => s.save(null))
    } else if (messages.length > 0) {
      dispatcher._resubmit(messages)
    }
    // Sent, expired (a restore on a shared clock can find messages past
    // their age) and announced only after `open()` has resolved, so that
    // listeners attached to what it gives hear every event (the messages a
    // crash restart dropped for `maxMessages` too).
    setTimeout(() => {
      dispatcher._opening = false
      drain(dispatcher)
      dispatcher._pump()
    }, 0)
    return dispatcher
  }

  /**
   * After a crash: the outcome of what was in flight is unknown, so every
   * stored message is submitted again (at least once), in its order, under
   * new numbers and their keys. All are taken before anything is sent or
   * stored; the new copies are stored before the old ones are forgotten (in
   * one Redis MULTI).
   */
  _resubmit(messages) {
    const taken = []
    const queue = this.queue
    queue._deferred += 1
    for (const [, message, key] of messages) {
      const result = queue.submit(message)
      if (result.status === 'refused') {
        const err = new RetentionFullError(this.name)
        err.message = `Dispatcher[${this.name}] cannot take back the ${messages.length} messages its store holds (a bound is reached); nothing was changed`
        throw err
      }
      taken.push([result, message, key])
    }
    const fresh = new Set(taken.map(([r]) => r.seq))
    for (const [{ seq }, message, key] of taken) {
      this._promise(seq)
      this._keys.set(seq, key ?? this._newKey(seq))
      this._stored((s) => s.add(seq, message, this._keys.get(seq)))
    }
    for (const [seq] of messages) if (!fresh.has(seq)) this._stored((s) => s.remove(seq))
    for (const [{ seq, status }, message] of taken) if (status === 'send') this._start(seq, message)
    queue._deferred -= 1
    drain(queue)
  }

  _adopt(queue) {
    this.queue.removeAllListeners()
    this.queue = queue
    this._listen(queue)
  }

  _listen(queue) {
    for (const event of FORWARDED) queue.on(event, (payload) => this._on(event, payload))
  }

  /** A queue event: settles the message's promise, frees it in the store, re-emits it. */
  _on(event, payload) {
    if (event === 'delivered' || event === 'dead' || event === 'dropped') {
      const pending = this._pending.get(payload.seq)
      this._pending.delete(payload.seq)
      payload.key = this._keys.get(payload.seq)
      this._keys.delete(payload.seq)
      this._stored((s) => s.remove(payload.seq))
      if (pending !== undefined) {
        if (event === 'delivered') pending.resolve()
        else {
          const reason = event === 'dropped' ? 'dropped' : payload.reason
          pending.reject(new DeadLetterError(this.name, payload.message, reason, payload.attempts ?? 0))
        }
      }
    }
    if (this._opening) enqueue(this, event, payload)
    else publish(this, event, payload)
  }

  /**
   * Submits `message`: the promise fulfils when it is delivered and rejects
   * with a DeadLetterError when it is given up, at once with a
   * RetentionFullError when a bound is reached (nothing is held) or an
   * Error when the dispatcher is closed. Throws a TypeError for a bad size
   * or key. `key`: what `send` is given to deduplicate by (default: unique).
   */
  submit(message, options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) throw typeError('options', 'an object { key }', options)
    const key = options?.key
    if (key !== undefined && (typeof key !== 'string' || key === '')) throw typeError('key', 'a non-empty string', key)
    if (this._closing) return Promise.reject(new Error(`Dispatcher[${this.name}] is closed`))
    // The queue's events (a message dropped for this one) wait until this
    // message has its promise and its place in the store: a listener that
    // submits again finds everything in order.
    const queue = this.queue
    queue._deferred += 1
    let result
    try {
      result = queue.submit(message)
    } finally {
      queue._deferred -= 1
    }
    if (result.status === 'refused') {
      drain(queue)
      // Not marked handled: a refusal nobody looks at is an unhandled rejection, not silence.
      return Promise.reject(new RetentionFullError(this.name))
    }
    const promise = this._promise(result.seq)
    this._keys.set(result.seq, key ?? this._newKey(result.seq))
    this._stored((s) => s.add(result.seq, message, this._keys.get(result.seq)))
    if (result.status === 'send') this._start(result.seq, message)
    drain(queue)
    this._pump()
    return promise
  }

  /** The default key of the message `seq`. */
  _newKey(seq) {
    return `${this._origin}-${seq}`
  }

  _promise(seq) {
    let pending
    const promise = new Promise((resolve, reject) => {
      pending = { resolve, reject }
    })
    // Handled: a message given up is an event and a count, not a crash.
    promise.catch(() => {})
    this._pending.set(seq, pending)
    return promise
  }

  /** Runs `send` for `seq`; its outcome is reported exactly once (timeout, throw, garbage included). */
  _start(seq, message) {
    if (this._mayStart !== null && !this._mayStart()) {
      try {
        this.queue.report(seq, OUTCOMES[CANCELLED])
      } catch (err) {
        warnCallback(err, `the dispatcher '${this.name}', handing a message back`)
      }
      return
    }
    let done = false
    let timer
    const finish = (outcome) => {
      if (done) return
      done = true
      clearTimeout(timer)
      try {
        this.queue.report(seq, OUTCOMES[outcome])
      } catch (err) {
        warnCallback(err, `the dispatcher '${this.name}', reporting a send`)
      }
      this._pump()
    }
    try {
      // A signal only where something aborts it (`timeoutMs`): an
      // AbortController per send costs more than the rest of the send's bookkeeping.
      let controller
      let timedOut = false
      const timeoutMs = this._timeoutMs
      if (timeoutMs !== undefined) {
        controller = new AbortController()
        timer = setTimeout(() => {
          timedOut = true
          // Aborted; reported when it settles (its slot is held until then),
          // or failed after as long again if it ignores its signal.
          timer = setTimeout(() => {
            warnCallback(new Error(`a send ignored its abort signal for ${timeoutMs} ms: reported as failed, its retry may overlap it`), `the dispatcher '${this.name}'`)
            finish(FAILURE)
          }, timeoutMs)
          controller.abort(new CircuitBreakerTimeoutError(this.name, timeoutMs))
        }, timeoutMs)
      }
      // Whatever `send` returns or throws, even a value whose `then` or
      // `constructor` throws when read, ends in one report.
      Promise.resolve(this._send(message, { signal: controller?.signal, seq, key: this._keys.get(seq) })).then(
        (value) => finish(fulfilled(this, value)),
        (err) => finish(timedOut ? FAILURE : classify(this, err)),
      )
    } catch (err) {
      finish(classify(this, err))
    }
  }

  /** Sends whatever may go now, then sets the timer for what may go later. Not re-entered. */
  _pump() {
    if (this._pumping) {
      this._again = true
      return
    }
    this._pumping = true
    try {
      do {
        this._again = false
        if (this._closing || (this._mayStart !== null && !this._mayStart())) break
        for (const { seq, message } of this.queue.next()) this._start(seq, message)
      } while (this._again)
    } catch (err) {
      warnCallback(err, `the dispatcher '${this.name}', sending`)
    } finally {
      this._pumping = false
    }
    this._schedule()
    this._settleIdle()
  }

  _schedule() {
    const at = this._closing ? null : this.queue.pollTimeoutMs()
    // The timer set for that time already: kept (most submissions while open).
    if (at !== null && this._timer !== null && at === this._timerAt) return
    if (this._timer !== null) clearTimeout(this._timer)
    this._timer = null
    this._timerAt = at
    if (at === null) return
    let delay
    try {
      delay = Math.min(Math.max(0, at - read(this.queue)), MAX_TIMER_MS)
    } catch (err) {
      warnCallback(err, 'the clock')
      delay = this.queue._native.clockFailureRetryMs()
    }
    this._timer = setTimeout(() => {
      this._timer = null
      try {
        this.queue.handleTimeout()
      } catch (err) {
        warnCallback(err, `the dispatcher '${this.name}', on its timer`)
      }
      this._pump()
    }, delay)
  }

  /**
   * Runs `op(store)` now (a store applies its operations in the order they
   * are called); a failure is a warning. `persisted()` waits for them.
   */
  _stored(op) {
    const store = this._store
    if (store === undefined) return
    let done
    try {
      done = Promise.resolve(op(store))
    } catch (err) {
      done = Promise.reject(err)
    }
    this._storeOps += 1
    done
      .catch((err) => warnCallback(err, `the store of dispatcher '${this.name}'`))
      .then(() => {
        this._storeOps -= 1
        if (this._storeOps === 0) for (const resolve of this._storeIdle.splice(0)) resolve()
      })
  }

  _settleIdle() {
    if (this._idle.length === 0 && this._quiet.length === 0) return
    const { retained, inFlight } = this.queue.stats()
    if (inFlight === 0) for (const resolve of this._quiet.splice(0)) resolve()
    if (retained + inFlight === 0) for (const resolve of this._idle.splice(0)) resolve()
  }

  /** Resolves once nothing is held (every message delivered or given up). */
  drained() {
    return new Promise((resolve) => {
      this._idle.push(resolve)
      this._settleIdle()
    })
  }

  /** Resolves once every store operation so far is done: the messages submitted until now are stored. */
  persisted() {
    return new Promise((resolve) => {
      if (this._storeOps === 0) resolve()
      else this._storeIdle.push(resolve)
    })
  }

  /**
   * Applies what is due at the clock's reading now (an open time that
   * ended, messages aged out) and sends what may go. The dispatcher's timer
   * does this by itself; call it after moving an injected clock.
   */
  poll() {
    this.queue.handleTimeout()
    this._pump()
  }

  /**
   * Stops sending and submitting, waits for the sends in flight to end, and
   * saves the state with the store (if any): `Dispatcher.open` takes it back,
   * delivering nothing twice. Messages still retained stay held (in the store).
   */
  async close() {
    this._closing = true
    if (this._timer !== null) clearTimeout(this._timer)
    this._timer = null
    await new Promise((resolve) => {
      this._quiet.push(resolve)
      this._settleIdle()
    })
    if (this._store !== undefined) {
      const snapshot = this.queue.toJSON()
      this._stored((s) => s.save(snapshot))
      await this.persisted()
    }
  }

  /** The breaker's state: 'CLOSED', 'OPEN' or 'HALF_OPEN'. */
  getState() {
    return this.queue.getState()
  }

  /** What it holds and did (see RetentionQueue.stats). */
  stats() {
    return this.queue.stats()
  }

  /** The breaker's metrics. */
  metrics() {
    return this.queue.metrics()
  }

  /** The Prometheus text of the breaker and of the retention. */
  prometheus() {
    return this.queue.prometheus()
  }

  /** Holds the breaker open for `ms`, or until `release()` (a throttle webhook). */
  forceOpen(ms) {
    this.queue.forceOpen(ms)
    this._pump()
  }

  /** Holds the breaker open for at least `ms` (the partner's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms) {
    this.queue.forceOpenAtLeast(ms)
    this._pump()
  }

  /** Ends `forceOpen()`. */
  release() {
    this.queue.release()
    this._pump()
  }
}

/**
 * The outcome of a send that fulfilled with `value`: an Error object is
 * classified as if thrown (a forgotten `throw`); anything else (`false`,
 * and however odd: a Proxy whose prototype cannot be read included) is a
 * delivery.
 */
function fulfilled(dispatcher, value) {
  let error = false
  try {
    error = value instanceof Error
  } catch {}
  return error ? classify(dispatcher, value) : SUCCESS
}

/** What `store.load()` gave, checked: a TypeError naming `store` for anything but `{ snapshot, messages }`. */
function loaded(value) {
  const bad = (why) => typeError('store', `an object whose load() gives { snapshot, messages } (${why})`, value)
  if (value === null || typeof value !== 'object') throw bad('not an object')
  const { snapshot, messages } = value
  if (!Array.isArray(messages)) throw bad('messages is not an array')
  const seen = new Set()
  for (const pair of messages) {
    if (!Array.isArray(pair) || (pair.length !== 2 && pair.length !== 3) || !Number.isSafeInteger(pair[0]) || pair[0] < 0) {
      throw bad('messages holds something other than [seq, message] or [seq, message, key] entries')
    }
    if (pair[2] !== undefined && (typeof pair[2] !== 'string' || pair[2] === '')) throw bad(`the key of ${pair[0]} is not a non-empty string`)
    if (seen.has(pair[0])) throw bad(`sequence number ${pair[0]} twice`)
    seen.add(pair[0])
  }
  return { snapshot, messages: [...messages].sort((a, b) => a[0] - b[0]) }
}

module.exports = { Dispatcher }
