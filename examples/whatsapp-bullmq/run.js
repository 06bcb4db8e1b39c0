'use strict'
// Seed 000's campaign, for real and small: a redis-server, a BullMQ queue of
// messages for two WhatsApp instances, a worker (concurrency 100) posting to a
// local gateway that rate-limits and takes 20 ms to answer, and one halfopen
// breaker per instance (a Registry keyed by instance) with an adaptive
// concurrency limit (up to the worker's concurrency), through
// `halfopen/bullmq`: whenever a breaker refuses — open, probes busy, or its
// limit full — the job goes back to the queue, delayed by the refusal's
// retryAfterMs: not failed, no attempt consumed. At the end every message
// must have been delivered exactly once.
//
// node run.js [--messages N] [--rate R] [--no-limit] [--json]
// (--rate: the messages per second the gateway takes from an instance,
// default 100; its bucket holds as many.)

const { spawn } = require('node:child_process')
const net = require('node:net')
const { Queue, Worker } = require('bullmq')
const { Registry } = require('halfopen')
const { breakerProcessor } = require('halfopen/bullmq')
const { startGateway } = require('./gateway.js')

const args = process.argv.slice(2)
const MESSAGES = Number(args[args.indexOf('--messages') + 1]) || 1000
const JSON_OUTPUT = args.includes('--json')
const LIMIT = !args.includes('--no-limit')
const RATE = Number(args[args.indexOf('--rate') + 1]) || 100
const CONCURRENCY = 100 // the worker's sends in flight, and the adaptive limit's ceiling
const INSTANCES = ['instance-a', 'instance-b']

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

async function startRedis() {
  const port = await freePort()
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    redis.on('error', reject)
    redis.stdout.on('data', (d) => String(d).includes('Ready to accept connections') && resolve())
  })
  return { port, stop: () => redis.kill('SIGTERM') }
}

async function main() {
  const redis = await startRedis()
  const gateway = await startGateway({ ratePerSecond: RATE, abuseLimit: 60, suspendMs: 3000, latencyMs: 20 })
  const connection = { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null }
  const queue = new Queue('messages', { connection })

  // Seed 000: one breaker per instance. Time scaled for a quick run: 5
  // failures in 1 s open it for 300 ms, doubling up to 1 s; 3 probes. The
  // adaptive limit keeps the requests in flight to what the instance takes
  // (100/s at 20 ms: about 2), so a breaker that closes does not send the
  // whole backlog at once. (`node run.js --messages 1000 [--no-limit]`,
  // three runs here, 1,000 messages: with the limit
  // 212–268 429s, 0–2 suspensions, 4.5–9.1 s; with --no-limit 272–333 429s,
  // 4 suspensions, 9.7–10.3 s. Real time: it varies from run to run.)
  const breakers = new Registry({
    failureThreshold: 5,
    windowMs: 1000,
    openTimeoutMs: 300,
    maxOpenTimeoutMs: 1000,
    halfOpenMaxAttempts: 3,
    jitter: 0.3, // breakers of many instances do not reopen in step
    ...(LIMIT ? { adaptiveLimitMin: 1, adaptiveLimitMax: CONCURRENCY } : {}),
  })
  const events = { opens: 0, delayed: 0, limited: 0 }
  breakers.on('open', () => (events.opens += 1))
  // Each refusal puts its job back, delayed until the breaker says to try
  // again (the open time left, spread after it; a short hint while the
  // probes are out; about one round trip when the limit is full).
  breakers.on('reject', (err) => {
    events.delayed += 1
    if (err.reason === 'limit_full') events.limited += 1
  })

  const worker = new Worker(
    'messages',
    breakerProcessor({
      breaker: breakers,
      key: (job) => job.data.instanceId,
      send: async (job) => {
        const { instanceId, id, phone, text } = job.data
        const res = await fetch(`${gateway.url}/instances/${instanceId}/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ id, to: phone, type: 'text', text }),
        })
        // A 429/503 that got through: BullMQ retries it (attempts, backoff).
        if (!res.ok) throw new Error(`gateway answered ${res.status}`)
      },
    }),
    { connection, concurrency: CONCURRENCY },
  )

  const started = Date.now()
  await queue.addBulk(
    Array.from({ length: MESSAGES }, (_, i) => ({
      name: 'send',
      data: { instanceId: INSTANCES[i % INSTANCES.length], id: `m${i}`, phone: `+55119${String(i).padStart(8, '0')}`, text: 'Black Friday!' },
      opts: { attempts: 25, backoff: { type: 'exponential', delay: 50 }, removeOnComplete: true },
    })),
  )
  let failed = 0
  worker.on('failed', (job) => job && job.attemptsMade >= 25 && (failed += 1))
  while ((await queue.getJobCountByTypes('waiting', 'delayed', 'active', 'prioritized', 'waiting-children')) > 0) {
    await new Promise((r) => setTimeout(r, 100))
  }
  const elapsedMs = Date.now() - started
  await worker.close()
  await queue.close()
  gateway.close()
  redis.stop()

  const counts = [...gateway.delivered.values()]
  const result = {
    messages: MESSAGES,
    delivered: gateway.delivered.size,
    deliveredTwice: counts.filter((n) => n > 1).length,
    failedForGood: failed,
    breakerOpens: events.opens,
    delayedByBreaker: events.delayed,
    delayedByLimit: events.limited,
    limit: LIMIT ? 'adaptive' : 'none',
    gateway: gateway.stats,
    elapsedMs,
  }
  if (JSON_OUTPUT) console.log(JSON.stringify(result))
  else {
    console.log(`${result.delivered}/${MESSAGES} messages delivered (${result.deliveredTwice} twice) in ${elapsedMs} ms`)
    console.log(`breakers opened ${result.breakerOpens} times; ${result.delayedByBreaker} jobs delayed by a breaker (${result.delayedByLimit} by its concurrency limit)`)
    console.log(`gateway: ${JSON.stringify(gateway.stats)}`)
  }
  process.exitCode = result.delivered === MESSAGES && result.deliveredTwice === 0 && failed === 0 ? 0 : 1
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
