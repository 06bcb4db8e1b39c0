'use strict'
// A Registry's `group` option against a real redis-server: each name's
// breaker is a group of its own (failures of one name, spread over
// processes, open that name everywhere and no other), and every name due
// goes in one script call: Redis itself counts (INFO commandstats) at most
// one script call per process per flush interval for ten processes of
// 1,000 names. Every wait is for the system's own answer, never a margin.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const Redis = require('ioredis')
const { Registry } = require('..')
const { groupKeys } = require('../native.js')
const { freePort, startRedis } = require('./support/redis-server.js')

let port
let server
const clients = []

before(async () => {
  port = await freePort()
  server = await startRedis(port)
})

after(() => {
  for (const r of clients) r.disconnect()
  server.kill()
})

function client() {
  const r = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
  r.on('error', () => {})
  clients.push(r)
  return r
}

async function until(check) {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 20))
}

// The registry processes' flush interval: a round of 10 × 1,000 names takes
// Redis about half a second (50 µs a name: BENCHMARKS.md).
const FLUSH_MS = 2_000

const BREAKER = { failureThreshold: 5, windowMs: 60_000, openTimeoutMs: 60_000, halfOpenMaxAttempts: 1, probeTimeoutMs: 1_000 }

function registry(group, options = {}) {
  return new Registry({ ...BREAKER, ...options, group: { redis: client(), name: group, flushIntervalMs: 50, storeTimeoutMs: 40 } })
}

test('a registry group option is checked as a breaker\'s, and a name configured past the lease is refused', () => {
  assert.throws(() => new Registry({ group: 1 }), (e) => e instanceof TypeError && e.option === 'group')
  assert.throws(() => new Registry({ group: { redis: client(), name: 'a{b' } }), (e) => e.option === 'group.name')
  assert.throws(() => new Registry({ group: { redis: client(), name: 'g', flushIntervalMs: 0 } }), (e) => e.option === 'group.flushIntervalMs')
  const r = new Registry({ ...BREAKER, group: { redis: client(), name: 'checked', leaseMs: 2_000 } })
  assert.throws(() => r.configure('slow', { probeTimeoutMs: 5_000 }), (e) => e instanceof RangeError && e.option === 'probeTimeoutMs' && e.problem === 'too_large')
  r.configure('quick', { probeTimeoutMs: 1_000 })
  assert.deepEqual(Object.keys(r.groupStatus()).sort(), ['answered', 'degraded', 'member', 'names'])
  r.leaveGroup()
  assert.equal(r.groupStatus(), null)
  assert.throws(() => r.get('quick').groupForceOpen(1_000), TypeError)
})

test('each name is a group of its own: failures of one, spread over processes, open it everywhere and no other', { timeout: 30_000 }, async () => {
  const fleet = [registry('names'), registry('names'), registry('names')]
  for (const r of fleet) for (const name of ['a', 'b']) await r.get(name).execute(() => 1)
  await until(() => fleet.every((r) => r.groupStatus().answered === 2))
  // Six failures of 'a', two per process: none trips alone (five needed).
  for (const r of fleet) for (let i = 0; i < 2; i++) await r.get('a').execute(() => Promise.reject(new Error('down'))).catch(() => {})
  assert.ok(fleet.every((r) => r.get('a').getState() === 'CLOSED'))
  await until(() => fleet.every((r) => r.get('a').getState() === 'OPEN'))
  assert.ok(fleet.every((r) => r.get('b').getState() === 'CLOSED'), 'b is a group of its own')
  // Each name's group is a hash under the registry's hash tag and the name.
  const probe = client()
  await until(() => probe.status === 'ready')
  assert.equal(await probe.hget('halfopen:v2:{names}:k:a', 'phase'), 'open')
  assert.equal(await probe.hget('halfopen:v2:{names}:k:b', 'phase'), null)
  assert.deepEqual(groupKeys('names'), ['halfopen:v2:{names}'])
  for (const r of fleet) r.leaveGroup()
})

