'use strict'
// Three sender processes share one partner's outbox on a real redis-server
// with AOF (issue 24): 100,000 events submitted while the partner is down,
// then it is back; a third of the way the lease holder is SIGKILLed, two
// thirds of the way Redis is SIGKILLed and restarted from its AOF. At the
// partner: every event at least once, each process's first deliveries in
// its order, the epochs never going back (one deliverer at a time), and
// repeats only of ambiguous outcomes: a send given up at its timeout, or
// one of at most four pages (read and not out of the log) per grant that ended
// unconfirmed (the killed holder's, the one that lost the lease to the
// crash). Every wait is for the processes' own words or the partner's
// count, never a margin.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const net = require('node:net')
const path = require('node:path')
const Redis = require('ioredis')
const { aofRedisForTests, startRedis } = require('./support/redis-server.js')

// With AOF, as an outbox's Redis runs (no warning).
const redisServer = aofRedisForTests('halfopen-outbox-')

/**
 * A partner on one TCP connection per sender (a JSON line each, answered
 * `ok`, or `down` while `state.failing`), recording every event it accepts.
 */
async function partnerServer(t) {
  const state = { failing: true, delivered: [], keys: new Set(), waiters: [] }
  const partner = net.createServer((socket) => {
    let buffered = ''
    socket.on('error', () => {})
    socket.on('data', (d) => {
      buffered += d
      let answers = ''
      for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
        const line = buffered.slice(0, i)
        buffered = buffered.slice(i + 1)
        if (state.failing) answers += 'down\n'
        else {
          const d = JSON.parse(line)
          state.delivered.push(d)
          state.keys.add(d.key)
          answers += 'ok\n'
        }
      }
      socket.write(answers)
      for (const w of state.waiters.splice(0)) w()
    })
  })
  await new Promise((resolve) => partner.listen(0, '127.0.0.1', resolve))
  const sockets = new Set()
  partner.on('connection', (c) => sockets.add(c))
  t.after(() => {
    for (const c of sockets) c.destroy()
    partner.close()
  })
  const unique = () => state.keys.size
  const until = async (check) => {
    while (!check()) await new Promise((resolve) => state.waiters.push(resolve))
  }
  return { state, unique, until, url: `tcp://127.0.0.1:${partner.address().port}/` }
}

test('100,000 events from three processes, the partner down then back, the holder killed and then Redis killed mid-release: every event at least once, in order, one deliverer at a time', { timeout: 180_000 }, async (t) => {
  const { state, unique, until, url } = await partnerServer(t)
  const PER = 33_334
  const TOTAL = 3 * PER
  const children = Array.from({ length: 3 }, () =>
    fork(path.join(__dirname, 'support', 'outbox-sender.js'), [String(redisServer.port), url, 'fleet', String(PER)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
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
  const timedOut = new Set() // keys of sends given up at their timeout
  for (const c of children) {
    c.on('message', (m) => {
      if (m.what === 'acquired') role.set(c, true)
      else if (m.what === 'lost') role.set(c, false)
      else if (m.what === 'timedOut') timedOut.add(m.key)
    })
  }
  const submitted = await Promise.all(children.map((c) => said(c, 'submitted')))
  // A batch Redis did not store in time was submitted again (same keys):
  // stored once or twice, never lost.
  const retried = submitted.reduce((sum, m) => sum + m.retried, 0)
  const admin = new Redis({ host: '127.0.0.1', port: redisServer.port, retryStrategy: () => 50 })
  admin.on('error', () => {})
  t.after(() => admin.disconnect())
  const stored = await admin.xlen('halfopen:outbox:v1:{fleet}:log')
  assert.ok(stored >= TOTAL && stored <= TOTAL + retried, `the partner down: every event in the log (${stored})`)

  // The partner is back; a third of the way, the holder is killed.
  state.failing = false
  await until(() => unique() >= TOTAL / 3)
  const holder = children.find((c) => c.pid === state.delivered.at(-1).pid)
  const killedGrant = `${holder.pid} ${state.delivered.at(-1).epoch}`
  const others = children.filter((c) => c !== holder)
  const successor = Promise.race(others.map((c) => said(c, 'acquired')))
  holder.kill('SIGKILL')
  await successor
  // Two thirds of the way, Redis is killed (SIGKILL) and restarted from its
  // AOF once the holder said it lost the lease (it could not renew it).
  await until(() => unique() >= (2 * TOTAL) / 3)
  const last = children.find((c) => c.pid === state.delivered.at(-1).pid)
  const crashedGrant = `${last.pid} ${state.delivered.at(-1).epoch}`
  const lost = said(last, 'lost')
  redisServer.server.kill('SIGKILL')
  await new Promise((resolve) => redisServer.server.once('exit', resolve))
  await lost
  redisServer.server = await startRedis(redisServer.port, ['--appendonly', 'yes', '--dir', redisServer.dir])
  await until(() => unique() === TOTAL)

  // Every event; each process's in its order (first deliveries).
  const first = new Map()
  for (const d of state.delivered) if (!first.has(d.key)) first.set(d.key, d)
  const byFrom = new Map()
  for (const { event } of first.values()) {
    if (!byFrom.has(event.from)) byFrom.set(event.from, [])
    byFrom.get(event.from).push(event.n)
  }
  assert.equal(byFrom.size, 3)
  for (const ns of byFrom.values()) assert.deepEqual(ns, Array.from({ length: PER }, (_, i) => i))
  // One deliverer at a time: the epochs, in delivery order, never go back
  // (the epoch counter is in the AOF: a Redis restart does not reset it).
  const epochs = state.delivered.map((d) => d.epoch)
  assert.ok(
    epochs.every((e, i) => i === 0 || e >= epochs[i - 1]),
    'epochs never go back',
  )
  // Repeats: of a send given up at its timeout, or of what the killed
  // holder, or the holder that lost the lease to the crash, had sent
  // without Redis confirming the removal: at most four pages per grant (the
  // core reads no more while they are not out of the log), or of a batch
  // stored twice.
  const repeats = state.delivered.length - first.size
  const twice = stored - TOTAL
  if (twice === 0) {
    const perGrant = new Map([
      [killedGrant, 0],
      [crashedGrant, 0],
    ])
    for (const d of state.delivered.filter((x) => first.get(x.key) !== x)) {
      if (timedOut.has(d.key)) continue
      const grant = `${first.get(d.key).pid} ${first.get(d.key).epoch}`
      assert.ok(perGrant.has(grant), `a repeat of ${d.key}, first sent by grant ${grant}, which did not end unconfirmed`)
      perGrant.set(grant, perGrant.get(grant) + 1)
    }
    for (const [grant, n] of perGrant) assert.ok(n <= 4 * 200, `${n} repeats of grant ${grant}: more than four pages`)
  }
  // The others close: the log is empty, nothing left unremoved.
  const closed = await Promise.all(
    others.map((c) => {
      c.send({ what: 'close' })
      return said(c, 'closed')
    }),
  )
  assert.deepEqual(
    closed.map((m) => m.unremoved),
    [0, 0],
  )
  assert.equal(await admin.xlen('halfopen:outbox:v1:{fleet}:log'), 0)
  t.diagnostic(`${state.delivered.length} deliveries of ${TOTAL} events, ${repeats} repeats after the kills, ${twice} stored twice`)
})
