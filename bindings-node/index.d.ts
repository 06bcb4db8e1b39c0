// Types of the `halfopen` package (hand-checked against index.js; the native
// half's generated types are in native.d.ts).
import { EventEmitter } from 'node:events'

/**
 * Which native half runs the core: `'native'` (this platform's prebuilt
 * addon) or `'wasm'` (its WebAssembly build: where no prebuilt binary
 * exists, or with HALFOPEN_BACKEND=wasm).
 */
export declare const backend: 'native' | 'wasm'

export type CircuitState = 'CLOSED' | 'OPEN' | 'HALF_OPEN'

/** The options every breaker has (the core's; ms for times). `null` unsets a policy, even one the preset sets. */
export interface CoreOptions {
  /** Start from the core's preset: seed 000's breaker (the default), seed 001's webhook breaker, or `sender` (seed 000's with an adaptive concurrency limit from 1 to 1,000: what a message sender wants). */
  preset?: 'whatsappGateway' | 'partnerWebhook' | 'sender'
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
  /**
   * At most this many calls in flight at once (a bulkhead); a call over it is
   * refused with `reason: 'limit_full'`, the state `'CLOSED'` (or
   * `'HALF_OPEN'` while probing). A call holds its slot until it settles,
   * whatever the state does meanwhile; an abort or `timeoutMs` frees it at
   * once (a `fn` that ignores its signal may still be running). Calls that
   * never settle cannot wedge it: when it has refused calls for
   * `probeTimeoutMs` with none settling, the calls in flight are given up
   * (their later results count nothing: keep `probeTimeoutMs` longer than
   * any call). Off by
   * default (seed 000's class has no limit); `null` turns it off (for a
   * `Registry.configure` name: the Registry's limit, of either kind).
   * Excludes `adaptiveLimitMin`/`adaptiveLimitMax`.
   */
  concurrencyLimit?: number | null
  /**
   * With `adaptiveLimitMax`: a concurrency limit adapted to what the upstream
   * takes (TCP-like: starts at `halfOpenMaxAttempts`; while it holds callers
   * back, doubles per round trip; halves on a failure or slow call, then
   * grows by one per round trip), never below this. What a sender in front of a rate-limited gateway wants:
   * a breaker that closes does not release its whole backlog at once.
   */
  adaptiveLimitMin?: number
  /** With `adaptiveLimitMin`: the adaptive limit never grows beyond this (say, the sender's concurrency). */
  adaptiveLimitMax?: number
}

/** Why a call was refused: see `CircuitBreakerOpenError.reason`. */
export type RefusalReason = 'open' | 'probes_busy' | 'limit_full' | 'held'
/**
 * What is wrong with an option, as the core says it (`Problem::code`): the
 * `problem` of a RangeError naming the option in `option`.
 */
export type OptionProblem =
  | 'no_trip_policy'
  | 'zero'
  | 'too_small'
  | 'too_large'
  | 'not_finite'
  | 'out_of_range'
  | 'exceeds_window'
  | 'missing'
  | 'below_open_timeout'
  | 'exceeds_half_open_max_attempts'
  | 'exceeds_max'


/**
 * Seed 000's options, and every other core option (ms for times).
 *
 * Errors thrown by `isFailure`, `clock` or a listener never change a call's
 * result, the breaker's state or later events: they are reported with
 * `process.emitWarning`, code `HALFOPEN_CALLBACK_ERROR`, the error as `cause`.
 */
