'use strict'
// A process restart loses nothing and delivers nothing twice: the sender
// (sender.js, a real process) submits events while the partner is down and
// is stopped (SIGTERM: it closes, saving its state in Redis); a new process
// takes everything back and delivers it, in order, once. After a crash
// (SIGKILL) nothing is lost either: what was in flight is sent again.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const Redis = require('ioredis')
const { startPartners } = require('../partner.js')
const { startRedis } = require('../redis.js')

const DIR = path.join(__dirname, '..')

/** A sender process; `wait(key)` resolves when it prints a JSON line with `key`. */
function sender(redisPort, base, first, count) {
  const child = spawn('node', ['sender.js', String(redisPort), base, 'a', String(first), String(count)], { cwd: DIR, stdio: ['ignore', 'pipe', 'inherit'] })
  const seen = new Set()
  const waiting = []
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    for (const key of Object.keys(JSON.parse(line))) seen.add(key)
    for (const w of waiting.filter((w) => seen.has(w.key))) {
      waiting.splice(waiting.indexOf(w), 1)
      w.resolve()
    }
  })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return {
    wait: (key) => new Promise((resolve) => (seen.has(key) ? resolve() : waiting.push({ key, resolve }))),
    stop: (signal) => {
      child.kill(signal)
      return exited
    },
  }
}

function setUp() {
  return Promise.all([startRedis(), startPartners(['a'])])
}

test('a graceful restart while the partner is down: every event delivered once, in order', async () => {
  const [redis, web] = await setUp()
  const base = web.url('a').replace(/a$/, '')
  const partner = web.partners.a
  partner.up = false
  const first = sender(redis.port, base, 0, 2000)
  await first.wait('stored')
  // Until the breaker has opened and probed at least once (open time: 500 ms).
  while (partner.callsWhileDown < 6) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.deepEqual(await first.stop('SIGTERM'), { code: 0, signal: null })
  const client = new Redis({ host: '127.0.0.1', port: redis.port })
  assert.equal(await client.hlen('webhooks:a:messages'), 2000, 'every event is in Redis')
  assert.equal(await client.exists('webhooks:a:state'), 1, 'the state was saved')
  partner.up = true
  const second = sender(redis.port, base, 0, 0)
  await second.wait('drained')
  assert.deepEqual(await second.stop('SIGTERM'), { code: 0, signal: null })
  assert.deepEqual(partner.received, [...Array(2000).keys()], 'each event once, in order')
  assert.equal(await client.hlen('webhooks:a:messages'), 0)
  await client.quit()
  await web.close()
  redis.stop()
})

test('a crash (SIGKILL) mid-delivery loses nothing: at most the sends not yet forgotten are repeated', async () => {
  const [redis, web] = await setUp()
  const base = web.url('a').replace(/a$/, '')
  const partner = web.partners.a
  partner.up = false
  const first = sender(redis.port, base, 0, 3000)
  await first.wait('stored')
  partner.up = true
  while (partner.received.length < 500) await new Promise((resolve) => setTimeout(resolve, 5))
  await first.stop('SIGKILL')
  const second = sender(redis.port, base, 0, 0)
  await second.wait('drained')
  await second.stop('SIGTERM')
  assert.deepEqual(partner.received, [...Array(3000).keys()], 'nothing lost, each processed once, in order')
  // What the partner took but Redis had not yet forgotten when the process
  // died is sent again (at least once): the send in flight, and the latest
  // delivery if its removal was still in this turn's batch — with the key it
  // had before the crash (kept in Redis), so the partner processes none of
  // them twice. After the restart, the rest in order.
  const ids = partner.arrivals
  const repeated = ids.length - new Set(ids).size
  console.log(`crash: ${repeated} deliveries repeated, deduplicated by key: ${partner.duplicates}`)
  assert.ok(repeated <= 2, `repeated ${repeated}`)
  assert.equal(partner.duplicates, repeated, 'every repeat carried its first key')
  const firstAfter = ids.findIndex((id, i) => ids.indexOf(id) !== i)
  const tail = ids.slice(firstAfter === -1 ? ids.length : firstAfter)
  assert.ok(tail.every((id, i) => i === 0 || id > tail[i - 1]), 'the restarted sender sends in order')
  await web.close()
  redis.stop()
})
