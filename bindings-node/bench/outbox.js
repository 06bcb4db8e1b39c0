'use strict'
// The Outbox (issue 24) against a local redis-server with AOF (appendfsync
// everysec): events stored per second by one process and by three at once
// (submits of 1,000 at a time, awaited), events delivered per second from a
// backlog by the holder (a send that does nothing: the outbox's own cost,
// reads, dispatch and removals; concurrencyLimit 1 and 64), and a restart
// into a backlog of 1,000,000: the longest event-loop stall
// (perf_hooks.monitorEventLoopDelay) and the RSS while it delivers the
// first 100,000. Medians of 3 runs for the rates.
// Run: `cd bindings-node && node bench/outbox.js`.

const { fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const Redis = require('ioredis')
const { Outbox } = require('..')
const { freePort, startRedis } = require('../test/support/redis-server.js')

const RUNS = 3
const EVENTS = Number(process.env.EVENTS ?? 100_000)
const BACKLOG = Number(process.env.BACKLOG ?? 1_000_000)

/** A child: submits EVENTS to partner argv[4] when told, then says how long it took. */
async function submitter() {
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.argv[3]) })
  const outbox = new Outbox({ redis, partner: process.argv[4], concurrencyLimit: 1, send: async () => {} })
  process.send({ what: 'ready' })
  await new Promise((resolve) => process.once('message', resolve))
  const started = performance.now()
  await submitAll(outbox, EVENTS)
  process.send({ what: 'done', ms: performance.now() - started })
  await outbox.close()
  redis.disconnect()
  process.disconnect()
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function submitAll(outbox, n) {
  for (let i = 0; i < n; i += 1_000) {
    const batch = []
    for (let j = i; j < Math.min(n, i + 1_000); j++) batch.push(outbox.submit({ n: j, body: 'order confirmed: #12345, total 99.90' }))
    await Promise.all(batch)
  }
}

/** Another process holds `partner`'s lease for an hour: submitting alone, nobody delivers. */
async function holdLease(redis, partner) {
  await redis.set(`halfopen:outbox:v1:{${partner}}:lease`, 'elsewhere 1', 'PX', 3_600_000)
}

/** `n` events in `partner`'s log, written as an outbox writes them (pipelines of 10,000). */
async function fill(redis, partner, n) {
  const log = `halfopen:outbox:v1:{${partner}}:log`
  for (let i = 0; i < n; i += 10_000) {
    const pipe = redis.pipeline()
    for (let j = i; j < Math.min(n, i + 10_000); j++) pipe.xadd(log, '*', 'p', JSON.stringify({ n: j, body: 'order confirmed: #12345, total 99.90' }))
    await pipe.exec()
  }
}

async function until(check) {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5))
}

async function main() {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-bench-'))
  const server = await startRedis(port, ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir])
  const redis = new Redis({ host: '127.0.0.1', port })
  const rows = []
  try {
    // Stored per second, one process (it holds no lease: a partner nobody delivers).
    const one = []
    for (let run = 0; run < RUNS; run++) {
      await holdLease(redis, `submit-${run}`)
      const outbox = new Outbox({ redis, partner: `submit-${run}`, concurrencyLimit: 1, send: async () => {} })
      const started = performance.now()
      await submitAll(outbox, EVENTS)
      one.push(EVENTS / ((performance.now() - started) / 1000))
      await outbox.close()
      await redis.del(`halfopen:outbox:v1:{submit-${run}}:log`)
    }
    rows.push(['submit, 1 process', `${Math.round(median(one)).toLocaleString('en')} events/s`])

    // Three processes at once, one log.
    const three = []
    for (let run = 0; run < RUNS; run++) {
      const partner = `three-${run}`
      await holdLease(redis, partner)
      const children = Array.from({ length: 3 }, () => fork(__filename, ['submitter', String(port), partner]))
      const exited = children.map((c) => new Promise((resolve) => c.once('exit', resolve)))
      await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', resolve))))
      const started = performance.now()
      for (const c of children) c.send('go')
      await Promise.all(children.map((c) => new Promise((resolve) => c.on('message', (m) => m.what === 'done' && resolve()))))
      three.push((3 * EVENTS) / ((performance.now() - started) / 1000))
      await Promise.all(exited)
      await redis.del(`halfopen:outbox:v1:{${partner}}:log`)
    }
    rows.push(['submit, 3 processes together', `${Math.round(median(three)).toLocaleString('en')} events/s`])

    // Delivered per second from a backlog (send does nothing).
    for (const limit of [1, 64]) {
      const rates = []
      for (let run = 0; run < RUNS; run++) {
        const partner = `deliver-${limit}-${run}`
        await fill(redis, partner, EVENTS)
            const started = performance.now()
        const outbox = await Outbox.open({ redis, partner, concurrencyLimit: limit, send: async () => {} })
        await until(() => outbox.stats().removed === EVENTS)
        rates.push(EVENTS / ((performance.now() - started) / 1000))
        await outbox.close()
      }
      rows.push([`deliver from a backlog, concurrencyLimit ${limit}`, `${Math.round(median(rates)).toLocaleString('en')} events/s`])
    }

    // A restart into a backlog of 1,000,000.
    const partner = 'restart'
    await fill(redis, partner, BACKLOG)
    global.gc?.()
    const rssBefore = process.memoryUsage().rss
    const delay = monitorEventLoopDelay({ resolution: 5 })
    delay.enable()
    const started = performance.now()
    const outbox = await Outbox.open({ redis, partner, concurrencyLimit: 64, send: async () => {} })
    let rssMax = 0
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 20)
    const first = Math.min(100_000, BACKLOG)
    await until(() => outbox.stats().removed >= first)
    const ms = performance.now() - started
    clearInterval(sampler)
    delay.disable()
    await outbox.close()
    rows.push([`restart into ${BACKLOG.toLocaleString('en')} stored: first ${first.toLocaleString('en')} delivered`, `${Math.round(ms)} ms`])
    rows.push(['  longest event-loop stall meanwhile', `${(delay.max / 1e6).toFixed(1)} ms (p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms)`])
    rows.push(['  RSS growth meanwhile (max)', `${((rssMax - rssBefore) / 1e6).toFixed(1)} MB`])
  } finally {
    redis.disconnect()
    server.kill()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log(`Outbox on a local redis-server (AOF everysec), Node ${process.version}, ${os.cpus().length} cores; medians of ${RUNS}`)
  console.log('| what | figure |\n|---|---|')
  for (const [what, figure] of rows) console.log(`| ${what} | ${figure} |`)
}

if (process.argv[2] === 'submitter') submitter()
else main()