export interface CircuitOptions extends CoreOptions {
  /** Identifies the breaker in errors, events and metrics (well-formed UTF-16, at most 1024 bytes of UTF-8). Required. */
  name: string
  /** Abort `fn` (through the signal it receives) after this (at most 2^31 - 1 ms; null or absent: never); counts as a failure. */
  timeoutMs?: number | null
  /** Keep a latency histogram (4 KB) for p50/p95/p99 in `metrics()`. */
  latencyHistogram?: boolean
  /**
   * One breaker for several processes (README "Several processes"): the
   * breakers of every process with the same `name` on the same Redis trip on
   * their merged failures (with a quorum of processes), probe once for the
   * group and close together. Exchanges run in the background, at most one
   * script call per `flushIntervalMs`: no call ever waits for Redis or fails
   * because of it. Native addon only (not the WebAssembly backend).
   */
  group?: GroupOptions
  /** Whether an error from `fn` says the upstream is unwell (default: every error does; if it throws, the call is a failure). */
  isFailure?: (err: unknown) => boolean
  /**
   * What a refused `execute` resolves to instead of rejecting with
   * `CircuitBreakerOpenError`: called with the refusal (a plain object: no
   * error is built), awaited if it returns a promise; what it throws or
   * rejects with is the call's rejection. It should return what `fn` does
   * (the type of `execute` assumes it). A call's own `fallback` option
   * replaces it (`null`: none). It runs outside `signal` and `timeoutMs`.
   * `tryAcquire` is not affected.
   */
  fallback?: (refusal: FallbackRefusal) => any
  /**
   * The clock, in ms (default: `performance.now`, monotonic). A reading that
   * is not a finite number up to 2^53 - 1 is a TypeError (`option: 'clock'`).
   */
  clock?: () => number
  /**
   * The clock's readings mean the same in every process that restores this
   * state (a wall clock such as `Date.now`, passed as `clock`): a restore
   * then counts the time since the snapshot was taken (an open period that
   * ended meanwhile has ended, old failures have left the window, retained
   * messages have aged). Default false: a restore resumes as if no time had
   * passed, right for a monotonic clock whose origin is each process's start.
   * `true` without `clock` is a TypeError.
   */
  sharedClock?: boolean
}

/** A transition, as events carry it. */
export interface Transition {
  from: CircuitState
  to: CircuitState
  reason: string
  atMs: number
}

export type Permit = { admitted: true; generation: number; issuedAtMs: number }
export type Refusal = { admitted: false; state: CircuitState; retryAfterMs: number; reason: RefusalReason }
/** A refused call, as a fallback receives it (`registry_full`: a Registry full of busy breakers). */
export type FallbackRefusal = { breakerName: string; state: CircuitState; retryAfterMs: number; reason: RefusalReason | 'registry_full' }
/**
 * `execute`'s options (own properties only): an AbortSignal that cancels the
 * call, and this call's fallback (see `CircuitOptions.fallback`), which
 * replaces the breaker's or Registry's; `null`: none for this call (a
 * refusal rejects, as a retry library wants). A fallback runs outside
 * `signal` and `timeoutMs`: it is neither aborted nor timed.
 */
export type ExecuteOptions<T> = { signal?: AbortSignal; fallback?: ((refusal: FallbackRefusal) => T | PromiseLike<T>) | null }
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
  /** Calls admitted and not yet settled nor given up, whatever the state did since. */
  inFlight: number
  /** The concurrency limit in force; null without one. */
  concurrencyLimit: number | null
}

/** Rejection of a call the breaker did not admit (`fn` was not called). */
export declare class CircuitBreakerOpenError extends Error {
  readonly breakerName: string
  /** The state that refused: `'OPEN'`, `'HALF_OPEN'`, or `'CLOSED'` when the concurrency limit is full. */
  readonly state: CircuitState
  /**
   * ms after which to try again — use it as a queue's delay: the open time
   * left (spread over a tenth of `openTimeoutMs` after it with a concurrency
   * limit), a short hint while half-open, about one round trip when the
   * limit is full; Infinity while held open.
   */
  readonly retryAfterMs: number
  /**
   * Why: `'open'` (the open time has not ended), `'probes_busy'` (half-open,
   * every probe slot taken), `'limit_full'` (the concurrency limit is full),
   * `'held'` (forced open until released).
   */
  readonly reason: RefusalReason
}

/** A snapshot that cannot be restored. */
export declare class SnapshotError extends Error {
  readonly kind: 'malformed' | 'newer_version' | 'config_mismatch' | 'corrupt'
}

