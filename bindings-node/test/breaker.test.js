'use strict'
// The CircuitBreaker class as a Node user meets it: options and their errors,
// execute, events, concurrency, cancellation and timeouts, snapshots, and the
// batched fast path's bookkeeping. Time comes from an injected clock.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { CircuitBreaker, CircuitBreakerOpenError, CircuitBreakerTimeoutError, Registry } = require(process.env.HALFOPEN_PACKAGE || '..')

function clocked(options = {}) {
  const clock = { now: 0 }
  const breaker = new CircuitBreaker({ name: 'instance-1', clock: () => clock.now, ...options })
  return { breaker, clock }
}

const fail = () => Promise.reject(new Error('upstream said 429'))
const ok = (v = 'sent') => () => Promise.resolve(v)

async function trip(breaker, n = 5) {
  for (let i = 0; i < n; i++) await breaker.execute(fail).catch(() => {})
}

test('invalid options throw a TypeError or RangeError naming the option', () => {
  const cases = [
    [{ name: 'x', failureThreshold: 0 }, RangeError, 'failureThreshold'],
    [{ name: 'x', failureThreshold: -1 }, RangeError, 'failureThreshold'],
    [{ name: 'x', failureThreshold: 2.5 }, RangeError, 'failureThreshold'],
    [{ name: 'x', windowMs: NaN }, RangeError, 'windowMs'],
    [{ name: 'x', windowMs: 0 }, RangeError, 'windowMs'],
    [{ name: 'x', openTimeoutMs: Infinity }, RangeError, 'openTimeoutMs'],
    [{ name: 'x', openTimeoutMs: -30000 }, RangeError, 'openTimeoutMs'],
    [{ name: 'x', halfOpenMaxAttempts: 0 }, RangeError, 'halfOpenMaxAttempts'],
    [{ name: 'x', halfOpenMaxAttempts: 3, halfOpenSuccesses: 4 }, RangeError, 'halfOpenSuccesses'],
    [{ name: 'x', failureRateThreshold: 150 }, RangeError, 'failureRateThreshold'],
    [{ name: 'x', backoffFactor: 0.5 }, RangeError, 'backoffFactor'],
    [{ name: 'x', windowCalls: 129 }, RangeError, 'windowCalls'],
    [{ name: 'x', failureThreshold: '5' }, TypeError, 'failureThreshold'],
    [{ name: 'x', openTimeoutMs: '30s' }, TypeError, 'openTimeoutMs'],
    [{ name: 'x', isFailure: 'yes' }, TypeError, 'isFailure'],
    [{ name: 'x', timeoutMs: 0 }, RangeError, 'timeoutMs'],
    [{ name: 'x', windowMs: 1000, windowCalls: 10 }, TypeError, 'windowCalls'],
    [{ name: 'x', windowMsTypo: 1000 }, TypeError, 'windowMsTypo'],
    [{ failureThreshold: 5 }, TypeError, 'name'],
    [{ name: '' }, TypeError, 'name'],
  ]
  for (const [options, kind, option] of cases) {
    assert.throws(
      () => new CircuitBreaker(options),
      (err) => err instanceof kind && err.option === option,
      `${JSON.stringify(options)} should throw ${kind.name} naming ${option}`,
    )
  }
  assert.throws(() => new CircuitBreaker(null), TypeError)
})

test("seed 000's options behave as the seed describes", async () => {
  const { breaker, clock } = clocked({ failureThreshold: 5, windowMs: 60000, openTimeoutMs: 30000, halfOpenMaxAttempts: 3 })
  assert.equal(breaker.getState(), 'CLOSED')
  await trip(breaker, 4)
  assert.equal(breaker.getState(), 'CLOSED')
  await trip(breaker, 1)
  assert.equal(breaker.getState(), 'OPEN')
  let called = false
  const err = await breaker.execute(async () => (called = true)).catch((e) => e)
  assert.ok(err instanceof CircuitBreakerOpenError)
  assert.equal(called, false)
  assert.deepEqual([err.breakerName, err.state, err.retryAfterMs], ['instance-1', 'OPEN', 30000])
  clock.now = 30000
  assert.equal(breaker.getState(), 'HALF_OPEN', 'getState accounts for elapsed time')
  await breaker.execute(fail).catch(() => {})
  assert.equal(breaker.retryAfterMs(), 60000, 'a failed trial doubles the open time')
  clock.now = 90000
  for (let i = 0; i < 3; i++) assert.equal(await breaker.execute(ok()), 'sent')
  assert.equal(breaker.getState(), 'CLOSED')
})

