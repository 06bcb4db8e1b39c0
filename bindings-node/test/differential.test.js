'use strict'
// Differential test: `execute()` (with its batched fast path, local
// rejections and the guarded path for signals/timeouts) must behave exactly
// like the plain protocol, `tryAcquire()` then `record(permit, outcome)`.
//
// Two breakers with identical options share one fake clock `t`. Breaker A
// runs every call through `A.execute(fn)`; breaker B mirrors it with
// `B.tryAcquire()` at the same time and `B.record(permit, outcome)` when the
// call ends. After every step we compare A and B: the events they emitted,
// `getState()` and every field of `metrics()`. Sequences are drawn from a
// seeded PRNG, so a failure names its seed and step and replays exactly:
//
//   HALFOPEN_DIFF_SEED=<seed> node --test test/differential.test.js
//
// Other knobs: HALFOPEN_DIFF_SEQUENCES (default 300 random sequences; the
// timeout test runs a third of them), HALFOPEN_DIFF_STEPS (default 150).
//
// Events: `record()` emits no 'success'/'failure' (only `execute()` does, see
// index.js), so the A/B comparison covers the transitions ('open',
// 'halfOpen', 'close', 'stateChange', with from/to/reason/atMs) and the
// 'reject' events (with state and retryAfterMs; `tryAcquire()` emits those).
// A's 'success'/'failure' events are checked instead against the outcomes the
// driver gave its calls. Event logs are compared twice per step: right after
// the step (an event owed by a call must have been emitted by the time the
// call has settled) and again after `getState()`/`metrics()` have been read.
//
// Only the public API is used; time is the variable `t` (and node:test's mock
// timers for `timeoutMs`): nothing here sleeps or reads real time.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { inspect, isDeepStrictEqual } = require('node:util')
const { CircuitBreaker, CircuitBreakerOpenError, CircuitBreakerTimeoutError, Registry } = require(process.env.HALFOPEN_PACKAGE || '..')

const SEQUENCES = positiveInt(process.env.HALFOPEN_DIFF_SEQUENCES, 300)
const STEPS = positiveInt(process.env.HALFOPEN_DIFF_STEPS, 150)
const ONLY_SEED = process.env.HALFOPEN_DIFF_SEED === undefined ? undefined : Number(process.env.HALFOPEN_DIFF_SEED)
const HISTORY_SHOWN = 12
const TIMEOUT_MS = 100

function positiveInt(text, fallback) {
  const n = Number(text)
  return Number.isInteger(n) && n > 0 ? n : fallback
}

// ---------------------------------------------------------------------------
// Seeded randomness (mulberry32).

function rng(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
    /** `choices`: [[weight, value], ...] */
    weighted(choices) {
      const total = choices.reduce((s, [w]) => s + w, 0)
      let r = next() * total
      for (const [w, v] of choices) {
        r -= w
        if (r < 0) return v
      }
      return choices[choices.length - 1][1]
    },
  }
}

/** The seeds a test runs: HALFOPEN_DIFF_SEED alone, or `count` from `base`. */
function seeds(base, count) {
  if (ONLY_SEED !== undefined) return [ONLY_SEED]
  return Array.from({ length: count }, (_, i) => base + i)
}

// ---------------------------------------------------------------------------
// Mismatches and their report.

class Mismatch extends Error {
  constructor(what, a, b, detail) {
    super(what)
    this.what = what
    this.a = a
    this.b = b
    this.detail = detail
  }
}

const show = (v) => inspect(v, { depth: 6, breakLength: 160, maxArrayLength: 20 })

/** Every leaf path where `a` and `b` differ (index/key paths, `''` for the root). */
function differences(a, b, path = '', out = []) {
  if (isDeepStrictEqual(a, b)) return out
  const bothArrays = Array.isArray(a) && Array.isArray(b)
  const bothObjects =
    !bothArrays && a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !(a instanceof Error)
  if (bothArrays) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) differences(a[i], b[i], `${path}[${i}]`, out)
  } else if (bothObjects) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) differences(a[key], b[key], `${path}.${key}`, out)
  } else {
    out.push({ path, a, b })
  }
  return out
}