/** The `group` option. Ranges are checked by the core: a RangeError with `option: 'group.<name>'` and `problem`. */
export interface GroupOptions {
  /** The ioredis client (a `Redis` or a `Cluster`: a group's keys share one hash slot). */
  redis: { defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void }
  /** The group: every process's breaker with this name and Redis is one breaker (its key: the hash `halfopen:v2:{name}`; no `{` or `}`). */
  name: string
  /** At most one exchange per interval (besides those a transition asks for), 10 ms to an hour. Default 1000. */
  flushIntervalMs?: number
  /** An exchange that takes longer counts as failed; at most `flushIntervalMs`. Default 250, or `flushIntervalMs` if shorter. */
  storeTimeoutMs?: number
  /** Distinct live processes whose calls failed within the window, needed to open the group (all, if fewer are live). Default 2. */
  quorum?: number
  /** How long one process's probe lease lasts (renewed while its probes are out) before another may take over; at least `probeTimeoutMs`, at most a day. Default `probeTimeoutMs` + `flushIntervalMs`. */
  leaseMs?: number
  /** How long a silent process still counts as live. Default 3 flush intervals. */
  memberTtlMs?: number
}

/** What a grouped breaker knows of its group. */
export interface GroupStatus {
  /** This process's member id (16 hex digits, random). */
  member: string
  /** Whether it decides alone because Redis failed or was late. */
  degraded: boolean
  /** The group's phase as last answered; null before the first answer or since Redis failed. */
  phase: 'closed' | 'open' | 'half_open' | null
}

/** Rejection of a call that exceeded `timeoutMs`. */
export declare class CircuitBreakerTimeoutError extends Error {
  readonly breakerName: string
}

export declare class CircuitBreaker extends EventEmitter {
  constructor(options: CircuitOptions)
  readonly name: string
  /**
   * Runs `fn` if admitted; settles exactly as `fn` does, or rejects with
   * `CircuitBreakerOpenError` (never throws), or, with a fallback, settles as
   * the fallback does. With a `signal`, an abort before `fn` settles cancels
   * the call (nothing counted); once `fn` has settled, its result wins.
   */
  execute<T>(fn: (signal?: AbortSignal) => T | Promise<T>, options?: ExecuteOptions<T>): Promise<T>
  getState(): CircuitState
  isCallPermitted(): boolean
  /** ms until a call is worth trying: 0 now; while half-open with every probe slot taken, a short hint. */
  retryAfterMs(): number
  /** A permit from the core (no fast path), or why not. */
  tryAcquire(): Permit | Refusal
  /** Reports a permit's outcome, once: a reported, forged or foreign permit is a TypeError. */
  record(permit: Permit, outcome: Outcome): void
  mode(): 'NORMAL' | 'FORCED_OPEN' | 'DISABLED'
  pollTimeoutMs(): number | null
  handleTimeout(): void
  forceOpen(ms?: number): void
  /** Holds open for at least `ms` (an upstream's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms: number): void
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
  /** With the `group` option, what it knows of its group; else (also after `leaveGroup()`) null. */
  groupStatus(): GroupStatus | null
  /** Stops exchanging with the group (the breaker goes on alone). */
  leaveGroup(): void
  /**
   * With the `group` option: opens every process's breaker for `ms` (a throttle webhook that reached
   * this one): this one at once, the others at their next exchange; sent again until Redis answers.
   */
  groupForceOpen(ms: number): void
  /**
   * With the `group` option: closes every process's breaker and forgets the group's failures and
   * backoff (an operator's force-close); this one at once, the others at their next exchange.
   */
  groupForceClose(): void
  /** With the `group` option: resets every process's breaker (as `groupForceClose`, each breaker reset). */
  groupReset(): void

  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition) => void): this
  /** Redis failed or was late: this process decides alone (it still trips, probes and closes by itself). */
  on(event: 'groupDegraded', listener: (e: { name: string; error: Error | null }) => void): this
  /** Redis answered again: this process follows the group again (and adopts what it did meanwhile). */
  on(event: 'groupRecovered', listener: (e: { name: string }) => void): this
  on(event: 'reject', listener: (err: CircuitBreakerOpenError) => void): this
  on(event: 'success', listener: (value: unknown) => void): this
  on(event: 'failure', listener: (err: unknown) => void): this
}

