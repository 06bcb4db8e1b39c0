'use strict'
// `make bench` (Node, retention): messages per second through the retention
// protocol, in the same three cases as the Rust harness (bench/src/
// retention.rs): closed (submitted, sent at once, delivered), open
// (submitted, retained), recovered (released 100 at a time through a
// concurrency limit of 100, delivered) — for the addon's RetentionQueue, the
// wasm package's, and the addon's Dispatcher (promises, a `send` that
// resolves at once); the memory a retained message costs a Dispatcher; and
// the Redis store (a local redis-server): retained and stored, then
// released, delivered and forgotten. Medians of ROUNDS, as Markdown tables.
// Run with --expose-gc. No peer library retains messages: the Rust figures
// are the yardstick.

const { spawn } = require('node:child_process')
const net = require('node:net')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const Redis = require('ioredis')
const { Dispatcher, RetentionQueue } = require(path.join(__dirname, '..'))
const { RedisStore } = require(path.join(__dirname, '..', 'redis-store.js'))
const Wasm = require(path.join(__dirname, '..', '..', 'bindings-wasm', 'dist', 'node.js')).RetentionQueue

const MESSAGES = 200_000
const ROUNDS = 5
const STORED = 50_000
const options = { name: 'bench', preset: 'partnerWebhook', concurrencyLimit: 100, size: () => 100 }

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const rate = (n, ms) => (n / ms) * 1000

/** The three cases through a RetentionQueue class: messages/s each. */
function queueRound(Queue) {
  const closed = new Queue(options)
  let t = performance.now()
  for (let i = 0; i < MESSAGES; i++) closed.report(closed.submit(i).seq, 'success')
  const closedRate = rate(MESSAGES, performance.now() - t)
  const q = new Queue(options)
  q.forceOpen()
  t = performance.now()
  for (let i = 0; i < MESSAGES; i++) q.submit(i)
  const retainRate = rate(MESSAGES, performance.now() - t)
  q.release()
  // Released: half-open, one probe; its success closes; then 100 at a time.
  t = performance.now()
  let delivered = 0
  for (let batch = q.next(); batch.length > 0; batch = q.next()) {
    for (const { seq } of batch) {
      q.report(seq, 'success')
      delivered += 1
    }
  }
  const releaseRate = rate(delivered, performance.now() - t)
  if (delivered !== MESSAGES) throw new Error(`released ${delivered}`)
  return [closedRate, retainRate, releaseRate]
}

/** The three cases through a Dispatcher whose send resolves at once. */
async function dispatcherRound() {
  const send = () => Promise.resolve()
  const closed = new Dispatcher({ ...options, send })
  let t = performance.now()
  const all = []
  for (let i = 0; i < MESSAGES; i++) all.push(closed.submit(i))
  await Promise.all(all)
  const closedRate = rate(MESSAGES, performance.now() - t)
  const d = new Dispatcher({ ...options, send })
  d.forceOpen()
  all.length = 0
  t = performance.now()
  for (let i = 0; i < MESSAGES; i++) all.push(d.submit(i))
  const retainRate = rate(MESSAGES, performance.now() - t)
  t = performance.now()
  d.release()
  await Promise.all(all)
  const releaseRate = rate(MESSAGES, performance.now() - t)
  return [closedRate, retainRate, releaseRate]
}

/** Bytes per retained message (a 100-character string): V8 heap and RSS. */
function memory() {
  const d = new Dispatcher({ ...options, send: () => Promise.resolve() })
  d.forceOpen()
  const messages = Array.from({ length: MESSAGES }, (_, i) => `${i}`.padStart(100, 'x'))
  global.gc()
  const before = process.memoryUsage()
  for (const m of messages) d.submit(m)
  global.gc()
  const after = process.memoryUsage()
  const per = (k) => Math.round((after[k] - before[k]) / MESSAGES)
  return { heap: per('heapUsed'), d }
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Retained and stored (submit until persisted), then released and forgotten: messages/s. */
async function redisRound(redis, round) {
  const store = new RedisStore(redis, { key: `bench:${round}` })
  const d = await Dispatcher.open({ ...options, store, send: () => Promise.resolve() })
  d.forceOpen()
  const all = []
  let t = performance.now()
  for (let i = 0; i < STORED; i++) all.push(d.submit({ id: i, body: 'x'.repeat(100) }))
  await d.persisted()
  const storeRate = rate(STORED, performance.now() - t)
  t = performance.now()
  d.release()
  await Promise.all(all)
  await d.persisted()
  const releaseRate = rate(STORED, performance.now() - t)
  if ((await redis.hlen(`bench:${round}:messages`)) !== 0) throw new Error('messages left in Redis')
  return [storeRate, releaseRate]
}

const fmt = (x) => `${(x / 1e6).toFixed(2)} M`

async function main() {
  const rows = { addon: [], wasm: [], dispatcher: [] }
  for (let r = 0; r < ROUNDS; r++) {
    rows.addon.push(queueRound(RetentionQueue))
    rows.wasm.push(queueRound(Wasm))
    rows.dispatcher.push(await dispatcherRound())
  }
  console.log(`\n### Retention in Node: ${MESSAGES.toLocaleString('en')} messages, medians of ${ROUNDS}\n`)
  console.log('| messages/s | closed: sent at once, delivered | open: retained | recovered: released 100 at a time |')
  console.log('|---|---:|---:|---:|')
  const names = { addon: 'RetentionQueue (addon)', wasm: 'RetentionQueue (halfopen-wasm)', dispatcher: 'Dispatcher (addon, promises)' }
  for (const [key, runs] of Object.entries(rows)) {
    const cols = [0, 1, 2].map((i) => fmt(median(runs.map((run) => run[i]))))
    console.log(`| ${names[key]} | ${cols.join(' | ')} |`)
  }
  const m = memory()
  console.log(`\nA retained message (a 100-character string) costs a Dispatcher ${m.heap} B of V8 heap, the message included (the core's bookkeeping, about 42 B, is outside the heap).`)

  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  const redis = new Redis({ host: '127.0.0.1', port })
  const stored = []
  for (let r = 0; r < 3; r++) stored.push(await redisRound(redis, r))
  await redis.quit()
  server.kill()
  console.log(`\n### The Redis store (local redis-server), ${STORED.toLocaleString('en')} messages, medians of 3\n`)
  console.log('| messages/s | retained and stored | released, delivered, forgotten |\n|---|---:|---:|')
  console.log(`| Dispatcher + RedisStore | ${fmt(median(stored.map((s) => s[0])))} | ${fmt(median(stored.map((s) => s[1])))} |`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
