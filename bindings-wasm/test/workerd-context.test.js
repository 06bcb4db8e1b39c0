// A call that outlives its request in workerd: the handler answers (a
// fallback) without waiting for it, and workerd drops the request's pending
// promises and timers with its context, so neither the call nor its
// `timeoutMs` timer ever reports it. Its permit must not hold a
// concurrency-limit slot for good: once its deadline has passed, the next
// call that would be refused times it out (as its timer would have) and is
// admitted. Real workerd, real time: every wait is the worker's own answer.

import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import { test } from 'node:test'
import { serveWorker, writeWorker } from '../support/workerd.js'

const MAIN = `
import { CircuitBreaker } from './halfopen/workerd.js'
// One isolate, one breaker: two calls at most; the core's own give-up
// (probeTimeoutMs) far away, so only the timeout can free a slot.
const breaker = new CircuitBreaker({ name: 'upstream', concurrencyLimit: 2, timeoutMs: 200, probeTimeoutMs: 600000 })
export default {
  async fetch(request) {
    const path = new URL(request.url).pathname
    if (path === '/hang') {
      // A call that never settles (an upstream that never answers), and a
      // fallback after 20 ms: the request ends with the call pending.
      const call = breaker.execute(() => new Promise(() => {})).catch(() => {})
      await Promise.race([call, scheduler.wait(20)])
      return new Response('fallback', { headers: { 'x-deadline-ms': String(performance.now() + 200) } })
    }
    const m = breaker.metrics()
    try {
      await breaker.execute(async () => 'ok')
      return new Response('admitted', { headers: { 'x-in-flight': String(m.inFlight) } })
    } catch (err) {
      return new Response(err.reason ?? err.message, { status: 503, headers: { 'x-retry-after-ms': String(err.retryAfterMs), 'x-in-flight': String(m.inFlight), 'x-now-ms': String(performance.now()) } })
    }
  },
}
`

async function freePort() {
  const s = http.createServer().listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  return port
}

test('a call whose request ended (its timer dropped) gives its slot back once its deadline passes', async () => {
  const port = await freePort()
  const { config } = writeWorker({ 'main.js': MAIN }, { port })
  const child = await serveWorker(config, port, '/ready')
  try {
    const get = async (path) => {
      const r = await fetch(`http://127.0.0.1:${port}${path}`)
      return { status: r.status, body: await r.text(), headers: r.headers }
    }
    // /ready above made one quick call: the limit is free. Two calls hang.
    let deadline = 0
    for (let i = 0; i < 2; i++) {
      const r = await get('/hang')
      assert.equal(r.body, 'fallback')
      deadline = Number(r.headers.get('x-deadline-ms'))
    }
    const refused = await get('/try')
    assert.deepEqual([refused.status, refused.body], [503, 'limit_full'], 'both slots held by the calls whose requests ended')
    // Wait until the worker's own clock is past the later deadline (asking it, never guessing).
    for (let i = 0; ; i++) {
      assert.ok(i < 100, 'the worker clock reached the deadline')
      const r = await get('/try')
      if (r.status === 200) {
        assert.ok(Number(r.headers.get('x-in-flight')) <= 2)
        break
      }
      assert.equal(r.body, 'limit_full')
      const left = deadline - Number(r.headers.get('x-now-ms'))
      assert.ok(left > 0, `refused at ${r.headers.get('x-now-ms')} although past the deadline ${deadline}`)
      await new Promise((resolve) => setTimeout(resolve, left))
    }
  } finally {
    child.kill()
  }
})
