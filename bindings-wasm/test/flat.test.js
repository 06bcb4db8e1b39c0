// The module's flat records (src/flat.rs) come back as the addon's objects:
// js/native.js reads each value at the place flat.rs names for it
// (`flatFields()`), so the same calls give the same objects as the Node
// addon's, with no field lost, swapped or invented.

import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import '../dist/node.js'
import * as wasm from '../dist/native.js'

const addon = createRequire(import.meta.url)('../../bindings-node/addon.js')

/** The same calls on `native` (the addon or the module): every record each kind makes. */
function records({ NativeBreaker, NativeDispatcher, NativeRegistry }) {
  const options = { failureThreshold: 1, concurrencyLimit: 2 }
  const breaker = new NativeBreaker(options, true)
  const closed = breaker.licence(0)
  breaker.record(breaker.acquire(0), 0, 0, 5)
  breaker.record(breaker.acquire(6), 6, 1, 7) // a failure: it opens
  const out = { closed, open: breaker.licence(8), metrics: breaker.metrics(8), transitions: breaker.takeTransitions() }

  const registry = new NativeRegistry(options, 10)
  registry.record('host', registry.acquire('host', 0), 0, 1, 1)
  Object.assign(out, { refusal: registry.acquire('host', 2), named: registry.takeTransitions() })

  const dispatcher = new NativeDispatcher(options, false, { maxAttempts: 1 })
  dispatcher.submit(1, 0)
  dispatcher.report(0, 1, 1) // dead after one attempt, and the breaker opens
  return Object.assign(out, { stats: dispatcher.stats(), events: dispatcher.takeEvents() })
}

test('the same calls give the addon\'s objects', () => {
  assert.deepEqual(records(wasm), records(addon))
})

test('every field flat.rs names is in an object built, and nothing else is', () => {
  const fields = Object.fromEntries(
    wasm
      .flatFields()
      .split(';')
      .map((entry) => {
        const [record, list] = entry.split('=')
        return [record, list.split(',').sort()]
      }),
  )
  const r = records(wasm)
  const keys = (o) => Object.keys(o).sort()
  assert.deepEqual(keys(r.open), fields.licence)
  // Every metric is there with a histogram, a limit and an opening.
  assert.deepEqual(keys(r.metrics), fields.metrics)
  assert.deepEqual(keys(r.named[0]), fields.transition)
  assert.deepEqual(keys(r.stats), fields.stats)
  const dead = r.events.find((e) => e.kind === 'dead')
  const opened = r.events.find((e) => e.kind === 'transition').transition
  const read = new Set([...Object.keys(dead), ...Object.keys(opened).map((k) => (k === 'reason' ? 'transitionReason' : k))])
  assert.deepEqual([...read].sort(), fields.event)
})
