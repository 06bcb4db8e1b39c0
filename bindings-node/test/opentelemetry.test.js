'use strict'
// The OpenTelemetry integration, read by the SDK's own MetricReader: every
// instrument of the core's table with its kind, unit and description, the
// same values as the Prometheus text, hostile names kept whole as
// attributes, a failing source reported without losing the others, and
// nothing observed after close(). Runs on the addon and, in `make test`,
// on the WebAssembly fallback (HALFOPEN_BACKEND=wasm).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { DataPointType, MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
const { CircuitBreaker, Dispatcher, Registry } = require('..')
const { INSTRUMENTS, observeBreakerMetrics } = require('../opentelemetry.js')
const path = require('node:path')
const { PACKAGE, typeCheck } = require('./support/tsc.js')

class TestReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** A meter provider with a reader, and a function collecting `{ metrics: Map(name → metric), errors }`. */
function sdk() {
  const reader = new TestReader()
  const provider = new MeterProvider({ readers: [reader] })
  const meter = provider.getMeter('test')
  const collect = async () => {
    const { resourceMetrics, errors } = await reader.collect()
    const metrics = new Map()
    for (const scope of resourceMetrics.scopeMetrics) for (const m of scope.metrics) metrics.set(m.descriptor.name, m)
    return { metrics, errors }
  }
  return { meter, collect }
}

/** The value of `metric` for exactly `attributes`, or undefined. */
function pointOf(metric, attributes) {
  const want = JSON.stringify(Object.entries(attributes).sort())
  const found = metric?.dataPoints.filter((p) => JSON.stringify(Object.entries(p.attributes).sort()) === want) ?? []
  assert.ok(found.length <= 1, `${metric?.descriptor.name}: one point per attribute set`)
  return found[0]?.value
}

const fail = () => Promise.reject(new Error('upstream down'))

test('every instrument of the table, with its kind, unit and description, and the values of the Prometheus text', async () => {
  let now = 0
  const clock = () => now
  const registry = new Registry({ clock })
  for (let i = 0; i < 5; i++) await registry.get('a').execute(fail).catch(() => {})
  now = 40
  await registry.get('b').execute(async () => 1)
  const timed = new CircuitBreaker({ name: 'timed', clock, latencyHistogram: true })
  await timed.execute(async () => {
    now += 25
    return 1
  })
  // One opening that ended, for the mean time open.
  registry.get('b').forceOpen()
  now += 100
  registry.get('b').forceClose()
  const dispatcher = new Dispatcher({ name: 'partner', concurrencyLimit: 1, clock, send: async () => {} })
  dispatcher.forceOpen()
  dispatcher.submit('held', { size: 10 })
  const { meter, collect } = sdk()
  observeBreakerMetrics([registry, timed, dispatcher], { meter })
  const { metrics, errors } = await collect()
  assert.deepEqual(errors, [])
  for (const row of INSTRUMENTS) {
    if (row.sample.startsWith('circuit_group_')) continue // a grouped breaker's: the group tests
    const metric = metrics.get(row.name)
    assert.ok(metric, `${row.name} was observed`)
    assert.equal(metric.descriptor.unit, row.unit, row.name)
    assert.equal(metric.descriptor.description, row.description, row.name)
    const type = { gauge: DataPointType.GAUGE, counter: DataPointType.SUM, updowncounter: DataPointType.SUM }[row.kind]
    assert.equal(metric.dataPointType, type, row.name)
    if (type === DataPointType.SUM) assert.equal(metric.isMonotonic, row.kind === 'counter', row.name)
  }
  const name = (n) => ({ 'circuit.name': n })
  assert.equal(pointOf(metrics.get('circuit.state'), name('a')), 2)
  assert.equal(pointOf(metrics.get('circuit.failures'), name('a')), 5)
  assert.equal(pointOf(metrics.get('circuit.successes'), name('b')), 1)
  assert.equal(pointOf(metrics.get('circuit.mean_open_time'), name('b')), 0.1)
  assert.equal(pointOf(metrics.get('circuit.upstream.error_ratio'), name('a')), 1)
  assert.equal(pointOf(metrics.get('circuit.latency'), { ...name('timed'), quantile: '1' }) > 0.024, true)
  assert.equal(pointOf(metrics.get('circuit.latency_count'), name('timed')), 1)
  assert.equal(pointOf(metrics.get('circuit.time_in_state'), { ...name('b'), 'circuit.state': 'open' }), 0.1)
  assert.equal(pointOf(metrics.get('circuit.registry.breakers'), {}), 2)
  assert.equal(pointOf(metrics.get('circuit.retention.retained'), name('partner')), 1)
  assert.ok(pointOf(metrics.get('circuit.retention.size'), name('partner')) > 0)
  assert.equal(pointOf(metrics.get('circuit.state'), name('partner')), 2)
  // Each value is the Prometheus text's, for every series of every source.
  const text = registry.prometheus() + timed.prometheus() + dispatcher.prometheus()
  let checked = 0
  for (const line of text.split('\n')) {
    const m = /^([a-z_0-9]+)\{name="([a-z]+)"(?:,([a-z]+)="([^"]+)")?\} (\S+)$/.exec(line)
    if (!m) continue
    const row = INSTRUMENTS.find((r) => r.sample === m[1] && (r.label ?? undefined) === m[3])
    const attributes = m[3] === undefined ? name(m[2]) : { ...name(m[2]), [row.attribute]: m[4] }
    assert.equal(pointOf(metrics.get(row.name), attributes), Number(m[5]), line)
    checked++
  }
  assert.ok(checked > 40, `${checked} series checked`)
})