/** A call refused because the registry is full and none of its breakers is idle. */
export declare class RegistryFullError extends Error {
  readonly breakerName: string
}

/**
 * Whether `err` is a breaker's refusal (`CircuitBreakerOpenError` or
 * `RegistryFullError`): the call never reached the upstream, so a retry
 * library should stop — p-retry: `shouldRetry: ({ error }) => !isRefusal(error)`;
 * async-retry: `bail(err)` — and the caller requeue at `retryAfterMs`.
 */
export declare function isRefusal(err: unknown): err is CircuitBreakerOpenError | RegistryFullError

export interface RegistryOptions extends CoreOptions {
  /** Most breakers held, and names given their own options (default 10,000); beyond it idle ones are evicted. */
  capacity?: number
  /** As for `CircuitBreaker`, for every breaker of the registry. */
  isFailure?: (err: unknown) => boolean
  /** As for `CircuitBreaker`, for every call through the registry (also one refused because it is full: `registry_full`). */
  fallback?: (refusal: FallbackRefusal) => any
  /** As for `CircuitBreaker`, for every breaker of the registry. */
  clock?: () => number
  /**
   * The clock's readings mean the same in every process that restores this
   * state (a wall clock such as `Date.now`, passed as `clock`): a restore
   * then counts the time since the snapshot was taken (an open period that
   * ended meanwhile has ended, old failures have left the window, retained
   * messages have aged). Default false: a restore resumes as if no time had
   * passed, right for a monotonic clock whose origin is each process's start.
   * `true` without `clock` is a TypeError.
   */
  sharedClock?: boolean
  /** As for `CircuitBreaker`, for every call through the registry. */
  timeoutMs?: number | null
  /**
   * Each name's breaker one breaker for several processes (README "Several
   * processes"): every process's registry with this group `name` on the same
   * Redis shares name `n`'s breaker (the hash `halfopen:v2:{name}:k:n`, all in
   * one hash slot). The names due go together, in script calls of at most
   * 100 names: one round per `flushIntervalMs`, plus a call per burst of
   * transitions. A name joins at the next round after its breaker is made.
   */
  group?: GroupOptions
}

/** What a grouped registry knows of its group. */
export interface RegistryGroupStatus {
  /** This process's member id (16 hex digits, random). */
  member: string
  /** Whether some names decide alone: an exchange that carried them failed, and Redis has not answered them since. */
  degraded: boolean
  /** Names in the group (joined at an exchange). */
  names: number
  /** Names whose group Redis answered (since it last failed for them). */
  answered: number
}

/** One registry breaker, by name (from `Registry.get`; not constructed directly). */
export interface KeyedBreaker {
  readonly name: string
  execute<T>(fn: (signal?: AbortSignal) => T | Promise<T>, options?: ExecuteOptions<T>): Promise<T>
  tryAcquire(): Permit | (Omit<Refusal, 'reason'> & { reason: RefusalReason | 'registry_full'; error: CircuitBreakerOpenError | RegistryFullError })
  record(permit: Permit, outcome: Outcome): void
  getState(): CircuitState
  retryAfterMs(): number
  isCallPermitted(): boolean
  mode(): 'NORMAL' | 'FORCED_OPEN' | 'DISABLED'
  handleTimeout(): void
  metrics(): Metrics | null
  forceOpen(ms?: number): void
  /** Holds open for at least `ms` (an upstream's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms: number): void
  forceClose(): void
  disable(): void
  release(): void
  reset(): void
  /** With the registry's `group` option: opens this name's breaker in every process for `ms` (see `CircuitBreaker.groupForceOpen`). */
  groupForceOpen(ms: number): void
  /** With the registry's `group` option: closes this name's breaker in every process (see `CircuitBreaker.groupForceClose`). */
  groupForceClose(): void
  /** With the registry's `group` option: resets this name's breaker in every process. */
  groupReset(): void
}

