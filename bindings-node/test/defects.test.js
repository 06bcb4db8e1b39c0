'use strict'
// Regression tests for the defects list, one or more per defect, named by
// its number. Time comes from an injected clock; the only real timers are
// `timeoutMs` itself (#3, #13) and a guard against a call that never settles.
//
//  (numbers as in the issue "One contract for every binding")
//  #1  fast path: successes count in the window at their own time
//  #2  a throwing 'failure' listener skips the report
//  #3  timeoutMs + a throwing 'failure' listener crashes the process
//  #4  throwing listeners / clock break execute (it must never throw); callback
//      errors are reported as HALFOPEN_CALLBACK_ERROR warnings
//  #5  events from a listener's forceClose/reset/disable are queued after the current one
//  #6  permits are reported once; forged permits are TypeErrors
//  #7  a breaker with a call in flight is never evicted
//  #8  Registry execute honours its AbortSignal
//  #9  a throwing isFailure counts a failure and leaks nothing (breaker and registry)
//  #10 Registry honours timeoutMs; configure refuses options it would ignore
//  #11 names that are not well-formed UTF-16 are refused
//  #12 a clock reading that is not a finite number is a TypeError naming 'clock'
//  #13 window counts are exact beyond 65,535 calls
//  #14 circuit_state_seconds_total never decreases
//  #15 raw napi errors: unknown outcomes, has(5), restore(undefined), configure('')
//  #16 a key refused by a full registry says so
//  #17 per-name configurations are bounded
//  #18 snapshot counters above 2^53 are refused
//  #19 once fn has settled, its result wins over a late abort
//  #20 restoring a half-open snapshot gives up the saving process's probes
//  #21 (hand-written snapshot codec, review) hostile snapshots: many fields,
//      a newer registry snapshot, a lone surrogate in the text, times ≥ 2^53
//  #extra prom-client families, huge registry snapshots, configure() on an open breaker

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const {
  CircuitBreaker,
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  Registry,
  RegistryFullError,
  RetentionQueue,
} = require(process.env.HALFOPEN_PACKAGE || '..')

// ---- helpers -----------------------------------------------------------

/** A breaker on a fake clock (`clock.now`, ms). */
function clocked(options = {}) {
  const clock = { now: 0 }
  const breaker = new CircuitBreaker({ name: 'defects', clock: () => clock.now, ...options })
  return { breaker, clock }
}

/** A registry on a fake clock (`clock.now`, ms). */
function clockedRegistry(options = {}) {
  const clock = { now: 0 }
  const registry = new Registry({ clock: () => clock.now, ...options })
  return { registry, clock }
}

const listenerBug = () => {
  throw new Error('listener bug')
}
const fail = () => Promise.reject(new Error('upstream said 503'))
const tick = () => new Promise((resolve) => setImmediate(resolve))

/** Trips a breaker (or keyed breaker) through tryAcquire/record, without execute. */
function tripByRecord(breaker, n = 5) {
  for (let i = 0; i < n; i++) breaker.record(breaker.tryAcquire(), 'failure')
}

/** How `start()` ended: `{ value }` or `{ error }`, a synchronous throw included. */
async function outcome(start) {
  try {
    return { value: await start() }
  } catch (error) {
    return { error }
  }
}

/**
 * Calls `start()`, asserting that it returns a promise without throwing;
 * resolves to that promise's outcome (`{ value }` or `{ error }`).
 */
function returnsPromise(start, what) {
  let p
  assert.doesNotThrow(() => {
    p = start()
  }, `${what} threw synchronously`)
  assert.ok(p instanceof Promise, `${what} returned a promise`)
  return outcome(() => p)
}

/** `p`'s outcome, or `{ pending: true }` if it is still pending after `ms` of real time (a hang guard). */
async function within(p, ms = 2000) {
  let timer
  const guard = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ pending: true }), ms)
  })
  try {
    return await Promise.race([outcome(() => p), guard])
  } finally {
    clearTimeout(timer)
  }
}

/** Collects HALFOPEN_CALLBACK_ERROR warnings until the returned function is awaited. */
function watchWarnings() {
  const seen = []
  const onWarning = (w) => {
    if (w && w.code === 'HALFOPEN_CALLBACK_ERROR') seen.push(w)
  }
  process.on('warning', onWarning)
  return async () => {
    await tick()
    await tick()
    process.off('warning', onWarning)
    return seen
  }
}

/** Runs `n` calls whose fn rejects with its own error, through `execute`. */
async function failingCalls(n, execute) {
  const calls = []
  for (let i = 0; i < n; i++) {
    const own = new Error(`upstream said 503 (#${i})`)
    const call = { own, called: false }
    const { error } = await outcome(() =>
      execute(() => {
        call.called = true
        return Promise.reject(own)
      }),
    )
    call.got = error
    calls.push(call)
  }
  return calls
}

/** Each caller whose fn ran got fn's own error; the others a CircuitBreakerOpenError. */
function assertOwnErrors(calls, minCalled) {
  for (const [i, c] of calls.entries()) {
    if (c.called) assert.equal(c.got, c.own, `call ${i} got fn's own error`)
    else assert.ok(c.got instanceof CircuitBreakerOpenError, `call ${i} was rejected by the breaker`)
  }
  assert.ok(calls.filter((c) => c.called).length >= minCalled, `fn ran at least ${minCalled} times`)
}

/** `{ closed, half_open, open }` from `circuit_state_seconds_total` samples. */
function stateSeconds(text) {
  const out = {}
  for (const m of text.matchAll(/^circuit_state_seconds_total\{name="[^"]*",state="(\w+)"\} (\S+)$/gm)) {
    out[m[1]] = Number(m[2])
  }
  assert.deepEqual(Object.keys(out).sort(), ['closed', 'half_open', 'open'])
  return out
}

/** The metric family names of a Prometheus text exposition. */
function families(text) {
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]))
}

// ---- tests -----------------------------------------------------------------