/** Throws a Mismatch naming the first differing field (and listing the others). */
function same(what, a, b) {
  if (isDeepStrictEqual(a, b)) return
  const diffs = differences(a, b)
  const first = diffs[0] || { path: '', a, b }
  const lines = diffs.slice(0, 8).map((d) => `    ${what}${d.path}: A ${show(d.a)}  vs  B ${show(d.b)}`)
  if (diffs.length > 8) lines.push(`    ... and ${diffs.length - 8} more`)
  let detail = `  differing fields:\n${lines.join('\n')}`
  if (Array.isArray(a) && Array.isArray(b)) {
    // An event log: show both from a little before the first difference.
    const from = Math.max(0, Number((/^\[(\d+)\]/.exec(first.path) || [])[1] || 0) - 2)
    const tail = (log) => log.slice(from, from + 6).map((e, i) => `      [${from + i}] ${show(e)}`).join('\n') || '      (nothing)'
    detail += `\n  A's log from [${from}]:\n${tail(a)}\n  B's log from [${from}]:\n${tail(b)}`
  }
  throw new Mismatch(`${what}${first.path}`, first.a, first.b, detail)
}

/** A field key for the tally: indices folded, so like failures count together. */
const kindOf = (what) => what.replace(/\[\d+\]/g, '[i]')

function report(title, failures, total, reproduce = (f) => `HALFOPEN_DIFF_SEED=${f.seed} node --test test/differential.test.js`) {
  const f = failures[0]
  const tally = new Map()
  for (const x of failures) tally.set(kindOf(x.what), (tally.get(kindOf(x.what)) || 0) + 1)
  const tallyText = [...tally]
    .sort((x, y) => y[1] - x[1])
    .map(([k, n]) => `    ${n} × ${k}`)
    .join('\n')
  const where = (x) => `${x.seed === null ? `case ${x.index}` : x.seed}@${x.step}`
  return [
    `${title}: ${failures.length} of ${total} sequences differ between A (execute) and B (tryAcquire/record).`,
    `First mismatch: ${f.seed === null ? '' : `seed ${f.seed}, `}step ${f.step}, ${f.seed === null ? 'case' : 'profile'} ${f.profile}, field ${f.what}`,
    `  A (execute):           ${show(f.a)}`,
    `  B (tryAcquire/record): ${show(f.b)}`,
    f.detail || '',
    `  options: ${show(f.options)}`,
    `  last steps (t = clock ms; the mismatch was found after the last one):`,
    ...f.history.slice(-HISTORY_SHOWN).map((h) => `    ${h}`),
    `  reproduce: ${reproduce(f)}`,
    `First mismatch field per failing sequence:`,
    tallyText,
    `Failing ${failures[0].seed === null ? 'cases' : 'seeds'}@step (first 20): ${failures.slice(0, 20).map(where).join(', ')}`,
  ]
    .filter((line) => line !== '')
    .join('\n')
}

// ---------------------------------------------------------------------------
// Events, as plain data.

const TRANSITION_EVENTS = ['open', 'halfOpen', 'close', 'stateChange']

/** Logs `breaker`'s events (a registry's: those of the name `only`, and the successes and failures of every name). */
function listen(breaker, log, results, only) {
  const ours = (name) => only === undefined || name === only
  for (const name of TRANSITION_EVENTS) {
    breaker.on(name, (e) => {
      if (ours(e.name)) log.push({ event: name, from: e.from, to: e.to, reason: e.reason, atMs: e.atMs })
    })
  }
  breaker.on('reject', (err) => {
    if (ours(err.breakerName)) log.push({ event: 'reject', state: err.state, retryAfterMs: err.retryAfterMs, reason: err.reason })
  })
  if (results) {
    breaker.on('success', () => results.push('success'))
    breaker.on('failure', () => results.push('failure'))
  }
}

/** Follows a promise without awaiting it: `{ done, ok, value | error }`. */
function track(promise) {
  const state = { done: false }
  promise.then(
    (value) => Object.assign(state, { done: true, ok: true, value }),
    (error) => Object.assign(state, { done: true, ok: false, error }),
  )
  return state
}

