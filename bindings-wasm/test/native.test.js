// The wasm native half answers as the Node addon's does: the same objects
// (licences with their infinities, metrics, transitions, refusals), with
// their properties in the same order, for the same sequence of calls.
// (Objects leave the module as flat arrays that js/native.js builds back:
// this pins that translation.)

import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import { NativeBreaker, NativeDispatcher, NativeRegistry } from '../dist/native.js'
import '../dist/node.js'

const require = createRequire(import.meta.url)
const addon = require('../../bindings-node/addon.js')

const OPTIONS = [
  {},
  { unset: ['failureThreshold'], consecutiveFailures: 3 },
  { slowCallMs: 50 },
  { concurrencyLimit: 2 },
  { adaptiveLimitMin: 1, adaptiveLimitMax: 10 },
]

/** What a breaker of `Kind` says along one sequence. */
function story(Kind, options) {
  const b = new Kind(options, false)
  const said = [b.licence(0), b.metrics(0)]
  for (let i = 0; i < 6; i++) {
    const code = b.acquire(i * 10)
    said.push(code)
    if (code >= 0) said.push(b.record(code % 4294967296, i * 10, 1, i * 10 + 5))
  }
  said.push(b.takeTransitions(), b.licence(100), b.metrics(100), b.retryAfter(100), b.pollTimeoutMs())
  b.forceOpen(200)
  said.push(b.acquire(201), b.refusalReason(), b.licence(201), b.takeTransitions(), b.mode(201))
  return said
}

test('a breaker says what the addon says, infinities included', () => {
  for (const options of OPTIONS) {
    const [wasm, napi] = [story(NativeBreaker, options), story(addon.NativeBreaker, options)]
    assert.deepEqual(wasm, napi, JSON.stringify(options))
    assert.equal(JSON.stringify(wasm), JSON.stringify(napi), 'the same properties in the same order')
  }
  const licence = new NativeBreaker({ unset: ['failureThreshold'], consecutiveFailures: 3 }, false).licence(0)
  assert.equal(licence.untilMs, Infinity)
  assert.equal(licence.slowAfterMs, Infinity)
  assert.equal(licence.room, Infinity)
})

test('a registry says what the addon says', () => {
  const run = (Kind) => {
    const r = new Kind({ failureThreshold: 1 }, 2)
    const said = [r.licence('a', 0), r.metrics('a', 0), r.acquire('a', 0)]
    said.push(r.record('a', 0, 0, 1, 1), r.acquire('a', 2), r.takeTransitions())
    said.push(r.licence('a', 3), r.metrics('a', 3), r.names(), r.size, r.evictions, r.retryAfter('b', 3))
    return said
  }
  assert.deepEqual(run(NativeRegistry), run(addon.NativeRegistry))
})

test('a dispatcher says what the addon says: submissions, sends, reports, events, stats, a restore', () => {
  const run = (Kind) => {
    const options = { unset: ['failureThreshold'], consecutiveFailures: 2, openTimeoutMs: 100, concurrencyLimit: 2 }
    const retention = { maxMessages: 5, maxAttempts: 3, overflow: 'drop_oldest', releasePerSecond: 100, releaseBurst: 2 }
    const d = new Kind(options, false, retention)
    const said = []
    for (let i = 0; i < 7; i++) said.push(d.submit(i, i))
    said.push(d.report(0, 1, 10), d.report(1, 1, 10), d.report(1, 0, 10), d.takeEvents(), d.stats(), d.pollTimeoutMs())
    said.push(d.next(110), d.takeEvents(), d.report(0, 0, 120), d.next(120), d.takeEvents(), d.state(120), d.metrics(120))
    d.forceOpen(130, 50)
    said.push(d.takeEvents(), d.held(), d.snapshotJson(130))
    const restored = new Kind(options, false, retention)
    restored.load(d.snapshotJson(130), null, d.held(), 130, false)
    said.push(restored.stats(), restored.held(), restored.next(200), restored.takeEvents())
    return said
  }
  const [wasm, napi] = [run(NativeDispatcher), run(addon.NativeDispatcher)]
  assert.deepEqual(wasm, napi)
  assert.equal(JSON.stringify(wasm), JSON.stringify(napi), 'the same properties in the same order')
})

test('a call made while another is active (an options getter) and throwing leaves the outer call intact', () => {
  const other = new NativeBreaker({}, true)
  const registry = new NativeRegistry({}, 1000)
  function* unset() {
    try {
      other.acquire(Symbol('not a time'))
    } catch {}
    registry.configure('z', { failureThreshold: 99, openTimeoutMs: 1, windowMs: 5, jitter: 0.9, halfOpenMaxAttempts: 77 }, 0)
    yield 'slowCallMs'
  }
  const b = new NativeBreaker({ failureThreshold: 2, openTimeoutMs: 12345, unset: unset(), windowMs: 60000 }, false)
  assert.equal(b.acquire(0), 0)
  assert.equal(b.metrics(0).admitted, 1)
  assert.equal(other.acquire(0), 0)
  assert.equal(registry.acquire('z', 0), 0)
})
