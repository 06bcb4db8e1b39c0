'use strict'
// Events in the core's order. An event is queued on its emitter and emitted
// after those queued before it, so a listener that changes the breaker
// (`forceClose()` from an 'open' listener) has its events emitted after the
// current one's. A listener's exception goes to `warnCallback`: it never
// changes a call's result, the breaker's state, or the events that follow.

const { warnCallback } = require('./errors.js')
const { EventEmitter } = require('./platform.js')

/** A state's name in the API, by the core's. */
const STATE_OF = { closed: 'CLOSED', half_open: 'HALF_OPEN', open: 'OPEN' }
/** The event a transition to each state emits. */
const EVENT_OF = { closed: 'close', half_open: 'halfOpen', open: 'open' }

/** Emitters emitting now (a listener's own events join the running loop). */
const DRAINING = new WeakSet()

/** Queues `name(payload)` on `emitter` (its `_queue`: null when empty), to be emitted by the next `drain`. */
function enqueue(emitter, name, payload) {
  if (emitter._queue === null) emitter._queue = []
  emitter._queue.push(name, payload)
}

/** Queues `name(payload)` on `emitter` and emits everything queued, in order. */
function publish(emitter, name, payload) {
  enqueue(emitter, name, payload)
  drain(emitter)
}

/** Emits everything queued on `emitter`, in order (unless it is emitting already). */
function drain(emitter) {
  if (emitter._queue === null || DRAINING.has(emitter)) return
  DRAINING.add(emitter)
  const queue = emitter._queue
  try {
    for (let i = 0; i < queue.length; i += 2) {
      const event = queue[i]
      const listeners = emitter.rawListeners(event)
      for (const listener of listeners) {
        try {
          const returned = listener.call(emitter, queue[i + 1])
          // An async listener's rejection is its exception, a little later.
          if (returned !== null && typeof returned === 'object' && typeof returned.then === 'function') {
            returned.then(undefined, (err) => warnCallback(err, `a '${event}' listener`))
          }
        } catch (err) {
          warnCallback(err, `a '${event}' listener`)
        }
      }
    }
  } finally {
    emitter._queue = null
    DRAINING.delete(emitter)
  }
}

/** The event payload of a native transition. */
function transitionEvent(t) {
  const event = { from: STATE_OF[t.from], to: STATE_OF[t.to], reason: t.reason, atMs: t.atMs }
  if (t.name !== undefined && t.name !== null) return { name: t.name, ...event }
  return event
}

/** Queues each transition the addon held, in its order, on `emitter`. */
function enqueueTransitions(emitter, transitions) {
  for (const t of transitions) {
    const event = transitionEvent(t)
    enqueue(emitter, EVENT_OF[t.to], event)
    enqueue(emitter, 'stateChange', event)
  }
}

/** The methods that add or remove a listener. */
const CHANGES = ['addListener', 'on', 'prependListener', 'once', 'prependOnceListener', 'removeListener', 'off', 'removeAllListeners']

/**
 * Makes `Class` an EventEmitter (instanceof, on/once/off/emit...) whose
 * listener table is made on its first `on` (the platform's methods create
 * it lazily; skipping its constructor saves ~260 bytes an object with no
 * listener), and which knows without a lookup whether anything listens to
 * 'success' (`heard`): a success under a licence asks, and looking up a
 * table that exists cost it a fifth of the seed class's overhead. Each
 * method that adds or removes a listener is wrapped to note it again; it
 * calls the platform's method as it is when called (a hook installed on
 * it later still runs). Its constructor sets `_heard` false and
 * `_heardCount` to its `_eventsCount` (a prototype's, before its table).
 */
function listenable(Class) {
  Object.setPrototypeOf(Class.prototype, EventEmitter.prototype)
  Object.setPrototypeOf(Class, EventEmitter)
  for (const method of CHANGES) {
    const wrapper = {
      [method](...args) {
        const returned = EventEmitter.prototype[method].apply(this, args)
        noteHeard(this)
        return returned
      },
    }[method]
    Object.defineProperty(wrapper, 'length', { value: EventEmitter.prototype[method].length })
    Object.defineProperty(Class.prototype, method, { value: wrapper, writable: true, configurable: true })
  }
}

/**
 * Notes whether `emitter` has 'success' listeners, and its table's count of
 * events then (Node's `_eventsCount`; halfopen-wasm's emitter keeps none,
 * and its class is not exported: only its own methods add listeners).
 */
function noteHeard(emitter) {
  emitter._heard = emitter.listenerCount('success') > 0
  emitter._heardCount = emitter._eventsCount
}

/**
 * Whether `emitter` (made `listenable`) has 'success' listeners: as noted,
 * unless its table's count of events moved since, which a listener of an
 * event without one added past its own methods does
 * (`EventEmitter.prototype.on.call(breaker, ...)`): then looked up.
 */
function heard(emitter) {
  if (emitter._heard) return true
  if (emitter._eventsCount === emitter._heardCount) return false
  noteHeard(emitter)
  return emitter._heard
}

module.exports = { drain, enqueue, enqueueTransitions, heard, listenable, publish, STATE_OF }