test('execute settles exactly as fn does', async () => {
  const { breaker } = clocked()
  const value = { id: 7 }
  assert.equal(await breaker.execute(async () => value), value)
  assert.equal(await breaker.execute(() => 'sync value'), 'sync value')
  const boom = new Error('boom')
  assert.equal(await breaker.execute(() => Promise.reject(boom)).catch((e) => e), boom)
  assert.equal(
    await breaker
      .execute(() => {
        throw boom
      })
      .catch((e) => e),
    boom,
  )
  assert.equal(breaker.metrics().failures, 2)
})

test('events carry the transition and its reason', async () => {
  const { breaker, clock } = clocked({ halfOpenMaxAttempts: 1 })
  const events = []
  for (const name of ['open', 'halfOpen', 'close', 'reject', 'success', 'failure']) {
    breaker.on(name, (e) => events.push([name, e?.reason ? e.reason : e instanceof Error ? e.name : e]))
  }
  await trip(breaker)
  await breaker.execute(ok()).catch(() => {})
  clock.now = 30000
  await breaker.execute(ok('probe'))
  assert.deepEqual(events.slice(3), [
    ['failure', 'Error'],
    ['failure', 'Error'],
    ['open', 'failure_threshold'],
    ['reject', 'open'],
    ['halfOpen', 'open_timeout'],
    ['success', 'probe'],
    ['close', 'probes_succeeded'],
  ])
})

test('a success under the licence reaches its listeners however they were added or removed', async () => {
  // Whether 'success' is heard is kept by the methods that add and remove
  // listeners (lib/events.js's `listenable`): each way of adding one, each
  // of removing it, on a breaker and on a registry.
  const { once: onceEvent } = require('node:events')
  const { breaker } = clocked()
  const registry = new Registry({ clock: () => 0 })
  for (const [emitter, call] of [
    [breaker, (fn) => breaker.execute(fn)],
    [registry, (fn) => registry.get('a').execute(fn)],
  ]) {
    // Its licence first, with a listener of another event in the table.
    emitter.on('stateChange', () => {})
    await call(ok())
    await call(ok())
    const heard = []
    const listener = (v) => heard.push(v)
    for (const add of ['on', 'addListener', 'prependListener']) {
      emitter[add]('success', listener)
      await call(ok(add))
      emitter.off('success', listener)
      await call(ok('unheard'))
    }
    emitter.once('success', listener)
    emitter.prependOnceListener('success', listener)
    await call(ok('once'))
    await call(ok('unheard'))
    emitter.on('success', listener)
    emitter.removeAllListeners('success')
    await call(ok('unheard'))
    emitter.on('success', listener)
    emitter.removeAllListeners()
    await call(ok('unheard'))
    // node:events' once() adds through the emitter's own method.
    const next = onceEvent(emitter, 'success')
    await call(ok('awaited'))
    heard.push(...(await next))
    assert.deepEqual(heard, ['on', 'addListener', 'prependListener', 'once', 'once', 'awaited'])
  }
})

test('a success listener added past the breaker\'s own methods is heard; a hook on EventEmitter installed later still runs', async (t) => {
  const { EventEmitter } = require('node:events')
  const { breaker } = clocked()
  // (halfopen-wasm's breakers are its platform's small EventEmitter.)
  if (!(breaker instanceof EventEmitter)) return t.skip("not Node's EventEmitter")
  assert.equal(breaker.on.length, EventEmitter.prototype.on.length)
  for (let i = 0; i < 3; i++) await breaker.execute(ok('licensed'))
  const heard = []
  EventEmitter.prototype.on.call(breaker, 'success', (v) => heard.push(v))
  await breaker.execute(ok('past its methods'))
  assert.deepEqual(heard, ['past its methods'])
  const seen = []
  const on = EventEmitter.prototype.on
  EventEmitter.prototype.on = function (event, listener) {
    seen.push(event)
    return on.call(this, event, listener)
  }
  try {
    breaker.on('stateChange', () => {})
  } finally {
    EventEmitter.prototype.on = on
  }
  assert.deepEqual(seen, ['stateChange'])
})

test('10,000 concurrent calls against a half-open breaker reach fn exactly halfOpenMaxAttempts times', async () => {
  const { breaker, clock } = clocked({ halfOpenMaxAttempts: 3 })
  await trip(breaker)
  clock.now = 30000
  let reached = 0
  const release = []
  const calls = Array.from({ length: 10000 }, () =>
    breaker
      .execute(() => {
        reached += 1
        return new Promise((resolve) => release.push(resolve))
      })
      .then(
        () => 'ok',
        (e) => e.name,
      ),
  )
  await Promise.resolve()
  for (const r of release) r()
  const results = await Promise.all(calls)
  assert.equal(reached, 3)
  assert.equal(results.filter((r) => r === 'ok').length, 3)
  assert.equal(results.filter((r) => r === 'CircuitBreakerOpenError').length, 9997)
  assert.equal(breaker.getState(), 'CLOSED')
})

