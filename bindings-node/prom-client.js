'use strict'
// Serves halfopen's series from a user's existing prom-client registry
// (prom-client 15, an optional peer dependency): the same names and values as
// `prometheus()`, read from the breakers at each scrape.

const client = require('prom-client')

const STATE_GAUGE = { CLOSED: 0, HALF_OPEN: 1, OPEN: 2 }

const FAMILIES = [
  ['circuit_state', 'Gauge', 'Breaker state: 0 closed, 1 half-open, 2 open.', (m) => STATE_GAUGE[m.state]],
  ['circuit_failures_total', 'Counter', 'Calls counted as failures (slow calls included).', (m) => m.failures],
  ['circuit_opens_total', 'Counter', 'Transitions to open.', (m) => m.opens],
  ['circuit_calls_admitted_total', 'Counter', 'Calls admitted.', (m) => m.admitted],
  ['circuit_calls_rejected_total', 'Counter', 'Calls rejected without reaching the upstream.', (m) => m.rejections],
  ['circuit_slow_calls_total', 'Counter', 'Calls slower than the slow-call threshold.', (m) => m.slow],
  ['circuit_opens_last_24h', 'Gauge', 'Transitions to open in the last 24 hours (counted per hour).', (m) => m.opensLast24h],
  ['circuit_open_mean_seconds', 'Gauge', 'Mean time spent open per opening.', (m) => m.meanTimeOpenMs === null ? null : m.meanTimeOpenMs / 1000],
  ['circuit_upstream_error_ratio', 'Gauge', 'Share of the calls in the trip window that failed (0 to 1).', (m) => m.errorRate === null ? null : m.errorRate / 100],
]

/** `[name, metrics]` for each breaker of `source` (a CircuitBreaker, a Registry, or an array of breakers). */
function* breakersOf(source) {
  if (Array.isArray(source)) for (const b of source) yield [b.name, b.metrics()]
  else if (typeof source.names === 'function') for (const name of source.names()) yield [name, source.get(name).metrics()]
  else yield [source.name, source.metrics()]
}

/**
 * Registers halfopen's series for `source` in prom-client's `registry`
 * (default: prom-client's global registry). Returns the metrics created.
 */
function collectDefaultBreakerMetrics(source, registry = client.register) {
  return FAMILIES.map(([name, kind, help, read]) => {
    const metric = new client[kind]({
      name,
      help,
      labelNames: ['name'],
      registers: [registry],
      collect() {
        this.reset()
        for (const [breaker, m] of breakersOf(source)) {
          const value = read(m)
          if (value === null || value === undefined) continue
          if (kind === 'Counter') this.inc({ name: breaker }, value)
          else this.set({ name: breaker }, value)
        }
      },
    })
    return metric
  })
}

module.exports = { collectDefaultBreakerMetrics }