test('a force-open (and a force-close) of one name reaches that name in every process; a killed Redis leaves every name alone', { timeout: 30_000 }, async () => {
  const fleet = [registry('forced'), registry('forced')]
  for (const r of fleet) for (const name of ['a', 'b']) await r.get(name).execute(() => 1)
  await until(() => fleet.every((r) => r.groupStatus().answered === 2))
  fleet[0].get('a').groupForceOpen(60_000)
  assert.equal(fleet[0].get('a').getState(), 'OPEN')
  await until(() => fleet[1].get('a').getState() === 'OPEN')
  assert.equal(fleet[1].get('b').getState(), 'CLOSED')
  assert.throws(() => fleet[0].get('a').groupForceOpen(-1), RangeError)
  // And a force-close of it closes it everywhere.
  fleet[1].get('a').groupForceClose()
  assert.equal(fleet[1].get('a').getState(), 'CLOSED')
  await until(() => fleet[0].get('a').getState() === 'CLOSED')
  const degraded = fleet.map((r) => once(r, 'groupDegraded'))
  server.kill('SIGKILL')
  const events = await Promise.all(degraded)
  assert.ok(events.every(([e]) => e.error instanceof Error))
  assert.ok(fleet.every((r) => r.groupStatus().degraded))
  // Deciding alone: b still admits, without waiting for Redis.
  assert.equal(await fleet[1].get('b').execute(() => 'sent'), 'sent')
  const recovered = fleet.map((r) => once(r, 'groupRecovered'))
  server = await startRedis(port)
  await Promise.all(recovered)
  for (const r of fleet) r.leaveGroup()
})

test('ten processes of 1,000 names: Redis counts one script call per hundred names per process per flush interval', { timeout: 60_000 }, async () => {
  const admin = client()
  await until(() => admin.status === 'ready')
  await admin.config('RESETSTAT')
  const started = performance.now()
  const processes = Array.from({ length: 10 }, () =>
    fork(path.join(__dirname, 'support', 'registry-member.js'), [String(port), 'counted', '1000', '10000', String(FLUSH_MS)]),
  )
  const answers = await Promise.all(processes.map((p) => once(p, 'message').then(([m]) => m)))
  const stats = await admin.info('commandstats')
  const elapsed = performance.now() - started
  for (const p of processes) p.disconnect()
  await Promise.all(processes.map((p) => once(p, 'exit')))
  assert.ok(answers.every((a) => a.what === 'done' && a.names === 1000 && !a.degraded), JSON.stringify(answers[0]))
  let calls = 0
  for (const name of ['evalsha', 'eval']) {
    const m = stats.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`))
    if (m) calls += Number(m[1])
  }
  // No transition: every round is a flush interval's (the first at once,
  // before any name), of ten calls (100 names each); ioredis loads the
  // script once per client (a refused EVALSHA, then EVAL).
  const rounds = Math.floor(elapsed / FLUSH_MS) + 1
  const bound = processes.length * (rounds * 10 + 1)
  assert.ok(calls >= processes.length * 10 && calls <= bound, `${calls} script calls in ${Math.round(elapsed)} ms for 10 × 1,000 names (bound ${bound})`)
})

test('the exposition shows each grouped breaker\'s group: alone or not, and its state; prom-client the same', { timeout: 30_000 }, async () => {
  const promClient = require('prom-client')
  const { collectDefaultBreakerMetrics } = require('../prom-client.js')
  const { CircuitBreaker } = require('..')
  const r = registry('exposed')
  const b = new CircuitBreaker({ name: 'solo', ...BREAKER, group: { redis: client(), name: 'exposed-solo', flushIntervalMs: 50, storeTimeoutMs: 40 } })
  await r.get('a').execute(() => 1)
  await until(() => r.groupStatus().answered === 1 && b.groupStatus().phase === 'closed')
  r.get('a').groupForceOpen(60_000)
  // (Degraded for a moment if the loaded machine makes an answer late: the
  // wait is for the exposition of an answered, open group.)
  await until(() => /circuit_group_state\{name="a"\} 2/.test(r.prometheus()) && /^circuit_group_degraded\{name="a"\} 0$/m.test(r.prometheus()))
  assert.match(b.prometheus(), /^circuit_group_state\{name="solo"\} 0$/m)
  assert.doesNotMatch(new CircuitBreaker({ name: 'alone' }).prometheus(), /circuit_group/)
  for (const [source, text] of [
    [r, () => r.prometheus()],
    [b, () => b.prometheus()],
  ]) {
    const prom = new promClient.Registry()
    collectDefaultBreakerMetrics(source, prom)
    const served = await prom.metrics()
    for (const family of ['circuit_group_degraded', 'circuit_group_state']) {
      const ours = text().split('\n').filter((l) => l.startsWith(`${family}{`))
      const theirs = served.split('\n').filter((l) => l.startsWith(`${family}{`))
      assert.ok(ours.length === 1, family)
      assert.deepEqual(theirs, ours, family)
    }
  }
  r.leaveGroup()
  b.leaveGroup()
  assert.doesNotMatch(r.prometheus(), /circuit_group/, 'out of the group, no group family')
})
