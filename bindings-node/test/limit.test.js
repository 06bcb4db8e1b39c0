'use strict'
// The concurrency limit as a Node user meets it: its options and their
// errors, refusals that say why (and how long to wait), slots freed by every
// way a call can end (fn throwing, isFailure throwing, an abort, a timeout),
// and the licence's room on the fast path. The core's rules themselves are
// in tests/conformance/concurrency_limit.json, which this package runs too.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { CircuitBreaker, CircuitBreakerOpenError, Registry } = require(process.env.HALFOPEN_PACKAGE || '..')

function clocked(options = {}) {
  const clock = { now: 0 }
  const breaker = new CircuitBreaker({ name: 'instance-1', clock: () => clock.now, ...options })
  return { breaker, clock }
}

/** A call that stays in flight until `release()`. */
function pending() {
  let release
  const promise = new Promise((resolve, reject) => {
    release = { resolve, reject }
  })
  return { fn: () => promise, release }
}

test('invalid limit options throw naming the option', () => {
  const cases = [
    [{ concurrencyLimit: 0 }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: -1 }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: 1.5 }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: NaN }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: Infinity }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: 1_000_001 }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: '3' }, TypeError, 'concurrencyLimit'],
    [{ adaptiveLimitMin: 1 }, RangeError, 'adaptiveLimitMax'],
    [{ adaptiveLimitMax: 10 }, RangeError, 'adaptiveLimitMin'],
    [{ adaptiveLimitMin: 0, adaptiveLimitMax: 10 }, RangeError, 'adaptiveLimitMin'],
    [{ adaptiveLimitMin: 11, adaptiveLimitMax: 10 }, RangeError, 'adaptiveLimitMin'],
    [{ adaptiveLimitMin: 1, adaptiveLimitMax: 2e6 }, RangeError, 'adaptiveLimitMax'],
    [{ adaptiveLimitMin: 1, adaptiveLimitMax: -Infinity }, RangeError, 'adaptiveLimitMax'],
    [{ adaptiveLimitMin: { min: 1 }, adaptiveLimitMax: 10 }, TypeError, 'adaptiveLimitMin'],
    [{ concurrencyLimit: 5, adaptiveLimitMin: 1, adaptiveLimitMax: 10 }, RangeError, 'concurrencyLimit'],
    [{ concurrencyLimit: null, adaptiveLimitMin: 1, adaptiveLimitMax: 10 }, RangeError, 'concurrencyLimit'],
  ]
  for (const [options, kind, option] of cases) {
    assert.throws(
      () => new CircuitBreaker({ name: 'x', ...options }),
      (err) => err instanceof kind && err.option === option,
      `${JSON.stringify(options)} should throw ${kind.name} naming ${option}`,
    )
    assert.throws(() => new Registry(options), (err) => err instanceof kind && err.option === option)
  }
  // null turns it off (the default).
  assert.equal(new CircuitBreaker({ name: 'x', concurrencyLimit: null }).metrics().concurrencyLimit, null)
})

test('a full limit refuses with state CLOSED, reason limit_full and a retry hint; every way a call ends frees its slot', async () => {
  const { breaker } = clocked({ concurrencyLimit: 2, isFailure: () => {
    throw new Error('isFailure is broken')
  } })
  const a = pending()
  const b = pending()
  const callA = breaker.execute(a.fn)
  const callB = breaker.execute(b.fn)
  const refused = await breaker.execute(() => 'never').catch((e) => e)
  assert.ok(refused instanceof CircuitBreakerOpenError)
  assert.deepEqual([refused.state, refused.reason, refused.retryAfterMs], ['CLOSED', 'limit_full', 3000])
  assert.match(refused.message, /concurrency limit/)
  assert.equal(breaker.getState(), 'CLOSED')
  assert.deepEqual([breaker.metrics().inFlight, breaker.metrics().rejections], [2, 1])
  // fn rejects and isFailure throws: still reported (as a failure), slot freed.
  process.once('warning', () => {})
  a.release.reject(new Error('429'))
  await callA.catch(() => {})
  assert.equal(breaker.metrics().inFlight, 1)
  // An abort frees the slot without counting.
  const controller = new AbortController()
  const aborted = breaker.execute(() => new Promise(() => {}), { signal: controller.signal })
  assert.equal(breaker.metrics().inFlight, 2)
  controller.abort()
  await aborted.catch(() => {})
  assert.deepEqual([breaker.metrics().inFlight, breaker.metrics().cancelled], [1, 1])
  b.release.resolve('ok')
  assert.equal(await callB, 'ok')
  assert.equal(breaker.metrics().inFlight, 0)
})