describe('fast path', () => {
  test('#1 successes through execute count in the window at their own time (error rate as with tryAcquire/record)', async () => {
    const options = { failureThreshold: null, failureRateThreshold: 50, minimumCalls: 10, windowMs: 1000 }
    const fast = clocked(options)
    const exact = clocked(options)
    for (let i = 0; i < 200; i++) {
      fast.clock.now += 10
      assert.equal(await fast.breaker.execute(() => 'ok'), 'ok')
      exact.clock.now += 10
      exact.breaker.record(exact.breaker.tryAcquire(), 'success')
    }
    for (let i = 0; i < 10; i++) {
      fast.clock.now += 10
      await fast.breaker.execute(fail).catch(() => {})
      exact.clock.now += 10
      exact.breaker.record(exact.breaker.tryAcquire(), 'failure')
    }
    const want = exact.breaker.metrics().errorRate
    assert.ok(want > 5 && want < 20, `reference error rate ${want} is about 10`)
    assert.equal(fast.breaker.getState(), 'CLOSED')
    const got = fast.breaker.metrics().errorRate
    assert.ok(Math.abs(got - want) <= 0.01, `execute's error rate ${got} should be ${want}`)
  })
})

describe('listener and callback errors', () => {
  test('#2 a throwing failure listener does not skip the report (CircuitBreaker)', async () => {
    const { breaker } = clocked({ failureThreshold: 3 })
    breaker.on('failure', listenerBug)
    const calls = await failingCalls(10, (fn) => breaker.execute(fn))
    assertOwnErrors(calls, 3)
    assert.equal(breaker.getState(), 'OPEN')
    assert.ok(breaker.metrics().failures >= 3)
  })

  test('#2 a throwing failure listener does not skip the report (Registry)', async () => {
    const { registry } = clockedRegistry({ failureThreshold: 3 })
    registry.on('failure', listenerBug)
    const key = registry.get('partner')
    const calls = await failingCalls(10, (fn) => key.execute(fn))
    assertOwnErrors(calls, 3)
    assert.equal(key.getState(), 'OPEN')
    assert.ok(key.metrics().failures >= 3)
  })

  test('#3 a timed-out call with a throwing failure listener does not crash the process', () => {
    const pkg = path.resolve(__dirname, '..')
    const script = `
      const { CircuitBreaker, CircuitBreakerTimeoutError } = require(${JSON.stringify(pkg)})
      const breaker = new CircuitBreaker({ name: 'slow-partner', timeoutMs: 20 })
      breaker.on('failure', () => { throw new Error('listener bug') })
      breaker.execute(() => new Promise(() => {})).then(
        () => console.log('RESOLVED'),
        (err) => console.log(err instanceof CircuitBreakerTimeoutError ? 'TIMEOUT_REJECTED' : 'OTHER_REJECTION ' + err),
      )
    `
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 })
    assert.equal(child.status, 0, `child exited ${child.status} (${child.signal}): ${child.stderr}`)
    assert.match(child.stdout, /^TIMEOUT_REJECTED$/m)
  })

  test('#4 a throwing open listener: execute returns a promise that settles as fn did', async () => {
    const fns = {
      'fn throws': (own) => () => {
        throw own
      },
      'fn rejects': (own) => () => Promise.reject(own),
    }
    for (const [label, make] of Object.entries(fns)) {
      const { breaker } = clocked()
      tripByRecord(breaker, 4)
      breaker.on('open', listenerBug)
      const own = new Error('upstream said 503')
      const { error } = await returnsPromise(() => breaker.execute(make(own)), `execute (${label})`)
      assert.equal(error, own, `${label}: the caller gets fn's error`)
      assert.equal(breaker.getState(), 'OPEN', label)
    }
  })

  test('#4 a throwing reject listener: execute returns a promise rejected with CircuitBreakerOpenError', async () => {
    const { breaker } = clocked()
    tripByRecord(breaker)
    breaker.on('reject', listenerBug)
    let called = false
    for (let i = 0; i < 2; i++) {
      const { error } = await returnsPromise(
        () =>
          breaker.execute(() => {
            called = true
          }),
        `execute #${i}`,
      )
      assert.ok(error instanceof CircuitBreakerOpenError)
    }
    assert.equal(called, false)
    let refusal
    assert.doesNotThrow(() => {
      refusal = breaker.tryAcquire()
    })
    assert.equal(refusal.admitted, false)
  })

  test('#4 a throwing halfOpen listener: the probe still runs fn', async () => {
    const { breaker, clock } = clocked({ halfOpenMaxAttempts: 1 })
    tripByRecord(breaker)
    clock.now = 30000
    breaker.on('halfOpen', listenerBug)
    let called = false
    const { value } = await returnsPromise(
      () =>
        breaker.execute(() => {
          called = true
          return 'probe'
        }),
      'execute',
    )
    assert.equal(called, true)
    assert.equal(value, 'probe')
    assert.equal(breaker.getState(), 'CLOSED')
  })

  test('#4 a throwing success listener does not reject a successful call', async () => {
    const { breaker } = clocked()
    breaker.on('success', listenerBug)
    assert.deepEqual(await outcome(() => breaker.execute(() => 'sent')), { value: 'sent' })
    const guarded = breaker.execute(async () => 'guarded', { signal: new AbortController().signal })
    assert.deepEqual(await outcome(() => guarded), { value: 'guarded' })
    assert.equal(breaker.metrics().successes, 2)

    const { registry } = clockedRegistry()
    registry.on('success', listenerBug)
    assert.deepEqual(await outcome(() => registry.get('k').execute(() => 'sent')), { value: 'sent' })
    assert.equal(registry.get('k').metrics().successes, 1)
  })

  test("#4 Registry's tryAcquire/record never throw because of a listener", () => {
    const { registry, clock } = clockedRegistry({ halfOpenMaxAttempts: 1 })
    const key = registry.get('k')
    tripByRecord(key)
    for (const event of ['open', 'halfOpen', 'close', 'stateChange', 'reject']) registry.on(event, listenerBug)
    let refusal
    assert.doesNotThrow(() => {
      refusal = key.tryAcquire()
    }, 'tryAcquire with a throwing reject listener')
    assert.equal(refusal.admitted, false)
    clock.now = 30000
    let permit
    assert.doesNotThrow(() => {
      permit = key.tryAcquire()
    }, 'tryAcquire with a throwing halfOpen listener')
    assert.equal(permit.admitted, true)
    assert.doesNotThrow(() => key.record(permit, 'success'), 'record with a throwing close listener')
    assert.equal(key.getState(), 'CLOSED')
  })

  test('#4 an error thrown by a listener is reported as a HALFOPEN_CALLBACK_ERROR warning', async () => {
    const stop = watchWarnings()
    const bug = new Error('listener bug')
    const { breaker } = clocked()
    breaker.on('failure', () => {
      throw bug
    })
    await outcome(() => breaker.execute(fail))
    const seen = await stop()
    assert.ok(
      seen.some((w) => w instanceof Error && w.cause === bug),
      `a warning with the listener's error as cause (got ${seen.length} warnings)`,
    )
  })

  test('#4 an error thrown by isFailure is reported as a HALFOPEN_CALLBACK_ERROR warning', async () => {
    for (const kind of ['CircuitBreaker', 'Registry']) {
      const stop = watchWarnings()
      const bug = new Error('isFailure bug')
      const isFailure = () => {
        throw bug
      }
      const target =
        kind === 'CircuitBreaker' ? clocked({ isFailure }).breaker : clockedRegistry({ isFailure }).registry.get('k')
      await outcome(() => target.execute(fail))
      const seen = await stop()
      assert.ok(
        seen.some((w) => w instanceof Error && w.cause === bug),
        `${kind}: a warning with isFailure's error as cause (got ${seen.length} warnings)`,
      )
    }
  })

  test('#5 a throwing open listener changes neither the state nor the order of later events', async () => {
    const { breaker, clock } = clocked({ halfOpenMaxAttempts: 1 })
    const seen = []
    breaker.on('open', listenerBug)
    breaker.on('stateChange', (e) => seen.push(`${e.from}>${e.to}`))
    for (let i = 0; i < 5; i++) await outcome(() => breaker.execute(fail))
    assert.equal(breaker.getState(), 'OPEN')
    clock.now = 30000
    assert.deepEqual(await outcome(() => breaker.execute(() => 'probe')), { value: 'probe' })
    assert.deepEqual(seen, ['CLOSED>OPEN', 'OPEN>HALF_OPEN', 'HALF_OPEN>CLOSED'])
    assert.equal(breaker.getState(), 'CLOSED')
  })

  test('#4 execute never throws synchronously: it always returns a promise', async () => {
    let broken = false
    let now = 0
    const clock = () => {
      if (broken) throw new Error('clock down')
      return now
    }
    const cases = {
      'open breaker, clock throws': () => {
        const breaker = new CircuitBreaker({ name: 'c1', clock })
        tripByRecord(breaker)
        broken = true
        return () => breaker.execute(() => 'x')
      },
      'half-open breaker, clock throws': () => {
        const breaker = new CircuitBreaker({ name: 'c2', clock })
        tripByRecord(breaker)
        now = 30000
        broken = true
        return () => breaker.execute(() => 'x')
      },
      'fn throws, failure listener throws': () => {
        const breaker = new CircuitBreaker({ name: 'c3', clock })
        breaker.on('failure', listenerBug)
        return () =>
          breaker.execute(() => {
            throw new Error('sync failure')
          })
      },
      'registry, clock throws': () => {
        const registry = new Registry({ clock })
        broken = true
        return () => registry.get('k').execute(() => 'x')
      },
      'registry, open key, reject listener throws': () => {
        const registry = new Registry({ clock })
        tripByRecord(registry.get('k'))
        registry.on('reject', listenerBug)
        return () => registry.get('k').execute(() => 'x')
      },
    }
    for (const [label, setUp] of Object.entries(cases)) {
      broken = false
      now = 0
      const start = setUp()
      await returnsPromise(start, label)
    }
  })
})