/** One breaker per name (seed 000's `breakerFor`), bounded; events carry the breaker's `name`. */
export declare class Registry extends EventEmitter {
  constructor(options?: RegistryOptions)
  get(name: string): KeyedBreaker
  /**
   * Gives `name` its own core options: the Registry's, changed by `options`.
   * A breaker it has is replaced (events with reason 'reconfigured' if it was not closed).
   */
  configure(name: string, options: CoreOptions): void
  has(name: string): boolean
  /** Every name with a breaker; a RangeError with code 'HALFOPEN_OUT_OF_MEMORY' if they do not fit the memory (WebAssembly). */
  names(): string[]
  readonly size: number
  readonly evictions: number
  /** Every breaker's exposition; a RangeError with code 'HALFOPEN_OUT_OF_MEMORY' if it does not fit the memory (WebAssembly). */
  prometheus(): string
  /** Every breaker's state; a RangeError with code 'HALFOPEN_OUT_OF_MEMORY' if it does not fit the memory (WebAssembly). */
  toJSON(): object
  /** Replaces every breaker (events with reason 'restored' for each state changed); calls in flight stay out of the new breakers. */
  restore(snapshot: object | string): void
  /** With the `group` option, what it knows of its group; else (also after `leaveGroup()`) null. */
  groupStatus(): RegistryGroupStatus | null
  /** Stops exchanging with the group (every name goes on alone). */
  leaveGroup(): void
  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition & { name: string }) => void): this
  /** Redis failed or was late: the names of that exchange decide alone until it answers them. */
  on(event: 'groupDegraded', listener: (e: { error: Error | null }) => void): this
  /** Redis answered every name again: each follows its group again. */
  on(event: 'groupRecovered', listener: (e: object) => void): this
  on(event: 'reject', listener: (err: CircuitBreakerOpenError | RegistryFullError) => void): this
  on(event: 'success', listener: (value: unknown) => void): this
  on(event: 'failure', listener: (err: unknown) => void): this
}

/** How a retaining queue holds what its breaker does not admit (seed 001). */
export interface RetentionOptions extends CoreOptions {
  /** The queue's name (in metrics and errors). */
  name: string
  /** A clock in ms (default: `performance.now`); injected for tests. */
  clock?: () => number
  /**
   * The clock's readings mean the same in every process that restores this
   * state (a wall clock such as `Date.now`, passed as `clock`): a restore
   * then counts the time since the snapshot was taken (an open period that
   * ended meanwhile has ended, old failures have left the window, retained
   * messages have aged). Default false: a restore resumes as if no time had
   * passed, right for a monotonic clock whose origin is each process's start.
   * `true` without `clock` is a TypeError.
   */
  sharedClock?: boolean
  /** Keep a latency histogram (off by default). */
  latencyHistogram?: boolean
  /** At most this many messages held (retained and in flight). */
  maxMessages?: number
  /** At most this many bytes held, as `size` counts them. */
  maxBytes?: number
  /** A message's size in bytes (default: UTF-8 of a string, a binary's length, else its JSON's UTF-8). */
  size?: (message: unknown) => number
  /** Beyond a bound: refuse the new message (default) or drop the oldest retained ones. */
  overflow?: 'reject' | 'dropOldest'
  /**
   * Which message probes a half-open breaker: the oldest retained one (the
   * default: no new traffic needed, order kept) or, seed 001's rule, a new one.
   */
  probe?: 'oldest' | 'newMessage'
  /** A message that failed this many times is a dead letter. */
  maxAttempts?: number
  /** A message older than this (since its submission) is a dead letter. */
  maxAgeMs?: number
  /**
   * At most `perSecond` sends a second, in bursts of `burst`. A queue needs
   * this or a `concurrencyLimit`: a recovered upstream never gets the whole
   * backlog at once.
   */
  releaseRate?: { perSecond: number; burst: number }
}

