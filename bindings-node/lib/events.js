'use strict'
// Events in the core's order. An event is queued on its emitter and emitted
// after those queued before it, so a listener that changes the breaker
// (`forceClose()` from an 'open' listener) has its events emitted after the
// current one's. A listener's exception goes to `warnCallback`: it never
// changes a call's result, the breaker's state, or the events that follow.

const { warnCallback } = require('./errors.js')

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

module.exports = { drain, enqueue, enqueueTransitions, publish, STATE_OF }
