'use strict'
// Three sender processes share one partner's outbox on a real redis-server
// (issue 24): the partner is down while they submit, then back; the lease
// holder is SIGKILLed mid-release. At the partner: every event at least
// once, the first deliveries in the log's order, the epochs never going
// back (one deliverer at a time), and duplicates only for what the killed
// holder delivered without Redis confirming the removal. Every wait is for
// the processes' own words or the partner's count, never a margin.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { freePort, startRedis } = require('./support/redis-server.js')

let port
let server

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-outbox-'))

before(async () => {
  port = await freePort()
  // With AOF, as an outbox's Redis runs (no warning).
  server = await startRedis(port, ['--appendonly', 'yes', '--dir', dir])
})

after(() => {
  server.kill()
  fs.rmSync(dir, { recursive: true, force: true })
})

/** A partner that answers 503 while `state.failing`, recording every event it accepts. */
async function partnerServer(t) {
  const state = { failing: true, delivered: [], waiters: [] }
  const partner = http.createServer((req, res) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      if (state.failing) {
        res.statusCode = 503
        return res.end()
      }
      state.delivered.push({ key: req.headers['x-key'], epoch: Number(req.headers['x-epoch']), pid: Number(req.headers['x-pid']), event: JSON.parse(body) })
      res.end()
      for (const w of state.waiters.splice(0)) w()
    })
  })
  await new Promise((resolve) => partner.listen(0, '127.0.0.1', resolve))
  t.after(() => partner.close())
  const unique = () => new Set(state.delivered.map((d) => d.key)).size
  const until = async (check) => {
    while (!check()) await new Promise((resolve) => state.waiters.push(resolve))
  }
  return { state, unique, until, url: `http://127.0.0.1:${partner.address().port}/` }
}

test('three processes, the partner down then back, the holder killed mid-release: every event at least once, in order, one deliverer at a time', { timeout: 120_000 }, async (t) => {
  const { state, unique, until, url } = await partnerServer(t)
  const PER = 2_000
  const children = Array.from({ length: 3 }, () =>
    fork(path.join(__dirname, 'support', 'outbox-sender.js'), [String(port), url, 'fleet', String(PER)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  )
  t.after(() => {
    for (const c of children) c.kill('SIGKILL')
  })
  const role = new Map() // child → holds the lease
  const said = (c, what) =>
    new Promise((resolve) => {
      const on = (m) => {
        if (m.what === what) {
          c.off('message', on)
          resolve(m)
        }
      }
      c.on('message', on)
    })
  for (const c of children) c.on('message', (m) => (m.what === 'acquired' ? role.set(c, true) : m.what === 'lost' && role.set(c, false)))
  const submitted = await Promise.all(children.map((c) => said(c, 'submitted')))
  // A batch Redis did not store in time was submitted again (same keys):
  // stored once or twice, never lost.
  const retried = submitted.reduce((sum, m) => sum + m.retried, 0)
  const admin = new Redis({ host: '127.0.0.1', port })
  t.after(() => admin.disconnect())
  const stored = await admin.xlen('halfopen:outbox:v1:{fleet}:log')
  assert.ok(stored >= 3 * PER && stored <= 3 * PER + retried, `the partner down: every event in the log (${stored})`)

  state.failing = false
  await until(() => unique() >= PER)
  const holder = children.find((c) => role.get(c) === true)
  assert.ok(holder !== undefined, 'a process delivers')
  const others = children.filter((c) => c !== holder)
  const successor = Promise.race(others.map((c) => said(c, 'acquired')))
  holder.kill('SIGKILL')
  await successor
  await until(() => unique() === 3 * PER)

  // Every event; each process's in its order (first deliveries).
  const first = new Map()
  for (const d of state.delivered) if (!first.has(d.key)) first.set(d.key, d)
  const byFrom = new Map()
  for (const { event } of first.values()) byFrom.set(event.from, [...(byFrom.get(event.from) ?? []), event.n])
  assert.equal(byFrom.size, 3)
  for (const ns of byFrom.values()) assert.deepEqual(ns, Array.from({ length: PER }, (_, i) => i))
  // One deliverer at a time: the epochs, in delivery order, never go back.
  const epochs = state.delivered.map((d) => d.epoch)
  assert.ok(epochs.every((e, i) => i === 0 || e >= epochs[i - 1]), 'epochs never go back')
  // Duplicates: only what the killed holder had delivered (or had in
  // flight) without Redis confirming the removal.
  const duplicates = state.delivered.length - first.size
  const twice = stored - 3 * PER
  assert.ok(duplicates <= 3 + twice, `${duplicates} duplicates (${twice} events stored twice)`)
  if (twice === 0) {
    for (const d of state.delivered.filter((x, i) => state.delivered.findIndex((y) => y.key === x.key) !== i)) {
      assert.equal(first.get(d.key).pid, holder.pid, 'a duplicate is of an event the killed holder sent')
    }
  }
  // The others close: the log is empty, nothing left unremoved.
  const closed = await Promise.all(
    others.map((c) => {
      c.send({ what: 'close' })
      return said(c, 'closed')
    }),
  )
  assert.deepEqual(closed.map((m) => m.unremoved), [0, 0])
  assert.equal(await admin.xlen('halfopen:outbox:v1:{fleet}:log'), 0)
  t.diagnostic(`${state.delivered.length} deliveries of ${3 * PER} events, ${duplicates} duplicates after the kill`)
})