/** What a retaining queue holds and did. */
export interface RetentionStats {
  retained: number
  inFlight: number
  bytes: number
  submitted: number
  refused: number
  sent: number
  delivered: number
  failed: number
  dead: number
  dropped: number
}

export interface DeadLetter<M = unknown> {
  seq: number
  message: M
  reason: 'attempts' | 'age' | 'refused'
  attempts: number
}

/**
 * The retention protocol without I/O (as `tryAcquire`/`record` are for a
 * breaker): `submit` a message, send what it and `next()` hand out, `report`
 * each send. Every decision is the core's. `Dispatcher` drives one.
 */
export declare class RetentionQueue<M = unknown> extends EventEmitter {
  constructor(options: RetentionOptions)
  readonly name: string
  /** Send it now (`'send'`), held for later (`'retained'`), or not taken: a bound is reached (`'refused'`). */
  submit(message: M): { status: 'send' | 'retained'; seq: number } | { status: 'refused' }
  /** Every retained message that may be sent now, oldest first. */
  next(): Array<{ seq: number; message: M }>
  /** How the send of `seq` went; `'unknown'`: it is not in flight (reported already, or never handed out). */
  report(seq: number, outcome: Outcome): 'delivered' | 'retained' | 'dead' | 'unknown'
  /** Applies what is due now: an open time that ended, messages aged out. */
  handleTimeout(): void
  /** When `next()` may hand out something it cannot now, or a message ages out; null: not by time. */
  pollTimeoutMs(): number | null
  message(seq: number): M | undefined
  /** Every message held, `[seq, message]` in submission order (what a store keeps). */
  held(): Array<[number, M]>
  getState(): CircuitState
  stats(): RetentionStats
  metrics(): Metrics
  /** The breaker's and the retention's Prometheus text. */
  prometheus(): string
  forceOpen(ms?: number): void
  /** Holds open for at least `ms` (an upstream's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms: number): void
  release(): void
  /** The state, not the messages (keep them with `held()`). */
  toJSON(): object
  toBytes(): Buffer
  /** A queue with the state of `snapshot` and its messages; a send in flight then is retained again. */
  static fromJSON<M>(options: RetentionOptions, snapshot: object | string, messages: Iterable<[number, M]>): RetentionQueue<M>
  static fromBytes<M>(options: RetentionOptions, bytes: Uint8Array, messages: Iterable<[number, M]>): RetentionQueue<M>
  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition) => void): this
  on(event: 'delivered' | 'dropped', listener: (e: { seq: number; message: M }) => void): this
  on(event: 'dead', listener: (e: DeadLetter<M>) => void): this
}

/** Where a Dispatcher keeps its messages and state across a restart (e.g. `halfopen/redis-store`). */
export interface DispatcherStore<M = unknown> {
  /** Keep `message` as `seq`, with its `key` (keep it too: after a crash it is the message's key again). Operations apply in the order they are called. */
  add(seq: number, message: M, key?: string): unknown
  /** Forget `seq` (delivered or given up). */
  remove(seq: number): unknown
  /** Forget every message. */
  clear(): unknown
  /** Save the dispatcher's state (from `close()`); `null`: forget it (`Dispatcher.open` took it back). */
  save(snapshot: object | null): unknown
  /** The state saved (or null) and the messages with their keys, in order; reads only. */
  load(): Promise<{ snapshot: object | null; messages: Array<[number, M] | [number, M, string]> }> | { snapshot: object | null; messages: Array<[number, M] | [number, M, string]> }
}

