'use strict'
// Retry libraries beside the breaker (issue 25): p-retry and async-retry,
// as their users configure them, with `isRefusal` as what stops retrying:
// a failure of the upstream is retried with the library's backoff; once the
// breaker opens, the next attempt is refused without reaching the upstream,
// and retrying stops with the refusal (its `retryAfterMs` is when to
// requeue). Time is the breaker's injected clock; the libraries wait 0 ms.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const retry = require('async-retry')
const { CircuitBreaker, CircuitBreakerOpenError, isRefusal, Registry, RegistryFullError } = require(process.env.HALFOPEN_PACKAGE || '..')

/** Fails its first `failures` calls, then answers; counts every call. */
function upstream(failures) {
  const up = {
    calls: 0,
    send: async (message) => {
      up.calls += 1
      if (up.calls <= failures) throw new Error(`gateway refused ${message}`)
      return `sent ${message}`
    },
  }
  return up
}

const breaker = () => new CircuitBreaker({ name: 'gateway', failureThreshold: 3, openTimeoutMs: 30_000, clock: () => 0 })

test('isRefusal: a breaker\'s refusal or a full Registry, nothing else', async () => {
  const b = new CircuitBreaker({ name: 'x', failureThreshold: 1, clock: () => 0 })
  await b.execute(() => Promise.reject(new Error('down'))).catch(() => {})
  const refused = await b.execute(() => 1).catch((e) => e)
  assert.ok(refused instanceof CircuitBreakerOpenError && isRefusal(refused))
  const r = new Registry({ capacity: 1, failureThreshold: 1, clock: () => 0 })
  await r.get('a').execute(() => Promise.reject(new Error('down'))).catch(() => {})
  const full = await r.get('b').execute(() => 1).catch((e) => e)
  assert.ok(full instanceof RegistryFullError && isRefusal(full))
  for (const other of [new Error('down'), null, undefined, 'CircuitBreakerOpenError', { name: 'CircuitBreakerOpenError' }]) assert.equal(isRefusal(other), false)
  const hostile = new Proxy({}, {
    get() {
      throw new Error('no reads')
    },
  })
  assert.equal(isRefusal(hostile), false)
})

test('isRefusal knows a refusal made by another copy of the package (halfopen-wasm beside halfopen)', async () => {
  const other = await import(path.join(__dirname, '..', '..', 'bindings-wasm', 'dist', 'node.js'))
  const b = new other.CircuitBreaker({ name: 'elsewhere' })
  b.forceOpen()
  const refused = await b.execute(() => 1).catch((e) => e)
  assert.equal(refused.name, 'CircuitBreakerOpenError')
  assert.equal(isRefusal(refused), true)
  assert.equal(other.isRefusal(new CircuitBreaker({ name: 'x' }).tryAcquire()), false, 'a permit is no refusal')
})

test('p-retry retries the upstream\'s failures and stops at the refusal (shouldRetry)', async () => {
  const { default: pRetry } = await import('p-retry')
  const options = { retries: 9, minTimeout: 0, maxTimeout: 0, shouldRetry: ({ error }) => !isRefusal(error) }
  let b = breaker()
  let up = upstream(100)
  const attempts = []
  const attempt = (n) => {
    attempts.push(n)
    return b.execute(() => up.send('olá'))
  }
  const refused = await pRetry(attempt, options).catch((e) => e)
  assert.ok(refused instanceof CircuitBreakerOpenError, String(refused))
  assert.equal(refused.retryAfterMs, 30_000)
  assert.equal(up.calls, 3, 'three failures reached the upstream, then the breaker opened')
  assert.deepEqual(attempts, [1, 2, 3, 4], 'the refused attempt was the last')
  // A flaky upstream: retried until it answers.
  b = breaker()
  up = upstream(2)
  assert.equal(await pRetry(() => b.execute(() => up.send('olá')), options), 'sent olá')
  assert.equal(up.calls, 3)
  assert.equal(b.getState(), 'CLOSED')
})

test('async-retry retries the upstream\'s failures and bails at the refusal', async () => {
  let b = breaker()
  let up = upstream(100)
  const send = (message) =>
    retry(
      async (bail) => {
        try {
          return await b.execute(() => up.send(message))
        } catch (err) {
          if (isRefusal(err)) return bail(err)
          throw err
        }
      },
      { retries: 9, minTimeout: 0, maxTimeout: 0, randomize: false },
    )
  const refused = await send('olá').catch((e) => e)
  assert.ok(refused instanceof CircuitBreakerOpenError, String(refused))
  assert.equal(up.calls, 3)
  b = breaker()
  up = upstream(2)
  assert.equal(await send('olá'), 'sent olá')
  assert.equal(up.calls, 3)
})