test('an aborted call is cancelled: its probe slot is freed and nothing is counted', async () => {
  const { breaker, clock } = clocked({ halfOpenMaxAttempts: 1 })
  await trip(breaker)
  clock.now = 30000
  const abort = new AbortController()
  let seen
  const call = breaker.execute(
    (signal) => {
      seen = signal
      return new Promise(() => {})
    },
    { signal: abort.signal },
  )
  abort.abort(new Error('user gave up'))
  assert.equal((await call.catch((e) => e)).message, 'user gave up')
  assert.equal(seen.aborted, true, 'fn was told through its signal')
  const m = breaker.metrics()
  assert.deepEqual([m.cancelled, m.probesInFlight, m.state], [1, 0, 'HALF_OPEN'])
  assert.equal(await breaker.execute(ok('second probe')), 'second probe')
})

test('a call over timeoutMs is aborted and counts as a failure', async () => {
  const breaker = new CircuitBreaker({ name: 'slow-partner', timeoutMs: 20, consecutiveFailures: 1, failureThreshold: null })
  let signal
  const err = await breaker
    .execute((s) => {
      signal = s
      return new Promise(() => {})
    })
    .catch((e) => e)
  assert.ok(err instanceof CircuitBreakerTimeoutError)
  assert.equal(signal.aborted, true)
  assert.equal(breaker.getState(), 'OPEN')
  assert.equal(breaker.metrics().failures, 1)
})

test('successes admitted without asking are all counted, and late ones become stale', async () => {
  const { breaker } = clocked()
  for (let i = 0; i < 1000; i++) await breaker.execute(ok())
  let m = breaker.metrics()
  assert.deepEqual([m.admitted, m.successes, m.windowCalls], [1000, 1000, 1000])
  // Calls in flight when the breaker trips report into an older period.
  const release = []
  const inFlight = Array.from({ length: 10 }, () => breaker.execute(() => new Promise((r) => release.push(r))))
  await trip(breaker)
  for (const r of release) r()
  await Promise.all(inFlight)
  m = breaker.metrics()
  assert.deepEqual([m.state, m.stale, m.admitted], ['OPEN', 10, 1015])
  assert.equal(m.admitted, m.successes + m.failures + m.ignored + m.cancelled + m.stale)
})

test('forceOpen holds the breaker open (the throttle webhook), then probes', async () => {
  const { breaker, clock } = clocked()
  breaker.forceOpen(60000)
  assert.equal(breaker.getState(), 'OPEN')
  assert.equal(breaker.mode(), 'FORCED_OPEN')
  clock.now = 59999
  assert.equal(breaker.isCallPermitted(), false)
  clock.now = 60000
  assert.equal(breaker.isCallPermitted(), true)
  breaker.forceOpen()
  assert.equal(breaker.retryAfterMs(), Infinity)
  breaker.forceClose()
  assert.equal(breaker.getState(), 'CLOSED')
  assert.throws(() => breaker.forceOpen(-1), RangeError)
})

test('forceOpenAtLeast holds open that long and never shortens: the longer of two hints holds; bad ms are typed errors', () => {
  const { Registry, RetentionQueue, Dispatcher } = require(process.env.HALFOPEN_PACKAGE || '..')
  const { breaker, clock } = clocked()
  const changes = []
  breaker.on('stateChange', (t) => changes.push(`${t.from}>${t.to}`))
  breaker.forceOpenAtLeast(120000)
  clock.now = 1000
  breaker.forceOpenAtLeast(5000)
  assert.equal(breaker.retryAfterMs(), 119000, 'the shorter hint after it changes nothing')
  breaker.forceOpen()
  breaker.forceOpenAtLeast(500000)
  assert.equal(breaker.retryAfterMs(), Infinity, 'held until release stays held')
  assert.deepEqual(changes, ['CLOSED>OPEN'])
  const registry = new Registry({ clock: () => clock.now })
  const key = registry.get('a')
  key.forceOpenAtLeast(30000)
  key.forceOpenAtLeast(10)
  assert.equal(key.retryAfterMs(), 30000)
  const queue = new RetentionQueue({ name: 'q', concurrencyLimit: 1, clock: () => clock.now })
  queue.forceOpenAtLeast(7000)
  assert.equal(queue.getState(), 'OPEN')
  const dispatcher = new Dispatcher({ name: 'd', concurrencyLimit: 1, clock: () => clock.now, send: () => {} })
  dispatcher.forceOpenAtLeast(7000)
  assert.equal(dispatcher.getState(), 'OPEN')
  for (const target of [breaker, key, queue, dispatcher]) {
    for (const bad of [undefined, '5', null, 10n]) {
      assert.throws(() => target.forceOpenAtLeast(bad), (e) => e instanceof TypeError && e.option === 'ms', String(bad))
    }
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      assert.throws(() => target.forceOpenAtLeast(bad), (e) => e instanceof RangeError && e.option === 'ms' && /forceOpenAtLeast/.test(e.message), String(bad))
    }
  }
  assert.equal(breaker.retryAfterMs(), Infinity, 'a refused call changed nothing')
  dispatcher.close()
})

