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
  ['circuit_successes_total', 'Counter', 'Calls that succeeded in time.', (m) => m.successes],
  ['circuit_slow_calls_total', 'Counter', 'Calls slower than the slow-call threshold.', (m) => m.slow],
  ['circuit_ignored_total', 'Counter', 'Calls whose error was ignored.', (m) => m.ignored],
  ['circuit_cancelled_total', 'Counter', 'Calls the caller gave up on.', (m) => m.cancelled],
  ['circuit_stale_results_total', 'Counter', 'Results reported after the state period they belonged to.', (m) => m.stale],
  ['circuit_opens_last_24h', 'Gauge', 'Transitions to open in the last 24 hours (counted per hour).', (m) => m.opensLast24h],
  ['circuit_open_mean_seconds', 'Gauge', 'Mean time spent open per opening.', (m) => m.meanTimeOpenMs === null ? null : m.meanTimeOpenMs / 1000],
  ['circuit_upstream_error_ratio', 'Gauge', 'Share of the calls in the trip window that failed (0 to 1).', (m) => m.errorRate === null ? null : m.errorRate / 100],
  // Families with a second label: [label, [[value of the label, read], ...]].
  ['circuit_state_seconds_total', 'Counter', 'Time spent in each state since first use.', [
    'state',
    [['closed', (m) => m.timeClosedMs / 1000], ['half_open', (m) => m.timeHalfOpenMs / 1000], ['open', (m) => m.timeOpenMs / 1000]],
  ]],
  // prom-client cannot serve quantiles computed elsewhere as a summary: the
  // quantiles are a gauge family of the same name (only with latencyHistogram).
  ['circuit_latency_seconds', 'Gauge', 'Latency of admitted calls (quantiles within 1.6 %).', [
    'quantile',
    [
      ['0.5', (m) => (m.latencyP50Ms === null ? null : m.latencyP50Ms / 1000)],
      ['0.95', (m) => (m.latencyP95Ms === null ? null : m.latencyP95Ms / 1000)],
      ['0.99', (m) => (m.latencyP99Ms === null ? null : m.latencyP99Ms / 1000)],
      ['1', (m) => (m.latencyMaxMs === null ? null : m.latencyMaxMs / 1000)],
    ],
  ]],
]

/** `[name, metrics]` for each breaker of `source` (a CircuitBreaker, a Registry, or an array of breakers). */
function* breakersOf(source) {
  if (Array.isArray(source)) for (const b of source) yield [b.name, b.metrics()]
  else if (typeof source.names === 'function') for (const name of source.names()) yield [name, source.get(name).metrics()]
  else yield [source.name, source.metrics()]
}

/** `{ name, degraded, state }` of each grouped breaker of `source` (the addon's; the WebAssembly backend has no group). */
function* groupsOf(source) {
  if (Array.isArray(source)) {
    for (const b of source) yield* groupsOf(b)
  } else if (typeof source._native?.groupReadings === 'function') {
    yield* typeof source.names === 'function' ? source._native.groupReadings() : source._native.groupReadings(source.name)
  }
}

/** A grouped breaker's group families, as in `prometheus()`. */
const GROUP_FAMILIES = [
  ['circuit_group_degraded', "1 while the breaker decides alone because its group's store failed or was late, else 0.", (g) => (g.degraded ? 1 : 0)],
  ['circuit_group_state', "The group's state as its store last answered: 0 closed, 1 half-open, 2 open.", (g) => g.state],
]

/**
 * Registers halfopen's series for `source` in prom-client's `registry`
 * (default: prom-client's global registry). Returns the metrics created.
 */
function collectDefaultBreakerMetrics(source, registry = client.register) {
  const metrics = FAMILIES.map(([name, kind, help, read]) => {
    const [label, reads] = typeof read === 'function' ? [undefined, [[undefined, read]]] : read
    const metric = new client[kind]({
      name,
      help,
      labelNames: label === undefined ? ['name'] : ['name', label],
      registers: [registry],
      collect() {
        this.reset()
        for (const [breaker, m] of breakersOf(source)) {
          for (const [labelValue, readOne] of reads) {
            const value = readOne(m)
            if (value === null || value === undefined) continue
            const labels = label === undefined ? { name: breaker } : { name: breaker, [label]: labelValue }
            if (kind === 'Counter') this.inc(labels, value)
            else this.set(labels, value)
          }
        }
      },
    })
    return metric
  })
  for (const [name, help, read] of GROUP_FAMILIES) {
    metrics.push(
      new client.Gauge({
        name,
        help,
        labelNames: ['name'],
        registers: [registry],
        collect() {
          this.reset()
          for (const g of groupsOf(source)) {
            const value = read(g)
            if (value !== null && value !== undefined) this.set({ name: g.name }, value)
          }
        },
      }),
    )
  }
  if (typeof source.names === 'function') {
    // A Registry: its own two series, as in `prometheus()`.
    const own = [
      ['circuit_registry_breakers', 'Gauge', 'Breakers held by the registry.', () => source.size],
      ['circuit_registry_evictions_total', 'Counter', 'Idle breakers evicted to make room.', () => source.evictions],
    ]
    for (const [name, kind, help, read] of own) {
      metrics.push(
        new client[kind]({
          name,
          help,
          registers: [registry],
          collect() {
            this.reset()
            if (kind === 'Counter') this.inc(read())
            else this.set(read())
          },
        }),
      )
    }
  }
  return metrics
}
module.exports = { collectDefaultBreakerMetrics }
