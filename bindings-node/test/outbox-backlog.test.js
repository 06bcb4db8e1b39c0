'use strict'
// A restart into a backlog of 1,000,000 stored events (issue 24): the
// process opens at once and streams the log in pages, so the event loop is
// never held for long and its memory does not grow with the backlog, while
// it delivers the first 100,000 in the log's order.
//
// "Never held for long" is asserted as the work of one turn of the event
// loop, which is what the outbox bounds: the sends started between two of
// its check phases (setImmediate) are at most the core's `turnEvents` plus
// the sends that waited for that turn (at most the concurrency limit).
// Milliseconds are not asserted: on a loaded machine they measure the load
// (an on-CPU bound of 50 ms between two ticks of a 1 ms timer failed at
// 64 ms beside a cross-build, the ticks delayed while replies piled up).
// The main thread's on-CPU time between two ticks (Linux's
// /proc/<pid>/task/<tid>/schedstat) and the wall-clock delay
// (perf_hooks.monitorEventLoopDelay) are printed; BENCHMARKS.md measures
// them on a quiet machine (`node bench/outbox.js`).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const Redis = require('ioredis')
const { Outbox } = require('..')
const { aofRedisForTests } = require('./support/redis-server.js')

const BACKLOG = 1_000_000
const FIRST = 100_000
const LIMIT = 64
const PAGE = 1_000

const redisServer = aofRedisForTests('halfopen-backlog-')

/** `n` events in `partner`'s log, as an outbox writes them (a script of 100,000 XADDs a call: the fill is not what is measured). */
async function fill(redis, partner, n) {
  const script = "for i = 1, tonumber(ARGV[2]) do redis.call('XADD', KEYS[1], '*', 'p', '{\"n\":' .. (tonumber(ARGV[1]) + i - 1) .. ',\"body\":\"order confirmed\"}') end"
  for (let from = 0; from < n; from += 100_000) await redis.eval(script, 1, `halfopen:outbox:v1:{${partner}}:log`, from, Math.min(100_000, n - from))
}

test('a restart into 1,000,000 stored events: a turn of the event loop starts at most turnEvents + the limit of sends, at most two pages held, sent in the log order', { timeout: 120_000 }, async (t) => {
  const redis = new Redis({ host: '127.0.0.1', port: redisServer.port })
  t.after(() => redis.disconnect())
  await fill(redis, 'backlog', BACKLOG)
  assert.equal(await redis.xlen('halfopen:outbox:v1:{backlog}:log'), BACKLOG)

  global.gc?.()
  const rssBefore = process.memoryUsage().rss
  let rssMax = rssBefore
  // (A reading includes the resolution: an idle loop reads 1 ms.)
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const schedstat = `/proc/${process.pid}/task/${process.pid}/schedstat`
  const onCpuMs = () => Number(fs.readFileSync(schedstat, 'utf8').split(' ')[0]) / 1e6
  let cpuBefore = onCpuMs()
  let heldMs = 0
  const ticker = setInterval(() => {
    const cpu = onCpuMs()
    heldMs = Math.max(heldMs, cpu - cpuBefore)
    cpuBefore = cpu
  }, 1)
  const started = performance.now()
  let next = 0
  let outOfOrder = 0
  // Sends started since the last check phase, and the most in one turn.
  let inTurn = 0
  let turnMax = 0
  let marked = false
  const endTurn = () => {
    turnMax = Math.max(turnMax, inTurn)
    inTurn = 0
    marked = false
  }
  const outbox = await Outbox.open({
    redis,
    partner: 'backlog',
    concurrencyLimit: LIMIT,
    // Pages longer than a turn (the default page is one turn's events): a
    // page handed on, or sent, in one turn would show here.
    pageSize: PAGE,
    send: async (event) => {
      if (!marked) {
        marked = true
        setImmediate(endTurn)
      }
      inTurn += 1
      if (event.n !== next) outOfOrder += 1
      next = event.n + 1
    },
  })
  const turnEvents = outbox._native.turnEvents()
  const openedMs = performance.now() - started
  let heldMax = 0
  const sampler = setInterval(() => {
    rssMax = Math.max(rssMax, process.memoryUsage().rss)
    heldMax = Math.max(heldMax, outbox.stats().held)
  }, 20)
  await new Promise((resolve) => {
    const check = () => (outbox.stats().removed >= FIRST ? resolve() : setTimeout(check, 10))
    check()
  })
  const ms = performance.now() - started
  clearInterval(sampler)
  clearInterval(ticker)
  delay.disable()
  await outbox.close()
  const maxMs = delay.max / 1e6
  const growthMb = (rssMax - rssBefore) / 1e6
  t.diagnostic(
    `open ${openedMs.toFixed(1)} ms; first ${FIRST.toLocaleString('en')} of ${BACKLOG.toLocaleString('en')} in ${Math.round(ms)} ms; ` +
      `at most ${turnMax} sends started in a turn; the loop held at most ${heldMs.toFixed(1)} ms on the CPU; longest event-loop delay (wall clock) ${maxMs.toFixed(1)} ms (p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms); ` +
      `at most ${heldMax} events held; RSS growth ${growthMb.toFixed(1)} MB`,
  )
  // A send starts in the log's order (a limit of 64 runs them together, started in order).
  assert.equal(outOfOrder, 0)
  assert.ok(turnMax > 0 && turnMax <= turnEvents + LIMIT, `${turnMax} sends started in one turn (turnEvents ${turnEvents}, limit ${LIMIT})`)
  // At most two pages held; the RSS grows by the
  // heap's own slack (young generation, buffers), not with the backlog (a
  // process that loaded it grew by gigabytes).
  assert.ok(heldMax <= 2 * PAGE, `${heldMax} events held`)
  assert.ok(growthMb <= 128, `RSS grew ${growthMb.toFixed(1)} MB`)
  assert.equal(await redis.xlen('halfopen:outbox:v1:{backlog}:log'), BACKLOG - outbox.stats().removed)
})
