// Types of the `halfopen` package (hand-checked against index.js; the native
// half's generated types are in native.d.ts).
import { EventEmitter } from 'node:events'

export type CircuitState = 'CLOSED' | 'OPEN' | 'HALF_OPEN'

/** Seed 000's options, and every other core option (ms for times). */
export interface CircuitOptions {
  /** Identifies the breaker in errors, events and metrics. Required. */
  name: string
  /** Open after this many failures within `windowMs` (default 5); `null`: no such policy. */
  failureThreshold?: number | null
  /** The window failures are counted over (default 60,000 ms). */
  windowMs?: number
  /** Count over the last N calls (≤ 128) instead of a time window. */
  windowCalls?: number
  /** Time open after tripping (default 30,000 ms). */
  openTimeoutMs?: number
  /** Probes in flight while half-open (default 3); the same number of successes closes. */
  halfOpenMaxAttempts?: number
  /** Successful probes that close it (default: `halfOpenMaxAttempts`). */
  halfOpenSuccesses?: number
  /** Open after this many failures in a row. */
  consecutiveFailures?: number | null
  /** Open when ≥ this % of the window's calls failed (once it holds `minimumCalls`). */
  failureRateThreshold?: number | null
  /** Calls the window must hold before a rate is judged (default 10). */
  minimumCalls?: number
  /** A call slower than this counts as a failure (and as slow). */
  slowCallMs?: number | null
  /** Open when ≥ this % of the window's calls were slow. */
  slowCallRateThreshold?: number | null
  /** Open time multiplier after each failed trial (default 2). */
  backoffFactor?: number
  /** Open time cap (default 300,000 ms, or `openTimeoutMs` if longer). */
  maxOpenTimeoutMs?: number
  /** Shorten each open period by a random fraction below this (0 ≤ j < 1). */
  jitter?: number
  /** Seed of the jitter (same seed, same periods). */
  jitterSeed?: number
  /** Give up half-open probes not reported within this (default 60,000 ms). */
  probeTimeoutMs?: number
  /** Abort `fn` (through the signal it receives) after this; counts as a failure. */
  timeoutMs?: number
  /** Keep a latency histogram (4 KB) for p50/p95/p99 in `metrics()`. */
  latencyHistogram?: boolean
  /** Whether an error from `fn` says the upstream is unwell (default: every error does). */
  isFailure?: (err: unknown) => boolean
  /** The clock, in ms (default: `performance.now`, monotonic). */
  clock?: () => number
}

/** A transition, as events carry it. */
export interface Transition {
  from: CircuitState
  to: CircuitState
  reason: string
  atMs: number
}

export type Permit = { admitted: true; generation: number; issuedAtMs: number }
export type Refusal = { admitted: false; state: CircuitState; retryAfterMs: number }
export type Outcome = 'success' | 'failure' | 'ignored' | 'cancelled'

export interface Metrics {
  state: CircuitState
  admitted: number
  successes: number
  failures: number
  slow: number
  rejections: number
  ignored: number
  cancelled: number
  stale: number
  opens: number
  opensLast24h: number
  timeClosedMs: number
  timeOpenMs: number
  timeHalfOpenMs: number
  meanTimeOpenMs: number | null
  errorRate: number | null
  latencyCount: number | null
  latencyP50Ms: number | null
  latencyP95Ms: number | null
  latencyP99Ms: number | null
  latencyMaxMs: number | null
  consecutiveFailures: number
  windowCalls: number
  windowFailures: number
  windowSlow: number
  probesInFlight: number
  probeSuccesses: number
}

/** Rejection of a call the breaker did not admit (`fn` was not called). */
export declare class CircuitBreakerOpenError extends Error {
  readonly breakerName: string
  readonly state: CircuitState
  /** ms until a call may be admitted; Infinity while held open. */
  readonly retryAfterMs: number
}

/** Rejection of a call that exceeded `timeoutMs`. */
export declare class CircuitBreakerTimeoutError extends Error {
  readonly breakerName: string
}

export declare class CircuitBreaker extends EventEmitter {
  constructor(options: CircuitOptions)
  readonly name: string
  /** Runs `fn` if admitted; settles exactly as `fn` does, or rejects with `CircuitBreakerOpenError`. */
  execute<T>(fn: (signal?: AbortSignal) => T | Promise<T>, options?: { signal?: AbortSignal }): Promise<T>
  getState(): CircuitState
  isCallPermitted(): boolean
  retryAfterMs(): number
  tryAcquire(): Permit | Refusal
  record(permit: Permit, outcome: Outcome): void
  mode(): 'NORMAL' | 'FORCED_OPEN' | 'DISABLED'
  pollTimeoutMs(): number | null
  handleTimeout(): void
  forceOpen(ms?: number): void
  forceClose(): void
  disable(): void
  release(): void
  reset(): void
  metrics(): Metrics
  prometheus(): string
  toJSON(): object
  toBytes(): Buffer
  static fromJSON(options: CircuitOptions, snapshot: object | string): CircuitBreaker
  static fromBytes(options: CircuitOptions, bytes: Uint8Array): CircuitBreaker

  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition) => void): this
  on(event: 'reject', listener: (err: CircuitBreakerOpenError) => void): this
  on(event: 'success', listener: (value: unknown) => void): this
  on(event: 'failure', listener: (err: unknown) => void): this
}

/** A call refused because the registry is full and none of its breakers is idle. */
export declare class RegistryFullError extends Error {
  readonly breakerName: string
}

export interface RegistryOptions extends Omit<CircuitOptions, 'name' | 'latencyHistogram' | 'timeoutMs'> {
  /** Most breakers held (default 10,000); beyond it idle ones are evicted. */
  capacity?: number
}

/** One registry breaker, by name. */
export declare class KeyedBreaker {
  readonly name: string
  execute<T>(fn: (signal?: AbortSignal) => T | Promise<T>, options?: { signal?: AbortSignal }): Promise<T>
  tryAcquire(): Permit | (Refusal & { error: CircuitBreakerOpenError | RegistryFullError })
  record(permit: Permit, outcome: Outcome): void
  getState(): CircuitState
  retryAfterMs(): number
  isCallPermitted(): boolean
  metrics(): Metrics | null
  forceOpen(ms?: number): void
  forceClose(): void
  disable(): void
  release(): void
  reset(): void
}

/** One breaker per name (seed 000's `breakerFor`), bounded; events carry the breaker's `name`. */
export declare class Registry extends EventEmitter {
  constructor(options?: RegistryOptions)
  get(name: string): KeyedBreaker
  configure(name: string, options: Omit<CircuitOptions, 'name' | 'clock' | 'isFailure' | 'timeoutMs' | 'latencyHistogram'>): void
  has(name: string): boolean
  names(): string[]
  readonly size: number
  readonly evictions: number
  prometheus(): string
  toJSON(): object
  restore(snapshot: object | string): void
  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition & { name: string }) => void): this
  on(event: 'reject', listener: (err: CircuitBreakerOpenError) => void): this
  on(event: 'success', listener: (value: unknown) => void): this
  on(event: 'failure', listener: (err: unknown) => void): this
}
