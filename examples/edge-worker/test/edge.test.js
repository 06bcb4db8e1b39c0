// The edge worker in the real workerd, against local upstreams: a sick host
// trips its breaker and then sees no calls while it is open (the worker
// answers 503 with Retry-After); a healthy host is unaffected; the state
// survives a workerd restart (Durable Objects on disk) with the time between
// counted; after the open time the breaker probes, and closes when the
// probes succeed. Real time here (workerd's clock cannot be injected from
// outside): every wait is the worker's own answer (its exact Retry-After),
// never a guessed margin. Also: hundreds of hosts, each its own small state;
// a redeploy with other options starts the changed hosts afresh.

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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A worker on a fresh port; `get(host, path)` asks it for `/<host>/<path>`. */
async function worker(vars, storage = mkdtempSync(join(tmpdir(), 'halfopen-edge-state-'))) {
  const port = await freePort()
  const w = await serve({ port, storage, vars })
  w.storage = storage
  w.vars = vars
  w.get = async (host, path = 'hello') => {
    const r = await fetch(`http://127.0.0.1:${port}/${host}/${path}`)
    const h = (name) => r.headers.get(name)
    return { status: r.status, state: h('x-breaker-state'), retryAfter: h('retry-after'), retryAfterMs: Number(h('x-retry-after-ms')), body: await r.text() }
  }
  w.stop = async () => {
    if (w.child.exitCode === null) {
      w.child.kill()
      await once(w.child, 'exit')
    }
  }
  return w
}

/** Asks until the answer is not a refusal, waiting each refusal's own Retry-After; every refusal is checked. */
async function untilAdmitted(w, host, onRefusal) {
  for (let i = 0; i < 50; i++) {
    const r = await w.get(host)
    if (r.status !== 503) return r
    onRefusal(r)
    await sleep(r.retryAfterMs)
  }
  throw new Error(`${host} refused 50 times in a row`)
}

test('breakers per host: open, refuse without calling, survive a restart with the time counted, probe, close', async () => {
  const sick = await upstream(500)
  const healthy = await upstream(200)
  const vars = { OPEN_TIMEOUT_MS, FAILURE_THRESHOLD: 3, HALF_OPEN_MAX_ATTEMPTS: 2 }
  let w = await worker(vars)
  try {
    // The host's first requests arrive together: they share one restore.
    const first = await Promise.all([w.get(sick.host), w.get(sick.host), w.get(sick.host)])
    assert.deepEqual(first.map((r) => r.status), [500, 500, 500])
    assert.equal(sick.hits, 3)
    let before
    for (let i = 0; i < 5; i++) {
      const r = await w.get(sick.host)
      assert.equal(r.status, 503, r.body)
      assert.equal(r.state, 'OPEN')
      assert.ok(r.retryAfterMs > 0 && r.retryAfterMs <= OPEN_TIMEOUT_MS, `x-retry-after-ms ${r.retryAfterMs}`)
      assert.equal(r.retryAfter, String(Math.max(1, Math.ceil(r.retryAfterMs / 1000))))
      before = r.retryAfterMs
    }
    assert.equal(sick.hits, 3, 'no call reaches the sick host while its breaker is open')
    for (let i = 0; i < 5; i++) assert.equal((await w.get(healthy.host)).status, 200)
    assert.equal(healthy.hits, 5, 'the healthy host is not affected')

    const stoppedAt = Date.now()
    await w.stop()
    w = await worker(vars, w.storage)
    // The breaker came back open, and the restart's time counted: either it
    // still refuses, with less time left than before the restart by at
    // least the restart's length, or (a slow restart) the open time ended
    // meanwhile and the request was a probe, which the still-sick host
    // failed, so it is open again (a fresh breaker would have let it through
    // closed).
    const restartMs = Date.now() - stoppedAt
    const after = await w.get(sick.host)
    if (after.status === 503) {
      assert.ok(after.retryAfterMs <= before - restartMs, `${after.retryAfterMs} ms left after a ${restartMs} ms restart (${before} before)`)
      assert.equal(sick.hits, 3)
    } else {
      assert.deepEqual([after.status, after.state, sick.hits], [500, 'OPEN', 4], 'a probe, failed: open again')
    }
    const failedProbes = sick.hits - 3

    sick.status = 200
    const refusal = (r) => assert.equal(r.state, 'OPEN', 'refused only while open')
    const probe = await untilAdmitted(w, sick.host, refusal)
    assert.deepEqual([probe.status, probe.state], [200, 'HALF_OPEN'], 'the first probe')
    const second = await w.get(sick.host)
    assert.deepEqual([second.status, second.state], [200, 'CLOSED'], 'the second probe closes it')
    for (let i = 0; i < 5; i++) assert.equal((await w.get(sick.host)).status, 200)
    assert.equal(sick.hits, 3 + failedProbes + 2 + 5, 'two probes, then every call')
  } finally {
    await w.stop()
    sick.server.close()
    healthy.server.close()
  }
})

