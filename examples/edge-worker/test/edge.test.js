// The edge worker in the real workerd, against local upstreams: a sick host
// trips its breaker and then sees no calls while it is open (the worker
// answers 503 with Retry-After); a healthy host is unaffected; the state
// survives a workerd restart (Durable Object on disk); after the open time
// the breaker probes, and closes when the probes succeed. Real time here:
// the open time is 2 s (workerd's clock cannot be injected from outside).

import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { serve } from '../serve.mjs'

const OPEN_TIMEOUT_MS = 2000

/** A local upstream answering `status` (changeable), counting its calls. */
async function upstream(status) {
  const up = { status, hits: 0 }
  up.server = http.createServer((_req, res) => {
    up.hits += 1
    res.statusCode = up.status
    res.end(`upstream ${up.status}\n`)
  })
  up.server.listen(0, '127.0.0.1')
  await once(up.server, 'listening')
  up.host = `127.0.0.1:${up.server.address().port}`
  return up
}

async function freePort() {
  const s = http.createServer().listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  return port
}

test('breakers per host: open, refuse without calling, survive a restart, probe, close', async () => {
  const sick = await upstream(500)
  const healthy = await upstream(200)
  const port = await freePort()
  const storage = mkdtempSync(join(tmpdir(), 'halfopen-edge-state-'))
  const vars = { OPEN_TIMEOUT_MS, FAILURE_THRESHOLD: 3, HALF_OPEN_MAX_ATTEMPTS: 2 }
  const get = async (up) => {
    const r = await fetch(`http://127.0.0.1:${port}/${up.host}/hello`)
    return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.text() }
  }
  let worker = await serve({ port, storage, vars })
  try {
    // The isolate's first requests arrive together: they share one registry.
    const first = await Promise.all([get(sick), get(sick), get(sick)])
    assert.deepEqual(first.map((r) => r.status), [500, 500, 500])
    const openedAt = Date.now()
    assert.equal(sick.hits, 3)
    for (let i = 0; i < 5; i++) {
      const r = await get(sick)
      assert.equal(r.status, 503, r.body)
      assert.ok(Number(r.retryAfter) >= 1 && Number(r.retryAfter) <= 2, `Retry-After ${r.retryAfter}`)
    }
    assert.equal(sick.hits, 3, 'no call reaches the sick host while its breaker is open')
    for (let i = 0; i < 5; i++) assert.equal((await get(healthy)).status, 200)
    assert.equal(healthy.hits, 5, 'the healthy host is not affected')

    worker.child.kill()
    await once(worker.child, 'exit')
    worker = await serve({ port, storage, vars })
    assert.ok(Date.now() - openedAt < OPEN_TIMEOUT_MS, 'the restart took less than the open time')
    assert.equal((await get(sick)).status, 503, 'the open breaker survived the restart')
    assert.equal(sick.hits, 3)

    sick.status = 200
    await new Promise((r) => setTimeout(r, OPEN_TIMEOUT_MS - (Date.now() - openedAt) + 100))
    assert.equal((await get(sick)).status, 200, 'the first probe')
    assert.equal((await get(sick)).status, 200, 'the second probe closes it')
    for (let i = 0; i < 5; i++) assert.equal((await get(sick)).status, 200)
    assert.equal(sick.hits, 3 + 2 + 5, 'two probes, then every call')
  } finally {
    worker.child.kill()
    sick.server.close()
    healthy.server.close()
  }
})
