'use strict'
// Runs the group protocol's conformance cases (tests/conformance/group/;
// format: tests/conformance/README.md, "The group protocol") against the
// native addon: each simulated process is a `CircuitBreaker` on the case's
// clock with the package's own `GroupLink`, whose exchanges the steps make
// (`_exchange`, as its timer would) instead of its timer, through a client
// that runs the Redis script's arguments on the core's reference store
// (`NativeGroupMemoryStore`) at the store's clock. Unknown keys or ops fail.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { backend, CircuitBreaker, Registry, RetentionQueue } = require('..')
const { NativeGroupMemoryStore } = require('../native.js')
const { readRaw } = require('../lib/clock.js')
const { COMMAND, GroupLink, linkOf } = require('../lib/group.js')
const { conformance } = require('./conformance-runner.js')

const DIR = path.join(__dirname, '..', '..', 'tests', 'conformance', 'group')
const { options, checkKeys, checkRetry, checkTransitions, checkMetrics, COUNTS, STATE } = conformance({
  CircuitBreaker,
  Registry,
  RetentionQueue,
  assert,
})

/** A link whose exchanges the steps make: no timer. */
class SteppedLink extends GroupLink {
  _schedule() {}
}

const GROUP_OPTIONS = {
  flush_interval_ms: 'flushIntervalMs',
  quorum: 'quorum',
  lease_ms: 'leaseMs',
  member_ttl_ms: 'memberTtlMs',
  store_timeout_ms: 'storeTimeoutMs',
}
const STEP_KEYS = {
  acquire: ['permit', 'rejected', 'transition'],
  record: ['permit', 'outcome', 'transition'],
  call: ['outcome', 'duration_ms', 'repeat', 'transition', 'transitions'],
  expect: ['state', 'retry_after_ms', 'mode', 'counts', 'poll_timeout_ms', 'metrics', 'group', 'store'],
  exchange: ['due', 'lost', 'transition', 'transitions'],
  group_force_open: ['for_ms', 'transition', 'transitions'],
  group_force_close: ['transition', 'transitions'],
  group_reset: ['transition', 'transitions'],
  store_restart: [],
}

/** The case's processes around one store. */
function build(c) {
  checkKeys(c.group, ['processes', 'clocks_ms', ...Object.keys(GROUP_OPTIONS)], 'group')
  const n = c.group.processes
  assert.ok(Number.isInteger(n) && n >= 1 && n <= 16, 'group.processes: 1 to 16')
  const offsets = c.group.clocks_ms || Array(n).fill(0)
  assert.equal(offsets.length, n, 'group.clocks_ms: one per process')
  const run = { at: 0, store: new NativeGroupMemoryStore(), lost: undefined, calls: 0, processes: [] }
  // The client: the script's call on the store at the store's clock; a
  // request `lost` never reaches it, an answer `lost` never comes back.
  const client = {
    defineCommand() {},
    [COMMAND](keys, flat) {
      run.calls += 1
      if (run.lost === 'request') return Promise.reject(new Error('the request was lost'))
      const reply = run.store.exchange(flat.slice(keys), run.at)
      if (run.lost === 'answer') return Promise.reject(new Error('the answer was lost'))
      return Promise.resolve(reply)
    },
  }
  const group = { redis: client, name: 'conformance' }
  const SPECIAL = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity }
  for (const [key, option] of Object.entries(GROUP_OPTIONS)) {
    const value = c.group[key]
    if (value !== undefined) group[option] = typeof value === 'string' && value in SPECIAL ? SPECIAL[value] : value
  }
  for (let i = 0; i < n; i++) {
    const p = { seen: [], events: [] }
    p.breaker = new CircuitBreaker(options(c.config, () => run.at + offsets[i]))
    p.breaker.on('stateChange', (t) => p.seen.push(t))
    p.breaker.on('groupDegraded', () => p.events.push('degraded'))
    p.breaker.on('groupRecovered', () => p.events.push('recovered'))
    p.link = new SteppedLink(p.breaker, group, false, (i + 1).toString(16).padStart(16, '0'))
    run.processes.push(p)
  }
  return run
}