test('a timeout frees its slot', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  const { breaker } = clocked({ concurrencyLimit: 1, timeoutMs: 50 })
  const call = breaker.execute(() => new Promise(() => {}))
  assert.equal((await breaker.execute(() => 1).catch((e) => e)).reason, 'limit_full')
  t.mock.timers.tick(50)
  await call.catch(() => {})
  assert.equal(breaker.metrics().inFlight, 0)
  assert.equal(await breaker.execute(() => 'again'), 'again')
})

test('tryAcquire says why; record frees the slot', () => {
  const { breaker } = clocked({ concurrencyLimit: 1 })
  const permit = breaker.tryAcquire()
  assert.equal(permit.admitted, true)
  assert.deepEqual(breaker.tryAcquire(), { admitted: false, state: 'CLOSED', retryAfterMs: 3000, reason: 'limit_full' })
  breaker.record(permit, 'ignored')
  assert.equal(breaker.tryAcquire().admitted, true)
})

test('the adaptive limit grows by a success after a refusal, and is cut by a failure', async () => {
  const { breaker } = clocked({ adaptiveLimitMin: 1, adaptiveLimitMax: 50 })
  assert.equal(breaker.metrics().concurrencyLimit, 3)
  for (let i = 0; i < 5; i++) await breaker.execute(() => 'one at a time')
  assert.equal(breaker.metrics().concurrencyLimit, 3, 'a limit that holds nobody back does not grow')
  // Fill the limit, see a call refused, let one call succeed: each success
  // after a refusal adds one (slow start, while callers wait).
  const running = []
  for (let limit = 3; limit < 6; limit++) {
    while (running.length < limit) {
      const call = pending()
      running.push({ call, done: breaker.execute(call.fn) })
    }
    assert.equal((await breaker.execute(() => 1).catch((e) => e)).reason, 'limit_full')
    const first = running.shift()
    first.call.release.resolve('ok')
    await first.done
    assert.equal(breaker.metrics().concurrencyLimit, limit + 1)
  }
  assert.equal(breaker.metrics().concurrencyLimit, 6, 'slow start: one more per success after a refusal')
  await breaker.execute(() => Promise.reject(new Error('429'))).catch(() => {})
  assert.equal(breaker.metrics().concurrencyLimit, 3, 'halved by a failure')
})

test('while open, refusals say so; with a limit their hints are spread after the open time', async () => {
  const { breaker } = clocked({ adaptiveLimitMin: 1, adaptiveLimitMax: 50 })
  for (let i = 0; i < 5; i++) await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {})
  const hints = new Set()
  for (let i = 0; i < 20; i++) {
    const err = await breaker.execute(() => 1).catch((e) => e)
    assert.deepEqual([err.state, err.reason], ['OPEN', 'open'])
    assert.ok(err.retryAfterMs >= 30000 && err.retryAfterMs < 33000, `${err.retryAfterMs}`)
    hints.add(err.retryAfterMs)
  }
  // The spread is drawn from the moment: a frozen clock gives one value.
  assert.equal(hints.size, 1)
  const { breaker: plain } = clocked()
  for (let i = 0; i < 5; i++) await plain.execute(() => Promise.reject(new Error('down'))).catch(() => {})
  assert.equal((await plain.execute(() => 1).catch((e) => e)).retryAfterMs, 30000, 'no spread without a limit')
  breaker.forceOpen()
  assert.equal((await breaker.execute(() => 1).catch((e) => e)).reason, 'held')
})