test('several registries: their own series summed, names kept apart', async () => {
  const one = new Registry()
  const two = new Registry()
  for (const [registry, name] of [[one, 'x'], [two, 'y'], [two, 'z']]) await registry.get(name).execute(async () => 1)
  const { meter, collect } = sdk()
  const handle = observeBreakerMetrics(one, { meter })
  handle.add(two)
  handle.add(two) // once, however often it is added
  const { metrics } = await collect()
  assert.equal(pointOf(metrics.get('circuit.registry.breakers'), {}), 3)
  assert.equal(metrics.get('circuit.state').dataPoints.length, 3)
  handle.remove(one)
  const after = (await collect()).metrics
  assert.equal(pointOf(after.get('circuit.registry.breakers'), {}), 2)
})

test('hostile names are whole attribute values', async () => {
  const names = ['evil"} 1\ncircuit_state{name="injected', 'back\\slash ünïcode 😀', 'a,b="c"']
  const breakers = names.map((name) => new CircuitBreaker({ name }))
  const { meter, collect } = sdk()
  observeBreakerMetrics(breakers, { meter })
  const { metrics } = await collect()
  const seen = metrics
    .get('circuit.state')
    .dataPoints.map((p) => p.attributes['circuit.name'])
    .sort()
  assert.deepEqual(seen, [...names].sort())
  const times = metrics.get('circuit.time_in_state').dataPoints
  assert.equal(times.length, 9)
  for (const p of times) assert.ok(names.includes(p.attributes['circuit.name']) && ['closed', 'half_open', 'open'].includes(p.attributes['circuit.state']))
})

test('a source that fails is reported with the collection, and the others are still recorded', async () => {
  const good = new CircuitBreaker({ name: 'good' })
  const bad = new CircuitBreaker({ name: 'bad' })
  const garbage = new CircuitBreaker({ name: 'garbage' })
  bad.prometheus = () => {
    throw new Error('no figures')
  }
  garbage.prometheus = () => 42
  const { meter, collect } = sdk()
  observeBreakerMetrics([bad, garbage, good], { meter })
  const { metrics, errors } = await collect()
  assert.equal(errors.length, 1)
  assert.ok(errors[0] instanceof AggregateError)
  assert.deepEqual(
    errors[0].errors.map((e) => e.message),
    ['no figures', 'prometheus() gave number, not a string'],
  )
  assert.equal(pointOf(metrics.get('circuit.state'), { 'circuit.name': 'good' }), 0)
  assert.equal(pointOf(metrics.get('circuit.state'), { 'circuit.name': 'bad' }), undefined)
  // Reported once per collection.
  assert.equal((await collect()).errors.length, 1)
})