test('snapshots round-trip through JSON and bytes; corrupt ones are refused', async () => {
  const options = { name: 'snap', clock: () => 1000 }
  const breaker = new CircuitBreaker(options)
  await trip(breaker)
  for (const restored of [
    CircuitBreaker.fromJSON(options, JSON.parse(JSON.stringify(breaker))),
    CircuitBreaker.fromBytes(options, breaker.toBytes()),
  ]) {
    assert.equal(restored.getState(), 'OPEN')
    assert.equal(restored.retryAfterMs(), 30000)
    assert.equal(restored.metrics().failures, 5)
  }
  const corrupt = { ...breaker.toJSON(), probes_in_flight: 9 }
  assert.throws(() => CircuitBreaker.fromJSON(options, corrupt), (e) => e.name === 'SnapshotError' && e.kind === 'corrupt')
  assert.throws(
    () => CircuitBreaker.fromJSON({ ...options, openTimeoutMs: 1000 }, breaker.toJSON()),
    (e) => e.kind === 'config_mismatch',
  )
  assert.throws(() => CircuitBreaker.fromBytes(options, Buffer.from([2, 255])), (e) => e.kind === 'malformed')
})

test('metrics and Prometheus text', async () => {
  const { breaker } = clocked({ latencyHistogram: true })
  await breaker.execute(ok())
  await breaker.execute(fail).catch(() => {})
  const m = breaker.metrics()
  assert.deepEqual([m.admitted, m.successes, m.failures, m.errorRate, m.latencyCount], [2, 1, 1, 50, 2])
  const text = breaker.prometheus()
  assert.match(text, /^circuit_state\{name="instance-1"\} 0$/m)
  assert.match(text, /^circuit_failures_total\{name="instance-1"\} 1$/m)
})

test('a fallback answers a refused call with the refusal (no error built): sync or async, its throw the rejection; a call\'s own replaces the breaker\'s', async () => {
  const calls = []
  const { breaker, clock } = clocked({
    failureThreshold: 2,
    openTimeoutMs: 1_000,
    fallback: (refusal) => {
      calls.push(refusal)
      return 'volume alto, retornaremos em instantes'
    },
  })
  const rejected = []
  breaker.on('reject', (err) => rejected.push(err))
  // Admitted calls settle as fn does: the fallback is only for refusals.
  assert.equal(await breaker.execute(ok('sent')), 'sent')
  await trip(breaker, 2)
  assert.equal(breaker.getState(), 'OPEN')
  let ran = false
  const answer = await breaker.execute(() => {
    ran = true
  })
  assert.equal(ran, false, 'fn is not called')
  assert.equal(answer, 'volume alto, retornaremos em instantes')
  assert.deepEqual(calls, [{ breakerName: 'instance-1', state: 'OPEN', retryAfterMs: 1_000, reason: 'open' }])
  assert.ok(!(calls[0] instanceof Error), 'a plain object')
  assert.equal(rejected.length, 1, "the 'reject' event still heard it")
  assert.ok(rejected[0] instanceof CircuitBreakerOpenError)
  assert.equal(breaker.metrics().rejections, 1, 'counted as any refusal')
  // A call's own fallback, async: awaited.
  clock.now = 400
  assert.deepEqual(await breaker.execute(ok(), { fallback: async (r) => ({ later: r.retryAfterMs }) }), { later: 600 })
  // One that throws or rejects: that is the call's rejection.
  const boom = new Error('fallback down')
  assert.equal(
    await breaker
      .execute(ok(), {
        fallback: () => {
          throw boom
        },
      })
      .catch((e) => e),
    boom,
  )
  assert.equal(await breaker.execute(ok(), { fallback: () => Promise.reject(boom) }).catch((e) => e), boom)
  // A thenable whose `then` cannot be read rejects with that error.
  const trap = {
    // biome-ignore lint/suspicious/noThenProperty: a thenable whose `then` cannot be read
    get then() {
      throw boom
    },
  }
  assert.equal(await breaker.execute(ok(), { fallback: () => trap }).catch((e) => e), boom)
  assert.equal(breaker.metrics().rejections, 5)
  // Not a function: a TypeError naming it, as a rejection (nothing counted), or from the constructor.
  const bad = await breaker.execute(ok(), { fallback: 'text' }).catch((e) => e)
  assert.ok(bad instanceof TypeError && bad.option === 'fallback', String(bad))
  assert.equal(breaker.metrics().rejections, 5)
  assert.throws(() => new CircuitBreaker({ name: 'x', fallback: 42 }), (e) => e instanceof TypeError && e.option === 'fallback')
  // tryAcquire is not affected.
  assert.equal(breaker.tryAcquire().admitted, false)
  // Past the open period, the probe reaches fn.
  clock.now = 1_000
  assert.equal(await breaker.execute(ok('probe')), 'probe')
})

