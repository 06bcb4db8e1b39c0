'use strict'
// The example for real: a redis-server, BullMQ, a local gateway that
// rate-limits. (1) run.js: every message delivered exactly once, breakers
// engaged. (2) Seed 000's own usage code with only the import changed works
// as the seed intends: jobs go through, and the throttle webhook opens the
// instance's breaker.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync, spawn } = require('node:child_process')
const net = require('node:net')
const path = require('node:path')
const { Queue } = require('bullmq')
const { startGateway } = require('../gateway.js')

const DIR = path.join(__dirname, '..')

test('a campaign through BullMQ delivers every message exactly once, the breakers holding jobs back', () => {
  // A gateway that takes 20 messages a second per instance: any machine
  // sends 150 per instance faster (a rate of 100 let a loaded one stay under it).
  const out = execFileSync('node', ['run.js', '--json', '--messages', '300', '--rate', '20'], { cwd: DIR, encoding: 'utf8', timeout: 120_000 })
  const r = JSON.parse(out.trim().split('\n').pop())
  assert.equal(r.delivered, 300)
  assert.equal(r.deliveredTwice, 0)
  assert.equal(r.failedForGood, 0)
  assert.ok(r.gateway.throttled > 0, 'the gateway was pushed past its rate')
  assert.ok(r.delayedByLimit > 0, 'the concurrency limit held jobs back')
  assert.ok(r.delayedByBreaker > 0, 'breakers held jobs back')
})

test('without the limit the same campaign still delivers every message exactly once', () => {
  const out = execFileSync('node', ['run.js', '--json', '--messages', '300', '--rate', '20', '--no-limit'], { cwd: DIR, encoding: 'utf8', timeout: 120_000 })
  const r = JSON.parse(out.trim().split('\n').pop())
  assert.equal(r.limit, 'none')
  assert.equal(r.delivered, 300)
  assert.equal(r.deliveredTwice, 0)
  assert.equal(r.delayedByLimit, 0)
  assert.ok(r.breakerOpens > 0, 'breakers opened')
})

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

test("seed 000's usage code runs with only the import changed", async () => {
  const port = await freePort()
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => redis.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  const gateway = await startGateway({ ratePerSecond: 1000 })
  process.env.ZAP_URL = gateway.url
  const { app, breakerFor, startWorker } = require('../seed-usage.js')
  const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null }
  const worker = startWorker(connection)
  const queue = new Queue('messages', { connection })
  const server = app.listen(0, '127.0.0.1')
  try {
    await queue.addBulk(
      Array.from({ length: 100 }, (_, i) => ({
        name: 'send',
        data: { instanceId: `inst-${i % 2}`, id: `s${i}`, phone: '+5511999999999', text: 'hi' },
        opts: { attempts: 5, backoff: { type: 'exponential', delay: 20 } },
      })),
    )
    while ((await queue.getJobCountByTypes('waiting', 'delayed', 'active')) > 0) await new Promise((r) => setTimeout(r, 50))
    assert.equal(gateway.delivered.size, 100)
    assert.equal(breakerFor('inst-0').getState(), 'CLOSED')

    const res = await fetch(`http://127.0.0.1:${server.address().port}/webhook/zap`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'instance.throttle', instanceId: 'inst-1' }),
    })
    assert.equal(await res.text(), 'ok')
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(breakerFor('inst-1').getState(), 'OPEN')
    assert.equal(breakerFor('inst-0').getState(), 'CLOSED', 'one instance in trouble does not take down the others')
    assert.ok(breakerFor('inst-1').retryAfterMs() > 59_000)
  } finally {
    server.close()
    await worker.close()
    await queue.close()
    gateway.close()
    redis.kill('SIGTERM')
  }
})
