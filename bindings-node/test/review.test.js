'use strict'
// Regression tests for what a hostile review of the binding contract found
// (numbered as in its report). Time comes from an injected clock.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { CircuitBreaker, Registry, RegistryFullError } = require(process.env.HALFOPEN_PACKAGE || '..')

const tick = () => new Promise((resolve) => setImmediate(resolve))
const inFlight = (m) => m.admitted - (m.successes + m.failures + m.ignored + m.cancelled + m.stale)

/** Collects HALFOPEN_CALLBACK_ERROR warnings while `body` runs. */
async function warnings(body) {
  const seen = []
  const listen = (w) => seen.push(w)
  process.on('warning', listen)
  try {
    await body()
    await tick()
  } finally {
    process.off('warning', listen)
  }
  return seen.filter((w) => w.code === 'HALFOPEN_CALLBACK_ERROR')
}

/** A breaker half-open at t = 30,000 with `options`, and its clock. */
function halfOpen(options = {}) {
  const clock = { now: 0, broken: false }
  const b = new CircuitBreaker({
    name: 'r',
    clock: () => {
      if (clock.broken) throw new Error('clock down')
      return clock.now
    },
    ...options,
  })
  for (let i = 0; i < 5; i++) b.record(b.tryAcquire(), 'failure')
  clock.now = 30000
  return { b, clock }
}

