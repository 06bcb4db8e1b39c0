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