async function step(run, s, permits) {
  const keys = STEP_KEYS[s.op]
  if (keys === undefined) throw new Error(`unknown op ${s.op}`)
  checkKeys(s, ['op', 'at', 'process', 'events', ...keys], `step ${s.op}`)
  if (s.at !== undefined) run.at = s.at
  if (s.op === 'store_restart') {
    assert.ok(s.process === undefined && s.events === undefined, 'store_restart takes no process (and has no events)')
    run.store.restart()
    return
  }
  if (s.process === undefined) {
    assert.ok(s.op === 'expect' && s.store && Object.keys(s).every((k) => ['op', 'at', 'store'].includes(k)), 'this step needs a process')
    return expectStore(run, s.store)
  }
  const p = run.processes[s.process]
  assert.ok(p !== undefined, `no process ${s.process}`)
  const b = p.breaker
  p.seen.length = 0
  p.events.length = 0
  switch (s.op) {
    case 'acquire': {
      assert.ok((s.permit === undefined) !== (s.rejected === undefined), 'acquire: permit or rejected')
      const got = b.tryAcquire()
      if (s.permit !== undefined) {
        assert.ok(got.admitted, `expected admission, got ${JSON.stringify(got)}`)
        permits.set(s.permit, got)
      } else {
        assert.equal(got.admitted, false, 'expected a rejection')
        checkKeys(s.rejected, ['state', 'reason', 'retry_after_ms'], 'rejected')
        if (s.rejected.state) assert.equal(got.state, STATE[s.rejected.state])
        if (s.rejected.reason) assert.equal(got.reason, s.rejected.reason, 'rejection reason')
        if ('retry_after_ms' in s.rejected) checkRetry(got.retryAfterMs, s.rejected.retry_after_ms)
      }
      break
    }
    case 'record':
      b.record(permits.get(s.permit), s.outcome)
      permits.delete(s.permit)
      break
    case 'call': {
      // Through execute (so the batched successes are what an exchange
      // flushes), as the main suite's runner: an error marked `ignored` is
      // not the upstream's (the case's `isFailure`), an abort cancels.
      if (!['success', 'failure', 'ignored', 'cancelled'].includes(s.outcome)) throw new Error(`unknown outcome ${s.outcome}`)
      const settle = []
      const calls = []
      const abort = new AbortController()
      const cancelled = s.outcome === 'cancelled' ? { signal: abort.signal } : undefined
      for (let i = 0; i < (s.repeat || 1); i++) {
        const upstream = () => new Promise((resolve, reject) => settle.push({ resolve, reject }))
        calls.push(b.execute(upstream, cancelled).then(() => 'ok', (err) => err))
      }
      await Promise.resolve()
      assert.equal(settle.length, s.repeat || 1, 'every call must be admitted')
      run.at += s.duration_ms || 0
      if (cancelled) abort.abort()
      for (const x of settle) {
        if (s.outcome === 'success') x.resolve('ok')
        else if (s.outcome === 'failure') x.reject(new Error('failure'))
        else if (s.outcome === 'ignored') x.reject(Object.assign(new Error('ignored'), { ignored: true }))
      }
      await Promise.all(calls)
      break
    }
    case 'expect':
      if (s.store) expectStore(run, s.store)
      if (s.state) assert.equal(b.getState(), STATE[s.state], 'state')
      if ('retry_after_ms' in s) checkRetry(b.retryAfterMs(), s.retry_after_ms)
      if (s.mode) assert.equal(b.mode(), s.mode.toUpperCase(), 'mode')
      if ('poll_timeout_ms' in s) assert.equal(b.pollTimeoutMs(), s.poll_timeout_ms, 'poll timeout')
      if (s.counts) {
        const m = b.metrics()
        for (const [key, want] of Object.entries(s.counts)) {
          if (COUNTS[key] === undefined) throw new Error(`unknown count ${key}`)
          assert.equal(m[COUNTS[key]], want, `counts.${key}`)
        }
      }
      if (s.metrics) checkMetrics(b, s.metrics)
      if (s.group) expectGroup(p, s.group)
      break
    case 'exchange': {
      assert.ok(s.lost === undefined || s.lost === 'request' || s.lost === 'answer', 'lost')
      const before = run.calls
      run.lost = s.lost
      await p.link._exchange()
      run.lost = undefined
      const due = s.due === undefined ? true : s.due
      assert.equal(run.calls - before, due ? 1 : 0, due ? 'expected an exchange due' : 'expected no exchange due')
      break
    }
    case 'group_force_open':
      b.groupForceOpen(s.for_ms)
      break
    case 'group_force_close':
      b.groupForceClose()
      break
    case 'group_reset':
      b.groupReset()
      break
  }
  if (s.op !== 'expect') checkTransitions(p.seen, s)
  assert.deepEqual(p.events, s.events || [], 'events')
}