/** Lets every pending microtask and promise job run (one event-loop turn, no timer). */
const turn = () => new Promise((resolve) => setImmediate(resolve))

async function settled(state, what) {
  await turn()
  if (!state.done) throw new Mismatch(`${what}: A's promise settled`, 'still pending', 'settled')
  return state
}

// ---------------------------------------------------------------------------
// Profiles.

const PROFILES = [
  // Seed 000's defaults: 5 failures in 60 s, open 30 s, 3 probes.
  { label: 'seed000', options: {} },
  { label: 'rate-time', options: { failureThreshold: null, failureRateThreshold: 50, minimumCalls: 5, windowMs: 1000 } },
  { label: 'consecutive', options: { consecutiveFailures: 3, failureThreshold: null } },
  { label: 'rate-count', options: { windowCalls: 10, failureRateThreshold: 40, minimumCalls: 5, failureThreshold: null } },
]
const MODIFIERS = [
  ['slow50', 0.25, { slowCallMs: 50 }],
  ['probes2', 0.3, { halfOpenMaxAttempts: 2 }],
  ['open200', 0.5, { openTimeoutMs: 200 }],
  ['limit3', 0.2, { concurrencyLimit: 3 }],
  ['adaptive', 0.3, { adaptiveLimitMin: 1, adaptiveLimitMax: 8 }],
  // Calls given up (probes, and a full limit's) within the sequences' time.
  ['probe500', 0.3, { probeTimeoutMs: 500 }],
]

function drawProfile(r) {
  const base = r.pick(PROFILES)
  const labels = [base.label]
  const options = { ...base.options }
  for (const [label, p, extra] of MODIFIERS) {
    // A fixed and an adaptive limit exclude each other.
    if (r.chance(p) && !(label === 'adaptive' && options.concurrencyLimit !== undefined)) {
      labels.push(label)
      Object.assign(options, extra)
    }
  }
  return { label: labels.join('+'), options }
}

// ---------------------------------------------------------------------------
// One random sequence.

/**
 * Runs one seeded sequence; returns null, or the first mismatch with its
 * context. `timers`: node:test's mock timers, ticked with `t`; `timeouts`:
 * the calls have a `timeoutMs`; `keyed`: A is a Registry's name (through
 * handles kept and new), among other names whose calls, configurations and
 * readings cross into the same registry — `'evicting'`: a registry of 3
 * for 5 names, whose new names evict idle ones (every name's licence
 * holder is dropped then, A's with calls out); the sequence ends when A's
 * own breaker is evicted (it is idle then: a new one would start afresh).
 */
