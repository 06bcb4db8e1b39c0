// What the JavaScript half takes from its platform, for edge workers and
// browsers (the Node package's lib/platform.js uses Node's modules): a
// small EventEmitter, the global monotonic clock, bytes as Uint8Array, and
// warnings through `process.emitWarning` where there is one (Node, workerd
// with nodejs_compat), else `console.warn`.

const LISTENERS = Symbol('halfopen.listeners')

/** The listener table of `emitter`, made on first use (no constructor runs). */
function table(emitter) {
  if (!Object.hasOwn(emitter, LISTENERS)) {
    Object.defineProperty(emitter, LISTENERS, { value: new Map() })
  }
  return emitter[LISTENERS]
}

function checkListener(listener) {
  if (typeof listener !== 'function') {
    throw new TypeError(`The "listener" argument must be of type function. Received ${typeof listener}`)
  }
}

/**
 * Node's EventEmitter in the part a breaker needs: `on`/`addListener`,
 * `prependListener`, `once`, `off`/`removeListener`, `removeAllListeners`,
 * `emit`, `listeners`, `rawListeners`, `listenerCount`, `eventNames`. Not
 * here: `'error'` events throwing when unheard, `'newListener'` /
 * `'removeListener'` events, max-listener warnings, captureRejections.
 */
class EventEmitter {
  on(event, listener) {
    checkListener(listener)
    const map = table(this)
    const list = map.get(event)
    if (list === undefined) map.set(event, [listener])
    else list.push(listener)
    return this
  }

  addListener(event, listener) {
    return this.on(event, listener)
  }

  prependListener(event, listener) {
    checkListener(listener)
    const map = table(this)
    map.set(event, [listener, ...(map.get(event) ?? [])])
    return this
  }

  once(event, listener) {
    checkListener(listener)
    const emitter = this
    let fired = false
    function wrapper(...args) {
      emitter.removeListener(event, wrapper)
      if (fired) return undefined
      fired = true
      return listener.apply(this, args)
    }
    wrapper.listener = listener
    return this.on(event, wrapper)
  }

  removeListener(event, listener) {
    const map = table(this)
    const list = map.get(event)
    if (list === undefined) return this
    // The latest added goes first, as in Node.
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i] === listener || list[i].listener === listener) {
        list.splice(i, 1)
        if (list.length === 0) map.delete(event)
        break
      }
    }
    return this
  }

  off(event, listener) {
    return this.removeListener(event, listener)
  }

  removeAllListeners(event) {
    if (event === undefined) table(this).clear()
    else table(this).delete(event)
    return this
  }

  emit(event, ...args) {
    const list = table(this).get(event)
    if (list === undefined) return false
    for (const listener of [...list]) listener.apply(this, args)
    return true
  }

  listeners(event) {
    return (table(this).get(event) ?? []).map((l) => l.listener ?? l)
  }

  rawListeners(event) {
    return [...(table(this).get(event) ?? [])]
  }

  listenerCount(event) {
    return table(this).get(event)?.length ?? 0
  }

  eventNames() {
    return [...table(this).keys()]
  }
}

/** The clock: `performance.now()` (in workerd it moves only across I/O). */
const performance = globalThis.performance

/** Bytes for the native half: a Uint8Array, as given. */
const nativeBytes = (bytes) => bytes

/** Reports a warning (an Error with `code`). */
function emitWarning(warning) {
  const process = globalThis.process
  if (process !== undefined && typeof process.emitWarning === 'function') process.emitWarning(warning)
  else console.warn(warning)
}

export { EventEmitter, emitWarning, nativeBytes, performance }