describe('event order', () => {
  for (const op of ['forceClose', 'reset', 'disable']) {
    test(`#5 ${op}() called from an 'open' listener emits its events after the current stateChange`, async () => {
      const { breaker } = clocked()
      const events = []
      let stateInListener
      breaker.on('open', () => events.push('open'))
      breaker.on('close', () => events.push('close'))
      breaker.on('stateChange', (e) => events.push(`stateChange ${e.from}>${e.to}`))
      breaker.once('open', () => {
        stateInListener = breaker.getState()
        breaker[op]()
      })
      for (let i = 0; i < 5; i++) await outcome(() => breaker.execute(fail))
      assert.equal(stateInListener, 'OPEN', 'the core had committed the change when the event came')
      assert.deepEqual(events, ['open', 'stateChange CLOSED>OPEN', 'close', 'stateChange OPEN>CLOSED'])
      assert.equal(breaker.getState(), 'CLOSED')
    })
  }

  test("#5 a Registry listener's forceClose() is emitted after the current stateChange", async () => {
    const { registry } = clockedRegistry()
    const events = []
    registry.on('stateChange', (e) => events.push(`${e.name} ${e.from}>${e.to}`))
    registry.once('open', (e) => registry.get(e.name).forceClose())
    for (let i = 0; i < 5; i++) await outcome(() => registry.get('k').execute(fail))
    assert.deepEqual(events, ['k CLOSED>OPEN', 'k OPEN>CLOSED'])
    assert.equal(registry.get('k').getState(), 'CLOSED')
  })
})

