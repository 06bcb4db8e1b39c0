'use strict'
// The prom-client collector serves the same series and values as the
// addon's own Prometheus text, from a user's prom-client registry.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const client = require('prom-client')
const { CircuitBreaker, Registry } = require(process.env.HALFOPEN_PACKAGE || '..')
const { collectDefaultBreakerMetrics } = require('../prom-client.js')

function samples(text) {
  const out = new Map()
  for (const line of text.split('\n')) {
    const m = /^(circuit_[a-z0-9_]+)\{name="([^"]+)"\} (\S+)$/.exec(line)
    if (m) out.set(`${m[1]}{${m[2]}}`, Number(m[3]))
  }
  return out
}

/** A text exposition's families (HELP and TYPE by name) and samples (by name and labels, sorted). */
function exposition(text) {
  const help = new Map()
  const type = new Map()
  const series = new Map()
  for (const line of text.split('\n')) {
    let m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line)
    if (m) {
      ;(m[1] === 'HELP' ? help : type).set(m[2], m[3])
      continue
    }
    m = /^([a-z_0-9]+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m) series.set(`${m[1]}{${(m[2] ?? '').split(',').sort().join(',')}}`, Number(m[3]))
  }
  return { help, type, series }
}

test('prom-client serves the same values as prometheus()', async () => {
  const now = 0
  const registry = new Registry({ clock: () => now })
  for (let i = 0; i < 5; i++) await registry.get('a').execute(() => Promise.reject(new Error('x'))).catch(() => {})
  await registry.get('b').execute(async () => 1)
  const prom = new client.Registry()
  collectDefaultBreakerMetrics(registry, prom)
  const theirs = samples(await prom.metrics())
  const ours = samples(registry.prometheus())
  assert.ok(theirs.size >= 14, `prom-client served ${theirs.size} samples`)
  for (const [key, value] of theirs) assert.equal(value, ours.get(key), key)
  assert.equal(theirs.get('circuit_state{a}'), 2)
  assert.equal(theirs.get('circuit_failures_total{a}'), 5)

  const single = new CircuitBreaker({ name: 'solo', clock: () => now })
  const prom2 = new client.Registry()
  collectDefaultBreakerMetrics(single, prom2)
  assert.match(await prom2.metrics(), /^circuit_state\{name="solo"\} 0$/m)
})

test('prom-client serves every family of prometheus(), with its help, type and every series', async () => {
  // The collector's table of families is written in prom-client.js: this
  // is what keeps it the core's. A fixed clock makes time and latency exact.
  const now = 1_000
  const one = new CircuitBreaker({ name: 'hist', clock: () => now, latencyHistogram: true })
  await one.execute(async () => 1)
  await one.execute(() => Promise.reject(new Error('x'))).catch(() => {})
  const registry = new Registry({ clock: () => now, failureThreshold: 2 })
  for (let i = 0; i < 2; i++) await registry.get('tripped').execute(() => Promise.reject(new Error('x'))).catch(() => {})
  await registry.get('fine').execute(async () => 1)
  for (const source of [one, registry]) {
    const prom = new client.Registry()
    collectDefaultBreakerMetrics(source, prom)
    const theirs = exposition(await prom.metrics())
    const ours = exposition(source.prometheus())
    assert.ok(ours.help.size >= 15, `prometheus() has ${ours.help.size} families`)
    for (const [name, help] of ours.help) {
      assert.equal(theirs.help.get(name), help, `${name}'s help`)
      // (prom-client cannot serve quantiles computed elsewhere as a summary: a gauge, see prom-client.js.)
      const kind = ours.type.get(name) === 'summary' ? 'gauge' : ours.type.get(name)
      assert.equal(theirs.type.get(name), kind, `${name}'s type`)
    }
    // The group's families are registered up front, empty until a breaker has a group.
    for (const name of theirs.help.keys()) {
      if (!ours.help.has(name)) assert.ok(name.startsWith('circuit_group_'), `${name} is not in prometheus()`)
    }
    // A summary's _sum and _count: not in a gauge family.
    const served = [...ours.series].filter(([key]) => !/^circuit_latency_seconds_(sum|count)\{/.test(key))
    assert.ok(served.length > ours.help.size, `${served.length} series`)
    assert.deepEqual(new Map(served), theirs.series)
  }
})