test('hundreds of hosts: each keeps its own small state, every request is answered', async () => {
  // 250 sick upstreams: the old single value for every host failed from the
  // 222nd host on.
  const sick = await Promise.all(Array.from({ length: 250 }, () => upstream(500)))
  const w = await worker({ OPEN_TIMEOUT_MS: 60_000, FAILURE_THRESHOLD: 1 })
  try {
    for (let i = 0; i < sick.length; i += 25) {
      const answers = await Promise.all(sick.slice(i, i + 25).map((up) => w.get(up.host)))
      assert.deepEqual(new Set(answers.map((r) => `${r.status} ${r.state}`)), new Set(['500 OPEN']))
    }
    const again = await Promise.all(sick.map((up) => w.get(up.host)))
    assert.ok(again.every((r) => r.status === 503), 'every host is open: its state was kept')
    assert.ok(sick.every((up) => up.hits === 1), 'each host was called once')
  } finally {
    await w.stop()
    for (const up of sick) up.server.close()
  }
})

test('a redeploy with other options starts a host afresh, with a warning, instead of failing it', async () => {
  const sick = await upstream(500)
  let w = await worker({ OPEN_TIMEOUT_MS: 60_000, FAILURE_THRESHOLD: 2 })
  try {
    for (let i = 0; i < 2; i++) assert.equal((await w.get(sick.host)).status, 500)
    assert.equal((await w.get(sick.host)).status, 503)
    await w.stop()
    w = await worker({ OPEN_TIMEOUT_MS: 60_000, FAILURE_THRESHOLD: 3 }, w.storage)
    const first = await w.get(sick.host)
    assert.deepEqual([first.status, first.state], [500, 'CLOSED'], 'a fresh breaker with the new threshold')
    assert.match(w.output(), /cannot be restored \(config_mismatch/)
    assert.equal((await w.get(sick.host)).status, 500)
    assert.deepEqual([(await w.get(sick.host)).state, (await w.get(sick.host)).status], ['OPEN', 503], 'open after 3 failures')
    assert.equal(sick.hits, 2 + 3)
  } finally {
    await w.stop()
    sick.server.close()
  }
})

test('spellings of one host share its breaker', async () => {
  const sick = await upstream(500)
  const port = sick.host.split(':')[1]
  const w = await worker({ OPEN_TIMEOUT_MS: 60_000, FAILURE_THRESHOLD: 1 })
  try {
    assert.equal((await w.get(`127.0.0.1:${port}`)).status, 500)
    // What the URL parser writes as 127.0.0.1: hexadecimal, short and percent-encoded forms.
    for (const spelling of [`0x7f.0.0.1:${port}`, `127.1:${port}`, `%31%32%37.0.0.1:${port}`]) {
      const r = await w.get(spelling)
      assert.deepEqual([r.status, r.state], [503, 'OPEN'], spelling)
    }
    assert.equal(sick.hits, 1)
  } finally {
    await w.stop()
    sick.server.close()
  }
})