describe('permits', () => {
  test('#6 a permit is reported once: a second record() is a TypeError and counts nothing', () => {
    const { breaker } = clocked()
    const permit = breaker.tryAcquire()
    breaker.record(permit, 'success')
    for (const outcomeName of ['success', 'failure', 'ignored', 'cancelled']) {
      assert.throws(() => breaker.record(permit, outcomeName), TypeError, `second record as ${outcomeName}`)
    }
    const m = breaker.metrics()
    assert.deepEqual(
      [m.admitted, m.successes, m.failures, m.ignored, m.cancelled, m.stale],
      [1, 1, 0, 0, 0, 0],
    )
  })

  test('#6 a forged permit, or one from another breaker, is a TypeError and counts nothing', () => {
    const { breaker } = clocked()
    const other = clocked().breaker
    const foreign = other.tryAcquire()
    for (let i = 0; i < 5; i++) {
      assert.throws(() => breaker.record({ admitted: true, generation: 0, issuedAtMs: 0 }, 'failure'), TypeError)
      assert.throws(() => breaker.record({ ...foreign }, 'failure'), TypeError)
    }
    assert.throws(() => breaker.record(foreign, 'failure'), TypeError)
    const m = breaker.metrics()
    assert.deepEqual([m.state, m.admitted, m.failures, m.stale], ['CLOSED', 0, 0, 0])
    other.record(foreign, 'success')
    assert.equal(other.metrics().successes, 1, 'the real permit still reports to its own breaker')
  })

  test('#15 an unknown outcome such as "toString" is a TypeError and counts nothing', () => {
    const { breaker } = clocked()
    const permit = breaker.tryAcquire()
    for (const bad of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'SUCCESS', undefined]) {
      assert.throws(() => breaker.record(permit, bad), TypeError, `outcome ${String(bad)}`)
    }
    const m = breaker.metrics()
    assert.deepEqual([m.admitted, m.successes, m.failures, m.ignored, m.cancelled], [1, 0, 0, 0, 0])
    breaker.record(permit, 'success')
    assert.equal(breaker.metrics().successes, 1, 'the permit is still outstanding after a refused outcome')
  })

  test('#6 Registry: double record, forged permits and unknown outcomes are TypeErrors', () => {
    const { registry } = clockedRegistry()
    const key = registry.get('k')
    const permit = key.tryAcquire()
    assert.throws(() => key.record(permit, 'toString'), TypeError)
    key.record(permit, 'success')
    assert.throws(() => key.record(permit, 'success'), TypeError, 'second record')
    for (let i = 0; i < 5; i++) {
      assert.throws(() => key.record({ admitted: true, generation: 0, issuedAtMs: 0 }, 'failure'), TypeError)
    }
    const m = key.metrics()
    assert.deepEqual([m.state, m.admitted, m.successes, m.failures, m.stale], ['CLOSED', 1, 1, 0, 0])
    const other = registry.get('other')
    assert.throws(() => other.record({ admitted: true, generation: 0, issuedAtMs: 0 }, 'failure'), TypeError)
    const om = other.metrics()
    assert.ok(om === null || om.failures === 0, 'a forged permit counts nothing on a new key')
  })
})

describe('clock', () => {
  const BAD_READINGS = [
    ['NaN', NaN],
    ['undefined', undefined],
    ['Infinity', Infinity],
    ['a string', '1000'],
    ['a BigInt', 1000n],
    ['a Date', new Date(1000)],
  ]
  const isClockError = (err) => err instanceof TypeError && err.option === 'clock'

  for (const [label, bad] of BAD_READINGS) {
    test(`#12 a clock reading of ${label} is a TypeError naming clock`, async () => {
      let reading = 0
      const breaker = new CircuitBreaker({ name: 'clock', clock: () => reading })
      reading = bad
      for (const method of ['getState', 'tryAcquire', 'isCallPermitted', 'retryAfterMs', 'metrics', 'mode']) {
        assert.throws(() => breaker[method](), isClockError, `${method}()`)
      }
      let called = false
      const { error } = await returnsPromise(
        () =>
          breaker.execute(() => {
            called = true
          }),
        'execute',
      )
      assert.ok(isClockError(error), `execute rejects with a TypeError naming clock, got ${error}`)
      assert.equal(called, false, 'fn is not called')
      reading = 0
      const m = breaker.metrics()
      assert.deepEqual([m.state, m.admitted], ['CLOSED', 0])
    })
  }

  test('#12 Registry: a clock reading that is not a finite number is a TypeError naming clock', async () => {
    for (const [label, bad] of BAD_READINGS) {
      let reading = 0
      const registry = new Registry({ clock: () => reading })
      const key = registry.get('k')
      reading = bad
      for (const method of ['getState', 'tryAcquire', 'retryAfterMs']) {
        assert.throws(() => key[method](), isClockError, `${label}: ${method}()`)
      }
      let called = false
      const { error } = await returnsPromise(
        () =>
          key.execute(() => {
            called = true
          }),
        `${label}: execute`,
      )
      assert.ok(isClockError(error), `${label}: execute rejects with a TypeError naming clock, got ${error}`)
      assert.equal(called, false, `${label}: fn is not called`)
    }
  })

  test('#12 a clock that breaks while a call is in flight: the call settles as fn did and is counted', async () => {
    const clockDown = new Error('clock down')
    const breakages = {
      throws: () => {
        throw clockDown
      },
      'returns NaN': () => NaN,
    }
    for (const [label, broken] of Object.entries(breakages)) {
      for (const result of ['success', 'failure']) {
        let now = 0
        let read = () => now
        const breaker = new CircuitBreaker({ name: 'clock', clock: () => read() })
        const stop = watchWarnings()
        const own = new Error('upstream said 503')
        let settle
        const call = breaker.execute(
          () =>
            new Promise((resolve, reject) => {
              settle = () => (result === 'success' ? resolve('sent') : reject(own))
            }),
        )
        now = 50
        read = broken
        settle()
        const got = await outcome(() => call)
        const seen = await stop()
        read = () => now
        const what = `clock ${label}, fn ${result}`
        if (result === 'success') assert.deepEqual(got, { value: 'sent' }, what)
        else assert.deepEqual(got, { error: own }, what)
        const m = breaker.metrics()
        assert.equal(m.admitted, 1, what)
        assert.equal(result === 'success' ? m.successes : m.failures, 1, what)
        assert.ok(seen.length >= 1, `${what}: a HALFOPEN_CALLBACK_ERROR warning`)
        if (label === 'throws') assert.ok(seen.some((w) => w.cause === clockDown), `${what}: the warning's cause`)
      }
    }
  })
})

