'use strict'
// The licence's end on a timer (lib/licence.js, "With the default clock"):
// with the default clock, no slow-call threshold, no rate threshold and no
// concurrency limit, a success reads no clock until a timer at the end of
// the licence's window bucket fires. What a hostile review found of it, each a test here: a
// timer that never fires (a promise chain, a long task, fake timers never
// advanced) must not change a decision; a rate threshold reads every
// success; a setTimeout that calls back at once, or an end already reached,
// leaves nothing watched; a full limit's retry hint (which divides by the
// window's calls) is the plain one, so a limit arms no timer; a
// replaced performance.now that answers garbage is still a TypeError; a
// native promise with a then of its own settles its call once; the timer of
// a breaker no one holds is cancelled; a setTimeout that throws leaks no
// permit.
//
// Time is `t`, read through a replaced `performance.now` (the default clock
// reads it at each call); `setTimeout` is replaced where a test says so.
// Nothing here waits for real time. The Node package only (its own backend
// or HALFOPEN_BACKEND=wasm): halfopen-wasm sets no timer.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const v8 = require('node:v8')
const vm = require('node:vm')
const { CircuitBreaker } = require('..')

let t = 0
/** Runs `body` with performance.now reading `t` and setTimeout replaced by `fakeSetTimeout` (if given). */
async function withClock(fakeSetTimeout, body) {
  const realSetTimeout = global.setTimeout
  performance.now = () => t
  if (fakeSetTimeout !== undefined) global.setTimeout = fakeSetTimeout
  try {
    return await body()
  } finally {
    global.setTimeout = realSetTimeout
    delete performance.now // back to Performance.prototype.now
  }
}

/** A setTimeout whose timers never fire (as fake timers never advanced), with the delays it was given. */
function neverFires(delays = []) {
  const fake = (_callback, ms) => {
    delays.push(ms)
    const handle = { unref() {} }
    fake.handles.add(handle)
    return handle
  }
  fake.handles = new Set()
  return fake
}

/** Two breakers of `options`: A for `execute`, B for `tryAcquire`/`record`. */
function twins(options) {
  return [new CircuitBreaker({ name: 'a', ...options }), new CircuitBreaker({ name: 'b', ...options })]
}

/** The same calls through `execute` (A) and `tryAcquire`/`record` (B), `t` moving as `steps` say, in one promise chain. */
async function drive(options, steps) {
  const [A, B] = twins(options)
  for (const [dt, outcome] of steps) {
    t += dt
    const permit = B.tryAcquire()
    const call = A.execute(() => (outcome === 'success' ? Promise.resolve(1) : Promise.reject(new Error('down')))).catch(() => {})
    await call
    if (permit.admitted) B.record(permit, outcome)
  }
  return [A, B]
}

// Successes across every bucket of a 800 ms window (100 ms buckets), then
// failures: with a rate, which successes are still in the window decides.
const ACROSS = [
  ...Array.from({ length: 40 }, () => [25, 'success']),
  ...Array.from({ length: 6 }, () => [10, 'failure']),
]

test('a rate threshold reads every success: with no timer firing, the window and the state are the plain protocol\'s', async () => {
  t = 1_000
  const delays = []
  const [A, B] = await withClock(neverFires(delays), () =>
    drive({ failureThreshold: null, failureRateThreshold: 50, minimumCalls: 10, windowMs: 800 }, ACROSS),
  )
  assert.equal(delays.length, 0, 'no timer armed')
  await withClock(neverFires(), () => {
    assert.equal(A.metrics().windowCalls, B.metrics().windowCalls)
    assert.equal(A.getState(), B.getState())
    assert.deepEqual(A.metrics(), B.metrics())
  })
})

test('a reading within a microsecond of its bucket\'s end is counted where the core rounds it', async () => {
  // 1099.9996 is before the bucket's end (1100) but rounds to it: a batch
  // holding it and the success at 1050 (under the licence the first call's
  // report took) would count both in the bucket from 1100, and the one from
  // 1050 would stay in the window past its time. (Readings are rounded
  // before they are compared: a version that compared them as read did
  // this without a margin of 1 µs.)
  t = 1_000
  const options = { failureThreshold: null, failureRateThreshold: 50, minimumCalls: 10, windowMs: 800 }
  const steps = [
    [0, 'success'],
    [50, 'success'],
    [49.9996, 'success'],
    [760, 'success'],
  ]
  const [A, B] = await withClock(neverFires(), () => drive(options, steps))
  await withClock(neverFires(), () => {
    assert.equal(B.metrics().windowCalls, 2, 'the success at 1050 has left the window')
    assert.deepEqual(A.metrics(), B.metrics())
  })
})

