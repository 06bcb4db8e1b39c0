// A Rust panic inside one breaker (provoked by a method that exists for
// this test) poisons that breaker only: its later calls throw an error that
// says so and how to recover; other breakers, new ones and registries work.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CircuitBreaker, Registry } from '../dist/node.js'

test('a panic poisons its breaker only, with an error that says what to do', async () => {
  const sick = new CircuitBreaker({ name: 'sick' })
  const healthy = new CircuitBreaker({ name: 'healthy' })
  const snapshot = sick.toJSON()
  assert.throws(() => sick._native.__panicForTests(), WebAssembly.RuntimeError)
  await assert.rejects(sick.execute(async () => 'never'), (err) => {
    assert.match(err.message, /poisoned/)
    assert.match(err.message, /provoked by a test/)
    assert.match(err.message, /Make a new one/)
    return true
  })
  assert.throws(() => sick.metrics(), /poisoned/)
  assert.equal(await healthy.execute(async () => 'ok'), 'ok')
  const again = CircuitBreaker.fromJSON({ name: 'sick' }, snapshot)
  assert.equal(await again.execute(async () => 'restored'), 'restored')
  const registry = new Registry({})
  assert.equal(await registry.get('host').execute(async () => 'registry'), 'registry')
})