describe('isFailure and abort', () => {
  const isFailure = () => {
    throw new Error('isFailure bug')
  }

  test("#9 a throwing isFailure counts a failure and the caller gets fn's error (CircuitBreaker)", async () => {
    const { breaker } = clocked({ isFailure, failureThreshold: 2 })
    const calls = await failingCalls(2, (fn) => breaker.execute(fn))
    assertOwnErrors(calls, 2)
    assert.equal(breaker.metrics().failures, 2)
    assert.equal(breaker.getState(), 'OPEN')
  })

  test("#9 a throwing isFailure counts a failure and the caller gets fn's error (Registry)", async () => {
    const { registry } = clockedRegistry({ isFailure, failureThreshold: 2 })
    const key = registry.get('k')
    const calls = await failingCalls(2, (fn) => key.execute(fn))
    assertOwnErrors(calls, 2)
    assert.equal(key.metrics().failures, 2)
    assert.equal(key.getState(), 'OPEN')
  })

  test('#9 a half-open probe whose isFailure throws frees its slot (CircuitBreaker and Registry)', async () => {
    const targets = {
      CircuitBreaker: () => {
        const { breaker, clock } = clocked({ isFailure, halfOpenMaxAttempts: 1 })
        return { target: breaker, clock }
      },
      Registry: () => {
        const { registry, clock } = clockedRegistry({ isFailure, halfOpenMaxAttempts: 1 })
        return { target: registry.get('k'), clock }
      },
    }
    for (const [kind, make] of Object.entries(targets)) {
      const { target, clock } = make()
      tripByRecord(target)
      clock.now = 30000
      const [call] = await failingCalls(1, (fn) => target.execute(fn))
      assert.equal(call.called, true, `${kind}: the probe ran`)
      assert.equal(call.got, call.own, `${kind}: the caller gets fn's error`)
      const m = target.metrics()
      assert.equal(m.probesInFlight, 0, `${kind}: no probe slot leaked`)
      assert.equal(m.state, 'OPEN', `${kind}: the failed probe reopened the breaker`)
      assert.equal(m.failures, 6, `${kind}: the probe counted as a failure`)
    }
  })

  test('#19 an abort during or after fn does not cancel a call fn has already settled (CircuitBreaker)', async () => {
    {
      const { breaker } = clocked()
      const ac = new AbortController()
      const got = await outcome(() =>
        breaker.execute(
          () => {
            ac.abort(new Error('late'))
            return 'r'
          },
          { signal: ac.signal },
        ),
      )
      assert.deepEqual(got, { value: 'r' }, 'abort inside a synchronous fn')
      const m = breaker.metrics()
      assert.deepEqual([m.successes, m.cancelled], [1, 0])
    }
    {
      const { breaker } = clocked()
      const ac = new AbortController()
      const call = breaker.execute(() => Promise.resolve('r'), { signal: ac.signal })
      ac.abort(new Error('late'))
      assert.deepEqual(await outcome(() => call), { value: 'r' }, 'abort after fn resolved')
      const m = breaker.metrics()
      assert.deepEqual([m.successes, m.cancelled], [1, 0])
    }
  })

  test('#19 an abort during or after fn does not cancel a call fn has already settled (Registry)', async () => {
    const { registry } = clockedRegistry()
    const key = registry.get('k')
    const ac = new AbortController()
    const got = await outcome(() =>
      key.execute(
        () => {
          ac.abort(new Error('late'))
          return 'r'
        },
        { signal: ac.signal },
      ),
    )
    assert.deepEqual(got, { value: 'r' })
    const ac2 = new AbortController()
    const call = key.execute(() => Promise.resolve('r2'), { signal: ac2.signal })
    ac2.abort(new Error('late'))
    assert.deepEqual(await outcome(() => call), { value: 'r2' })
    const m = key.metrics()
    assert.deepEqual([m.successes, m.cancelled], [2, 0])
  })
})