describe('hostile review', () => {
  test('#1 record() with a throwing clock still reports the permit (with a warning)', async () => {
    const { b, clock } = halfOpen({ halfOpenMaxAttempts: 1 })
    const probe = b.tryAcquire()
    clock.broken = true
    const seen = await warnings(() => b.record(probe, 'success'))
    assert.equal(seen.length, 1)
    clock.broken = false
    assert.equal(b.getState(), 'CLOSED')
    assert.equal(inFlight(b.metrics()), 0)
  })

  test('#2 values that cannot be printed, thrown by callbacks, change nothing', async () => {
    const unprintable = Object.create(null)
    const b = new CircuitBreaker({
      name: 'r',
      isFailure: () => {
        throw unprintable
      },
    })
    b.on('success', () => {
      throw unprintable
    })
    const seen = await warnings(async () => {
      assert.equal(await b.execute(() => 42), 42)
      await assert.rejects(b.execute(() => Promise.reject(new Error('x'))), /x/)
    })
    assert.equal(seen.length, 2)
    const m = b.metrics()
    assert.deepEqual([m.successes, m.failures, inFlight(m)], [1, 1, 0])
  })

  test('#3 a then getter that throws, or a fake AbortSignal, leaks no permit', async () => {
    const { b } = halfOpen({ halfOpenMaxAttempts: 1, timeoutMs: 1000 })
    const garbage = {
      // biome-ignore lint/suspicious/noThenProperty: a thenable whose `then` cannot be read is the point
      get then() {
        throw new Error('then getter')
      },
    }
    await assert.rejects(b.execute(() => garbage), /then getter/)
    assert.equal(inFlight(b.metrics()), 0, 'the probe was reported (as a failure)')
    const fake = Object.create(AbortSignal.prototype)
    const r = new Registry({ clock: () => 0 })
    await assert.rejects(r.get('k').execute(() => 1, { signal: fake }), TypeError)
    assert.equal(r.get('k').metrics(), null, 'never admitted')
  })

  test('#4 a registry restore keeps calls in flight in flight, stale, and says what changed', async () => {
    let now = 0
    const r = new Registry({ clock: () => now, capacity: 2 })
    r.get('a').forceOpen()
    const saved = r.toJSON()
    r.get('a').forceClose()
    const events = []
    r.on('stateChange', (t) => events.push(`${t.name}:${t.to}:${t.reason}`))
    const permit = r.get('b').tryAcquire()
    now = 10
    r.restore(saved)
    assert.deepEqual(events, ['a:OPEN:restored'])
    assert.equal(r.get('a').getState(), 'OPEN')
    // 'b' is gone from the snapshot but its call is in flight: recreated, its report is stale.
    r.get('b').record(permit, 'failure')
    assert.equal(r.get('b').metrics(), null)
    const again = r.get('b').tryAcquire()
    r.get('b').record(again, 'success')
    assert.deepEqual([r.get('b').metrics().failures, r.get('b').metrics().successes], [0, 1])
  })

  test('#4 a breaker with a call in flight across a restore is not evicted', () => {
    const r = new Registry({ clock: () => 0, capacity: 1 })
    r.get('a').record(r.get('a').tryAcquire(), 'success')
    const saved = r.toJSON()
    const permit = r.get('a').tryAcquire()
    r.restore(saved)
    assert.ok(r.get('b').tryAcquire().error instanceof RegistryFullError)
    // Its report reaches no breaker (the restored one did not admit it),
    // and frees the name: the restored metrics still add up and round-trip.
    r.get('a').record(permit, 'failure')
    const m = r.get('a').metrics()
    assert.deepEqual([m.admitted, m.successes, m.stale, m.failures], [1, 1, 0, 0])
    r.restore(r.toJSON())
    assert.equal(r.get('b').tryAcquire().admitted, true, "'a' is idle again")
  })

  test('an abort during the admission (by a listener) cancels the call before fn runs', async () => {
    const { b } = halfOpen({ halfOpenMaxAttempts: 1 })
    const ac = new AbortController()
    b.on('halfOpen', () => ac.abort(new Error('stop')))
    let ran = false
    await assert.rejects(
      b.execute(
        () => {
          ran = true
        },
        { signal: ac.signal },
      ),
      /stop/,
    )
    assert.equal(ran, false)
    assert.deepEqual([b.metrics().cancelled, b.metrics().probesInFlight], [1, 0])
    assert.equal(b.tryAcquire().admitted, true, 'the probe slot is free')
  })

  test('configure() can switch a name between time and count windows', () => {
    const r = new Registry({ clock: () => 0, windowMs: 10000 })
    r.configure('k', { windowCalls: 10 })
    for (let i = 0; i < 12; i++) r.get('k').record(r.get('k').tryAcquire(), 'success')
    assert.equal(r.get('k').metrics().windowCalls, 10, 'a window of the last 10 calls')
    let now = 0
    const rate = new Registry({ clock: () => now, windowCalls: 10, failureThreshold: null, failureRateThreshold: 50 })
    rate.configure('k', { windowMs: 8000 })
    for (let i = 0; i < 12; i++) rate.get('k').record(rate.get('k').tryAcquire(), 'success')
    now = 8000
    assert.equal(rate.get('k').metrics().windowCalls, 0, 'a time window: the calls have left it')
  })

  test('options inherited from a polluted Object.prototype are not options', () => {
    Object.prototype.failureThreshold = 0
    try {
      const b = new CircuitBreaker({ name: 'r' })
      for (let i = 0; i < 5; i++) b.record(b.tryAcquire(), 'failure')
      assert.equal(b.getState(), 'OPEN', "the default threshold (5), not the prototype's 0")
      assert.doesNotThrow(() => new Registry().configure('k', { openTimeoutMs: 5000 }))
    } finally {
      delete Object.prototype.failureThreshold
    }
  })

  test('forceOpen(ms) beyond 2^53 - 1 ms is a RangeError', () => {
    const b = new CircuitBreaker({ name: 'r' })
    assert.throws(() => b.forceOpen(1e300), (e) => e instanceof RangeError)
    assert.equal(b.getState(), 'CLOSED')
  })

  test('#5 timeoutMs beyond what a timer keeps is a RangeError', () => {
    for (const make of [(o) => new CircuitBreaker({ name: 'r', ...o }), (o) => new Registry(o)]) {
      assert.throws(() => make({ timeoutMs: 2 ** 31 }), (e) => e instanceof RangeError && e.option === 'timeoutMs')
      assert.doesNotThrow(() => make({ timeoutMs: 2 ** 31 - 1 }))
    }
  })

  test("#6 an async listener's rejection is a warning, not an unhandled rejection", async () => {
    const b = new CircuitBreaker({ name: 'r' })
    b.on('open', async () => {
      throw new Error('notify failed')
    })
    const unhandled = []
    const onUnhandled = (e) => unhandled.push(e)
    process.on('unhandledRejection', onUnhandled)
    try {
      const seen = await warnings(() => b.forceOpen())
      assert.equal(seen.length, 1)
      assert.equal(seen[0].cause.message, 'notify failed')
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    assert.deepEqual(unhandled, [])
  })

  test("#7 null unsets a preset's policies", async () => {
    let now = 0
    const b = new CircuitBreaker({
      name: 'r',
      clock: () => now,
      preset: 'partnerWebhook',
      consecutiveFailures: null,
      slowCallMs: null,
      failureThreshold: 10,
    })
    for (let i = 0; i < 5; i++) b.record(b.tryAcquire(), 'failure')
    assert.equal(b.getState(), 'CLOSED')
    const slow = b.tryAcquire()
    now = 20000
    b.record(slow, 'success')
    assert.equal(b.metrics().slow, 0)
  })

  test('#8 names from Object.prototype are not options or presets', () => {
    const check = (make, option, Type = TypeError) =>
      assert.throws(make, (e) => e instanceof Type && e.option === option, `${option}`)
    for (const key of ['constructor', 'toString', 'hasOwnProperty']) {
      check(() => new CircuitBreaker({ name: 'r', [key]: 1 }), key)
      // (A string, but no preset's name: a RangeError.)
      check(() => new CircuitBreaker({ name: 'r', preset: key }), 'preset', RangeError)
      check(() => new Registry({ preset: key }), 'preset', RangeError)
      check(() => new Registry().configure('k', { preset: key }), 'preset', RangeError)
    }
    check(() => new CircuitBreaker(JSON.parse('{"name":"r","__proto__":{"x":1}}')), '__proto__')
  })

  test('#9 readings are what the core sees (microseconds, never before 0)', async () => {
    const options = { windowMs: 8, failureThreshold: null, failureRateThreshold: 50, minimumCalls: 100 }
    let now = 0.2
    const a = new CircuitBreaker({ name: 'a', clock: () => now, ...options })
    const b = new CircuitBreaker({ name: 'b', clock: () => now, ...options })
    await a.execute(() => 1)
    b.record(b.tryAcquire(), 'success')
    now = 0.9999996 // rounds to 1 ms: the next bucket
    await a.execute(() => 1)
    b.record(b.tryAcquire(), 'success')
    // At 8.5 ms the first bucket [0, 1) has left the window: a call counted
    // in the wrong bucket would show here.
    now = 8.5
    assert.equal(b.metrics().windowCalls, 1)
    assert.equal(a.metrics().windowCalls, b.metrics().windowCalls)
    // A rejection's wait is exact to the microsecond, negative readings are 0.
    let t = -100
    const c = new CircuitBreaker({ name: 'c', clock: () => t })
    for (let i = 0; i < 5; i++) c.record(c.tryAcquire(), 'failure')
    t = 3.0000004
    const err = await c.execute(() => 1).catch((e) => e)
    assert.equal(err.retryAfterMs, 29997)
    assert.equal(c.tryAcquire().retryAfterMs, 29997)
  })

  test('#10 a half-open breaker with every slot busy never says "retry in 0"', () => {
    const { b } = halfOpen({ openTimeoutMs: 0.005, halfOpenMaxAttempts: 1 })
    assert.equal(b.tryAcquire().admitted, true)
    const refused = b.tryAcquire()
    assert.equal(refused.admitted, false)
    assert.ok(refused.retryAfterMs > 0, `${refused.retryAfterMs}`)
    assert.equal(b.isCallPermitted(), false)
    assert.ok(b.retryAfterMs() > 0)
  })

  test('#11 execute() never throws for options it cannot read', async () => {
    const b = new CircuitBreaker({ name: 'r' })
    const getter = {
      get signal() {
        throw new Error('getter')
      },
    }
    // (Options are own properties: a proxy that cannot say what it has.)
    const proxy = new Proxy(
      {},
      {
        getOwnPropertyDescriptor() {
          throw new Error('proxy')
        },
        get() {
          throw new Error('proxy')
        },
      },
    )
    for (const options of [getter, proxy]) {
      let promise
      assert.doesNotThrow(() => {
        promise = b.execute(() => 1, options)
      })
      await assert.rejects(promise)
    }
    assert.equal(b.metrics().admitted, 0)
  })

  test('#12 an abort inside an async fn that has already returned lets its result win', async () => {
    const b = new CircuitBreaker({ name: 'r' })
    const ac = new AbortController()
    const got = await b.execute(
      async () => {
        ac.abort(new Error('late'))
        return 'r'
      },
      { signal: ac.signal },
    )
    assert.equal(got, 'r')
    assert.deepEqual([b.metrics().successes, b.metrics().cancelled], [1, 0])
  })

  test('#13 many calls sharing one signal add one listener to it', async () => {
    const b = new CircuitBreaker({ name: 'r' })
    const ac = new AbortController()
    const seen = []
    const listen = (w) => seen.push(w.name)
    process.on('warning', listen)
    const calls = Array.from({ length: 50 }, () => b.execute(() => new Promise(() => {}), { signal: ac.signal }))
    ac.abort(new Error('stop'))
    const results = await Promise.allSettled(calls)
    await tick()
    process.off('warning', listen)
    assert.deepEqual(seen, [])
    assert.ok(results.every((r) => r.status === 'rejected' && r.reason.message === 'stop'))
    assert.equal(b.metrics().cancelled, 50)
  })

  test('#14 a clock reading beyond 2^53 - 1 ms (a nanosecond clock) is a TypeError', async () => {
    const b = new CircuitBreaker({ name: 'r', clock: () => 1.7e18 })
    assert.throws(() => b.getState(), (e) => e instanceof TypeError && e.option === 'clock')
    await assert.rejects(b.execute(() => 1), TypeError)
  })

  test('#15 a registry snapshot with evictions beyond 2^53 is corrupt', () => {
    const r = new Registry({ clock: () => 0 })
    const saved = r.toJSON()
    const text = JSON.stringify(saved).replace('"evictions":0', '"evictions":1152921504606846976')
    assert.throws(() => r.restore(text), (e) => e.name === 'SnapshotError' && e.kind === 'corrupt')
  })

  test("#16 configure() starts from the Registry's options", () => {
    const r = new Registry({ clock: () => 0, consecutiveFailures: 1, failureThreshold: null })
    r.configure('k', { openTimeoutMs: 5000 })
    r.get('k').record(r.get('k').tryAcquire(), 'failure')
    assert.equal(r.get('k').getState(), 'OPEN')
    assert.equal(r.get('k').retryAfterMs(), 5000)
  })

  test('a licence held before the first call starts time in states at that call', async () => {
    let t = 100.5
    const o = { clock: () => t, windowCalls: 4, failureThreshold: null, failureRateThreshold: 50, minimumCalls: 2 }
    const a = new CircuitBreaker({ name: 'a', ...o })
    const b = new CircuitBreaker({ name: 'b', ...o })
    a.reset()
    b.reset()
    let resolve
    const call = a.execute(() => new Promise((r) => (resolve = r)))
    const permit = b.tryAcquire()
    t = 5000.5
    resolve(1)
    await call
    b.record(permit, 'success')
    t = 4999.5 // the clock steps back
    assert.equal(a.metrics().timeClosedMs, b.metrics().timeClosedMs)
  })
})
