'use strict'
// BullMQ in one line (BullMQ 5, an optional peer dependency): a processor
// that runs each job through a breaker and, when the breaker refuses, puts
// the job back in the queue at the breaker's hint without using an attempt
// (seed 000: "if the breaker is open, the job goes back to the queue; it is
// not discarded"). The decisions are the breaker's; this file only moves
// jobs as BullMQ allows.

const { DelayedError, Worker } = require('bullmq')
const { CircuitBreaker } = require('./lib/breaker.js')
const { isRefusal, rangeError, typeError } = require('./lib/errors.js')
const { numberProblem } = require('./lib/options.js')
const { Registry } = require('./lib/registry.js')

/** A job refused while held open with no end (`forceOpen()` without ms) comes back after this. */
const HELD_DELAY_MS = 30_000

/**
 * A BullMQ processor: `send(job, signal)` runs through `breaker` (a
 * `CircuitBreaker`, or a `Registry` with `key(job)` naming the job's
 * breaker). What `send` returns is the job's result; what it throws fails
 * the attempt as usual (BullMQ's `attempts` and `backoff`). A refusal puts
 * the job back: delayed until the refusal's `retryAfterMs` (no attempt
 * used), or, with a single breaker that is open for at least
 * `pauseWhenOpenMs` more (default 1,000; `null`: never), back to waiting
 * while the worker fetches nothing for that long (`worker.rateLimit`):
 * idle workers do not fetch and requeue job after job while nothing can
 * be sent. (A Registry's breakers are per key: one open key must not stop
 * the others, so its refusals are always delayed.)
 */
function breakerProcessor(options) {
  if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options)
  const { breaker, key, send, pauseWhenOpenMs = 1_000 } = options
  const keyed = breaker instanceof Registry
  if (!keyed && !(breaker instanceof CircuitBreaker)) throw typeError('breaker', 'a CircuitBreaker or a Registry', breaker)
  if (keyed && typeof key !== 'function') throw typeError('key', 'a function of the job (a Registry needs one)', key)
  if (!keyed && key !== undefined) throw typeError('key', 'absent with a CircuitBreaker', key)
  if (typeof send !== 'function') throw typeError('send', 'a function', send)
  if (pauseWhenOpenMs !== null) {
    if (typeof pauseWhenOpenMs !== 'number') throw typeError('pauseWhenOpenMs', 'a number of ms or null', pauseWhenOpenMs)
    if (!(pauseWhenOpenMs >= 0 && pauseWhenOpenMs <= Number.MAX_SAFE_INTEGER)) {
      throw rangeError('pauseWhenOpenMs', `must be from 0 to 2^53 - 1 ms, got ${pauseWhenOpenMs}`, numberProblem(pauseWhenOpenMs, Number.MAX_SAFE_INTEGER))
    }
  }
  return async (job, token, signal) => {
    const target = keyed ? breaker.get(key(job)) : breaker
    try {
      return await target.execute((s) => send(job, s), signal === undefined ? undefined : { signal })
    } catch (err) {
      if (!isRefusal(err)) throw err
      // (A full Registry, or held open with no end: no hint to wait for.)
      const wait = Number.isFinite(err.retryAfterMs) ? err.retryAfterMs : HELD_DELAY_MS
      const open = err.reason === 'open' || err.reason === 'held'
      // The worker that fetched the job (BullMQ makes it the job's queue;
      // by its method: another copy of bullmq has another Worker class).
      const worker = job.queue
      if (!keyed && open && pauseWhenOpenMs !== null && wait >= pauseWhenOpenMs && typeof worker?.rateLimit === 'function') {
        await worker.rateLimit(wait)
        throw Worker.RateLimitError()
      }
      await job.moveToDelayed(Date.now() + wait, token)
      throw new DelayedError()
    }
  }
}

module.exports = { breakerProcessor }
