// Every function of the interface once, from Node through jco: what each
// returns, and that errors are values (jco throws them as ComponentError
// with the WIT error as `payload`), never a trap.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { breaker as wit } from '../dist/js/halfopen.js'

const S = 1_000_000n // one second in µs

/** The WIT error a call threw. */
function refusal(f) {
  try {
    f()
  } catch (e) {
    assert.ok('payload' in e, `expected a component error, got ${e}`)
    return e.payload
  }
  assert.fail('expected an error')
}

/** A breaker tripped at 0..4 s by five failures (seed 000). */
function tripped() {
  const b = wit.Breaker.create(wit.whatsappGateway(), true)
  for (let t = 0n; t < 5n; t++) {
    const a = b.tryAcquire(t * S)
    b.record(a.decision.val, 'failure', t * S)
  }
  return b
}

test('presets are the core defaults, and an invalid config is a value naming field and problem', () => {
  assert.deepEqual(wit.defaultConfig(), wit.whatsappGateway())
  const webhook = wit.partnerWebhook()
  assert.equal(webhook.consecutiveFailures, 5)
  assert.equal(webhook.openTimeout, 10n * S)
  const bad = refusal(() => wit.Breaker.create({ ...wit.defaultConfig(), failureThreshold: 0 }, false))
  assert.deepEqual([bad.field, bad.problem], ['failure-threshold', 'zero'])
  assert.match(bad.message, /failure_threshold/)
  const nan = refusal(() => wit.Breaker.create({ ...wit.defaultConfig(), backoffFactor: Number.NaN }, false))
  assert.deepEqual([nan.field, nan.problem], ['backoff-factor', 'not-finite'])
})

test('a breaker: acquire, record, state, retry, mode, counts, metrics, timeouts', () => {
  const b = tripped()
  assert.equal(b.state(5n * S), 'open')
  assert.equal(b.retryAfter(5n * S), 29n * S)
  assert.deepEqual(b.mode(5n * S), { tag: 'normal' })
  assert.equal(b.counts(5n * S).consecutiveFailures, 5)
  const m = b.metrics(5n * S)
  assert.equal(m.failures, 5n)
  assert.equal(m.opens, 1n)
  assert.equal(m.latency.count, 5n)
  assert.equal(b.pollTimeout(), 34n * S)
  const rejected = b.tryAcquire(6n * S).decision
  assert.deepEqual(rejected, { tag: 'err', val: { state: 'open', reason: 'open', retryAfter: 28n * S } })
  const t = b.handleTimeout(34n * S)
  assert.deepEqual([t.from, t.to, t.reason, t.at], ['open', 'half-open', 'open-timeout', 34n * S])
  const probe = b.tryAcquire(35n * S).decision.val
  assert.equal(probe.issuedAt(), 35n * S)
  assert.equal(b.record(probe, 'success', 36n * S), undefined)
})

test('a permit is reported once: record takes it; another breaker refuses it; a dropped one counts as cancelled', () => {
  const a = wit.Breaker.create(wit.defaultConfig(), false)
  const other = wit.Breaker.create(wit.defaultConfig(), false)
  const permit = a.tryAcquire(0n).decision.val
  a.record(permit, 'success', 1n)
  assert.throws(() => a.record(permit, 'success', 2n))
  assert.equal(a.metrics(3n).successes, 1n)

  const foreign = a.tryAcquire(4n).decision.val
  assert.equal(refusal(() => other.record(foreign, 'failure', 5n)), 'other-owner')
  assert.equal(a.metrics(6n).cancelled, 1n, 'reported to its own breaker as cancelled')
  assert.equal(other.metrics(6n).admitted, 0n)
  assert.equal(a.counts(6n).inFlight, 0)

  const dropped = a.tryAcquire(7n).decision.val
  assert.equal(a.counts(7n).inFlight, 1)
  dropped[Symbol.dispose]()
  assert.equal(a.counts(8n).inFlight, 0)
  assert.equal(a.metrics(8n).cancelled, 2n)
})

test('manual operations return their transitions', () => {
  const b = wit.Breaker.create(wit.defaultConfig(), false)
  assert.deepEqual(b.forceOpen(0n, 60n * S).map((t) => t.reason), ['forced-open'])
  assert.deepEqual(b.mode(1n), { tag: 'forced-open', val: 60n * S })
  assert.deepEqual(b.release(2n).map((t) => t.reason), ['released'])
  assert.deepEqual(b.disable(3n).map((t) => t.to), ['closed'])
  assert.deepEqual(b.mode(4n), { tag: 'disabled' })
  assert.deepEqual(b.forceClose(5n).length, 0)
  assert.deepEqual(b.reset(6n).length, 0)
})

