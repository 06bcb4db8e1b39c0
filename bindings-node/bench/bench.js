'use strict'
// `make bench` (Node part): one run, side by side: a raw `await fn()`, the
// seed's class (plain-JS port), opossum 10, cockatiel 4, halfopen and
// halfopen-wasm.
// - closed: overhead per call over the raw await;
// - open: cost of a rejected call;
// - fallback: cost of a refused call answered with a value (each library's
//   fallback; the seed's class has none: a `catch`);
// - memory per breaker, 100,000 breakers (V8 heap and process RSS: the
//   addon's breakers live outside the V8 heap);
// - require('halfopen') with the addon and with the WebAssembly fallback.
// Rounds interleave the contenders; medians of ROUNDS are printed, as a
// Markdown table. Run with --expose-gc. HALFOPEN_PKG=<dir> measures another
// build of the package (an earlier commit's, for before/after figures).

const opossum = require('opossum')
const cockatiel = require('cockatiel')
const { spawn, spawnSync } = require('node:child_process')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const pkg = process.env.HALFOPEN_PKG || path.join(__dirname, '..')
const { CircuitBreaker, Registry } = require(pkg)
const { NativeBreaker } = require(path.join(pkg, 'native.js'))
const Seed = require('./seed-circuit-breaker.js').CircuitBreaker
// The wasm package (make wasm-build), through Node's require of ES modules.
const Wasm = require(path.join(__dirname, '..', '..', 'bindings-wasm', 'dist', 'node.js')).CircuitBreaker

const CALLS = 200_000
const ROUNDS = 7
const BREAKERS = 100_000
const seedOptions = { name: 'bench', failureThreshold: 5, windowMs: 60_000, openTimeoutMs: 30_000, halfOpenMaxAttempts: 3 }
// The open and fallback rounds: open for an hour, so that no breaker half-opens
// (and answers calls) before its rounds are over (30 s did, mid-measurement).
const HOUR = 3_600_000
const openOptions = { ...seedOptions, openTimeoutMs: HOUR }
/** A breaker's options as a registry's (a registry takes no name). */
const keyOf = ({ name, ...options }) => options
// Seed 001's webhook breaker: a slow-call threshold (latency matters for every call).
const webhookOptions = {
  name: 'bench-webhook',
  failureThreshold: null,
  consecutiveFailures: 5,
  slowCallMs: 10_000,
  openTimeoutMs: 10_000,
  backoffFactor: 1,
  maxOpenTimeoutMs: 10_000,
  halfOpenMaxAttempts: 1,
}
const fn = () => Promise.resolve(1)
// What a refused call is answered with (seed 000's case 3).
const BUSY = 'estamos com volume alto, retornaremos em instantes'
const failing = () => Promise.reject(new Error('down'))

function cockatielBreaker() {
  return cockatiel.circuitBreaker(cockatiel.handleAll, {
    halfOpenAfter: 30_000,
    breaker: new cockatiel.ConsecutiveBreaker(5),
  })
}

function opossumBreaker(resetTimeout = 30_000) {
  // The call is passed per fire(), so one breaker serves any fn.
  return new opossum((f) => f(), { timeout: false, errorThresholdPercentage: 50, resetTimeout, volumeThreshold: 5 })
}

