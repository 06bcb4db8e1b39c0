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

test('ten thousand panics leave the module working for every other breaker', () => {
  const healthy = new CircuitBreaker({ name: 'healthy' })
  for (let i = 0; i < 10_000; i++) {
    const b = new CircuitBreaker({ name: `p${i}` })
    assert.throws(() => b._native.__panicForTests(), WebAssembly.RuntimeError)
  }
  assert.equal(healthy.metrics().state, 'CLOSED')
  assert.equal(new CircuitBreaker({ name: 'new' }).getState(), 'CLOSED')
})

test('the JavaScript stack running out inside the module loses at most that breaker', () => {
  const other = new CircuitBreaker({ name: 'other' })
  // Stack traces taken this deep make each error cost a millisecond; and
  // only the innermost frames, where the stack is about to run out, call
  // into the module (the rest would only repeat calls that fit).
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  let interrupted = 0
  for (let round = 0; round < 300; round++) {
    const b = new CircuitBreaker({ name: 'deep' })
    let near = 0
    const deep = () => {
      try {
        deep()
      } catch {
        near = 1000
      }
      if (near-- <= 0) return
      try {
        b.metrics()
      } catch (err) {
        if (err instanceof RangeError && /call stack/.test(err.message)) interrupted += 1
      }
    }
    deep()
    try {
      assert.equal(b.getState(), 'CLOSED')
    } catch (err) {
      assert.match(err.message, /poisoned/)
    }
  }
  Error.stackTraceLimit = limit
  assert.ok(interrupted > 0, 'some call ran out of stack (the test tests something)')
  assert.equal(other.getState(), 'CLOSED')
  assert.equal(other.metrics().admitted, 0)
})

test('the stack running out inside a constructor or a static method leaves the module working', () => {
  // A constructor that did not return left the module's stack pointer moved
  // and the shared-configuration lock held: every later construction trapped.
  const snapshot = new CircuitBreaker({ name: 'saved' }).toJSON()
  let interrupted = 0
  // Stack traces taken this deep make each error cost a millisecond.
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  for (let round = 0; round < 10; round++) {
    // Construct in the innermost frames only, where the stack is about to run out.
    let near = 0
    const deep = () => {
      try {
        deep()
      } catch {
        near = 1000
      }
      if (near-- <= 0) return
      for (const make of [
        () => new CircuitBreaker({ name: 'deep', failureThreshold: round + 1 }),
        () => CircuitBreaker.fromJSON({ name: 'deep' }, snapshot),
        () => new Registry({ failureThreshold: round + 1 }),
      ]) {
        try {
          make()
        } catch (err) {
          if (err instanceof RangeError && /call stack/.test(err.message)) interrupted += 1
        }
      }
    }
    deep()
    const fresh = new CircuitBreaker({ name: 'fresh', failureThreshold: round + 1 })
    assert.equal(fresh.getState(), 'CLOSED')
    assert.equal(CircuitBreaker.fromJSON({ name: 'again' }, snapshot).getState(), 'CLOSED')
    assert.equal(new Registry({}).get('k').getState(), 'CLOSED')
  }
  Error.stackTraceLimit = limit
  assert.ok(interrupted > 0, 'some construction ran out of stack (the test tests something)')
})

test('an accessor on Object.prototype named like a result field changes nothing', () => {
  for (const key of ['kind', 'state', 'generation', 'untilMs', 'gauge', 'admitted', 'from']) {
    Object.defineProperty(Object.prototype, key, {
      get: () => 2,
      set: () => {
        throw new Error('polluted')
      },
      configurable: true,
    })
    try {
      const b = new CircuitBreaker({ name: key, failureThreshold: 1 })
      assert.equal(b.getState(), 'CLOSED')
      b.forceOpen()
      assert.equal(b.getState(), 'OPEN')
      assert.equal(Object.hasOwn(b.metrics(), 'admitted'), true)
    } finally {
      delete Object.prototype[key]
    }
  }
})

test('calls in flight on a breaker poisoned meanwhile settle as fn does; the host survives', async () => {
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    const timed = new CircuitBreaker({ name: 'timed', timeoutMs: 20 })
    const late = timed.execute(() => new Promise(() => {}))
    const plain = new CircuitBreaker({ name: 'plain' })
    let finish
    const done = plain.execute(() => new Promise((resolve) => (finish = resolve)))
    const controller = new AbortController()
    const aborted = new CircuitBreaker({ name: 'aborted' })
    const cut = aborted.execute(() => new Promise(() => {}), { signal: controller.signal })
    for (const b of [timed, plain, aborted]) assert.throws(() => b._native.__panicForTests(), WebAssembly.RuntimeError)
    const outcomes = [
      assert.rejects(late, (err) => err.name === 'CircuitBreakerTimeoutError'),
      assert.rejects(cut, /stop/),
    ]
    controller.abort(new Error('stop'))
    finish('sent')
    assert.equal(await done, 'sent', "fn's value, though the breaker could not count it")
    await Promise.all(outcomes)
    await new Promise((r) => setImmediate(r))
    assert.equal(warnings.filter((w) => /poisoned/.test(w.message)).length, 3)
  } finally {
    process.off('warning', onWarning)
  }
})

test('a registry is at most 2^20 breakers in the module: a larger one would run out of memory, not answer full', () => {
  assert.ok(new Registry({ capacity: 2 ** 20 }))
  assert.throws(
    () => new Registry({ capacity: 2 ** 20 + 1 }),
    (err) => err instanceof RangeError && err.option === 'capacity' && /1048576/.test(err.message),
  )
})
