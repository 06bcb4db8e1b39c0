import type { Meter, Observable } from '@opentelemetry/api'
import type { CircuitBreaker, Dispatcher, Registry, RetentionQueue } from './index'

/** What the OpenTelemetry integration observes: anything with a Prometheus text of halfopen's. */
export type Source = CircuitBreaker | Registry | Dispatcher<any> | RetentionQueue<any>

/** One instrument of the core's table. */
export interface InstrumentRow {
  /** The instrument's name, e.g. `circuit.failures`. */
  readonly name: string
  readonly kind: 'gauge' | 'counter' | 'updowncounter'
  /** UCUM: `s`, `By`, `1`, or an annotation such as `{call}`. */
  readonly unit: string
  readonly description: string
  /** The Prometheus sample it reports, e.g. `circuit_failures_total`. */
  readonly sample: string
  /** The Prometheus label beside `name` (`state`, `quantile`), or null. */
  readonly label: string | null
  /** The attribute that label becomes (`circuit.state`, `quantile`), or null. */
  readonly attribute: string | null
}

/** Every instrument, in the order of the Prometheus exposition. */
export declare const INSTRUMENTS: readonly InstrumentRow[]

/** What `observeBreakerMetrics` returns. */
export interface BreakerMetricsHandle {
  /** The observable instruments made, by name. */
  readonly instruments: Readonly<Record<string, Observable>>
  /** Observes `source` too (once, however often it is added). */
  add(source: Source): void
  /** Stops observing `source`. */
  remove(source: Source): void
  /** Stops observing every source. */
  close(): void
}

/**
 * Observes `sources` with OpenTelemetry observable instruments on `meter`
 * (default: `metrics.getMeter('halfopen', version)` of the global provider).
 */
export declare function observeBreakerMetrics(
  sources: Source | readonly Source[],
  options?: { meter?: Meter },
): BreakerMetricsHandle