const contenders = {
  'raw await fn()': { closed: () => ({ run: () => fn() }) },
  'seed class (plain-JS port)': {
    closed: () => {
      const b = new Seed(seedOptions)
      return { run: () => b.execute(fn) }
    },
    open: async () => {
      const b = new Seed(openOptions)
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
    fallback: async () => {
      const b = new Seed(openOptions)
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn).catch(() => BUSY) }
    },
    make: () => new Seed(seedOptions),
  },
  'opossum 10': {
    closed: () => {
      const b = opossumBreaker()
      return { run: () => b.fire(fn) }
    },
    open: async () => {
      const b = opossumBreaker(HOUR)
      b.open()
      return { run: () => b.fire(fn) }
    },
    fallback: async () => {
      const b = opossumBreaker(HOUR)
      b.fallback(() => BUSY)
      b.open()
      return { run: () => b.fire(fn) }
    },
    make: () => opossumBreaker(),
  },
  'cockatiel 4': {
    closed: () => {
      const b = cockatielBreaker()
      return { run: () => b.execute(fn) }
    },
    open: async () => {
      const b = cockatielBreaker()
      b.isolate()
      return { run: () => b.execute(fn) }
    },
    fallback: async () => {
      const b = cockatielBreaker()
      b.isolate()
      const p = cockatiel.wrap(cockatiel.fallback(cockatiel.handleType(cockatiel.BrokenCircuitError), () => BUSY), b)
      return { run: () => p.execute(fn) }
    },
    make: () => cockatielBreaker(),
  },
  halfopen: {
    closed: () => {
      const b = new CircuitBreaker(seedOptions)
      return { run: () => b.execute(fn) }
    },
    open: async () => {
      const b = new CircuitBreaker(openOptions)
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
    fallback: async () => {
      const b = new CircuitBreaker({ ...openOptions, fallback: () => BUSY })
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
    make: () => new CircuitBreaker(seedOptions),
  },
  // A Registry's key (issue 26: a refusal crosses into the addon once).
  'halfopen, a Registry key': {
    closed: () => {
      const key = new Registry(keyOf(seedOptions)).get('instance-1')
      return { run: () => key.execute(fn) }
    },
    open: async () => {
      const key = new Registry(keyOf(openOptions)).get('instance-1')
      for (let i = 0; i < 5; i++) await key.execute(failing).catch(() => {})
      return { run: () => key.execute(fn) }
    },
  },
  'halfopen-wasm (the same JavaScript half over the wasm module)': {
    closed: () => {
      const b = new Wasm(seedOptions)
      return { run: () => b.execute(fn) }
    },
    open: async () => {
      const b = new Wasm(openOptions)
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
    fallback: async () => {
      const b = new Wasm({ ...openOptions, fallback: () => BUSY })
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
    make: () => new Wasm(seedOptions),
  },
  // The concurrency limit on (the licence's room is counted in JavaScript).
  'halfopen, seed 000 options + adaptive limit': {
    closed: () => {
      const b = new CircuitBreaker({ ...seedOptions, adaptiveLimitMin: 1, adaptiveLimitMax: 1000 })
      return { run: () => b.execute(fn) }
    },
    // Open: each rejection asks the core, which spreads its retry hint.
    open: async () => {
      const b = new CircuitBreaker({ ...openOptions, adaptiveLimitMin: 1, adaptiveLimitMax: 1000 })
      for (let i = 0; i < 5; i++) await b.execute(failing).catch(() => {})
      return { run: () => b.execute(fn) }
    },
  },
  'halfopen, seed 000 options + fixed limit': {
    closed: () => {
      const b = new CircuitBreaker({ ...seedOptions, concurrencyLimit: 100 })
      return { run: () => b.execute(fn) }
    },
  },
  // What the closed path costs without a clock reading per success: a policy
  // with no time window (its licence has no bucket end), or a clock that
  // returns a number the caller keeps (a coarse clock).
  'halfopen, consecutive failures (no reading needed)': {
    closed: () => {
      const b = new CircuitBreaker({ name: 'bench-consecutive', failureThreshold: null, consecutiveFailures: 5 })
      return { run: () => b.execute(fn) }
    },
  },
  // A listener of another event: the breaker's listener table exists.
  'halfopen, a stateChange listener': {
    closed: () => {
      const b = new CircuitBreaker(seedOptions)
      b.on('stateChange', () => {})
      return { run: () => b.execute(fn) }
    },
  },
  'halfopen, seed 000 options, a cached clock': {
    closed: () => {
      const cached = performance.now()
      const b = new CircuitBreaker({ ...seedOptions, clock: () => cached })
      return { run: () => b.execute(fn) }
    },
  },
  'halfopen, seed 001 options (slow-call threshold)': {
    closed: () => {
      const b = new CircuitBreaker(webhookOptions)
      return { run: () => b.execute(fn) }
    },
  },
  // Not breakers: the least a call through any wrapper costs, reactions to
  // what `fn` returns (seed 000's floor: it reads no clock a call) ...
  'floor: a reaction (no breaker)': {
    closed: () => {
      const counted = { calls: 0 }
      const onError = (err) => {
        throw err
      }
      const onValue = (value) => {
        counted.calls += 1
        return value
      }
      return { run: () => fn().then(onValue, onError) }
    },
  },
  // ... and the least an exact slow-call judgement costs, seed 001's floor
  // (the call's start read, its end read, its reactions, a slow call
  // counted).
  'floor: two readings and a reaction (no breaker)': {
    closed: () => {
      const counted = { slow: 0 }
      const onError = (err) => {
        throw err
      }
      return {
        run: () => {
          const start = performance.now()
          return fn().then((value) => {
            if (performance.now() - start > webhookOptions.slowCallMs) counted.slow += 1
            return value
          }, onError)
        },
      }
    },
  },
}

// Each contender is timed by a loop of its own: one loop shared by all has
// one `run()` call site that sees every contender, and what V8 then inlines
// depends on which ran before (the same build's overhead moved by half
// between runs); a loop per contender keeps its call site to one function.
const LOOP = `return (async () => {
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) {
    try {
      await run()
    } catch {}
  }
  return Number(process.hrtime.bigint() - start) / calls
})()`
const loops = new Map()

/** ns per `run()` over `calls` awaited calls, in `run`'s own loop. */
function time(run, calls) {
  let loop = loops.get(run)
  if (loop === undefined) {
    loop = new Function('run', 'calls', LOOP)
    loops.set(run, loop)
  }
  return loop(run, calls)
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]

async function measure(kind) {
  const results = {}
  const runs = {}
  for (const [name, c] of Object.entries(contenders)) if (c[kind]) runs[name] = await c[kind]()
  for (const name of Object.keys(runs)) await time(runs[name].run, CALLS / 10) // warm up
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, r] of Object.entries(runs)) {
      results[name] ||= []
      // Each starts with a clean heap: no contender pays for the garbage of
      // the one before it.
      global.gc()
      results[name].push(await time(r.run, CALLS))
    }
  }
  return Object.fromEntries(Object.entries(results).map(([n, xs]) => [n, median(xs)]))
}