test('a breaker name in two sources: the series of the first, and an error', async () => {
  const first = new CircuitBreaker({ name: 'api' })
  const second = new CircuitBreaker({ name: 'api' })
  second.forceOpen()
  const other = new CircuitBreaker({ name: 'other' })
  const { meter, collect } = sdk()
  observeBreakerMetrics([first, second, other], { meter })
  const { metrics, errors } = await collect()
  assert.equal(pointOf(metrics.get('circuit.state'), { 'circuit.name': 'api' }), 0)
  assert.equal(pointOf(metrics.get('circuit.opens'), { 'circuit.name': 'api' }), 0)
  assert.equal(pointOf(metrics.get('circuit.state'), { 'circuit.name': 'other' }), 0)
  assert.equal(errors.length, 1)
  assert.match(errors[0].message, /breaker names in two sources .*"api"/)
})

test('one handle per meter; a source added during a collection waits for the next', async () => {
  const { meter, collect } = sdk()
  const one = new CircuitBreaker({ name: 'one' })
  const two = new CircuitBreaker({ name: 'two' })
  const handle = observeBreakerMetrics(one, { meter })
  assert.equal(observeBreakerMetrics(two, { meter }), handle)
  let calls = 0
  const late = new CircuitBreaker({ name: 'late' })
  const prometheus = one.prometheus.bind(one)
  one.prometheus = () => {
    calls++
    handle.add(late)
    return prometheus()
  }
  const first = (await collect()).metrics.get('circuit.state')
  assert.deepEqual(first.dataPoints.map((p) => p.attributes['circuit.name']).sort(), ['one', 'two'])
  assert.equal(calls, 1)
  const second = (await collect()).metrics.get('circuit.state')
  assert.deepEqual(second.dataPoints.map((p) => p.attributes['circuit.name']).sort(), ['late', 'one', 'two'])
})

test('close() stops observing; bad sources are TypeErrors', async () => {
  const { meter, collect } = sdk()
  const breaker = new CircuitBreaker({ name: 'c' })
  const handle = observeBreakerMetrics(breaker, { meter })
  assert.equal(pointOf((await collect()).metrics.get('circuit.state'), { 'circuit.name': 'c' }), 0)
  handle.close()
  handle.close()
  breaker.forceOpen()
  // The SDK may repeat the last value it had; it never sees the new one.
  assert.notEqual(pointOf((await collect()).metrics.get('circuit.state'), { 'circuit.name': 'c' }), 2)
  assert.throws(() => handle.add(breaker), /closed/)
  // A new call on the meter makes a new handle.
  const again = observeBreakerMetrics(breaker, { meter })
  assert.notEqual(again, handle)
  assert.equal(pointOf((await collect()).metrics.get('circuit.state'), { 'circuit.name': 'c' }), 2)
  const fake = { prometheus: () => 'circuit_state{name="x"} 0\n' }
  for (const bad of [undefined, null, 1, 'name', {}, fake, [new CircuitBreaker({ name: 'ok' }), {}]]) {
    assert.throws(() => observeBreakerMetrics(bad, { meter }), TypeError)
  }
  const registry = new Registry()
  assert.throws(() => again.add(registry.get('k')), /a registry's breaker: observe the registry/)
})

test('the global meter provider by default', async () => {
  const api = require('@opentelemetry/api')
  const reader = new TestReader()
  api.metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }))
  try {
    const handle = observeBreakerMetrics(new CircuitBreaker({ name: 'global' }))
    const { resourceMetrics } = await reader.collect()
    const scope = resourceMetrics.scopeMetrics.find((s) => s.scope.name === 'halfopen')
    assert.equal(scope.scope.version, require('../package.json').version)
    assert.ok(scope.metrics.some((m) => m.descriptor.name === 'circuit.state'))
    handle.close()
  } finally {
    api.metrics.disable()
  }
})

test('the types (tsc --strict)', () => {
  const pkg = (file) => JSON.stringify(path.join(PACKAGE, file))
  typeCheck(`import { metrics } from '@opentelemetry/api'
import { CircuitBreaker, Registry } from ${pkg('index')}
import { INSTRUMENTS, observeBreakerMetrics } from ${pkg('opentelemetry')}
const handle = observeBreakerMetrics([new CircuitBreaker({ name: 'gw' }), new Registry()], { meter: metrics.getMeter('app') })
handle.add(new CircuitBreaker({ name: 'other' }))
export const units: string[] = INSTRUMENTS.map((row) => row.unit)
export const state = handle.instruments['circuit.state']
handle.close()
`)
})