async function runSequence(seed, steps, timers, timeouts, keyed = false) {
  const r = rng(seed)
  const profile = drawProfile(r)
  let t = r.int(0, 100000)
  const options = { name: 'differential', clock: () => t, isFailure: (e) => !e.ignored, ...profile.options }
  // Every third sequence runs on the default clock (performance.now, here
  // reading `t`, and setTimeout node:test's, ticked with `t`): the fast path
  // skips readings it knows cannot matter there, and its licence's end is a
  // timer's.
  if (seed % 3 === 0 && !timeouts) {
    delete options.clock
    performance.now = () => t
  }
  if (timeouts) options.timeoutMs = TIMEOUT_MS
  const openTimeout = options.openTimeoutMs === undefined ? 30000 : options.openTimeoutMs
  // Every fourth sequence, A answers refusals with a fallback (B, with
  // tryAcquire, has no use for one); some calls bring their own.
  const breakerFallback = seed % 4 === 1
  const optionsA = breakerFallback ? { ...options, fallback: (refusal) => ({ fellBack: refusal }) } : options
  let A
  let registry
  if (keyed) {
    const { name: _, ...registryOptions } = optionsA
    registry = new Registry(keyed === 'evicting' ? { ...registryOptions, capacity: 3 } : registryOptions)
    A = registry.get('differential')
  } else A = new CircuitBreaker(optionsA)
  const B = new CircuitBreaker(options)
  const logA = []
  const logB = []
  const resultsA = [] // A's 'success'/'failure' events
  const expectedResults = [] // what the driver's outcomes call for
  listen(keyed ? registry : A, logA, resultsA, keyed ? 'differential' : undefined)
  listen(B, logB, null)
  // (A name's breaker is made on its first use: made here, as B is.)
  if (keyed) {
    A.forceClose()
    B.forceClose()
  }
  // A's handle for a call: the one kept, or (keyed, now and then) a new one.
  const handle = () => (keyed && r.chance(0.3) ? registry.get('differential') : A)

  const history = []
  let step = 0
  const note = (text) => history.push(`#${step} t=${t} ${text}`)
  const calls = [] // in flight on both
  let nextId = 1
  const pSignal = timeouts ? 0.3 : r.pick([0, 0.15, 0.4])
  const pendingWeight = timeouts ? 85 : 70

  const errorFor = (id, outcome) =>
    outcome === 'ignored' ? Object.assign(new Error(`bad request #${id}`), { ignored: true }) : new Error(`upstream 503 #${id}`)

  /** Checks how A's call ended and mirrors it on B. */
  async function finish(call, outcome, expected) {
    const s = await settled(call.state, `call #${call.id} (${outcome})`)
    const got = s.ok ? { resolved: s.value } : { rejected: s.error }
    if (!isDeepStrictEqual(got, expected) || (expected.rejected !== undefined && s.error !== expected.rejected)) {
      throw new Mismatch(`call #${call.id} (${outcome}): A's promise`, got, expected)
    }
    B.record(call.permit, outcome)
    if (outcome === 'success' || outcome === 'failure') expectedResults.push(outcome)
  }

  async function startCall() {
    const id = nextId++
    const kind = r.weighted([
      [pendingWeight, 'pending'],
      [10, 'returns'],
      [8, 'throws'],
      [6, 'resolved'],
      [6, 'rejected'],
    ])
    const withSignal = r.chance(pSignal)
    const ownFallback = r.chance(0.15)
    const preAborted = withSignal && r.chance(0.04)
    const syncOutcome =
      kind === 'returns' || kind === 'resolved' ? 'success' : r.weighted([[3, 'failure'], [1, 'ignored']])
    const value = { value: id }
    const error = kind === 'throws' || kind === 'rejected' ? errorFor(id, syncOutcome) : undefined
    let called = false
    const call = { id, value, withSignal }
    const fn = () => {
      called = true
      switch (kind) {
        case 'pending':
          return new Promise((resolve, reject) => Object.assign(call, { resolve, reject }))
        case 'returns':
          return value
        case 'throws':
          throw error
        case 'resolved':
          return Promise.resolve(value)
        default:
          return Promise.reject(error)
      }
    }
    if (withSignal) {
      call.controller = new AbortController()
      call.reason = new Error(`caller gave up on #${id}`)
      if (preAborted) call.controller.abort(call.reason)
    }
    const given = {}
    if (withSignal) given.signal = call.controller.signal
    if (ownFallback) given.fallback = (refusal) => ({ own: refusal })
    call.state = track(withSignal || ownFallback ? handle().execute(fn, given) : handle().execute(fn))
    const how = `${kind}${withSignal ? (preAborted ? ', pre-aborted signal' : ', signal') : ''}${ownFallback ? ', own fallback' : ''}`
    if (preAborted) {
      // Refused before asking the breaker: B does nothing.
      note(`start #${id} (${how}): not asked, not mirrored`)
      if (called) throw new Mismatch(`call #${id}: fn called despite an aborted signal`, true, false)
      const s = await settled(call.state, `pre-aborted call #${id}`)
      if (s.ok || s.error !== call.reason) {
        throw new Mismatch(`call #${id}: A's promise`, s.ok ? { resolved: s.value } : { rejected: s.error }, { rejected: call.reason })
      }
      return
    }
    const mirror = B.tryAcquire()
    note(`start #${id} (${how}): A ${called ? 'admitted' : 'rejected'}, B ${mirror.admitted ? 'admitted' : 'refused'}`)
    if (called !== mirror.admitted) {
      throw new Mismatch(`admission of call #${id}`, called ? 'admitted' : 'rejected', mirror.admitted ? 'admitted' : 'refused')
    }
    if (!called) {
      const s = await settled(call.state, `rejected call #${id}`)
      const refusal = { breakerName: 'differential', state: mirror.state, retryAfterMs: mirror.retryAfterMs, reason: mirror.reason }
      if (ownFallback || breakerFallback) {
        // The fallback's answer, with the refusal B was given.
        same(`fallback of call #${id}`, s.ok ? { resolved: s.value } : { rejected: s.error }, { resolved: ownFallback ? { own: refusal } : { fellBack: refusal } })
        return
      }
      if (s.ok || !(s.error instanceof CircuitBreakerOpenError)) {
        throw new Mismatch(`call #${id}: A's rejection`, s.ok ? { resolved: s.value } : s.error, 'a CircuitBreakerOpenError')
      }
      same(
        `rejection of call #${id}`,
        { state: s.error.state, retryAfterMs: s.error.retryAfterMs, reason: s.error.reason },
        { state: mirror.state, retryAfterMs: mirror.retryAfterMs, reason: mirror.reason },
      )
      return
    }
    call.permit = mirror
    if (kind === 'pending') {
      call.dueAt = t + TIMEOUT_MS
      calls.push(call)
      return
    }
    await finish(call, syncOutcome, syncOutcome === 'success' ? { resolved: value } : { rejected: error })
  }

  /** Ends one in-flight call (a random one, or `call`) with `outcome`. */
  async function settleCall(call, outcome) {
    calls.splice(calls.indexOf(call), 1)
    note(`settle #${call.id} (admitted at ${call.permit.issuedAtMs}): ${outcome}`)
    if (outcome === 'success') {
      call.resolve(call.value)
      await finish(call, outcome, { resolved: call.value })
    } else if (outcome === 'cancelled') {
      call.controller.abort(call.reason)
      await finish(call, outcome, { rejected: call.reason })
    } else {
      const error = errorFor(call.id, outcome)
      call.reject(error)
      await finish(call, outcome, { rejected: error })
    }
  }

  function drawOutcome(call, successWeight = 50) {
    return r.weighted([
      [successWeight, 'success'],
      [30, 'failure'],
      [10, 'ignored'],
      [call.withSignal ? 10 : 0, 'cancelled'],
    ])
  }

  /** Advances `t` by `d`, with the mock timers; fires each timeout at its own time and mirrors it. */
  async function advance(d) {
    const target = t + d
    if (!timeouts) timers.tick(d)
    else {
      for (;;) {
        const due = calls.filter((c) => c.dueAt <= target).sort((x, y) => x.dueAt - y.dueAt || x.id - y.id)
        if (due.length === 0) break
        const at = due[0].dueAt
        const delta = at - t
        t = at
        timers.tick(delta)
        for (const call of due.filter((c) => c.dueAt === at)) {
          calls.splice(calls.indexOf(call), 1)
          note(`timeout #${call.id} (admitted at ${call.permit.issuedAtMs})`)
          const s = await settled(call.state, `timed-out call #${call.id}`)
          if (s.ok || !(s.error instanceof CircuitBreakerTimeoutError)) {
            throw new Mismatch(`call #${call.id}: A's timeout`, s.ok ? { resolved: s.value } : s.error, 'a CircuitBreakerTimeoutError')
          }
          B.record(call.permit, 'failure')
          expectedResults.push('failure')
        }
      }
      timers.tick(target - t)
    }
    t = target
  }

  function manual() {
    const op = r.pick(['forceOpen', 'forceOpenMs', 'forceClose', 'disable', 'release', 'reset'])
    if (op === 'forceOpenMs') {
      const ms = r.int(0, 1000)
      note(`forceOpen(${ms}) on both`)
      A.forceOpen(ms)
      B.forceOpen(ms)
    } else {
      note(`${op}() on both`)
      A[op]()
      B[op]()
    }
  }

  /** Keyed: another name's doing, which crosses into A's registry (A must not notice). */
  async function others() {
    const evicting = keyed === 'evicting'
    const name = `other-${r.int(1, evicting ? 4 : 6)}`
    let what = r.pick(['call', 'call', 'configure', 'prometheus', 'toJSON', 'forceOpen', 'forceClose', 'metrics'])
    // (Evicting, one name only is configured: at most `capacity` may be.)
    if (evicting && what === 'configure' && name !== 'other-1') what = 'call'
    note(`${name}: ${what}`)
    const other = registry.get(name)
    try {
      await otherDoes(other, name, what)
    } catch (err) {
      // (A registry full of busy names refuses a new one.)
      if (!(evicting && err.name === 'RegistryFullError')) throw err
      note(`  ${name}: registry full`)
    }
  }

  async function otherDoes(other, name, what) {
    switch (what) {
      case 'call': {
        const s = track(other.execute(() => 'ok'))
        await turn()
        if (s.done && s.ok && s.value === 'ok') expectedResults.push('success') // (not a fallback's)
        break
      }
      case 'configure':
        registry.configure(name, { failureThreshold: r.int(1, 9) })
        break
      case 'prometheus':
        registry.prometheus()
        break
      case 'toJSON':
        registry.toJSON()
        break
      case 'metrics':
        other.metrics()
        break
      default:
        other[what]()
    }
  }

  function reads() {
    const a = { getState: A.getState(), isCallPermitted: A.isCallPermitted(), retryAfterMs: A.retryAfterMs() }
    const b = { getState: B.getState(), isCallPermitted: B.isCallPermitted(), retryAfterMs: B.retryAfterMs() }
    note(`read: ${show(a)}`)
    same('read', a, b)
  }

  /**
   * Compares the events after every step; `full`: getState() and metrics()
   * too. Those reads hand everything over to the core and ask for the
   * licence again, so they are left out of most steps: the fast path must
   * also hold over runs of steps with no read (a licence's room, say).
   */
  function compare(full) {
    same('events (before reads)', logA, logB)
    same("A's success/failure events vs the outcomes given", resultsA, expectedResults)
    if (!full) return
    same('getState()', A.getState(), B.getState())
    same('metrics()', A.metrics(), B.metrics())
    same('events (after getState/metrics)', logA, logB)
  }

  try {
    note(`new A and B: ${profile.label}`)
    compare(true)
    for (step = 1; step <= steps; step++) {
      const action = r.weighted([
        [calls.length > 40 ? 5 : 32, 'start'],
        [calls.length > 0 ? (timeouts ? 12 : 22) : 0, 'settle'],
        [calls.length > 1 ? 6 : 0, 'burst'],
        [calls.length > 40 ? 0 : 6, 'startBurst'],
        [22, 'advance'],
        [4, 'manual'],
        [12, 'read'],
        [keyed ? 8 : 0, 'others'],
      ])
      switch (action) {
        case 'start':
          await startCall()
          break
        case 'startBurst': {
          // Several calls start at once with no read in between (a sender's
          // workers picking up jobs): what admissions under a licence batch.
          const n = r.int(2, 8)
          note(`start burst of ${n}`)
          for (let i = 0; i < n; i++) await startCall()
          break
        }
        case 'settle': {
          const call = r.pick(calls)
          await settleCall(call, drawOutcome(call))
          break
        }
        case 'burst': {
          // Several calls end a few ms apart (across window buckets) with no
          // read in between: what the fast path batches.
          const n = r.int(2, Math.min(8, calls.length))
          note(`burst of ${n}`)
          for (let i = 0; i < n && calls.length > 0; i++) {
            await advance(r.int(0, 60))
            if (calls.length === 0) break // all timed out meanwhile
            const call = r.pick(calls)
            await settleCall(call, drawOutcome(call, 80))
          }
          break
        }
        case 'advance': {
          const d = r.weighted([
            [75, () => r.int(0, 50)],
            // Readings off the microsecond, within one of a bucket's end or
            // the slow-call threshold: the fast path compares the default
            // clock's readings unrounded, the core rounds them. (Not with
            // timeouts: the mock timers' whole milliseconds.)
            [timeouts ? 0 : 10, () => r.int(0, 50) + r.pick([0.0004, 0.0005, 0.0006, 0.9995])],
            [20, () => r.int(100, 2000)],
            [5, () => r.int(openTimeout, openTimeout * 4)],
          ])()
          note(`advance ${d} ms`)
          await advance(d)
          break
        }
        case 'manual':
          manual()
          break
        case 'others':
          await others()
          // A's breaker evicted (idle): what it did until then compared.
          if (!registry.has('differential')) {
            note('A evicted: the sequence ends')
            return null
          }
          break
        default:
          reads()
      }
      compare(r.chance(0.25))
    }
    compare(true)
    return null
  } catch (err) {
    const base = { seed, step, profile: profile.label, options: { ...options, clock: '() => t', isFailure: '(e) => !e.ignored' }, history }
    if (err instanceof Mismatch) return { ...base, what: err.what, a: err.a, b: err.b, detail: err.detail }
    return { ...base, what: 'exception in the driver or a breaker', a: String(err), b: '(none)', detail: `  ${err?.stack}` }
  }
}

