import type { Job, Processor } from 'bullmq'
import type { CircuitBreaker, Registry } from './index'

export interface BreakerProcessorOptions<T, R> {
  /** The breaker every job goes through, or a Registry (then `key` names each job's breaker). */
  breaker: CircuitBreaker | Registry
  /** With a Registry: the name of the job's breaker (an upstream instance, a partner). */
  key?: (job: Job<T, R>) => string
  /** The upstream call; `signal` aborts it when BullMQ or the breaker's `timeoutMs` gives up. */
  send: (job: Job<T, R>, signal?: AbortSignal) => R | Promise<R>
  /**
   * With a single breaker: a refusal while it stays open at least this long
   * (ms, default 1,000) puts the job back to waiting and pauses the worker's
   * fetching until then (`worker.rateLimit`); `null`: never (every refused job
   * is delayed instead).
   */
  pauseWhenOpenMs?: number | null
}

/**
 * A BullMQ processor that runs each job through the breaker and puts a
 * refused one back in the queue at the breaker's hint, without using an
 * attempt: `new Worker(name, breakerProcessor({ breaker, send }), opts)`.
 */
export declare function breakerProcessor<T = any, R = any>(options: BreakerProcessorOptions<T, R>): Processor<T, R>