export interface DispatcherOptions<M = unknown> extends RetentionOptions {
  /**
   * Sends one message; resolve when the upstream took it, reject (throw) when
   * not. The value it fulfils with is not looked at (`false` too), but an
   * Error object, which counts as thrown. Honour `signal` (aborted at the
   * timeout): the send's slot is held until it settles. `key`: the same on
   * every attempt of this message and, with a store, across restarts (the
   * partner can deduplicate by it: delivery is at least once).
   */
  send: (message: M, context: { signal: AbortSignal | undefined; seq: number; key: string }) => unknown
  /** Whether an error from `send` says the upstream is unwell (default: every error). `false`: a dead letter at once. */
  isFailure?: (err: unknown) => boolean
  /**
   * Ms a send may take (default 10,000, the core's; `null`: no limit). Then
   * its signal aborts, and it fails when it settles (unless it delivered
   * after all); a send that ignores its signal fails after as long again.
   */
  timeoutMs?: number | null
  /** Keeps messages and state across a restart (see `Dispatcher.open`). */
  store?: DispatcherStore<M>
}

/** A message given up; `payload` is the message. */
export declare class DeadLetterError extends Error {
  readonly dispatcherName: string
  readonly payload: unknown
  readonly reason: 'attempts' | 'age' | 'refused' | 'dropped'
  readonly attempts: number
}

/** A message a Dispatcher could not take: a bound is reached. */
export declare class RetentionFullError extends Error {
  readonly dispatcherName: string
}

/**
 * Seed 001's promise: messages go through `send` when the breaker admits,
 * are held while it does not, and are sent later in order and paced.
 */
export declare class Dispatcher<M = unknown> extends EventEmitter {
  constructor(options: DispatcherOptions<M>)
  /** A dispatcher that takes back what `options.store` kept (the saved state, or after a crash the stored messages, sent again). */
  static open<M>(options: DispatcherOptions<M>): Promise<Dispatcher<M>>
  readonly name: string
  readonly queue: RetentionQueue<M>
  /**
   * Fulfils when `message` is delivered; rejects with a DeadLetterError when
   * given up (unawaited, that rejection does not crash the process). Rejects
   * at once with a RetentionFullError when a bound is reached, and with an
   * Error when the dispatcher is closed: handle those (unhandled, they are
   * Node's unhandled rejections). `key`: what `send` is given for this
   * message to deduplicate by (default: `<origin>-<seq>`, unique: the origin
   * is random per Dispatcher); a TypeError unless a non-empty string.
   */
  submit(message: M, options?: { key?: string }): Promise<void>
  /** Resolves when nothing is held. */
  drained(): Promise<void>
  /** Resolves when the store has applied every operation so far. */
  persisted(): Promise<void>
  /** Applies what is due at the clock's reading and sends what may go (after moving an injected clock). */
  poll(): void
  /**
   * Stops sending, waits for the sends in flight (up to twice `timeoutMs`
   * for a send that ignores its signal; without a timeout, as long as they
   * take), saves the state in the store.
   */
  close(): Promise<void>
  getState(): CircuitState
  stats(): RetentionStats
  metrics(): Metrics
  prometheus(): string
  forceOpen(ms?: number): void
  /** Holds open for at least `ms` (an upstream's Retry-After), never shortening an open period in force. */
  forceOpenAtLeast(ms: number): void
  release(): void
  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition) => void): this
  on(event: 'delivered' | 'dropped', listener: (e: { seq: number; message: M; key: string }) => void): this
  on(event: 'dead', listener: (e: DeadLetter<M> & { key: string }) => void): this
}

/**
 * An event an Outbox did not store: Redis refused it (`ambiguous` false:
 * not stored) or did not answer in time (`ambiguous` true: it may be;
 * submit it again with the same key). `cause` is Redis's error.
 */
export declare class StoreUnavailableError extends Error {
  readonly code: 'HALFOPEN_STORE_UNAVAILABLE'
  readonly partner: string
  readonly ambiguous: boolean
  readonly cause: unknown
}

/** How an Outbox writes an event in its log and reads it back (default: JSON). */
export interface OutboxSerializer<M = unknown> {
  /** The event as a string; throw (or return anything else) to refuse it: `submit` throws a TypeError. */
  encode(event: M): string
  decode(text: string): M
}