describe('registry', () => {
  test('#10 Registry honours timeoutMs: the call is aborted and counts as a failure', async () => {
    const { registry } = clockedRegistry({ timeoutMs: 20, consecutiveFailures: 1, failureThreshold: null })
    const key = registry.get('slow-partner')
    let signal
    const got = await within(
      key.execute((s) => {
        signal = s
        return new Promise(() => {})
      }),
    )
    assert.ok(!got.pending, 'the call settled')
    assert.ok(got.error instanceof CircuitBreakerTimeoutError, `rejected with ${got.error}`)
    assert.equal(signal?.aborted, true, 'fn was told through its signal')
    assert.equal(key.getState(), 'OPEN')
    assert.equal(key.metrics().failures, 1)
  })

  test('#8 Registry execute settles with signal.reason when aborted, and frees the probe slot', async () => {
    const { registry, clock } = clockedRegistry({ halfOpenMaxAttempts: 1 })
    const key = registry.get('k')
    tripByRecord(key)
    clock.now = 30000
    const ac = new AbortController()
    const reason = new Error('user gave up')
    const call = key.execute(() => new Promise(() => {}), { signal: ac.signal })
    ac.abort(reason)
    const got = await within(call)
    assert.ok(!got.pending, 'the call settled')
    assert.equal(got.error, reason)
    const m = key.metrics()
    assert.deepEqual([m.cancelled, m.probesInFlight, m.state], [1, 0, 'HALF_OPEN'])
    assert.deepEqual(await within(key.execute(() => 'second probe')), { value: 'second probe' })
  })

  test('#8 Registry execute with a signal that is not an AbortSignal rejects with a TypeError', async () => {
    const { registry } = clockedRegistry()
    let called = false
    const got = await returnsPromise(
      () =>
        registry.get('k').execute(
          () => {
            called = true
          },
          { signal: 5 },
        ),
      'execute',
    )
    assert.ok(got.error instanceof TypeError, `rejected with ${got.error}`)
    assert.equal(called, false)
  })

  test('#10 Registry configure refuses options a registry breaker cannot have, naming them', () => {
    const { registry } = clockedRegistry()
    const cases = [
      ['timeoutMs', 10],
      ['isFailure', () => true],
      ['clock', () => 0],
      ['latencyHistogram', true],
      ['name', 'other'],
      ['capacity', 5],
    ]
    for (const [option, value] of cases) {
      assert.throws(
        () => registry.configure('k', { failureThreshold: 2, [option]: value }),
        (err) => err instanceof TypeError && err.option === option,
        `configure with ${option}`,
      )
    }
  })

  test("#15 configure('') works like get('')", () => {
    const { registry } = clockedRegistry()
    registry.configure('', { failureThreshold: 2 })
    const key = registry.get('')
    tripByRecord(key, 2)
    assert.equal(key.getState(), 'OPEN')
  })

  test('#15 has(5), get(5) and restore(undefined) throw a TypeError', () => {
    const { registry } = clockedRegistry()
    assert.throws(() => registry.has(5), TypeError, 'has(5)')
    assert.throws(() => registry.get(5), TypeError, 'get(5)')
    assert.throws(() => registry.restore(undefined), TypeError, 'restore(undefined)')
  })

  test('#11 names that are not well-formed UTF-16 are a TypeError instead of colliding', () => {
    const { registry } = clockedRegistry()
    registry.get('acme\uFFFD').forceOpen()
    for (const name of ['acme\uD800', 'acme\uDBFF', 'acme\uDC00', '\uD83D']) {
      const shown = JSON.stringify(name)
      assert.throws(() => registry.get(name), TypeError, `get(${shown})`)
      assert.throws(() => registry.configure(name, { failureThreshold: 2 }), TypeError, `configure(${shown})`)
      assert.throws(() => new CircuitBreaker({ name }), TypeError, `new CircuitBreaker({ name: ${shown} })`)
    }
    assert.deepEqual(registry.names(), ['acme\uFFFD'])
    assert.equal(registry.get('acme\uFFFD').getState(), 'OPEN')
    assert.equal(registry.get('acme\u{1F600}').getState(), 'CLOSED', 'a surrogate pair is a well-formed name')
  })

  test('#7 a breaker with a call in flight is never evicted', async () => {
    const { registry } = clockedRegistry({ capacity: 1 })
    const permit = registry.get('a').tryAcquire()
    assert.equal(permit.admitted, true)
    let called = false
    const got = await returnsPromise(
      () =>
        registry.get('b').execute(() => {
          called = true
          return 'b'
        }),
      "get('b').execute",
    )
    assert.ok(got.error instanceof RegistryFullError, `rejected with ${got.error}`)
    assert.equal(called, false)
    registry.get('a').record(permit, 'success')
    let m = registry.get('a').metrics()
    assert.deepEqual([m.admitted, m.successes, m.stale], [1, 1, 0])
    registry.restore(registry.toJSON())
    m = registry.get('a').metrics()
    assert.deepEqual([m.admitted, m.successes], [1, 1], 'after restore')
  })

  test('#16 a key that cannot get a breaker because the registry is full says so', async () => {
    const { registry } = clockedRegistry({ capacity: 1 })
    registry.get('a').forceOpen()
    const key = registry.get('b')
    assert.equal(key.isCallPermitted(), false)
    assert.equal(key.retryAfterMs(), Infinity)
    const got = await returnsPromise(() => key.execute(() => 'b'), 'execute')
    assert.ok(got.error instanceof RegistryFullError, `rejected with ${got.error}`)
  })

  test("#extra configure() on an open breaker replaces it with 'close'/'stateChange' events (reason 'reconfigured')", () => {
    const { registry } = clockedRegistry()
    const key = registry.get('k')
    tripByRecord(key)
    assert.equal(key.getState(), 'OPEN')
    const events = []
    for (const name of ['open', 'halfOpen', 'close', 'stateChange']) {
      registry.on(name, (e) => events.push([name, e.name, e.from, e.to, e.reason]))
    }
    registry.configure('k', { failureThreshold: 2 })
    assert.deepEqual(events, [
      ['close', 'k', 'OPEN', 'CLOSED', 'reconfigured'],
      ['stateChange', 'k', 'OPEN', 'CLOSED', 'reconfigured'],
    ])
    assert.equal(key.getState(), 'CLOSED')
    tripByRecord(key, 2)
    assert.equal(key.getState(), 'OPEN', 'the new options apply')
  })

  test('#17 configure() with more distinct names than capacity is a RangeError naming capacity', () => {
    const { registry } = clockedRegistry({ capacity: 2 })
    registry.configure('a', { failureThreshold: 2 })
    registry.configure('b', { failureThreshold: 2 })
    registry.configure('a', { failureThreshold: 3 })
    assert.throws(
      () => registry.configure('c', { failureThreshold: 2 }),
      (err) => err instanceof RangeError && err.option === 'capacity',
    )
  })
})

describe('core counts and metrics', () => {
  /** A breaker on the default options that saw 70,000 successes within one second. */
  function busy() {
    const { breaker, clock } = clocked()
    for (let i = 0; i < 70000; i++) {
      clock.now = i / 70
      breaker.record(breaker.tryAcquire(), 'success')
    }
    return breaker
  }

  test('#13 70,000 successes within one second, then 5 failures, open the breaker', () => {
    const breaker = busy()
    tripByRecord(breaker)
    assert.equal(breaker.getState(), 'OPEN')
  })

  test('#13 window counts are exact beyond 65,535 calls', () => {
    const breaker = busy()
    const m = breaker.metrics()
    assert.deepEqual([m.windowCalls, m.windowFailures, m.successes], [70000, 0, 70000])
  })

  for (const op of ['forceOpen', 'forceClose', 'disable', 'reset']) {
    test(`#14 circuit_state_seconds_total never decreases across ${op}() after the open time passed unseen`, () => {
      const { breaker, clock } = clocked()
      tripByRecord(breaker)
      clock.now = 40000
      const before = stateSeconds(breaker.prometheus())
      breaker[op]()
      const after = stateSeconds(breaker.prometheus())
      for (const state of ['closed', 'half_open', 'open']) {
        assert.ok(after[state] >= before[state], `${state}: ${after[state]} after ${op}(), ${before[state]} before`)
      }
      clock.now = 50000
      const later = stateSeconds(breaker.prometheus())
      for (const state of ['closed', 'half_open', 'open']) {
        assert.ok(later[state] >= after[state], `${state}: ${later[state]} 10 s later, ${after[state]} before`)
      }
    })
  }
})

