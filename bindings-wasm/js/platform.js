// What the JavaScript half takes from its platform, for edge workers and
// browsers (the Node package's lib/platform.js uses Node's modules): a
// small EventEmitter, the global monotonic clock, bytes as Uint8Array, and
// warnings through `process.emitWarning` where there is one (Node), else
// `console.warn` (workerd: its `process`, even with nodejs_compat, has no
// `emitWarning`).

const LISTENERS = Symbol('halfopen.listeners')
const MAX = Symbol('halfopen.maxListeners')

/**
 * The listener table of `emitter` (event -> listeners), made on first use
 * (no constructor runs). A null-prototype object, as Node's: event names
 * that are not symbols are property keys (`1` and `'1'` are one event).
 */
function table(emitter) {
  const own = existing(emitter)
  if (own !== undefined) return own
  const made = Object.create(null)
  Object.defineProperty(emitter, LISTENERS, { value: made })
  return made
}

/** The listener table of `emitter` if it has one (reading never makes one:
 * most breakers have no listener, and every call asks). */
function existing(emitter) {
  const own = emitter[LISTENERS]
  // (An inherited table is another emitter's: a prototype used as one.)
  return own !== undefined && Object.hasOwn(emitter, LISTENERS) ? own : undefined
}

function checkListener(listener) {
  if (typeof listener !== 'function') {
    throw new TypeError(`The "listener" argument must be of type function. Received ${typeof listener}`)
  }
}

/** `listener` wrapped to run once, as `emitter`'s method (Node's `onceWrapper`). */
function onceWrapper(emitter, event, listener) {
  let fired = false
  function wrapper(...args) {
    emitter.removeListener(event, wrapper)
    if (fired) return undefined
    fired = true
    return listener.apply(emitter, args)
  }
  wrapper.listener = listener
  return wrapper
}

/**
 * Node's EventEmitter in the part a breaker needs: `on`/`addListener`,
 * `prependListener`, `once`, `prependOnceListener`, `off`/`removeListener`,
 * `removeAllListeners`, `emit`, `listeners`, `rawListeners`,
 * `listenerCount`, `eventNames`, `setMaxListeners`/`getMaxListeners`. Not
 * here: `'error'` events throwing when unheard, `'newListener'` /
 * `'removeListener'` events, max-listener warnings (the limit is kept, not
 * enforced), captureRejections.
 */
class EventEmitter {
  on(event, listener) {
    checkListener(listener)
    const events = table(this)
    // Copied on write: an emit in progress keeps the listeners it started with.
    events[event] = [...(events[event] ?? []), listener]
    return this
  }

  addListener(event, listener) {
    return this.on(event, listener)
  }

  prependListener(event, listener) {
    checkListener(listener)
    const events = table(this)
    events[event] = [listener, ...(events[event] ?? [])]
    return this
  }

  once(event, listener) {
    checkListener(listener)
    return this.on(event, onceWrapper(this, event, listener))
  }

  prependOnceListener(event, listener) {
    checkListener(listener)
    return this.prependListener(event, onceWrapper(this, event, listener))
  }

  removeListener(event, listener) {
    checkListener(listener)
    const events = table(this)
    const list = events[event]
    if (list === undefined) return this
    // The latest added goes first, as in Node.
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i] === listener || list[i].listener === listener) {
        if (list.length === 1) delete events[event]
        else events[event] = list.filter((_, j) => j !== i)
        break
      }
    }
    return this
  }

  off(event, listener) {
    return this.removeListener(event, listener)
  }

  removeAllListeners(event) {
    const events = table(this)
    if (event === undefined) {
      for (const key of Reflect.ownKeys(events)) delete events[key]
    } else {
      delete events[event]
    }
    return this
  }

  emit(event, ...args) {
    const list = existing(this)?.[event]
    if (list === undefined) return false
    // The listeners as they were when the event was emitted.
    for (const listener of list) listener.apply(this, args)
    return true
  }

  listeners(event) {
    return (existing(this)?.[event] ?? []).map((l) => l.listener ?? l)
  }

  rawListeners(event) {
    return [...(existing(this)?.[event] ?? [])]
  }

  listenerCount(event, listener) {
    // Asked on every call (an event without listeners is not built): no allocation.
    const list = existing(this)?.[event]
    if (list === undefined) return 0
    if (listener === undefined) return list.length
    return list.filter((l) => l === listener || l.listener === listener).length
  }

  eventNames() {
    return Reflect.ownKeys(existing(this) ?? {})
  }

  setMaxListeners(n) {
    if (typeof n !== 'number' || n < 0 || Number.isNaN(n)) {
      throw new RangeError(`The value of "n" is out of range. It must be a non-negative number. Received ${n}`)
    }
    Object.defineProperty(this, MAX, { value: n, configurable: true })
    return this
  }

  getMaxListeners() {
    return this[MAX] ?? 10
  }
}

/** The clock: `performance.now()` (in workerd it moves only across I/O). */
const performance = globalThis.performance

/** 64 random bits as 16 hex digits (Web Crypto: workerd, browsers, Node ≥ 19). */
function randomHex64() {
  const words = globalThis.crypto.getRandomValues(new Uint32Array(2))
  return Array.from(words, (w) => w.toString(16).padStart(8, '0')).join('')
}

/** Bytes for the native half: a Uint8Array, as given. */
const nativeBytes = (bytes) => bytes

/** Reports a warning (an Error with `code`). */
function emitWarning(warning) {
  const process = globalThis.process
  if (process !== undefined && typeof process.emitWarning === 'function') process.emitWarning(warning)
  else console.warn(warning)
}

/**
 * No timer ends a breaker's licence here, so its successes read the clock
 * (lib/licence.js): workerd drops a request's timers with its context, and
 * a browser fires a background tab's timers up to a minute late.
 */
const afterMs = undefined
const cancel = undefined

export { EventEmitter, afterMs, cancel, emitWarning, nativeBytes, performance, randomHex64 }