async function runMany(title, base, count, timers, timeouts, keyed = false) {
  // Once for every sequence: a reset would hand out a timer's id again, which
  // a breaker of an earlier sequence, collected later, would cancel.
  timers.enable({ apis: ['setTimeout'] })
  const list = seeds(base, count)
  const failures = []
  for (const seed of list) {
    let f
    try {
      f = await runSequence(seed, STEPS, timers, timeouts, keyed)
    } finally {
      delete performance.now // back to Performance.prototype.now
    }
    if (f) failures.push(f)
  }
  if (failures.length > 0) assert.fail(report(title, failures, list.length))
}

// ---------------------------------------------------------------------------

test('execute() behaves exactly like tryAcquire()/record(): random sequences', async (ctx) => {
  await runMany('random sequences', 1, SEQUENCES, ctx.mock.timers, false)
})

test('execute() with timeoutMs behaves exactly like tryAcquire()/record(failure at the timeout)', async (ctx) => {
  await runMany('timeout sequences', 1000001, Math.max(1, Math.ceil(SEQUENCES / 3)), ctx.mock.timers, true)
})

test("a Registry name's execute() behaves exactly like a breaker's tryAcquire()/record(), whatever other names do", async (ctx) => {
  await runMany('keyed sequences', 2000001, SEQUENCES, ctx.mock.timers, false, true)
})