describe('snapshots', () => {
  const isCorrupt = (err) => err.name === 'SnapshotError' && err.kind === 'corrupt'

  test('#18 a snapshot with counters above 2^53 is refused as corrupt', () => {
    const now = 0
    const options = { name: 'snap', clock: () => now }
    const breaker = new CircuitBreaker(options)
    breaker.record(breaker.tryAcquire(), 'success')

    const edited = breaker.toJSON()
    edited.metrics.counters.admitted = 2 ** 60
    edited.metrics.counters.successes = 2 ** 60
    assert.throws(() => CircuitBreaker.fromJSON(options, edited), isCorrupt, 'admitted = successes = 2^60')

    // Consistent counters just above 2^53, written as exact JSON integers.
    const text = JSON.stringify(breaker.toJSON())
      .replace('"admitted":1,', '"admitted":9007199254740993,')
      .replace('"successes":1,', '"successes":9007199254740993,')
    assert.match(text, /"admitted":9007199254740993,/)
    assert.throws(() => CircuitBreaker.fromJSON(options, text), isCorrupt, 'admitted = successes = 2^53 + 1')

    assert.equal(CircuitBreaker.fromJSON(options, breaker.toJSON()).metrics().successes, 1, 'the unedited one restores')
  })

  test("#20 restoring a half-open snapshot gives up the saving process's probes", () => {
    let now = 0
    const options = { name: 'snap', clock: () => now }
    const breaker = new CircuitBreaker(options)
    tripByRecord(breaker)
    now = 30000
    for (let i = 0; i < 3; i++) assert.equal(breaker.tryAcquire().admitted, true, `probe ${i}`)
    assert.equal(breaker.tryAcquire().admitted, false)
    const restored = CircuitBreaker.fromJSON(options, breaker.toJSON())
    assert.equal(restored.getState(), 'HALF_OPEN')
    assert.equal(restored.tryAcquire().admitted, true, 'a probe is admitted at once')
  })

  test('#21 an object with 100,000 fields is refused at once, not in quadratic time', () => {
    let text = '{'
    for (let i = 0; i < 100000; i++) text += `"k${i}":0,`
    text += '"version":2}'
    const started = Date.now()
    const malformed = (err) => err.name === 'SnapshotError' && err.kind === 'malformed'
    assert.throws(() => CircuitBreaker.fromJSON({ name: 'many' }, text), malformed)
    assert.throws(() => new Registry({}).restore(text), malformed)
    // Not a timing test of the code: the quadratic reader took 10 s here.
    assert.ok(Date.now() - started < 5000, 'refused well within the time a quadratic scan takes')
  })

  test('#21 a newer registry snapshot is newer_version, whatever else it holds', () => {
    const newer = (err) => err.name === 'SnapshotError' && err.kind === 'newer_version'
    assert.throws(() => new Registry({}).restore('{"version":4,"whatever":[]}'), newer)
    assert.throws(() => new Registry({ capacity: 1 }).restore(`{"version":4,"breakers":[${'0,'.repeat(50)}0]}`), newer)
  })

  test('#21 snapshot text that is not valid Unicode is malformed, not a name changed to U+FFFD', () => {
    const source = new Registry({ clock: () => 0 })
    source.get('lone').record(source.get('lone').tryAcquire(), 'success')
    const text = JSON.stringify(source.toJSON()).replace('"lone"', '"lone\\ud800"')
    const malformed = (err) => err.name === 'SnapshotError' && err.kind === 'malformed'
    assert.throws(() => new Registry({}).restore(text), malformed, 'an escaped lone surrogate')
    const rawText = JSON.stringify(source.toJSON()).replace('"lone"', `"lone${String.fromCharCode(0xd800)}"`)
    assert.throws(() => new Registry({}).restore(rawText), malformed, 'a raw lone surrogate')
    const breakerText = JSON.stringify(new CircuitBreaker({ name: 'b' }).toJSON()).replace('"closed"', `"closed${String.fromCharCode(0xdc00)}"`)
    assert.throws(() => CircuitBreaker.fromJSON({ name: 'b' }, breakerText), malformed)
  })

  test('#21 a snapshot object whose toJSON gives nothing is malformed, and says so', () => {
    const noForm = (err) => err.name === 'SnapshotError' && err.kind === 'malformed' && /no JSON form/.test(err.message)
    assert.throws(() => CircuitBreaker.fromJSON({ name: 'b' }, { toJSON: () => undefined }), noForm)
    assert.throws(() => new Registry({}).restore({ toJSON: () => undefined }), noForm)
  })

  test('#21 a forced open of any length saves and restores; forged times of 2^53 µs and more are corrupt', () => {
    const now = 0
    const options = { name: 'long', clock: () => now }
    const breaker = new CircuitBreaker(options)
    breaker.forceOpen(Number.MAX_SAFE_INTEGER)
    const saved = breaker.toJSON()
    assert.ok(Number.isSafeInteger(saved.deadline_in_us), `deadline_in_us ${saved.deadline_in_us}`)
    assert.equal(CircuitBreaker.fromJSON(options, saved).getState(), 'OPEN')
    const corrupt = (err) => err.name === 'SnapshotError' && err.kind === 'corrupt'
    const text = JSON.stringify(new CircuitBreaker(options).toJSON()).replace(/"time_in_us":\[\d+/, '"time_in_us":[18446744073709551615')
    assert.match(text, /18446744073709551615/)
    assert.throws(() => CircuitBreaker.fromJSON(options, text), corrupt)
  })

  test('#extra a huge registry snapshot is refused without decoding it (no memory spike)', () => {
    const source = new Registry({ clock: () => 0 })
    source.get('seed').record(source.get('seed').tryAcquire(), 'success')
    const snapshot = source.toJSON()
    const entry = JSON.stringify(snapshot.breakers[0][1])
    const parts = new Array(200000)
    for (let i = 0; i < parts.length; i++) parts[i] = `["breaker-${i}",${entry}]`
    const text = `{"version":${snapshot.version},"evictions":0,"breakers":[${parts.join(',')}]}`
    parts.length = 0
    assert.ok(text.length > 60e6, `${(text.length / 1e6).toFixed(0)} MB of JSON`)

    const target = new Registry({ capacity: 10, clock: () => 0 })
    const rssBefore = process.memoryUsage().rss
    assert.throws(() => target.restore(text), (err) => err.name === 'SnapshotError' && err.kind === 'corrupt')
    const grown = process.memoryUsage().rss - rssBefore
    // The breakers are counted before any is decoded: the native half's copy
    // of the text is all it costs (decoding it first cost many times the
    // text). The wasm package's copy stays: a module's memory never shrinks.
    const copies = process.env.HALFOPEN_PACKAGE ? 2.5 : 2
    assert.ok(grown < copies * text.length, `rss grew by ${(grown / 2 ** 20).toFixed(0)} MB for ${(text.length / 2 ** 20).toFixed(0)} MB of text`)
  })
})

describe('prom-client', () => {
  test('#extra the prom-client collector exposes every metric family prometheus() has', async () => {
    const client = require('prom-client')
    const { collectDefaultBreakerMetrics } = require('../prom-client.js')
    const { breaker } = clocked({ latencyHistogram: true })
    await breaker.execute(() => 'ok')
    await outcome(() => breaker.execute(fail))
    const { registry } = clockedRegistry()
    await registry.get('a').execute(() => 'ok')
    await outcome(() => registry.get('b').execute(fail))
    for (const [label, source] of [
      ['CircuitBreaker', breaker],
      ['Registry', registry],
    ]) {
      const prom = new client.Registry()
      collectDefaultBreakerMetrics(source, prom)
      const theirs = families(await prom.metrics())
      const missing = [...families(source.prometheus())].filter((name) => !theirs.has(name))
      assert.deepEqual(missing, [], `${label}: families missing from prom-client`)
    }
  })
})

describe('issue 21: inherited accessors and option getters', () => {
  test('an accessor on Object.prototype named like an optional metric neither stands in for it nor runs', () => {
    const names = ['concurrencyLimit', 'latencyP50Ms', 'meanTimeOpenMs']
    let ran = 0
    for (const name of names) {
      Object.defineProperty(Object.prototype, name, {
        get: () => 'polluted',
        set: () => {
          ran += 1
          throw new Error('setter ran')
        },
        configurable: true,
      })
    }
    try {
      const m = new CircuitBreaker({ name: 'm' }).metrics()
      for (const name of names) {
        assert.ok(Object.hasOwn(m, name), `${name} is the metrics' own`)
        assert.equal(m[name], null)
      }
      const keyed = new Registry({}).get('k')
      keyed.record(keyed.tryAcquire(), 'success')
      assert.equal(keyed.metrics().latencyP50Ms, null)
      assert.equal(ran, 0)
    } finally {
      for (const name of names) delete Object.prototype[name]
    }
  })

  test("a Registry reads each option's getter once: a name configured later gets the same options", async () => {
    let reads = 0
    const options = {
      get failureThreshold() {
        reads += 1
        return reads === 1 ? 3 : 50
      },
    }
    const registry = new Registry(options)
    registry.configure('later', { openTimeoutMs: 1000 })
    const fail = () => registry.get('later').execute(async () => {
      throw new Error('down')
    })
    for (let i = 0; i < 3; i++) await fail().catch(() => {})
    assert.equal(registry.get('later').getState(), 'OPEN', 'opened after 3 failures, the first reading')
    assert.equal(reads, 1)
  })

  test('a name longer than 1024 bytes of UTF-8 is a RangeError naming name, wherever a name is given', () => {
    const long = 'é'.repeat(513) // 1026 bytes, 513 UTF-16 units
    const refused = (err) => err instanceof RangeError && err.option === 'name' && /1024/.test(err.message)
    assert.throws(() => new CircuitBreaker({ name: long }), refused)
    assert.throws(() => new Registry({}).get(long), refused)
    assert.throws(() => new Registry({}).configure(long, {}), refused)
    assert.throws(() => new RetentionQueue({ name: long, concurrencyLimit: 1 }), refused)
    assert.equal(new CircuitBreaker({ name: 'é'.repeat(512) }).name.length, 512)
    assert.equal(new Registry({}).get('😀'.repeat(256)).getState(), 'CLOSED')
  })
})

describe('issue 21: typed errors', () => {
  test("forceOpen('5') is a TypeError, forceOpen(-1) a RangeError", () => {
    const b = new CircuitBreaker({ name: 'f' })
    assert.throws(() => b.forceOpen('5'), (e) => e instanceof TypeError && e.option === 'ms')
    assert.throws(() => b.forceOpen(-1), (e) => e instanceof RangeError && e.option === 'ms')
    assert.throws(() => new Registry({}).get('k').forceOpen('5'), TypeError)
  })

  test("a capacity the package cannot hold names the package's own bounds", () => {
    for (const capacity of [0, 1.5, 2 ** 40]) {
      assert.throws(
        () => new Registry({ capacity }),
        (e) => e instanceof RangeError && e.option === 'capacity' && (process.env.HALFOPEN_PACKAGE ? /1048576/ : /1 and/).test(e.message),
      )
    }
  })
})

test('timeoutMs: null is no timeout, as absent (fn gets no signal)', async () => {
  const b = new CircuitBreaker({ name: 'n', timeoutMs: null })
  assert.equal(await b.execute((signal) => signal), undefined)
  assert.throws(() => new CircuitBreaker({ name: 'n', timeoutMs: 'soon' }), (e) => e instanceof TypeError && e.option === 'timeoutMs')
})

test('a refusal says the state it was made in, even when a listener of the transition it observed changes the breaker', async () => {
  let t = 0
  const b = new CircuitBreaker({ name: 'refusal-state', concurrencyLimit: 1, clock: () => t })
  b.execute(() => new Promise(() => {})) // holds the one slot
  b.forceOpen(100)
  t = 200
  // The next call observes open -> half-open, then the full limit refuses it; the listener opens the breaker again.
  b.once('stateChange', () => b.forceOpen())
  const seen = []
  b.on('reject', (e) => seen.push([e.state, e.reason]))
  const err = await b.execute(() => 'ran').catch((e) => e)
  assert.deepEqual([err.state, err.reason], ['HALF_OPEN', 'limit_full'])
  assert.deepEqual(seen, [['HALF_OPEN', 'limit_full']])
  assert.equal(b.getState(), 'OPEN')
})

test('calls past their deadline whose timer was lost time out before the next call is asked: it is counted once', async () => {
  const { performance } = require('node:perf_hooks')
  const b = new CircuitBreaker({ name: 'overdue', timeoutMs: 20 })
  // As in a workerd request that ended: the call's timer never fires.
  const realSetTimeout = global.setTimeout
  global.setTimeout = () => 0
  let hung
  try {
    hung = b.execute(() => new Promise(() => {})).catch((e) => e)
  } finally {
    global.setTimeout = realSetTimeout
  }
  b.forceOpen()
  const before = b.metrics().rejections
  const deadline = performance.now() + 20
  while (performance.now() <= deadline) {} // its deadline passes (the clock's own answer)
  let events = 0
  b.on('reject', () => (events += 1))
  assert.equal(await b.execute(() => 'ran', { fallback: (r) => r.reason }), 'held')
  assert.equal(b.metrics().rejections - before, 1, 'one refused call, one rejection')
  assert.equal(events, 1)
  assert.equal((await hung).name, 'CircuitBreakerTimeoutError')
  assert.equal(b.metrics().inFlight, 0)
})