function expectStore(run, want) {
  checkKeys(want, ['phase', 'epoch', 'limit'], 'store')
  if (want.phase !== undefined) assert.equal(run.store.phase(), want.phase, 'store.phase')
  if (want.epoch !== undefined) assert.equal(run.store.epoch(), want.epoch, 'store.epoch')
  if (want.limit !== undefined) assert.equal(run.store.limit(), want.limit, 'store.limit')
}

function expectGroup(p, want) {
  checkKeys(want, ['degraded', 'phase', 'next_exchange_ms'], 'group')
  const status = p.breaker.groupStatus()
  if (want.degraded !== undefined) assert.equal(status.degraded, want.degraded, 'group.degraded')
  if (want.phase !== undefined) assert.equal(status.phase, want.phase, 'group.phase')
  if (want.next_exchange_ms !== undefined) {
    const now = readRaw(p.breaker)
    checkRetry(Math.max(0, p.breaker._native.groupNextMs(now) - now), want.next_exchange_ms)
  }
}

async function runCase(c) {
  checkKeys(c, ['description', 'config', 'group', 'steps', 'invalid', 'problem'], 'case')
  if (c.invalid !== undefined) {
    assert.equal(c.steps, undefined, 'a case has either steps or invalid')
    assert.throws(
      () => build(c),
      (err) => {
        assert.equal(err.option, `group.${GROUP_OPTIONS[`${c.invalid}_ms`] || GROUP_OPTIONS[c.invalid]}`, String(err))
        if (c.problem !== undefined) assert.equal(err.problem, c.problem, String(err))
        return true
      },
    )
    return
  }
  assert.ok(Array.isArray(c.steps), 'a case has either steps or invalid')
  const run = build(c)
  const permits = new Map()
  try {
    for (const [i, s] of c.steps.entries()) {
      try {
        await step(run, s, permits)
      } catch (err) {
        err.message = `step ${i} ${JSON.stringify(s)}: ${err.message}`
        throw err
      }
    }
  } finally {
    for (const p of run.processes) linkOf(p.breaker)?.close()
  }
}

if (backend === 'native') {
  const files = fs.readdirSync(DIR).filter((f) => f !== 'schema.json').sort()
  let cases = 0
  for (const file of files) {
    assert.ok(file.endsWith('.json'), `${file} is not a scenario file`)
    const doc = JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8'))
    checkKeys(doc, ['format', 'description', 'cases'], file)
    assert.equal(doc.format, 1, `${file}: unknown format`)
    for (const c of doc.cases) {
      cases += 1
      test(`group/${file.replace(/\.json$/, '')}::${c.description}`, () => runCase(c))
    }
  }
  test.after(() => console.log(`group conformance (node): ${files.length} files, ${cases} scenarios`))
} else {
  test('the group protocol needs the native addon (the WebAssembly backend has no group mode)', () => {
    assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis: { defineCommand() {} }, name: 'g' } }), TypeError)
  })
}