export interface OutboxOptions<M = unknown> extends Omit<DispatcherOptions<M>, 'name' | 'send' | 'store' | 'maxBytes' | 'overflow' | 'timeoutMs'> {
  /** The dispatcher's name (in metrics and errors; default: the partner's). */
  name?: string
  /** The ioredis client (Redis or Cluster) the log lives in. */
  redis: unknown
  /** The partner: one log, one lease, one deliverer (its keys: `halfopen:outbox:v1:{partner}:…`). */
  partner: string
  /**
   * Sends one event; resolve when the partner took it. `key`: the same on
   * every attempt, in every process (deduplicate by it); `epoch`: the
   * lease's, larger at each new deliverer.
   */
  send: (event: M, context: { signal: AbortSignal | undefined; key: string; epoch: number }) => unknown
  /** Ms a send may take (default 10,000); the lease must outlast it, so never null. */
  timeoutMs?: number
  serializer?: OutboxSerializer<M>
  /** The deliverer's lease (default: the shortest that fits: 4 × timeoutMs + 2 × storeTimeoutMs). */
  leaseMs?: number
  /** Events one read takes (default 64, or maxMessages if lower); at most two pages are held. */
  pageSize?: number
  /** How often a deliverer that read the whole log reads it again (default 250). */
  pollIntervalMs?: number
  /** How long a Redis call may take (default 1,000). */
  storeTimeoutMs?: number
}

/**
 * A partner's durable, ordered log on Redis, shared by processes: any
 * process submits; the one holding the lease delivers, through a
 * Dispatcher (breaker, limit, pacing), and removes what it delivered.
 */
export declare class Outbox<M = unknown> extends EventEmitter {
  constructor(options: OutboxOptions<M>)
  /** An outbox that starts once its caller has it; warns once when Redis runs without AOF. */
  static open<M>(options: OutboxOptions<M>): Promise<Outbox<M>>
  readonly partner: string
  /** Fulfils once Redis stored the event; rejects with a StoreUnavailableError when it did not (or did not say). */
  submit(event: M, options?: { key?: string }): Promise<{ id: string; key: string }>
  isDeliverer(): boolean
  stats(): { submitted: number; delivered: number; dead: number; removed: number; storeErrors: number; deliverer: boolean; epoch: number | null; held: number; removing: number }
  /** The dispatcher's state while this process delivers, else null. */
  getState(): CircuitState | null
  /**
   * Stores this turn's submits, waits for the sends in flight, removes what they delivered (four tries at most, with backoff, while the lease leaves room), then gives the lease up.
   * `unremoved`: deliveries whose removal Redis did not confirm (sent again later); `lapsed`: Redis did not confirm the
   * lease's last renewal, so it may have run out first (the next holder may send again what this one delivered last).
   */
  close(): Promise<{ unremoved: number; lapsed: boolean }>
  /**
   * This process delivers from now on. `breaker`: its breaker resumed the state the last holder left (`resumed`),
   * none was left (`none`), or why not (a SnapshotError kind: `config_mismatch` when its options differ; then a
   * warning `HALFOPEN_STATE_NOT_RESUMED` too, and it starts closed).
   */
  on(event: 'acquired', listener: (e: { epoch: number; breaker: 'resumed' | 'none' | 'config_mismatch' | 'malformed' | 'corrupt' | 'newer_version' }) => void): this
  on(event: 'lost', listener: (e: { reason: 'taken' | 'expired' | 'released' }) => void): this
  on(event: 'delivered', listener: (e: { id: string; key: string }) => void): this
  on(event: 'dead', listener: (e: { id: string; key: string; reason: 'attempts' | 'age' | 'refused' | 'undecodable' | 'full'; error: unknown }) => void): this
  on(event: 'storeError', listener: (e: { operation: 'lease' | 'read' | 'remove'; error: unknown }) => void): this
  on(event: 'open' | 'halfOpen' | 'close' | 'stateChange', listener: (t: Transition) => void): this
}