// A slow-call threshold's calls read the clock at their start and end. A
// version that did not note those readings as the latest (to save rounding
// them) told the core times behind what it had seen once the clock stepped
// back or failed (a hostile review's three cases, below).

/** One call through A's `execute` and B's `tryAcquire`/`record`, read at `start` and ending at `end`. */
async function call(A, B, start, end) {
  t = start
  const permit = B.tryAcquire()
  let resolve
  const result = A.execute(() => new Promise((r) => (resolve = r))).then(
    () => 'ok',
    (err) => err.reason ?? err,
  )
  t = end
  resolve?.(1)
  const got = await result
  if (permit.admitted) B.record(permit, 'success')
  return [got, permit.admitted ? 'ok' : permit.reason]
}

test('a clock stepping back between calls: a 1 ms call is not slow', async () => {
  const [A, B] = twins({ slowCallMs: 10, windowMs: 800, failureThreshold: 5 })
  await withClock(neverFires(), async () => {
    await call(A, B, 1_000, 1_001)
    await call(A, B, 980, 981)
    t = 1_002
    assert.equal(B.metrics().slow, 0)
    assert.deepEqual(A.metrics(), B.metrics())
  })
})

test('a reading that is not a number at a call\'s end, after a batch: the success is counted as the plain protocol counts it', async () => {
  const [A, B] = twins({ slowCallMs: 10, windowMs: 800, failureThreshold: 1 })
  let bad = false
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    await withClock(neverFires(), async () => {
      performance.now = () => (bad ? Number.NaN : t)
      t = 1_000
      let p = B.tryAcquire()
      await A.execute(async () => 1)
      B.record(p, 'success')
      // A call stays out at 1050 while 256 successes (a whole batch) end at 1052.
      t = 1_050
      const slowOne = B.tryAcquire()
      let resolve
      const out = A.execute(() => new Promise((r) => (resolve = r)))
      t = 1_052
      for (let i = 0; i < 256; i++) {
        p = B.tryAcquire()
        await A.execute(async () => 1)
        B.record(p, 'success')
      }
      bad = true
      resolve(1)
      await out
      B.record(slowOne, 'success')
      bad = false
      t = 1_053
      assert.equal(B.getState(), 'CLOSED')
      assert.equal(A.getState(), 'CLOSED')
      assert.deepEqual(A.metrics(), B.metrics())
    })
  } finally {
    process.off('warning', onWarning)
  }
})

test('a clock stepping back during a call: its slot is given back, its success counted in the protocol\'s bucket', async () => {
  for (const limit of [{ concurrencyLimit: 1 }, {}]) {
    const [A, B] = twins({ slowCallMs: 10, windowMs: 800, ...limit })
    await withClock(neverFires(), async () => {
      await call(A, B, 1_000, 1_000)
      // Starts after the licence's end (1100), ends 10 ms before its start.
      await call(A, B, 1_105, 1_095)
      t = 1_850
      assert.deepEqual(A.metrics(), B.metrics(), JSON.stringify(limit))
      assert.deepEqual(await call(A, B, 60_000, 60_001), ['ok', 'ok'])
      assert.equal(A.metrics().inFlight, 0)
    })
  }
})

test('a count threshold: with no timer firing, every decision is the plain protocol\'s', async () => {
  t = 1_000
  const delays = []
  const [A, B] = await withClock(neverFires(delays), () => drive({ failureThreshold: 5, windowMs: 800 }, ACROSS))
  assert.ok(delays.length > 0, 'a timer was armed')
  await withClock(neverFires(), () => {
    // (Only the window's calls may differ: successes counted in an earlier bucket.)
    assert.equal(A.getState(), 'OPEN')
    assert.equal(A.getState(), B.getState())
    assert.equal(A.metrics().windowFailures, B.metrics().windowFailures)
    assert.equal(A.metrics().consecutiveFailures, B.metrics().consecutiveFailures)
  })
})

test('a setTimeout that calls back at once leaves nothing watched: every success is counted at its own time', async () => {
  t = 1_000
  const atOnce = (callback) => {
    callback()
    return 0
  }
  const [A, B] = await withClock(atOnce, () => drive({ failureThreshold: 5, windowMs: 800 }, ACROSS.slice(0, 40)))
  await withClock(atOnce, () => assert.deepEqual(A.metrics(), B.metrics()))
})

test('a licence whose end the clock has already reached arms no timer', async () => {
  t = 1_000
  const delays = []
  // The clock moves 0.7 ms at each reading: licences are asked at readings
  // that are behind the clock by the time a timer would be armed.
  const realNow = () => {
    t += 0.7
    return t
  }
  await withClock(neverFires(delays), async () => {
    performance.now = realNow
    const b = new CircuitBreaker({ name: 'stepping', failureThreshold: 5, windowMs: 8 })
    for (let i = 0; i < 2_000; i++) await b.execute(() => Promise.resolve(1))
  })
  assert.ok(delays.length > 0)
  assert.ok(
    delays.every((ms) => ms > 0),
    `delays ≤ 0: ${delays.filter((ms) => !(ms > 0)).length}`,
  )
})

