'use strict'
// The one call path, shared by `CircuitBreaker.execute` and a registry's
// keyed breakers. A host (the breaker) provides:
//   _clock, _last, _timeoutMs, _isFailure, name
//   _admit()               -> a permit, or null (rejected); reads the clock
//                             when it needs a reading (may throw its TypeError)
//   _rejectionError()      -> the error for the rejection just made (emits 'reject')
//   _settle(permit, outcome, event, payload)
//                          -> reports the outcome to the core (reading the
//                             clock when it needs to, never throwing), then
//                             emits `event` (if any) and the transitions it caused
// Every admitted call is settled exactly once, whatever throws: `fn`,
// `isFailure`, a listener, the clock, an abort or a timeout.

const { CircuitBreakerTimeoutError, typeError, warnCallback } = require('./errors.js')

const SUCCESS = 0
const FAILURE = 1
const IGNORED = 2
const CANCELLED = 3

/** Runs `fn` through `host` if admitted; settles exactly as `fn` does (see index.d.ts). */
function execute(host, fn, options) {
  if (typeof fn !== 'function') return Promise.reject(typeError('fn', 'a function', fn))
  let signal
  if (options !== undefined) {
    if (options === null || typeof options !== 'object') return Promise.reject(typeError('options', 'an object', options))
    signal = options.signal
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      return Promise.reject(typeError('signal', 'an AbortSignal', signal))
    }
    if (signal?.aborted) return Promise.reject(signal.reason)
  }
  let permit
  try {
    permit = host._admit()
  } catch (err) {
    return Promise.reject(err)
  }
  if (permit === null) return Promise.reject(host._rejectionError())
  if (signal === undefined && host._timeoutMs === undefined) return plain(host, fn, permit)
  return guarded(host, fn, permit, signal)
}

/** The outcome of an error from `fn`: `isFailure` decides (a throwing one counts it as a failure). */
function classify(host, err) {
  if (host._isFailure === undefined) return FAILURE
  try {
    return host._isFailure(err) ? FAILURE : IGNORED
  } catch (thrown) {
    warnCallback(thrown, 'isFailure')
    return FAILURE
  }
}

function succeed(host, permit, value) {
  host._settle(permit, SUCCESS, 'success', value)
  return value
}

function fail(host, permit, err) {
  const outcome = classify(host, err)
  host._settle(permit, outcome, outcome === FAILURE ? 'failure' : undefined, err)
  return err
}

function plain(host, fn, permit) {
  let result
  try {
    result = fn()
  } catch (err) {
    return Promise.reject(fail(host, permit, err))
  }
  return Promise.resolve(result).then(
    (value) => succeed(host, permit, value),
    (err) => {
      throw fail(host, permit, err)
    },
  )
}

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function'
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
    const finish = (settle) => {
      if (settled) return
      settled = true
      if (timer !== undefined) clearTimeout(timer)
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
      settle()
    }
    const cancel = () =>
      finish(() => {
        controller.abort(signal.reason)
        host._settle(permit, CANCELLED)
        reject(signal.reason)
      })
    // An abort while `fn` runs waits for what it returns; one after waits a
    // microtask, so that a promise `fn` already resolved is settled first.
    const onAbort = () => {
      if (running) abortedWhileRunning = true
      else queueMicrotask(cancel)
    }
    if (signal !== undefined) signal.addEventListener('abort', onAbort, { once: true })
    if (host._timeoutMs !== undefined) {
      timer = setTimeout(() => {
        finish(() => {
          const err = new CircuitBreakerTimeoutError(host.name, host._timeoutMs)
          controller.abort(err)
          host._settle(permit, FAILURE, 'failure', err)
          reject(err)
        })
      }, host._timeoutMs)
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
    if (abortedWhileRunning) cancel()
    Promise.resolve(result).then(
      (value) => finish(() => resolve(succeed(host, permit, value))),
      (err) => finish(() => reject(fail(host, permit, err))),
    )
  })
}

module.exports = { execute, SUCCESS, FAILURE, IGNORED, CANCELLED }
