import type { Registry as PromRegistry, Metric } from 'prom-client'
import type { CircuitBreaker, Registry } from './index'

/** Registers halfopen's series for `source` in a prom-client registry (default: the global one). */
export declare function collectDefaultBreakerMetrics(
  source: CircuitBreaker | Registry | CircuitBreaker[],
  registry?: PromRegistry,
): Metric[]