test('a replaced performance.now that answers something else than a number is a TypeError naming clock', async () => {
  const b = new CircuitBreaker({ name: 'garbage', failureThreshold: 5 })
  for (const garbage of ['soon', '5', Number.NaN, Number.POSITIVE_INFINITY, undefined]) {
    await withClock(undefined, async () => {
      performance.now = () => garbage
      const err = await b.execute(() => 1).catch((e) => e)
      assert.ok(err instanceof TypeError, String(err))
      assert.equal(err.option, 'clock')
    })
  }
})

test('a full limit\'s retry hint divides by the window\'s calls: with no timer firing, it is the plain protocol\'s', async () => {
  // A success settled past the licence's end (1,100), then, once the
  // bucket before has left the window, the limit filled and a call refused.
  const hint = async (options) => {
    t = 1_000
    const b = new CircuitBreaker({ name: 'hint', failureThreshold: 5, windowMs: 800, concurrencyLimit: 2, ...options })
    await b.execute(() => 1)
    let settle
    const first = b.execute(() => new Promise((resolve) => (settle = resolve)))
    t = 1_150
    settle(1)
    await first
    t = 1_805
    const held = []
    const busy = [0, 1].map(() => b.execute(() => new Promise((resolve) => held.push(resolve))))
    const refused = await b.execute(() => 1).catch((e) => e)
    for (const resolve of held) resolve()
    await Promise.all(busy)
    return [refused.reason, refused.retryAfterMs, b.metrics().windowCalls]
  }
  const delays = []
  const watched = await withClock(neverFires(delays), () => hint({}))
  const plain = await withClock(neverFires(), () => hint({ clock: () => t }))
  assert.equal(watched[0], 'limit_full')
  assert.deepEqual(watched, plain)
  assert.equal(delays.length, 0, 'a limit: no timer armed')
})

test('fn\'s native promise with a then of its own settles the call once', async () => {
  const b = new CircuitBreaker({ name: 'own-then', failureThreshold: 5, concurrencyLimit: 2 })
  await b.execute(() => 1)
  const odd = () => {
    const p = Promise.resolve(1)
    // biome-ignore lint/suspicious/noThenProperty: a promise with a then of its own is the point
    p.then = function (ok, bad) {
      ok(1)
      ok(1)
      return Promise.prototype.then.call(this, ok, bad)
    }
    return p
  }
  for (let i = 0; i < 3; i++) assert.equal(await b.execute(odd), 1)
  for (let i = 0; i < 3; i++) assert.equal(await b.execute(odd, { signal: new AbortController().signal }), 1)
  const m = b.metrics()
  assert.deepEqual([m.admitted, m.successes, m.inFlight], [7, 7, 0])
})

test('the timer of a breaker no one holds is cancelled once it is collected', async () => {
  // (The collector, without --expose-gc on the command line.)
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc')
  t = 1_000
  const cancelled = []
  const timers = neverFires()
  const realClearTimeout = global.clearTimeout
  // (Only this test's timers: node:test and the tests before clear others.)
  global.clearTimeout = (handle) => timers.handles.has(handle) && cancelled.push(handle)
  try {
    await withClock(timers, async () => {
      for (let i = 0; i < 100; i++) await new CircuitBreaker({ name: `dropped-${i}`, failureThreshold: 5 }).execute(() => 1)
    })
    // Collected, then finalized (FinalizationRegistry runs after a turn).
    for (let i = 0; i < 10 && cancelled.length < 100; i++) {
      gc()
      await new Promise((resolve) => setImmediate(resolve))
    }
  } finally {
    global.clearTimeout = realClearTimeout
  }
  assert.equal(timers.handles.size, 100)
  assert.equal(cancelled.length, 100)
})

test('a setTimeout or clearTimeout that throws: every call is settled once, counted at its own time', async () => {
  t = 1_000
  const throws = () => {
    throw new Error('no timers here')
  }
  const realClearTimeout = global.clearTimeout
  global.clearTimeout = throws
  try {
    const [A, B] = await withClock(throws, () => drive({ failureThreshold: 5, windowMs: 800 }, ACROSS.slice(0, 40)))
    await withClock(throws, () => {
      assert.deepEqual(A.metrics(), B.metrics())
      assert.equal(A.metrics().inFlight, 0)
    })
  } finally {
    global.clearTimeout = realClearTimeout
  }
})
