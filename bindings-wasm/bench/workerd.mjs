// `make bench` (workerd part): halfopen-wasm inside the real workerd.
// - per call: a request runs N calls (`await fn()`, or through a breaker
//   closed / forced open); its time is taken outside (workerd's clocks do
//   not move while a request runs), less the time of a request with no
//   calls; medians of ROUNDS;
// - cold start: from starting workerd to the first answer of a request that
//   makes a breaker and admits one call, less the same for a worker without
//   the package (workerd's own start), medians of ROUNDS.
//   node bench/workerd.mjs            (after make wasm-build)

import { createServer } from 'node:http'
import { serveWorker, writeWorker } from '../support/workerd.js'

const CALLS = 200_000
const ROUNDS = 7
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]

const BENCH = `
import { CircuitBreaker } from './halfopen/workerd.js'
const fn = () => Promise.resolve(1)
const seed = { name: 'bench', failureThreshold: 5, windowMs: 60000, openTimeoutMs: 30000, halfOpenMaxAttempts: 3 }
let closed = null
let open = null
export default {
  async fetch(request) {
    const url = new URL(request.url)
    const n = Number(url.searchParams.get('n') ?? 0)
    if (url.pathname === '/first') {
      await new CircuitBreaker({ name: 'first' }).execute(fn)
    } else if (url.pathname === '/raw') {
      for (let i = 0; i < n; i++) await fn()
    } else if (url.pathname === '/closed') {
      closed ??= new CircuitBreaker(seed)
      for (let i = 0; i < n; i++) await closed.execute(fn)
    } else if (url.pathname === '/open') {
      if (open === null) {
        open = new CircuitBreaker(seed)
        open.forceOpen()
      }
      for (let i = 0; i < n; i++) {
        try {
          await open.execute(fn)
        } catch {}
      }
    }
    return new Response('ok')
  },
}
`
const BASELINE = `export default { async fetch() { return new Response('ok') } }`

async function freePort() {
  const s = createServer().listen(0, '127.0.0.1')
  await new Promise((r) => s.on('listening', r))
  const { port } = s.address()
  s.close()
  return port
}

async function timed(url) {
  const start = process.hrtime.bigint()
  const r = await fetch(url)
  await r.text()
  return Number(process.hrtime.bigint() - start)
}

async function perCall() {
  const port = await freePort()
  const { config } = writeWorker({ 'main.js': BENCH }, { port })
  const child = await serveWorker(config, port)
  try {
    const at = (path, n) => `http://127.0.0.1:${port}${path}?n=${n}`
    for (const path of ['/raw', '/closed', '/open']) await timed(at(path, CALLS / 10))
    const runs = { empty: [], '/raw': [], '/closed': [], '/open': [] }
    for (let round = 0; round < ROUNDS; round++) {
      runs.empty.push(await timed(at('/raw', 0)))
      for (const path of ['/raw', '/closed', '/open']) runs[path].push(await timed(at(path, CALLS)))
    }
    const empty = median(runs.empty)
    const ns = (path) => (median(runs[path]) - empty) / CALLS
    return { raw: ns('/raw'), closed: ns('/closed'), open: ns('/open') }
  } finally {
    child.kill()
  }
}

async function coldStart(source) {
  const times = []
  for (let round = 0; round < ROUNDS; round++) {
    const port = await freePort()
    const { config } = writeWorker({ 'main.js': source }, { port })
    const start = process.hrtime.bigint()
    const child = await serveWorker(config, port, '/first')
    times.push(Number(process.hrtime.bigint() - start) / 1e6)
    child.kill()
  }
  return median(times)
}

const calls = await perCall()
console.log(`workerd: ${CALLS} calls per request, ${ROUNDS} rounds, medians\n`)
console.log('| inside workerd | ns per call | overhead over raw await |')
console.log('|---|---:|---:|')
console.log(`| raw await fn() | ${calls.raw.toFixed(0)} | |`)
console.log(`| halfopen-wasm, closed | ${calls.closed.toFixed(0)} | ${(calls.closed - calls.raw).toFixed(0)} |`)
console.log(`| halfopen-wasm, open (a rejection) | ${calls.open.toFixed(0)} | |`)
const withPackage = await coldStart(BENCH)
const without = await coldStart(BASELINE)
console.log(`\nCold start: workerd to the first admitted call ${withPackage.toFixed(1)} ms, without the package ${without.toFixed(1)} ms: the package adds ${(withPackage - without).toFixed(1)} ms (compiling and instantiating the module, the first call).`)