test("a name configured in a Registry replaces the Registry's limit, of either kind, or turns it off with null", () => {
  const registry = new Registry({ adaptiveLimitMin: 1, adaptiveLimitMax: 50, clock: () => 0 })
  registry.configure('fixed', { concurrencyLimit: 5 })
  registry.configure('none', { concurrencyLimit: null })
  registry.configure('tighter', { adaptiveLimitMin: 1, adaptiveLimitMax: 2 })
  registry.configure('inherits', { concurrencyLimit: undefined, windowCalls: undefined, openTimeoutMs: 1000 })
  const limit = (name) => {
    // A name's breaker is made on its first call.
    const key = registry.get(name)
    key.record(key.tryAcquire(), 'success')
    return key.metrics().concurrencyLimit
  }
  assert.deepEqual([limit('fixed'), limit('none'), limit('tighter'), limit('inherits'), limit('other')], [5, null, 2, 3, 3])
  assert.throws(() => registry.configure('half', { adaptiveLimitMax: 9 }), (e) => e.option === 'adaptiveLimitMin', 'the limit options replace the Registry\'s as a group')
  const fixed = new Registry({ concurrencyLimit: 4, clock: () => 0 })
  fixed.configure('adaptive', { adaptiveLimitMin: 2, adaptiveLimitMax: 9 })
  const key = fixed.get('adaptive')
  key.record(key.tryAcquire(), 'success')
  assert.equal(key.metrics().concurrencyLimit, 3)
})

test('lost calls cannot wedge a full limit: after probeTimeoutMs of refusals with no report they are given up', async () => {
  const { breaker, clock } = clocked({ concurrencyLimit: 2, probeTimeoutMs: 1000 })
  const lost = [breaker.tryAcquire(), breaker.tryAcquire()]
  assert.ok(lost.every((p) => p.admitted))
  clock.now = 500
  assert.deepEqual([breaker.tryAcquire().reason, breaker.pollTimeoutMs()], ['limit_full', 1500])
  clock.now = 1500
  assert.equal(await breaker.execute(() => 'through'), 'through')
  breaker.record(lost[0], 'failure')
  assert.deepEqual([breaker.metrics().stale, breaker.metrics().failures, breaker.metrics().inFlight], [1, 0, 0])
})

test('calls in flight keep their slots across state changes; their stale reports free them', async () => {
  const { breaker } = clocked({ concurrencyLimit: 2 })
  const a = pending()
  const b = pending()
  const calls = [breaker.execute(a.fn), breaker.execute(b.fn)]
  breaker.forceClose()
  breaker.reset()
  assert.equal((await breaker.execute(() => 1).catch((e) => e)).reason, 'limit_full', 'a bulkhead stays a bulkhead')
  a.release.resolve('late')
  assert.equal(await calls[0], 'late')
  assert.deepEqual([breaker.metrics().inFlight, breaker.metrics().stale], [1, 1])
  assert.equal(await breaker.execute(() => 'now'), 'now')
  b.release.resolve('late too')
  await calls[1]
  assert.equal(breaker.metrics().inFlight, 0)
})

test('a registry key refuses for its limit with the reason', async () => {
  const registry = new Registry({ concurrencyLimit: 1, clock: () => 0 })
  const a = pending()
  const call = registry.get('inst-1').execute(a.fn)
  const refused = await registry.get('inst-1').execute(() => 1).catch((e) => e)
  assert.deepEqual([refused.state, refused.reason], ['CLOSED', 'limit_full'])
  const attempt = registry.get('inst-1').tryAcquire()
  assert.deepEqual([attempt.admitted, attempt.reason], [false, 'limit_full'])
  assert.equal(await registry.get('inst-2').execute(() => 'other instance'), 'other instance')
  a.release.resolve('done')
  await call
})

test('a refusal that observed a transition (an open time ended, then the limit full) emits it', () => {
  let t = 0
  const registry = new Registry({ concurrencyLimit: 1, clock: () => t })
  const breaker = new CircuitBreaker({ name: 'b', concurrencyLimit: 1, clock: () => t })
  const events = []
  registry.on('halfOpen', (e) => events.push(`registry ${e.name} ${e.reason}`))
  breaker.on('halfOpen', (e) => events.push(`breaker ${e.reason}`))
  const key = registry.get('a')
  const held = [key.tryAcquire(), breaker.tryAcquire()]
  key.forceOpen(1000)
  breaker.forceOpen(1000)
  t = 1000
  for (const refused of [key.tryAcquire(), breaker.tryAcquire()]) {
    assert.deepEqual([refused.admitted, refused.state, refused.reason], [false, 'HALF_OPEN', 'limit_full'])
  }
  assert.deepEqual(events, ['registry a forced_open_ended', 'breaker forced_open_ended'])
  key.record(held[0], 'cancelled')
  breaker.record(held[1], 'cancelled')
})
