'use strict'
// The one call path, shared by `CircuitBreaker.execute` and a registry's
// keyed breakers. A host (the breaker) provides:
//   _clock, _last, _timeoutMs, _isFailure, name
//   _admit()               -> a permit, or null (rejected); reads the clock
//                             when it needs a reading (may throw its TypeError)
//   _fallback              -> what a refused call returns instead (or undefined)
//   _rejectionError()      -> the error for the rejection just made (emits 'reject')
//   _refused()             -> the rejection just made, as a plain object
//                             `{ breakerName, state, retryAfterMs, reason }`
//                             (emits 'reject' with its error, if listened to)
//   _settle(permit, outcome, event, payload)
//                          -> reports the outcome to the core (reading the
//                             clock when it needs to), then emits `event` (if
//                             any) and the transitions it caused; if the
//                             native half throws (a wasm object poisoned by an
//                             earlier interrupted call), `settle` reports it as
//                             a warning and the caller still gets `fn`'s outcome
// Every admitted call is settled exactly once, whatever throws: `fn`,
// `isFailure`, a listener, the clock, an abort or a timeout.
//
// A timeout whose timer never fires: in workerd, a call that outlives its
// request (the handler answered without waiting for it) loses its pending
// promises and timers with the request's context, so neither `fn` nor its
// timer would ever report it, and its permit would hold a concurrency-limit
// or probe slot for good. So the calls with a timeout are also kept in
// `host._timed`; before a call is asked for, those past their deadline time
// out (as their timer would have: the oldest is checked, one clock reading).
// (A call without `timeoutMs` has only the core's give-up: `probeTimeoutMs`.)

const { CircuitBreakerTimeoutError, typeError, warnCallback } = require('./errors.js')
const { performance } = require('./platform.js')
const { CANCELLED, FAILURE, IGNORED, SUCCESS } = require('./wire.js')

const then = Promise.prototype.then

/** Runs `fn` through `host` if admitted; settles exactly as `fn` does (see index.d.ts). */
function execute(host, fn, options) {
  if (typeof fn !== 'function') return Promise.reject(typeError('fn', 'a function', fn))
  let signal
  let fallback = host._fallback
  if (options !== undefined) {
    let aborted = false
    try {
      if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options)
      // Own properties only (an inherited one, from a polluted prototype, is not an option).
      if (Object.hasOwn(options, 'fallback')) {
        const own = options.fallback
        if (own === null) fallback = undefined // this call: no fallback
        else if (own !== undefined) {
          if (typeof own !== 'function') throw typeError('fallback', 'a function or null', own)
          fallback = own
        }
      }
      if (Object.hasOwn(options, 'signal')) signal = options.signal
      if (signal !== undefined) {
        // The getter checks the brand: an object that only pretends to be an AbortSignal throws.
        if (!(signal instanceof AbortSignal)) throw typeError('signal', 'an AbortSignal', signal)
        try {
          aborted = signal.aborted
        } catch {
          throw typeError('signal', 'an AbortSignal', signal)
        }
      }
    } catch (err) {
      return Promise.reject(err)
    }
    if (aborted) return Promise.reject(signal.reason)
  }
  let permit
  try {
    // Calls past their deadline whose timer was lost time out first (so
    // that this call is asked once, and counted once).
    if (host._timed !== undefined) expireOverdue(host)
    permit = host._admit()
  } catch (err) {
    return Promise.reject(err)
  }
  if (permit === null) return fallback === undefined ? Promise.reject(host._rejectionError()) : fallBack(fallback, host._refused())
  if (signal === undefined && host._timeoutMs === undefined) return plain(host, fn, permit)
  return guarded(host, fn, permit, signal)
}

/**
 * A refused call's result: `fallback(refusal)`, awaited if it is a thenable
 * (no error is built for the refusal); what it throws or rejects with, the
 * call's rejection.
 */
function fallBack(fallback, refusal) {
  try {
    return Promise.resolve(fallback(refusal))
  } catch (err) {
    return Promise.reject(err)
  }
}

/** The outcome of an error from `fn` (or a Dispatcher's `send`): the host's `isFailure` decides (a throwing one counts it as a failure). */
function classify(host, err) {
  if (host._isFailure === undefined) return FAILURE
  try {
    return host._isFailure(err) ? FAILURE : IGNORED
  } catch (thrown) {
    warnCallback(thrown, 'isFailure')
    return FAILURE
  }
}

/** Settles `permit` through `host`; a failure of the native half becomes a warning. */
function settle(host, permit, outcome, event, payload) {
  try {
    host._settle(permit, outcome, event, payload)
  } catch (err) {
    warnCallback(err, `the breaker '${host.name}', recording a call`)
  }
}

function succeed(host, permit, value) {
  settle(host, permit, SUCCESS, 'success', value)
  return value
}