test('snapshots: bytes and JSON, static restore and in-place load; corrupt ones are values', () => {
  const b = tripped()
  const bytes = b.snapshot(10n * S)
  const json = b.snapshotJson(10n * S)
  assert.equal(JSON.parse(json).phase, 'open')
  const config = wit.whatsappGateway()
  for (const r of [wit.Breaker.restore(config, false, bytes, 0n, 'ignored'), wit.Breaker.restoreJson(config, false, json, 0n, 'counted')]) {
    assert.equal(r.state(0n), 'open')
    assert.equal(r.retryAfter(0n), 24n * S)
  }
  // On the same clock the 20 s since the snapshot count; on another they do not.
  assert.equal(wit.Breaker.restoreJson(config, false, json, 30n * S, 'counted').retryAfter(30n * S), 4n * S)
  assert.equal(wit.Breaker.restore(config, false, bytes, 30n * S, 'ignored').retryAfter(30n * S), 24n * S)
  const fresh = wit.Breaker.create(config, false)
  fresh.load(bytes, 100n, 'ignored')
  assert.equal(fresh.state(100n), 'open')
  fresh.loadJson(json, 200n, 'counted')
  assert.equal(fresh.metrics(200n).failures, 5n)
  assert.deepEqual(refusal(() => fresh.load(new Uint8Array([2, 255]), 0n, 'ignored')).tag, 'malformed')
  assert.deepEqual(refusal(() => fresh.loadJson('{"version": 9}', 0n, 'ignored')), { tag: 'newer-version', val: 9 })
  const other = { ...config, failureThreshold: 7 }
  assert.deepEqual(refusal(() => wit.Breaker.restore(other, false, bytes, 0n, 'ignored')), { tag: 'config-mismatch' })
  const text = b.prometheus('gateway "a"', 10n * S)
  assert.match(text, /circuit_state\{name="gateway \\"a\\""\} 2/)
  assert.match(text, /circuit_state_seconds_total\{name="gateway \\"a\\"",state="closed"\} 4/)
})

test('a registry: one breaker per name, bounded, with everything a breaker has', () => {
  assert.deepEqual(refusal(() => wit.Registry.create(wit.defaultConfig(), 0)), { tag: 'capacity' })
  const r = wit.Registry.create(wit.defaultConfig(), 2)
  const partner = { ...wit.partnerWebhook() }
  assert.equal(r.configure('partner', partner, 0n), undefined)
  for (let t = 0n; t < 5n; t++) {
    const a = r.tryAcquire('partner', t)
    const done = r.record(a.decision.val, 'failure', t)
    if (t === 4n) assert.deepEqual([done.name, done.transition.to], ['partner', 'open'])
  }
  assert.equal(r.state('partner', 5n), 'open')
  assert.equal(r.state('nobody', 5n), undefined)
  assert.equal(r.retryAfter('partner', 5n), 10n * S - 1n)
  assert.deepEqual(r.mode('partner', 5n), { tag: 'normal' })
  assert.equal(r.counts('partner', 5n).consecutiveFailures, 5)
  assert.equal(r.metrics('partner', 5n).failures, 5n)
  assert.equal(r.pollTimeout('partner'), 10n * S + 4n)
  assert.equal(r.handleTimeout('partner', 10n * S + 4n).to, 'half-open')
  assert.deepEqual(r.forceOpen('gateway', 20n * S, undefined).map((t) => t.to), ['open'])
  assert.deepEqual(r.release('gateway', 21n * S).map((t) => t.to), ['half-open'])
  assert.deepEqual(r.disable('gateway', 22n * S).map((t) => t.to), ['closed'])
  assert.deepEqual(r.forceClose('gateway', 23n * S).length, 0)
  assert.deepEqual(r.reset('gateway', 24n * S).length, 0)
  assert.deepEqual(r.names().sort(), ['gateway', 'partner'])
  assert.equal(r.len(), 2)
  // Both busy: a call in flight on each, so neither can be evicted.
  const held = [r.tryAcquire('gateway', 25n * S).decision.val, r.tryAcquire('partner', 25n * S).decision.val]
  assert.deepEqual(refusal(() => r.tryAcquire('third', 25n * S)), { tag: 'full' })
  for (const p of held) r.record(p, 'success', 26n * S)
  assert.equal(r.tryAcquire('third', 27n * S).decision.tag, 'ok')
  assert.equal(r.evictions(), 1n)
  assert.match(r.prometheus(28n * S), /circuit_registry_breakers 2/)
  const json = r.snapshotJson(28n * S)
  const bytes = r.snapshot(28n * S)
  const copy = wit.Registry.create(wit.defaultConfig(), 2)
  copy.configure('partner', partner, 0n)
  assert.deepEqual(copy.restore(bytes, 0n, 'ignored').map((t) => t.name).sort(), copy.names().filter((n) => copy.state(n, 0n) !== 'closed').sort())
  copy.restoreJson(json, 0n, 'counted')
  assert.deepEqual(copy.names().sort(), r.names().sort())
  assert.equal(refusal(() => copy.restoreJson('[]', 0n, 'ignored')).tag, 'malformed')
  assert.equal(refusal(() => copy.configure('x', { ...partner, jitter: 2 }, 0n)).tag, 'config')
})

