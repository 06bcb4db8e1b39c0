'use strict'
// The packed values' codes are written once, in src/wire.rs: lib/wire.js
// decodes with the same ones the native half in use (the addon, or the
// WebAssembly module under HALFOPEN_BACKEND=wasm) says it encodes with.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const native = require('../native.js')
const wire = require('../lib/wire.js')

test(`lib/wire.js decodes with the codes the ${native.backend} half encodes with`, () => {
  assert.deepEqual({ ...native.wireCodes() }, wire.CODES)
  assert.deepEqual(wire.OUTCOMES.map((name) => wire.OUTCOME_CODES[name]), [0, 1, 2, 3])
  for (const [name, code] of Object.entries({ SUCCESS: 'success', FAILURE: 'failure', IGNORED: 'ignored', CANCELLED: 'cancelled' })) {
    assert.equal(wire.OUTCOMES[wire[name]], code)
  }
  assert.equal(wire.CODES.licenceKinds[wire.ADMIT], 'admit')
  assert.equal(wire.CODES.licenceKinds[wire.REJECT], 'reject')
})

test('the packed retention values decode to what they say', () => {
  const { NativeDispatcher } = native
  const d = new NativeDispatcher({ failureThreshold: 1, concurrencyLimit: 1 }, false, {})
  const first = wire.submitted(d.submit(10, 0))
  assert.deepEqual(first, { status: 'send', seq: 0, events: false })
  assert.deepEqual(wire.submitted(d.submit(10, 0)), { status: 'retained', seq: 1, events: false })
  // The failure trips the breaker: a transition event waits.
  assert.deepEqual(wire.reportedOf(d.report(0, wire.FAILURE, 1)), { result: 'retained', events: true })
  d.takeEvents()
  assert.deepEqual(wire.reportedOf(d.report(0, wire.SUCCESS, 1)), { result: 'unknown', events: false })
  assert.deepEqual(wire.nextOf(d.next(2)), { seqs: [], events: false })
})

test("a registry name's rejection carries its whole refusal in one number", () => {
  const { NativeBreaker, NativeRegistry } = native
  const options = { failureThreshold: 1, openTimeoutMs: 30000.5, halfOpenMaxAttempts: 1, concurrencyLimit: 1 }
  const r = new NativeRegistry(options, 10)
  // A single breaker driven alike: its code's retry time is the same (while
  // closed: no jitter).
  const b = new NativeBreaker(options, false)
  const both = (now) => [wire.registryRefusalOf(r.acquire('a', now)), wire.retryOf(b.acquire(now))]
  // Closed with its one slot taken: limit_full, closed.
  const first = r.acquire('a', 0)
  assert.equal(b.acquire(0), first)
  const [refusal, retry] = both(1)
  assert.deepEqual(refusal, [0, retry, 'limit_full', false])
  assert.ok(retry > 0)
  // The failure trips it (a transition waits, taken here): open.
  assert.equal(r.record('a', first, 0, wire.FAILURE, 2), true)
  r.takeTransitions()
  // (Open for 30000.5 ms and the breaker's own jitter: the hint is the core's.)
  for (const now of [2, 1002.25]) {
    const hint = r.retryAfter('a', now)
    assert.ok(hint > 20000, `${hint}`)
    assert.deepEqual(wire.registryRefusalOf(r.acquire('a', now)), [2, hint, 'open', false])
  }
  // A probe out: probes_busy, half-open; the transition to half-open waits.
  assert.ok(r.acquire('a', 40000) >= wire.TRANSITION_PENDING)
  const [gauge, probeRetry, reason, pending] = wire.registryRefusalOf(r.acquire('a', 40001))
  assert.deepEqual([gauge, reason, pending], [1, 'probes_busy', true])
  assert.ok(probeRetry > 0)
  r.takeTransitions()
  // Held open until released: Infinity, held.
  r.manual('b', 'force_open', 0)
  r.takeTransitions()
  assert.deepEqual(wire.registryRefusalOf(r.acquire('b', 1)), [2, Infinity, 'held', false])
  // Past 2^47 µs (4.46 years) the code does not hold the time exactly: the
  // key asks for it (a hostile review found it cut to 2^47 µs).
  r.manual('c', 'force_open', 0, 1e12)
  r.takeTransitions()
  const [longGauge, long, longReason] = wire.registryRefusalOf(r.acquire('c', 1))
  assert.deepEqual([longGauge, longReason], [2, 'open'])
  assert.ok(Number.isNaN(long))
  // Microseconds to milliseconds as src/time.rs writes them.
  assert.equal(wire.registryRefusalOf(-1 - (32 * 123456789 + 16 + 4 * 2 + 1))[1], 123456.789)
  // The nearest double to µs / 1000, as a breaker's `retryOf` reads it (a
  // hostile review found 31.701999999999998 for 31702 µs: 31 + 0.702).
  for (let us = 0; us < 200000; us += 7) {
    assert.equal(wire.registryRefusalOf(-1 - 32 * us)[1], wire.retryOf(-1 - us / 1000), `${us} µs`)
  }
  assert.equal(wire.registryRefusalOf(-1 - 32 * 31702)[1], 31.702)
})

test('sequence numbers past 2^51 never cross inexactly: such a snapshot is refused, the last one refuses new messages', () => {
  const { RetentionQueue, SnapshotError } = require(process.env.HALFOPEN_PACKAGE || '..')
  const options = { name: 'q', clock: () => 0, concurrencyLimit: 1, maxMessages: 2, overflow: 'dropOldest' }
  const at = (n) => Object.assign(new RetentionQueue(options).toJSON(), { next_seq: n, counters: [n, 0, n, n, 0, 0, 0] })
  assert.throws(() => RetentionQueue.fromJSON(options, at(2 ** 51 + 1), []), (err) => err instanceof SnapshotError && err.kind === 'corrupt')
  const last = RetentionQueue.fromJSON(options, at(2 ** 51), [])
  assert.deepEqual(last.submit('A'), { status: 'refused' })
  assert.equal(last.stats().refused, 1) // counted as a refusal, as a full queue counts one
  const below = RetentionQueue.fromJSON(options, at(2 ** 51 - 1), [])
  assert.deepEqual(below.submit('A'), { status: 'send', seq: 2 ** 51 - 1 })
  assert.deepEqual(below.submit('B'), { status: 'refused' })
})

test("a Registry key's refusal past 4.46 years says its exact retry time everywhere", async () => {
  const { CircuitBreaker, Registry } = require(process.env.HALFOPEN_PACKAGE || '..')
  for (const ms of [1e12, 2 ** 53 - 1, 140737488355.329, 140737488355.327]) {
    const clock = () => 5
    const registry = new Registry({ clock })
    const key = registry.get('k')
    key.forceOpen(ms)
    const single = new CircuitBreaker({ name: 'k', clock })
    single.forceOpen(ms)
    const expected = single.tryAcquire().retryAfterMs
    assert.equal(key.tryAcquire().retryAfterMs, expected, `${ms}`)
    assert.equal(key.retryAfterMs(), single.retryAfterMs())
    const err = await key.execute(async () => 1).catch((e) => e)
    assert.equal(err.retryAfterMs, expected)
    const refusal = await registry.get('k').execute(async () => 1, { fallback: (r) => r })
    assert.equal(refusal.retryAfterMs, expected)
  }
})