function memory(make) {
  global.gc()
  const before = process.memoryUsage()
  const keep = []
  for (let i = 0; i < BREAKERS; i++) keep.push(make())
  global.gc()
  const after = process.memoryUsage()
  const per = (k) => (after[k] - before[k]) / BREAKERS
  keep.length = 0
  return { heap: per('heapUsed'), rss: per('rss') }
}

/** A redis-server on a free port for the group contender, a client, and `stop()` (also at exit). */
async function startRedis() {
  const port = 20000 + Math.floor(Math.random() * 20000)
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  process.on('exit', () => server.kill())
  const Redis = require(require.resolve('ioredis', { paths: [pkg] }))
  const redis = new Redis({ host: '127.0.0.1', port })
  // (The client and the server's pipes would keep the process alive.)
  const stop = () => {
    redis.disconnect()
    server.kill()
  }
  return { redis, stop }
}

// `node --expose-gc bench/bench.js [closed] [open] [fallback]`: only those
// tables (default: every table, and the clock, memory and require ones).
const ONLY = process.argv.slice(2)
const wanted = (table) => ONLY.length === 0 || ONLY.includes(table)

/** The table of `kind` (ns per refused call), with each contender's ratio to the best peer. */
async function refusals(kind, title) {
  const results = await measure(kind)
  const best = Math.min(...Object.entries(results).filter(([n]) => !n.startsWith('halfopen')).map(([, v]) => v))
  console.log(`\n### ${title}\n`)
  console.log('| contender | ns/call | × best peer |')
  console.log('|---|---:|---:|')
  for (const [name, ns] of Object.entries(results)) console.log(`| ${name} | ${ns.toFixed(0)} | ${(ns / best).toFixed(2)} |`)
}