test("a fallback that re-enters the breaker or changes it from a 'reject' listener gets the refusal as it was made", async () => {
  const { breaker, clock } = clocked({ failureThreshold: 1, openTimeoutMs: 500 })
  await trip(breaker, 1)
  // The listener closes the breaker: the refusal the fallback gets is the one made (open).
  breaker.once('reject', () => breaker.forceClose())
  const seen = await breaker.execute(ok(), { fallback: (r) => r })
  assert.deepEqual(seen, { breakerName: 'instance-1', state: 'OPEN', retryAfterMs: 500, reason: 'open' })
  assert.equal(breaker.getState(), 'CLOSED')
  // A fallback that calls the breaker: its call is admitted and counted once.
  await trip(breaker, 1)
  clock.now = 100
  const inner = await breaker.execute(ok(), { fallback: () => breaker.execute(ok('inner'), { fallback: () => 'inner refused' }) })
  assert.equal(inner, 'inner refused')
  assert.equal(breaker.metrics().rejections, 3)
})

test('a Registry fallback answers its names\' refusals, also when it is full of busy breakers (registry_full)', async () => {
  let now = 0
  const r = new Registry({ clock: () => now, capacity: 1, failureThreshold: 1, openTimeoutMs: 300, fallback: (refusal) => refusal })
  assert.equal(await r.get('a').execute(ok('sent')), 'sent')
  await r.get('a').execute(fail).catch(() => {})
  assert.deepEqual(await r.get('a').execute(ok()), { breakerName: 'a', state: 'OPEN', retryAfterMs: 300, reason: 'open' })
  // 'a' is open (not idle): no room for 'b'.
  assert.deepEqual(await r.get('b').execute(ok()), { breakerName: 'b', state: 'CLOSED', retryAfterMs: Infinity, reason: 'registry_full' })
  assert.equal(await r.get('b').execute(ok(), { fallback: () => 'own' }), 'own')
  assert.throws(() => new Registry({ fallback: {} }), (e) => e instanceof TypeError && e.option === 'fallback')
  now = 300
  assert.equal(await r.get('a').execute(ok('probe')), 'probe')
})

test('a call\'s fallback: null opts out of the breaker\'s; an inherited one is not an option; an unknown preset is a RangeError', async () => {
  const { breaker } = clocked({ failureThreshold: 1, fallback: () => 'breaker-wide' })
  await trip(breaker, 1)
  assert.equal(await breaker.execute(ok()), 'breaker-wide')
  assert.ok((await breaker.execute(ok(), { fallback: null }).catch((e) => e)) instanceof CircuitBreakerOpenError)
  assert.equal(await breaker.execute(ok(), { fallback: undefined }), 'breaker-wide')
  // From a prototype (a polluted Object.prototype, say): not this call's option.
  const inherited = Object.create({ fallback: () => 'inherited' })
  assert.equal(await breaker.execute(ok(), inherited), 'breaker-wide')
  const unknown = (() => {
    try {
      return new CircuitBreaker({ name: 'p', preset: 'Sender' })
    } catch (e) {
      return e
    }
  })()
  assert.ok(unknown instanceof RangeError && unknown.option === 'preset' && unknown.problem === 'out_of_range', String(unknown))
  assert.match(unknown.message, /"Sender"/)
  assert.throws(() => new CircuitBreaker({ name: 'p', preset: 7 }), (e) => e instanceof TypeError && e.option === 'preset')
})