test("a Registry name's execute() with timeoutMs behaves exactly like a breaker's tryAcquire()/record()", async (ctx) => {
  await runMany('keyed timeout sequences', 3000001, Math.max(1, Math.ceil(SEQUENCES / 3)), ctx.mock.timers, true, true)
})

test("a Registry name's execute() behaves exactly like a breaker's while other names evict (its holder dropped with calls out)", async (ctx) => {
  await runMany('evicting sequences', 4000001, SEQUENCES, ctx.mock.timers, false, 'evicting')
})

test("a Registry name's execute() with timeoutMs behaves exactly like a breaker's while other names evict", async (ctx) => {
  await runMany('evicting timeout sequences', 5000001, Math.max(1, Math.ceil(SEQUENCES / 3)), ctx.mock.timers, true, 'evicting')
})

// ---------------------------------------------------------------------------
// Successes and failures only, each at its own time, across the buckets of a
// 1,000 ms window (8 buckets of 125 ms). Compared at checkpoints only (every
// read flushes A's batch): after each run of successes and after each failure.

async function runWindowCase(spec) {
  let t = spec.start
  const options = {
    name: 'window',
    clock: () => t,
    failureThreshold: null,
    failureRateThreshold: spec.rate,
    minimumCalls: 5,
    windowMs: 1000,
    ...spec.extra,
  }
  const A = new CircuitBreaker(options)
  const B = new CircuitBreaker(options)
  const logA = []
  const logB = []
  listen(A, logA, null)
  listen(B, logB, null)
  const history = []
  let step = 0
  const checkpoint = (what) => {
    history.push(`#${step} t=${t} checkpoint after ${what}`)
    same('events (before reads)', logA, logB)
    same('getState()', A.getState(), B.getState())
    same('metrics()', A.metrics(), B.metrics())
    same('events (after getState/metrics)', logA, logB)
  }
  try {
    for (const run of spec.runs) {
      history.push(`#${step + 1} t=${t} ${run.count} × ${run.outcome}, every ${run.every} ms`)
      for (let i = 0; i < run.count; i++) {
        step++
        if (i > 0) t += run.every
        let called = false
        const fn =
          run.outcome === 'success'
            ? () => {
                called = true
                return 'ok'
              }
            : () => {
                called = true
                return Promise.reject(new Error('upstream 503'))
              }
        const s = track(A.execute(fn))
        const mirror = B.tryAcquire()
        if (called !== mirror.admitted) {
          history.push(`#${step} t=${t} ${run.outcome}: A ${called ? 'admitted' : 'rejected'}, B ${mirror.admitted ? 'admitted' : 'refused'}`)
          throw new Mismatch(`admission at t=${t}`, called ? 'admitted' : 'rejected', mirror.admitted ? 'admitted' : 'refused')
        }
        await settled(s, `${run.outcome} at t=${t}`)
        if (mirror.admitted) B.record(mirror, run.outcome)
        if (run.outcome === 'failure') checkpoint(`failure at t=${t}`)
      }
      if (run.outcome === 'success') checkpoint(`${run.count} successes (last at t=${t})`)
      t += run.every
    }
    return null
  } catch (err) {
    const base = { seed: null, index: spec.index, step, profile: `${spec.index} (${spec.label})`, options: { ...options, clock: '() => t' }, history }
    if (err instanceof Mismatch) return { ...base, what: err.what, a: err.a, b: err.b, detail: err.detail }
    return { ...base, what: 'exception in the driver or a breaker', a: String(err), b: '(none)', detail: `  ${err?.stack}` }
  }
}