async function main() {
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc')
  console.log(`node ${process.version}; ${CALLS} calls per round, ${ROUNDS} rounds, medians\n`)
  if (wanted('closed')) await closedTable()
  if (wanted('open')) await refusals('open', 'Open state: ns per rejected call')
  if (wanted('fallback')) await refusals('fallback', 'Open state with a fallback: ns per refused call answered with a value (the seed class: a catch)')
  if (ONLY.length === 0) others()
}

async function closedTable() {
  // The call path of a breaker in a group (its exchanges with Redis, one a
  // second, run beside it).
  const { redis, stop } = await startRedis()
  let grouped
  contenders['halfopen in a group (Redis)'] = {
    closed: () => {
      grouped = new CircuitBreaker({ ...seedOptions, group: { redis, name: 'bench' } })
      return { run: () => grouped.execute(fn) }
    },
  }
  const closed = await measure('closed')
  grouped.leaveGroup()
  stop()
  const raw = closed['raw await fn()']
  const seed = closed['seed class (plain-JS port)'] - raw
  console.log('### Closed state: ns per call\n')
  console.log('| contender | ns/call | overhead over raw await | × seed class overhead |')
  console.log('|---|---:|---:|---:|')
  for (const [name, ns] of Object.entries(closed)) {
    const over = ns - raw
    console.log(`| ${name} | ${ns.toFixed(0)} | ${name.startsWith('raw') ? '' : over.toFixed(0)} | ${name.startsWith('raw') ? '' : (over / seed).toFixed(2)} |`)
  }
}

/** The clock, memory and require tables. */
function others() {
  // What one clock reading costs here: a time window needs one per success.
  console.log('\n### A clock reading: ns per call\n')
  console.log('| clock | ns/call |')
  console.log('|---|---:|')
  for (const [name, clock] of [['performance.now()', () => performance.now()], ['Date.now()', () => Date.now()]]) {
    const rounds = []
    for (let round = 0; round < ROUNDS; round++) {
      const start = process.hrtime.bigint()
      let sink = 0
      for (let i = 0; i < CALLS * 10; i++) sink += clock()
      rounds.push(Number(process.hrtime.bigint() - start) / (CALLS * 10) + (sink === -1 ? 1 : 0))
    }
    console.log(`| ${name} | ${median(rounds).toFixed(1)} |`)
  }
  console.log(`\n### Memory per breaker (${BREAKERS} breakers)\n`)
  console.log('| contender | V8 heap bytes | process RSS bytes (noisy) |')
  console.log('|---|---:|---:|')
  for (const [name, c] of Object.entries(contenders)) {
    if (!c.make) continue
    const m = memory(c.make)
    console.log(`| ${name} | ${m.heap.toFixed(0)} | ${m.rss.toFixed(0)} |`)
  }
  console.log(`\nhalfopen's native struct per breaker: ${NativeBreaker.bytes()} bytes (its configuration is shared).`)
  // What the WebAssembly fallback (no prebuilt binary) costs at `require`:
  // a fresh process each time, medians of ROUNDS.
  console.log(`\n### require('halfopen'): ms, fresh process, median of ${ROUNDS}\n`)
  console.log('| backend | ms |\n|---|---:|')
  for (const backend of ['native', 'wasm']) {
    const code = "const t = performance.now(); require('.'); console.log(performance.now() - t)"
    const times = []
    for (let round = 0; round < ROUNDS; round++) {
      const out = spawnSync(process.execPath, ['-e', code], { cwd: pkg, encoding: 'utf8', env: { ...process.env, HALFOPEN_BACKEND: backend } })
      times.push(Number(out.stdout))
    }
    console.log(`| ${backend} | ${median(times).toFixed(1)} |`)
  }
}

main()
