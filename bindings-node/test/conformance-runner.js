'use strict'
// The conformance runner, apart from any test framework or file system: the
// Node test (conformance.test.js) and the workerd test of the wasm package
// (bindings-wasm/test/workerd) run it. `conformance({ CircuitBreaker,
// Registry, RetentionQueue, assert })` gives `runDoc(doc, file)`: the cases
// of one scenario file, each as `{ name, run }` (`run` rejects on a failure).
// Retention cases drive a `RetentionQueue` (the sans-IO protocol the
// `Dispatcher` is built on).

function conformance({ CircuitBreaker, Registry, RetentionQueue, assert }) {
  const FORMAT = 1

  // Cases this binding cannot pass yet, with the reason, by file. None.
  // A permit belongs to the breaker object that issued it, and the package
  // restores a single breaker into a new object (`fromJSON`/`fromBytes`): a
  // permit from before the restore is refused with a TypeError there, so the
  // "stale after a restore" rule cannot be exercised through this API. (A
  // Registry restores in place; its cases run.)
  const STALE_AFTER_RESTORE = 'a permit from before a restore belongs to another CircuitBreaker object: TypeError, not stale'
  const EXPECTED_FAILURES = {
    'snapshot.json': {
      'a half-open breaker restored keeps its successes and gives up the probes in flight': STALE_AFTER_RESTORE,
      'a permit issued before a snapshot is stale for the restored breaker': STALE_AFTER_RESTORE,
      'a permit from before a restore is still stale after it': STALE_AFTER_RESTORE,
    },
  }

  const CONFIG_KEYS = {
    failure_threshold: 'failureThreshold',
    window_ms: 'windowMs',
    window_calls: 'windowCalls',
    consecutive_failures: 'consecutiveFailures',
    failure_rate_threshold: 'failureRateThreshold',
    minimum_calls: 'minimumCalls',
    slow_call_duration_ms: 'slowCallMs',
    slow_call_rate_threshold: 'slowCallRateThreshold',
    open_timeout_ms: 'openTimeoutMs',
    backoff_factor: 'backoffFactor',
    max_open_timeout_ms: 'maxOpenTimeoutMs',
    jitter: 'jitter',
    jitter_seed: 'jitterSeed',
    half_open_max_attempts: 'halfOpenMaxAttempts',
    half_open_successes: 'halfOpenSuccesses',
    probe_timeout_ms: 'probeTimeoutMs',
    concurrency_limit: 'concurrencyLimit',
    adaptive_limit_min: 'adaptiveLimitMin',
    adaptive_limit_max: 'adaptiveLimitMax',
    latency_histogram: 'latencyHistogram',
  }
  // The core's presets, by the package's name for them (the values come from the core).
  const PRESETS = { whatsapp_gateway: 'whatsappGateway', partner_webhook: 'partnerWebhook', sender: 'sender' }
  const FIELD_OPTIONS = {
    failure_threshold: ['failureThreshold'],
    window: ['windowMs', 'windowCalls'],
    slow_call_duration: ['slowCallMs'],
    open_timeout: ['openTimeoutMs'],
    max_open_timeout: ['maxOpenTimeoutMs'],
    probe_timeout: ['probeTimeoutMs'],
  }
  const SPECIAL = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity }
  const METRICS = {
    admitted: 'admitted',
    successes: 'successes',
    failures: 'failures',
    slow: 'slow',
    rejections: 'rejections',
    ignored: 'ignored',
    cancelled: 'cancelled',
    stale: 'stale',
    opens: 'opens',
    opens_last_24h: 'opensLast24h',
    time_closed_ms: 'timeClosedMs',
    time_open_ms: 'timeOpenMs',
    time_half_open_ms: 'timeHalfOpenMs',
    mean_time_open_ms: 'meanTimeOpenMs',
    error_rate: 'errorRate',
    latency_count: 'latencyCount',
    latency_p50_ms: 'latencyP50Ms',
    latency_p95_ms: 'latencyP95Ms',
    latency_p99_ms: 'latencyP99Ms',
    latency_max_ms: 'latencyMaxMs',
  }
  const COUNTS = {
    consecutive_failures: 'consecutiveFailures',
    window_calls: 'windowCalls',
    window_failures: 'windowFailures',
    window_slow: 'windowSlow',
    probes_in_flight: 'probesInFlight',
    probe_successes: 'probeSuccesses',
    in_flight: 'inFlight',
    concurrency_limit: 'concurrencyLimit',
  }
  const STATE = { closed: 'CLOSED', open: 'OPEN', half_open: 'HALF_OPEN' }
  const STEP_KEYS = {
    acquire: ['permit', 'rejected', 'refused', 'transition'],
    record: ['permit', 'outcome', 'transition'],
    call: ['outcome', 'duration_ms', 'repeat', 'transition', 'transitions'],
    expect: ['state', 'retry_after_ms', 'mode', 'counts', 'poll_timeout_ms', 'metrics', 'registry'],
    force_open: ['for_ms', 'transition', 'transitions'],
    force_open_at_least: ['for_ms', 'transition', 'transitions'],
    force_close: ['transition', 'transitions'],
    disable: ['transition', 'transitions'],
    release: ['transition', 'transitions'],
    reset: ['transition', 'transitions'],
    handle_timeout: ['transition'],
    snapshot_restore: ['encoding', 'restore_at', 'elapsed'],
    restore: ['snapshot', 'error', 'elapsed'],
  }

  let steps = 0

  /**
   * Whether the case's restores count the time between (`elapsed:
   * "counted"`): a property of the clock here (`sharedClock`), so one
   * case does not mix the two.
   */
  function sharedClock(c) {
    const restores = c.steps.filter((s) => s.op === 'snapshot_restore' || s.op === 'restore')
    const counted = restores.filter((s) => s.elapsed === 'counted').length
    if (counted > 0 && counted < restores.length) throw new Error('a case mixes restores that count the time between and restores that do not')
    return counted > 0
  }

  function options(config, clock, shared = false) {
    // Errors marked `ignored` say nothing about the upstream (the spec's "ignored").
    const out = { name: 'conformance', clock, isFailure: (err) => !err.ignored }
    if (shared) out.sharedClock = true
    if (config.preset !== undefined) out.preset = PRESETS[config.preset]
    for (const [key, value] of Object.entries(config)) {
      if (key === 'preset') continue
      const option = CONFIG_KEYS[key]
      if (option === undefined) throw new Error(`unknown config key ${key}`)
      out[option] = typeof value === 'string' && value in SPECIAL ? SPECIAL[value] : value
    }
    return out
  }

  function checkKeys(object, allowed, what) {
    for (const key of Object.keys(object)) {
      if (!allowed.includes(key)) throw new Error(`unknown key ${key} in ${what}`)
    }
  }

  function checkRetry(gotMs, want) {
    if (want === null) return assert.equal(gotMs, Infinity, 'retry after: held open')
    if (typeof want === 'number') return assert.ok(Math.abs(gotMs - want) < 1e-6, `retry after ${gotMs} != ${want}`)
    checkKeys(want, ['min', 'max'], 'retry range')
    assert.ok(gotMs >= want.min && gotMs <= want.max, `retry after ${gotMs} not in [${want.min}, ${want.max}]`)
  }

  function checkTransitions(seen, step) {
    if (step.transition !== undefined && step.transitions !== undefined) throw new Error('transition and transitions are exclusive')
    const want = step.transitions || (step.transition ? [step.transition] : [])
    assert.equal(seen.length, want.length, `transitions ${JSON.stringify(seen)} != ${JSON.stringify(want)}`)
    want.forEach((w, i) => {
      checkKeys(w, ['from', 'to', 'reason', 'at'], 'transition')
      const got = seen[i]
      assert.deepEqual([got.from, got.to, got.reason], [STATE[w.from], STATE[w.to], w.reason])
      if (w.at !== undefined) assert.equal(got.atMs, w.at, 'transition at')
    })
  }

  function checkMetrics(breaker, want) {
    const m = breaker.metrics()
    for (const [key, expected] of Object.entries(want)) {
      const name = METRICS[key]
      if (name === undefined) throw new Error(`unknown metric ${key}`)
      const got = m[name] === undefined ? null : m[name]
      if (expected === null) assert.equal(got, null, `metrics.${key}`)
      else if (typeof expected === 'number') assert.ok(Math.abs(got - expected) <= 1e-9, `metrics.${key}: ${got} != ${expected}`)
      else {
        checkKeys(expected, ['min', 'max'], 'metric range')
        assert.ok(got >= expected.min && got <= expected.max, `metrics.${key}: ${got} not in range`)
      }
    }
  }

  function makeRegistry(spec, config, clock, sharedClock) {
    checkKeys(spec, ['capacity', 'configure'], 'registry')
    const { name, ...shared } = options(config, clock, sharedClock)
    const registry = new Registry({ ...shared, capacity: spec.capacity })
    for (const [key, own] of Object.entries(spec.configure || {})) {
      const { name: _, clock: __, isFailure: ___, ...numbers } = options(own, clock)
      delete numbers.sharedClock
      registry.configure(key, numbers)
    }
    return registry
  }

  async function runCase(c) {
    let clock = 0
    const now = () => clock
    const shared = sharedClock(c)
    const opts = options(c.config, now, shared)
    const registry = c.registry ? makeRegistry(c.registry, c.config, now, shared) : undefined
    let single = registry ? undefined : new CircuitBreaker(opts)
    const seen = []
    const listen = (b) => b.on('stateChange', (t) => seen.push(t))
    listen(registry || single)
    const permits = new Map()
    for (const step of c.steps) {
      const keys = STEP_KEYS[step.op]
      if (keys === undefined) throw new Error(`unknown op ${step.op}`)
      checkKeys(step, ['op', 'at', 'key', ...keys], `step ${step.op}`)
      if (step.at !== undefined) clock = step.at
      if (registry && step.key === undefined && !(step.op === 'expect' && step.registry) && step.op !== 'snapshot_restore') {
        throw new Error('a registry case needs a key on this step')
      }
      if (!registry && step.key !== undefined) throw new Error('key given, but the case has no registry')
      if (step.refused === 'name_too_long') {
        // Refused at the boundary: get() takes no name the core would refuse.
        assert.throws(() => registry.get(step.key), (err) => err instanceof RangeError && err.option === 'name')
        continue
      }
      const breaker = registry && step.key !== undefined ? registry.get(step.key) : single
      seen.length = 0
      switch (step.op) {
        case 'acquire': {
          const got = breaker.tryAcquire()
          if (step.refused !== undefined) {
            assert.equal(step.refused, 'full')
            assert.equal(got.error?.name, 'RegistryFullError', 'expected the registry to refuse')
          } else if (step.permit !== undefined) {
            assert.ok(got.admitted, `expected admission, got ${JSON.stringify(got)}`)
            permits.set(step.permit, got)
          } else {
            assert.equal(got.admitted, false, 'expected a rejection')
            if (step.rejected.state) assert.equal(got.state, STATE[step.rejected.state])
            if (step.rejected.reason) assert.equal(got.reason, step.rejected.reason, 'rejection reason')
            if ('retry_after_ms' in step.rejected) checkRetry(got.retryAfterMs, step.rejected.retry_after_ms)
          }
          break
        }
        case 'record':
          breaker.record(permits.get(step.permit), step.outcome)
          permits.delete(step.permit)
          break
        case 'call': {
          const settle = []
          const calls = []
          const abort = new AbortController()
          const cancelled = step.outcome === 'cancelled' ? { signal: abort.signal } : undefined
          for (let i = 0; i < (step.repeat || 1); i++) {
            calls.push(
              breaker
                .execute(() => new Promise((resolve, reject) => settle.push({ resolve, reject })), cancelled)
                .then(
                  () => 'ok',
                  (err) => err,
                ),
            )
          }
          await Promise.resolve()
          assert.equal(settle.length, step.repeat || 1, 'every call must be admitted')
          clock += step.duration_ms || 0
          if (cancelled) abort.abort()
          for (const s of settle) {
            if (step.outcome === 'success') s.resolve('ok')
            else if (step.outcome === 'failure') s.reject(new Error('failure'))
            else if (step.outcome === 'ignored') s.reject(Object.assign(new Error('ignored'), { ignored: true }))
          }
          await Promise.all(calls)
          break
        }
        case 'expect':
          if (step.registry) {
            checkKeys(step.registry, ['len', 'evictions', 'holds', 'lacks'], 'registry expectation')
            if (step.registry.len !== undefined) assert.equal(registry.size, step.registry.len, 'registry.len')
            if (step.registry.evictions !== undefined) assert.equal(registry.evictions, step.registry.evictions, 'evictions')
            for (const k of step.registry.holds || []) assert.ok(registry.has(k), `registry holds ${k}`)
            for (const k of step.registry.lacks || []) assert.ok(!registry.has(k), `registry lacks ${k}`)
            if (step.key === undefined) break
          }
          if (step.state) assert.equal(breaker.getState(), STATE[step.state], 'state')
          if ('retry_after_ms' in step) {
            checkRetry(breaker.retryAfterMs(), step.retry_after_ms)
            assert.equal(breaker.isCallPermitted(), step.retry_after_ms === 0, 'isCallPermitted')
          }
          if (step.mode) assert.equal(breaker.mode(), step.mode.toUpperCase(), 'mode')
          if ('poll_timeout_ms' in step) assert.equal(breaker.pollTimeoutMs(), step.poll_timeout_ms, 'poll timeout')
          if (step.counts) {
            const m = breaker.metrics()
            for (const [key, want] of Object.entries(step.counts)) {
              if (COUNTS[key] === undefined) throw new Error(`unknown count ${key}`)
              assert.equal(m[COUNTS[key]], want, `counts.${key}`)
            }
          }
          if (step.metrics) checkMetrics(breaker, step.metrics)
          break
        case 'force_open':
          breaker.forceOpen(step.for_ms)
          break
        case 'force_open_at_least':
          breaker.forceOpenAtLeast(step.for_ms)
          break
        case 'force_close':
          breaker.forceClose()
          break
        case 'disable':
          breaker.disable()
          break
        case 'release':
          breaker.release()
          break
        case 'reset':
          breaker.reset()
          break
        case 'handle_timeout':
          breaker.handleTimeout()
          break
        case 'snapshot_restore': {
          // Taken at the current time, restored at `restore_at`.
          const saved = registry || step.encoding === 'json' ? JSON.parse(JSON.stringify(registry || single)) : single.toBytes()
          if (step.restore_at !== undefined) clock = step.restore_at
          if (registry) {
            // A registry's snapshot is offered in JSON only.
            registry.restore(saved)
            break
          }
          single = step.encoding === 'json' ? CircuitBreaker.fromJSON(opts, saved) : CircuitBreaker.fromBytes(opts, saved)
          listen(single)
          break
        }
        case 'restore':
          try {
            single = CircuitBreaker.fromJSON(opts, step.snapshot)
            listen(single)
            assert.equal(step.error, undefined, `expected the error ${step.error}`)
          } catch (err) {
            if (err.code === 'ERR_ASSERTION') throw err
            assert.equal(err.name, 'SnapshotError', String(err))
            assert.equal(err.kind, step.error, `snapshot error kind (${err.message})`)
          }
          break
      }
      if (step.op !== 'expect') checkTransitions(seen, step)
      steps += 1
    }
  }

  const RETENTION_KEYS = {
    max_messages: 'maxMessages',
    max_bytes: 'maxBytes',
    max_attempts: 'maxAttempts',
    max_age_ms: 'maxAgeMs',
  }
  const RETENTION_FIELDS = {
    max_messages: 'maxMessages',
    max_bytes: 'maxBytes',
    max_attempts: 'maxAttempts',
    max_age: 'maxAgeMs',
    release_rate: 'releaseRate',
  }
  const RETENTION_STEPS = {
    submit: ['message', 'bytes', 'result'],
    next: ['sends'],
    report: ['message', 'outcome', 'result'],
    handle_timeout: [],
    force_open: ['for_ms'],
    force_open_at_least: ['for_ms'],
    release: [],
    expect: ['state', 'retention'],
    snapshot_restore: ['encoding', 'restore_at', 'elapsed'],
  }
  const COUNTERS = ['submitted', 'refused', 'sent', 'delivered', 'failed', 'dead', 'dropped']
  const number = (value) => (typeof value === 'string' && value in SPECIAL ? SPECIAL[value] : value)

  /** A RetentionQueue's options: the breaker's, the retention's; messages sized by `sizes`. */
  function retentionOptions(c, clock, sizes, shared) {
    const { isFailure: _, ...out } = options(c.config, clock, shared)
    checkKeys(c.retention, ['overflow', 'probe', 'release_per_second', 'release_burst', ...Object.keys(RETENTION_KEYS)], 'retention')
    for (const [key, option] of Object.entries(RETENTION_KEYS)) {
      if (key in c.retention) out[option] = number(c.retention[key])
    }
    if (c.retention.overflow !== undefined) out.overflow = { reject: 'reject', drop_oldest: 'dropOldest' }[c.retention.overflow]
    if (c.retention.probe !== undefined) out.probe = { oldest: 'oldest', new_message: 'newMessage' }[c.retention.probe]
    if ('release_per_second' in c.retention || 'release_burst' in c.retention) {
      out.releaseRate = { perSecond: number(c.retention.release_per_second), burst: number(c.retention.release_burst) }
    }
    out.size = (message) => sizes.get(message) ?? 0
    return out
  }

  function checkEvents(seen, step) {
    const want = step.events || []
    const got = seen.map((e) => {
      if (e.dead !== undefined) return { dead: e.dead, reason: e.reason, attempts: e.attempts }
      if (e.dropped !== undefined) return { dropped: e.dropped }
      return { transition: { from: e.from, to: e.to, reason: e.reason } }
    })
    const expected = want.map((w) => {
      if (w.transition === undefined) return w
      checkKeys(w.transition, ['from', 'to', 'reason', 'at'], 'transition')
      const { from, to, reason } = w.transition
      return { transition: { from: STATE[from], to: STATE[to], reason } }
    })
    assert.deepEqual(got, expected, `events ${JSON.stringify(got)} != ${JSON.stringify(expected)}`)
  }

  async function runRetention(c) {
    let clock = 0
    const sizes = new Map()
    const opts = retentionOptions(c, () => clock, sizes, sharedClock(c))
    let queue = new RetentionQueue(opts)
    const seqs = new Map()
    const seen = []
    const listen = (q) => {
      q.on('stateChange', (t) => seen.push(t))
      q.on('dead', (e) => seen.push({ dead: e.message, reason: e.reason, attempts: e.attempts }))
      q.on('dropped', (e) => seen.push({ dropped: e.message }))
    }
    listen(queue)
    for (const step of c.steps) {
      const keys = RETENTION_STEPS[step.op]
      if (keys === undefined) throw new Error(`unknown op ${step.op} in a retention case`)
      checkKeys(step, ['op', 'at', 'events', ...keys], `step ${step.op}`)
      if (step.at !== undefined) clock = step.at
      seen.length = 0
      switch (step.op) {
        case 'submit': {
          sizes.set(step.message, step.bytes ?? 0)
          const got = queue.submit(step.message)
          assert.equal(got.status, step.result, `submit ${step.message}`)
          if (got.seq !== undefined) seqs.set(step.message, got.seq)
          break
        }
        case 'next': {
          const sends = queue.next()
          for (const { seq, message } of sends) assert.equal(seqs.get(message), seq, 'the sequence number handed out')
          assert.deepEqual(
            sends.map((s) => s.message),
            step.sends,
            'sends',
          )
          break
        }
        case 'report':
          assert.equal(queue.report(seqs.get(step.message), step.outcome), step.result, `report ${step.message}`)
          break
        case 'handle_timeout':
          queue.handleTimeout()
          break
        case 'force_open':
          queue.forceOpen(step.for_ms)
          break
        case 'force_open_at_least':
          queue.forceOpenAtLeast(step.for_ms)
          break
        case 'release':
          queue.release()
          break
        case 'expect': {
          if (step.state) assert.equal(queue.getState(), STATE[step.state], 'state')
          const want = step.retention || {}
          checkKeys(want, ['retained', 'in_flight', 'bytes', 'poll_timeout_ms', 'counters'], 'retention expectation')
          const stats = queue.stats()
          if ('retained' in want) assert.equal(stats.retained, want.retained, 'retained')
          if ('in_flight' in want) assert.equal(stats.inFlight, want.in_flight, 'in flight')
          if ('bytes' in want) assert.equal(stats.bytes, want.bytes, 'bytes')
          if ('poll_timeout_ms' in want) assert.equal(queue.pollTimeoutMs(), want.poll_timeout_ms, 'poll timeout')
          for (const [key, n] of Object.entries(want.counters || {})) {
            if (!COUNTERS.includes(key)) throw new Error(`unknown counter ${key}`)
            assert.equal(stats[key], n, `counters.${key}`)
          }
          break
        }
        case 'snapshot_restore': {
          const held = queue.held()
          const saved = step.encoding === 'json' ? JSON.parse(JSON.stringify(queue)) : queue.toBytes()
          if (step.restore_at !== undefined) clock = step.restore_at
          queue = step.encoding === 'json' ? RetentionQueue.fromJSON(opts, saved, held) : RetentionQueue.fromBytes(opts, saved, new Map(held))
          listen(queue)
          break
        }
      }
      checkEvents(seen, step)
      steps += 1
    }
  }

  function runInvalidRetention(c) {
    let opts
    try {
      opts = retentionOptions(c, () => 0, new Map())
    } catch (err) {
      throw new Error(`config: ${err.message}`)
    }
    assert.throws(
      () => new RetentionQueue(opts),
      (err) => {
        assert.ok(err instanceof TypeError || err instanceof RangeError, `${err.name}: ${err.message}`)
        assert.equal(err.option, RETENTION_FIELDS[c.invalid], `the option named: ${err.message}`)
        if (c.problem !== undefined) assert.equal(err.problem, c.problem, `the problem: ${err.message}`)
        return true
      },
    )
  }

  function runInvalid(c) {
    if (c.retention !== undefined) return runInvalidRetention(c)
    let opts
    try {
      opts = options(c.config, () => 0)
    } catch (err) {
      throw new Error(`config: ${err.message}`)
    }
    assert.throws(
      () => new CircuitBreaker(opts),
      (err) => {
        assert.ok(err instanceof TypeError || err instanceof RangeError, `${err.name}: ${err.message}`)
        const names = FIELD_OPTIONS[c.invalid] || [CONFIG_KEYS[c.invalid] || c.invalid.replace(/_(.)/g, (_, l) => l.toUpperCase())]
        assert.ok(names.includes(err.option), `error names ${err.option}, expected ${names}: ${err.message}`)
        if (c.problem !== undefined) assert.equal(err.problem, c.problem, `the problem: ${err.message}`)
        return true
      },
    )
  }

  /** The cases of scenario file `file` (its parsed `doc`), each `{ name, run }`. */
  function runDoc(doc, file) {
    checkKeys(doc, ['format', 'description', 'cases'], file)
    assert.equal(doc.format, FORMAT, `${file}: format`)
    return doc.cases.map((c) => {
      checkKeys(c, ['description', 'config', 'registry', 'retention', 'steps', 'invalid', 'problem'], c.description)
      const expected = EXPECTED_FAILURES[file]?.[c.description]
      const name = `${file.replace('.json', '')}::${c.description}`
      const run = async () => {
        if (c.invalid !== undefined) return runInvalid(c)
        if (c.retention !== undefined) return runRetention(c)
        if (expected === undefined) return runCase(c)
        // An expected failure that passes must be taken off the list; it
        // must fail for its reason (a permit refused), not for another.
        await assert.rejects(runCase(c), (err) => err instanceof TypeError && err.option === 'permit')
      }
      return { name: expected ? `${name} (expected failure: ${expected})` : name, run }
    })
  }

  return { runDoc, steps: () => steps, options, checkKeys, checkRetry, checkTransitions, checkMetrics, COUNTS, STATE }
}

module.exports = { conformance }
