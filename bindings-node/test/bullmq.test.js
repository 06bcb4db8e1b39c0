'use strict'
// halfopen/bullmq against a real redis-server and BullMQ 5: a refused job
// goes back to the queue at the breaker's hint without using an attempt,
// and nothing is lost; with one breaker held open, the worker stops
// fetching (worker.rateLimit) instead of fetching and requeuing job after
// job; a Registry's open key never stops the others. Every wait is for
// BullMQ's or the breaker's own answer.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Queue, Worker } = require('bullmq')
const { CircuitBreaker, Registry } = require('..')
const { breakerProcessor } = require('../bullmq.js')
const path = require('node:path')
const { freePort, startRedis } = require('./support/redis-server.js')
const { PACKAGE, typeCheck } = require('./support/tsc.js')

let server
let connection
const CONCURRENCY = 5

before(async () => {
  const port = await freePort()
  server = await startRedis(port)
  connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null }
})

after(() => server.kill())

async function until(check) {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 10))
}

/** A queue of `n` jobs `{ n, key }`, and a worker running `processor` on it. */
async function queueOf(name, n, processor, keyOf = () => 'gw') {
  const queue = new Queue(name, { connection })
  await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'send', data: { n: i, key: keyOf(i) } })))
  const worker = new Worker(name, processor, { connection, concurrency: CONCURRENCY })
  return { queue, worker }
}

async function closeAll({ queue, worker }) {
  await worker.close(true)
  await queue.obliterate({ force: true })
  await queue.close()
}

test('options are checked: a typed error names the option', () => {
  const breaker = new CircuitBreaker({ name: 'gw' })
  const send = async () => {}
  const wrong = (options, option, Type = TypeError) => assert.throws(() => breakerProcessor(options), (e) => e instanceof Type && e.option === option)
  wrong(null, 'options')
  wrong({ breaker: {}, send }, 'breaker')
  wrong({ breaker, send: 'post' }, 'send')
  wrong({ breaker, send, key: () => 'a' }, 'key')
  wrong({ breaker: new Registry(), send }, 'key')
  wrong({ breaker, send, pauseWhenOpenMs: '1s' }, 'pauseWhenOpenMs')
  wrong({ breaker, send, pauseWhenOpenMs: -1 }, 'pauseWhenOpenMs', RangeError)
  wrong({ breaker, send, pauseWhenOpenMs: Number.NaN }, 'pauseWhenOpenMs', RangeError)
})

test('refused jobs go back to the queue at the hint without using an attempt: every job sent exactly once', { timeout: 60_000 }, async () => {
  const breaker = new CircuitBreaker({ name: 'gw', openTimeoutMs: 200 })
  const sent = new Map()
  // Open (the throttle webhook) for 300 ms: jobs are fetched, refused, delayed.
  breaker.forceOpen(300)
  const q = await queueOf('exactly-once', 50, breakerProcessor({ breaker, send: async (job) => sent.set(job.data.n, (sent.get(job.data.n) ?? 0) + 1) }))
  try {
    await until(async () => (await q.queue.getCompletedCount()) === 50)
    assert.equal(await q.queue.getFailedCount(), 0)
    assert.deepEqual([...sent.keys()].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i))
    assert.ok([...sent.values()].every((times) => times === 1), 'each sent once')
    assert.ok(breaker.metrics().rejections > 0, 'the breaker refused jobs')
    const jobs = await q.queue.getJobs(['completed'])
    assert.deepEqual(new Set(jobs.map((j) => j.attemptsMade)), new Set([1]), 'one attempt each: the refusals used none')
  } finally {
    await closeAll(q)
  }
})

/** While `breaker` is held open: how many times the worker fetched a job (each fetch refused). */
async function fetchesWhileHeld(name, pauseWhenOpenMs, settled) {
  const breaker = new CircuitBreaker({ name: 'gw' })
  breaker.forceOpen()
  let fetched = 0
  breaker.on('reject', () => (fetched += 1))
  const q = await queueOf(name, 100, breakerProcessor({ breaker, send: async () => {}, pauseWhenOpenMs }))
  try {
    await until(() => settled(q.queue))
    return fetched
  } finally {
    await closeAll(q)
  }
}

test('with one breaker held open, the worker stops fetching (rateLimit) instead of requeuing every job', { timeout: 60_000 }, async () => {
  // Without: every job is fetched, refused and delayed.
  const without = await fetchesWhileHeld('fetch-delay', null, async (queue) => (await queue.getDelayedCount()) === 100)
  assert.equal(without, 100)
  // With: the first refusals pause the queue's fetching; the jobs wait, none used an attempt.
  const paused = await fetchesWhileHeld('fetch-pause', 1_000, async (queue) => {
    const [ttl, waiting, active] = await Promise.all([queue.getRateLimitTtl(), queue.getWaitingCount(), queue.getActiveCount()])
    return ttl > 0 && waiting === 100 && active === 0
  })
  assert.ok(paused >= 1 && paused <= CONCURRENCY, `${paused} fetches while held open (at most one per slot)`)
})

test("a Registry: one key open delays its jobs only; the other key's go through, the worker never paused", { timeout: 60_000 }, async () => {
  const registry = new Registry()
  registry.get('a').forceOpen()
  const sent = []
  const q = await queueOf(
    'keyed',
    40,
    breakerProcessor({ breaker: registry, key: (job) => job.data.key, send: async (job) => sent.push(job.data.n) }),
    (i) => (i % 2 === 0 ? 'a' : 'b'),
  )
  try {
    await until(async () => (await q.queue.getCompletedCount()) === 20 && (await q.queue.getDelayedCount()) === 20)
    assert.deepEqual(
      sent.sort((x, y) => x - y),
      Array.from({ length: 20 }, (_, i) => 2 * i + 1),
    )
    assert.ok((await q.queue.getRateLimitTtl()) <= 0, 'never paused: key b was sending')
  } finally {
    await closeAll(q)
  }
})

test('the types: a typed processor for a typed Worker (tsc --strict)', () => {
  const pkg = (file) => JSON.stringify(path.join(PACKAGE, file))
  typeCheck(`import { Worker, type Job } from 'bullmq'
import { CircuitBreaker, Registry } from ${pkg('index')}
import { breakerProcessor } from ${pkg('bullmq')}
type Message = { instanceId: string; text: string }
const one = breakerProcessor<Message, number>({ breaker: new CircuitBreaker({ name: 'gw' }), send: async (job: Job<Message, number>, signal) => (signal?.aborted ? 0 : job.data.text.length), pauseWhenOpenMs: null })
const many = breakerProcessor<Message, number>({ breaker: new Registry(), key: (job) => job.data.instanceId, send: async (job) => job.data.text.length })
export const workers = [new Worker<Message, number>('a', one), new Worker<Message, number>('b', many)]
`)
})