test('a dispatcher: submit, next, report, events, stats, metrics, snapshots, errors as values', () => {
  const partner = { ...wit.partnerWebhook(), concurrencyLimit: { tag: 'fixed', val: 1 } }
  const retention = { overflow: 'reject', probe: 'oldest', maxMessages: 3, maxBytes: undefined, maxAttempts: 2, maxAge: undefined, releaseRate: undefined }
  const missing = refusal(() => wit.Dispatcher.create(wit.partnerWebhook(), retention))
  assert.deepEqual([missing.tag, missing.val.field, missing.val.problem], ['retention', 'release-rate', 'missing'])
  assert.equal(refusal(() => wit.Dispatcher.create({ ...partner, jitter: 2 }, retention)).tag, 'config')
  const d = wit.Dispatcher.create(partner, retention)
  assert.deepEqual(d.submit(10n, 0n), { tag: 'send', val: 0n })
  assert.deepEqual(d.submit(20n, 0n), { tag: 'retained', val: 1n })
  assert.deepEqual(d.submit(30n, 0n), { tag: 'retained', val: 2n })
  assert.equal(d.submit(1n, 0n), undefined, 'refused: max-messages')
  assert.deepEqual([...d.next(0n)], [], 'lists of u64 come as BigUint64Array')
  assert.equal(d.report(0n, 'failure', S), 'retained')
  assert.deepEqual([...d.next(S)], [0n])
  assert.equal(d.report(0n, 'failure', 2n * S), 'dead')
  assert.equal(d.report(0n, 'success', 2n * S), 'unknown')
  assert.deepEqual(d.takeEvents(), [{ tag: 'dead', val: { seq: 0n, reason: 'attempts', attempts: 2 } }])
  assert.deepEqual([...d.next(2n * S)], [1n])
  assert.equal(d.state(2n * S), 'closed')
  assert.deepEqual([...d.held()], [2n, 1n])
  const stats = d.stats()
  assert.deepEqual([stats.retained, stats.inFlight, stats.bytes, stats.refused, stats.dead, stats.sent], [1n, 1n, 50n, 1n, 1n, 3n])
  assert.equal(d.metrics(2n * S).failures, 2n)
  assert.match(d.prometheus('partner', 2n * S), /circuit_retained_messages\{name="partner"\} 1/)
  d.forceOpen(3n * S, 5n * S)
  assert.deepEqual(d.takeEvents().map((e) => [e.tag, e.val.to, e.val.reason]), [['transition', 'open', 'forced-open']])
  assert.equal(d.pollTimeout(), 8n * S)
  d.handleTimeout(8n * S)
  assert.equal(d.takeEvents()[0].val.to, 'half-open')
  d.release(9n * S)
  // Restored: the send in flight (1) is retained again, before 2.
  const held = d.held()
  const copy = wit.Dispatcher.restoreJson(partner, retention, d.snapshotJson(9n * S), held, 9n * S, 'counted')
  assert.deepEqual([...copy.held()], [1n, 2n])
  const again = wit.Dispatcher.restore(partner, retention, d.snapshot(9n * S), held, 9n * S, 'ignored')
  assert.equal(again.stats().retained, 2n)
  assert.equal(refusal(() => wit.Dispatcher.restore(partner, retention, d.snapshot(9n * S), [2n], 9n * S, 'ignored')).tag, 'corrupt')
  assert.equal(refusal(() => wit.Dispatcher.restoreJson(partner, retention, '{', [], 0n, 'ignored')).tag, 'malformed')
})