test('successes and failures across window-bucket boundaries count at their own times', async () => {
  const specs = [
    {
      label: '200 successes every 10 ms, then failures every 10 ms',
      start: 0,
      rate: 50,
      runs: [
        { outcome: 'success', count: 200, every: 10 },
        { outcome: 'failure', count: 10, every: 10 },
      ],
    },
    {
      label: '40 successes every 124 ms, then failures every 126 ms',
      start: 5000,
      rate: 40,
      runs: [
        { outcome: 'success', count: 40, every: 124 },
        { outcome: 'failure', count: 8, every: 126 },
      ],
    },
    {
      label: 'alternating runs straddling a bucket edge',
      start: 1000,
      rate: 50,
      runs: [
        { outcome: 'success', count: 30, every: 25 },
        { outcome: 'failure', count: 3, every: 125 },
        { outcome: 'success', count: 12, every: 100 },
        { outcome: 'failure', count: 6, every: 60 },
      ],
    },
  ]
  const r = rng(ONLY_SEED === undefined ? 77 : ONLY_SEED)
  for (let i = 0; i < 30; i++) {
    const runs = []
    const n = r.int(2, 6)
    for (let j = 0; j < n; j++) {
      const outcome = j % 2 === 0 ? 'success' : 'failure'
      runs.push({
        outcome,
        count: outcome === 'success' ? r.int(5, 250) : r.int(1, 8),
        every: r.pick([1, 10, 37, 62, 124, 125, 126, 250, r.int(1, 400)]),
      })
    }
    specs.push({ label: `random: ${runs.map((x) => `${x.count} ${x.outcome} /${x.every}ms`).join(', ')}`, start: r.int(0, 10000), rate: r.pick([20, 40, 50, 80]), runs })
  }
  for (const [index, spec] of specs.entries()) spec.index = index
  const failures = []
  for (const spec of specs) {
    const f = await runWindowCase(spec)
    if (f) failures.push(f)
  }
  if (failures.length > 0) {
    assert.fail(
      report('window-bucket cases', failures, specs.length, () => "node --test --test-name-pattern='bucket' test/differential.test.js"),
    )
  }
})