function fail(host, permit, err) {
  const outcome = classify(host, err)
  settle(host, permit, outcome, outcome === FAILURE ? 'failure' : undefined, err)
  return err
}

function plain(host, fn, permit) {
  let result
  try {
    result = fn()
  } catch (err) {
    return Promise.reject(fail(host, permit, err))
  }
  // A permit shared by many calls (a licence's) brings its own reactions.
  // Promise's own `then`: a native promise `fn` returned with a `then` of
  // its own would settle the call as often as that calls back.
  const { onValue, onError } = permit.settlers ?? settlers(host, permit)
  return then.call(Promise.resolve(result), onValue, onError)
}

/** The reactions that settle `permit` through `host`: to a value, to an error. */
function settlers(host, permit) {
  return {
    onValue: (value) => succeed(host, permit, value),
    onError: (err) => {
      throw fail(host, permit, err)
    },
  }
}

/**
 * Times out the calls of `host` past their deadline. Oldest first: a host
 * has one `timeoutMs`, so its calls' deadlines come in the order they were
 * added (a Set iterates so, and deleting the current one is safe).
 */
function expireOverdue(host) {
  const now = performance.now()
  for (const call of host._timed) {
    if (call.deadline > now) return
    call.expire()
  }
}

/** Whether `value` is a thenable; a `then` that cannot be read counts as one (it will reject). */
function isThenable(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false
  try {
    return typeof value.then === 'function'
  } catch {
    return true
  }
}

// One 'abort' listener per signal, whatever the number of calls waiting on
// it (so that many calls sharing a signal add no listeners to it).
const WATCHERS = new WeakMap()

/** Calls `onAbort` when `signal` aborts; returns the function that stops watching. */
function watch(signal, onAbort) {
  let set = WATCHERS.get(signal)
  if (set === undefined) {
    set = new Set()
    WATCHERS.set(signal, set)
    signal.addEventListener(
      'abort',
      () => {
        WATCHERS.delete(signal)
        for (const f of set) f()
      },
      { once: true },
    )
  }
  set.add(onAbort)
  return () => set.delete(onAbort)
}

// With a signal and/or a timeout: `fn` gets an AbortSignal; an abort before
// `fn` settles cancels the call (nothing counted), a timeout fails it. Once
// `fn` has settled, its result wins.
function guarded(host, fn, permit, signal) {
  return new Promise((resolve, reject) => {
    const controller = new AbortController()
    let settled = false
    let running = true
    let abortedWhileRunning = false
    let timer
    let unwatch
    let timed
    const finish = (settle) => {
      if (settled) return
      settled = true
      if (timer !== undefined) clearTimeout(timer)
      if (timed !== undefined) {
        const calls = host._timed
        calls.delete(timed)
        if (calls.size === 0) host._timed = undefined
      }
      if (unwatch !== undefined) unwatch()
      settle()
    }
    const cancel = () =>
      finish(() => {
        controller.abort(signal.reason)
        settle(host, permit, CANCELLED)
        reject(signal.reason)
      })
    // An abort while `fn` runs waits for what it returns; one after waits a
    // microtask, so that a promise `fn` already resolved is settled first.
    const onAbort = () => {
      if (running) abortedWhileRunning = true
      else queueMicrotask(cancel)
    }
    // An abort during the admission (a listener's doing): `fn` must not run.
    if (signal?.aborted) {
      finish(() => {
        settle(host, permit, CANCELLED)
        reject(signal.reason)
      })
      return
    }
    try {
      if (signal !== undefined) unwatch = watch(signal, onAbort)
      if (host._timeoutMs !== undefined) {
        const expire = () =>
          finish(() => {
            const err = new CircuitBreakerTimeoutError(host.name, host._timeoutMs)
            controller.abort(err)
            settle(host, permit, FAILURE, 'failure', err)
            reject(err)
          })
        timer = setTimeout(expire, host._timeoutMs)
        timed = { deadline: performance.now() + host._timeoutMs, expire }
        host._timed ??= new Set()
        host._timed.add(timed)
      }
    } catch (err) {
      // `fn` never ran: the permit goes back, nothing counted.
      finish(() => {
        settle(host, permit, CANCELLED)
        reject(err)
      })
      return
    }
    let result
    try {
      result = fn(controller.signal)
    } catch (err) {
      running = false
      finish(() => reject(fail(host, permit, err)))
      return
    }
    running = false
    if (!isThenable(result)) {
      finish(() => resolve(succeed(host, permit, result)))
      return
    }
    then.call(
      Promise.resolve(result),
      (value) => finish(() => resolve(succeed(host, permit, value))),
      (err) => finish(() => reject(fail(host, permit, err))),
    )
    // An abort while `fn` ran: cancel, unless the promise it returned is
    // already settled (its reaction, queued just above, runs first).
    if (abortedWhileRunning) queueMicrotask(cancel)
  })
}

module.exports = { classify, execute, settlers }
