'use strict'
// An Outbox against a real redis-server (issue 24): what submit promises
// (stored, or a typed rejection: never an acceptance that is not stored),
// delivery in the log's order with removal, dead letters with their reason,
// a Redis down or full, a closed process handing the log over, a Redis
// killed and restarted with AOF, and every option checked. Every wait is
// for the outbox's own words or Redis's answers.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { once } = require('node:events')
const Redis = require('ioredis')
const { Outbox, RetentionFullError, StoreUnavailableError } = require('..')
const { freePort, startRedis } = require('./support/redis-server.js')

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-outbox-'))
let port
let server
const clients = []

before(async () => {
  port = await freePort()
  server = await startRedis(port, ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir])
})

after(() => {
  for (const c of clients) c.disconnect()
  server.kill()
  fs.rmSync(dir, { recursive: true, force: true })
})

/** A client as a sender configures one: no offline queue (a Redis that is down fails a command at once). */
async function client(p = port) {
  const r = new Redis({ host: '127.0.0.1', port: p, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
  r.on('error', () => {})
  clients.push(r)
  await once(r, 'ready')
  return r
}

const FAST = { concurrencyLimit: 1, timeoutMs: 200, storeTimeoutMs: 500, pollIntervalMs: 20, failureThreshold: 3, openTimeoutMs: 100, maxOpenTimeoutMs: 100 }

async function until(check) {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 10))
}

const logKey = (partner) => `halfopen:outbox:v1:{${partner}}:log`
const deadKey = (partner) => `halfopen:outbox:v1:{${partner}}:dead`

test('options and events are checked: a typed error names the option, nothing reaches Redis', { timeout: 30_000 }, async () => {
  const redis = await client()
  const send = async () => {}
  const base = { redis, partner: 'checked', send, concurrencyLimit: 1 }
  const wrong = (options, check) => assert.throws(() => new Outbox({ ...base, ...options }), check)
  wrong({ redis: {} }, (e) => e instanceof TypeError && e.option === 'redis')
  wrong({ partner: 'a{b' }, (e) => e instanceof RangeError && e.option === 'partner')
  wrong({ partner: 7 }, (e) => e instanceof TypeError && e.option === 'partner')
  wrong({ send: 1 }, (e) => e instanceof TypeError && e.option === 'send')
  for (const option of ['store', 'size', 'maxBytes', 'overflow', 'group']) wrong({ [option]: 1 }, (e) => e instanceof TypeError && e.option === option)
  wrong({ timeoutMs: null }, (e) => e instanceof TypeError && e.option === 'timeoutMs')
  wrong({ serializer: { encode: () => '' } }, (e) => e instanceof TypeError && e.option === 'serializer')
  wrong({ pageSize: 11, maxMessages: 10 }, (e) => e instanceof RangeError && e.option === 'pageSize' && e.problem === 'too_large')
  wrong({ pageSize: 0 }, (e) => e instanceof RangeError && e.option === 'pageSize' && e.problem === 'zero')
  wrong({ pageSize: 1.5 }, (e) => e instanceof RangeError && e.option === 'pageSize')
  wrong({ leaseMs: 1_000, timeoutMs: 1_000 }, (e) => e instanceof RangeError && e.option === 'leaseMs' && e.problem === 'too_small')
  wrong({ pollIntervalMs: Number.NaN }, (e) => e instanceof RangeError && e.option === 'pollIntervalMs' && e.problem === 'not_finite')
  wrong({ pollIntervalMs: 5 }, (e) => e instanceof RangeError && e.option === 'pollIntervalMs' && e.problem === 'too_small')
  wrong({ storeTimeoutMs: '1' }, (e) => e instanceof TypeError && e.option === 'storeTimeoutMs')

  const outbox = new Outbox({ ...base, partner: 'events' })
  // Values JSON does not write as themselves are refused at submit, never kept in memory only.
  for (const event of [() => 1, Symbol('s'), undefined, new Map([[1, 2]]), 1n]) {
    assert.throws(() => outbox.submit(event), (e) => e instanceof TypeError && e.option === 'serializer')
  }
  const cyclic = {}
  cyclic.self = cyclic
  assert.throws(() => outbox.submit(cyclic), (e) => e instanceof TypeError && e.option === 'serializer' && e.cause instanceof TypeError)
  for (const key of ['', 1, null]) assert.throws(() => outbox.submit({}, { key }), (e) => e instanceof TypeError && e.option === 'key')
  const bad = new Outbox({ ...base, partner: 'events', serializer: { encode: () => 1, decode: JSON.parse } })
  assert.throws(() => bad.submit({}), (e) => e instanceof TypeError && e.option === 'serializer')
  await Promise.all([outbox.close(), bad.close()])
  assert.equal(await redis.exists(logKey('events')), 0, 'nothing refused was stored')
  await assert.rejects(outbox.submit({}), /closed/)
})

test('submit fulfils once the event is in the log; the holder delivers in the log order with its key and removes it', { timeout: 30_000 }, async () => {
  const redis = await client()
  const sent = []
  const outbox = await Outbox.open({ redis, partner: 'ordered', ...FAST, send: async (event, { key, epoch, signal }) => sent.push({ event, key, epoch, aborts: signal instanceof AbortSignal }) })
  const acquired = once(outbox, 'acquired')
  const receipts = await Promise.all(Array.from({ length: 50 }, (_, n) => outbox.submit({ n }, n === 7 ? { key: 'seven' } : undefined)))
  // In Redis, as said: its id, its key, its payload.
  const stored = await redis.xrange(logKey('ordered'), '-', '+')
  const ids = receipts.map((r) => r.id)
  for (const [id] of stored) assert.ok(ids.includes(id))
  assert.equal(receipts[7].key, 'seven')
  assert.equal(receipts[8].key, receipts[8].id)
  const [{ epoch }] = await acquired
  await until(() => outbox.stats().removed === 50)
  assert.deepEqual(sent.map((s) => s.event.n), Array.from({ length: 50 }, (_, n) => n))
  assert.deepEqual(sent.map((s) => s.key), receipts.map((r) => r.key))
  assert.ok(sent.every((s) => s.epoch === epoch && s.aborts))
  assert.equal(await redis.xlen(logKey('ordered')), 0)
  assert.deepEqual(await outbox.close(), { unremoved: 0, lapsed: false })
})

test('an event given up goes to the dead letters with its reason, out of the log; one the serializer cannot read too', { timeout: 30_000 }, async () => {
  const redis = await client()
  const refused = new Error('400 bad event')
  const dead = []
  const outbox = await Outbox.open({
    redis,
    partner: 'dead',
    ...FAST,
    isFailure: (err) => err !== refused,
    send: async (event) => {
      if (event.bad) throw refused
    },
  })
  outbox.on('dead', (d) => dead.push(d))
  const [good, bad] = await Promise.all([outbox.submit({ bad: false }), outbox.submit({ bad: true }, { key: 'bad-one' })])
  // Written by another writer, in a form this one cannot read.
  const garbled = await redis.xadd(logKey('dead'), '*', 'p', '{not json')
  await until(() => outbox.stats().removed === 3)
  assert.deepEqual(
    dead.map((d) => [d.id, d.key, d.reason]),
    [
      [bad.id, 'bad-one', 'refused'],
      [garbled, garbled, 'undecodable'],
    ],
  )
  const letters = await redis.xrange(deadKey('dead'), '-', '+')
  const fields = letters.map(([, list]) => {
    const f = {}
    for (let i = 0; i + 1 < list.length; i += 2) f[list[i]] = list[i + 1]
    return f
  })
  assert.deepEqual(
    fields.map((f) => [f.k, f.r, f.i]),
    [
      ['bad-one', 'refused', bad.id],
      [undefined, 'undecodable', garbled],
    ],
  )
  assert.equal(JSON.parse(fields[0].p).bad, true)
  assert.equal(await redis.xlen(logKey('dead')), 0)
  assert.ok(good.id < bad.id)
  await outbox.close()
})

test('Redis down or full: submit rejects with StoreUnavailableError, never accepts what is not stored', { timeout: 30_000 }, async () => {
  const fullPort = await freePort()
  const full = await startRedis(fullPort, ['--maxmemory-policy', 'noeviction', '--appendonly', 'yes', '--dir', dir])
  try {
    const redis = await client(fullPort)
    const admin = new Redis({ host: '127.0.0.1', port: fullPort, retryStrategy: () => null })
    admin.on('error', () => {})
    clients.push(admin)
    // A partner that never answers: nothing is delivered, every event stays in the log.
    const hang = (_event, { signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
    const outbox = await Outbox.open({ redis, partner: 'full', ...FAST, send: hang })
    assert.ok((await outbox.submit({ n: 0 })).id)
    // Well past its limit: Redis refuses the write (not ambiguous).
    for (let i = 0; i < 10; i++) await admin.set(`filler:${i}`, 'x'.repeat(100_000))
    await admin.config('SET', 'maxmemory', '100kb')
    const err = await outbox.submit({ n: 1 }).then(
      () => null,
      (e) => e,
    )
    assert.ok(err instanceof StoreUnavailableError, String(err))
    assert.equal(err.code, 'HALFOPEN_STORE_UNAVAILABLE')
    assert.equal(err.ambiguous, false)
    assert.match(err.cause.message, /OOM/)
    await admin.config('SET', 'maxmemory', '0')
    assert.ok((await outbox.submit({ n: 2 })).id, 'room again: stored')
    // Redis gone: rejected at once (no offline queue), every one of a turn's.
    full.kill('SIGKILL')
    await once(full, 'exit')
    const all = await Promise.allSettled([outbox.submit({ n: 3 }), outbox.submit({ n: 4 })])
    assert.ok(all.every((r) => r.status === 'rejected' && r.reason instanceof StoreUnavailableError), JSON.stringify(all.map((r) => r.status)))
    const closed = outbox.close()
    await closed
  } finally {
    full.kill('SIGKILL')
  }
})

test('a process that closes hands the log over: the next delivers what is left, in order; Redis killed and restarted with AOF keeps every accepted event', { timeout: 60_000 }, async () => {
  const restartPort = await freePort()
  const aofDir = fs.mkdtempSync(path.join(dir, 'restart-'))
  const args = ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', aofDir]
  let redisServer = await startRedis(restartPort, args)
  try {
    const a = await Outbox.open({ redis: await client(restartPort), partner: 'handover', ...FAST, send: async () => Promise.reject(new Error('partner down')) })
    const accepted = []
    for (let n = 0; n < 100; n++) accepted.push(await a.submit({ n }))
    await a.close()
    // Killed, not stopped: what it acknowledged is in its append-only file.
    redisServer.kill('SIGKILL')
    await once(redisServer, 'exit')
    redisServer = await startRedis(restartPort, args)
    const got = []
    const b = await Outbox.open({ redis: await client(restartPort), partner: 'handover', ...FAST, send: async (event, { key }) => got.push([event.n, key]) })
    await until(() => b.stats().removed === 100)
    assert.deepEqual(
      got,
      accepted.map((r, n) => [n, r.key]),
    )
    await b.close()
  } finally {
    redisServer.kill('SIGKILL')
  }
})

// Regressions from the hostile review (issue 24).

test('lease, send and store timeouts in fractions of a millisecond still deliver (the lease is whole ms in Redis, rounded up)', { timeout: 30_000 }, async () => {
  const redis = await client()
  const sent = []
  const outbox = await Outbox.open({ redis, partner: 'fractions', concurrencyLimit: 1, timeoutMs: 250.3, storeTimeoutMs: 333.3, leaseMs: 3000.5, send: async (e) => sent.push(e.n) })
  await outbox.submit({ n: 1 })
  await until(() => outbox.stats().removed === 1)
  assert.deepEqual(sent, [1])
  assert.equal(outbox.stats().storeErrors, 0)
  assert.equal(await redis.pttl('halfopen:outbox:v1:{fractions}:epoch'), -1, 'the epoch counter is kept: epochs only grow')
  await outbox.close()
})

test('close waits for the sends of every grant: a successor never sends while one of them runs', { timeout: 60_000 }, async () => {
  const [ra, rb, admin] = [await client(), await client(), await client()]
  const running = new Set()
  const overlaps = []
  const sender = (name, ms) => async (event) => {
    for (const other of running) if (!other.startsWith(name)) overlaps.push(`${name}:${event.n} started while ${other} ran`)
    running.add(`${name}:${event.n}`)
    await new Promise((resolve) => setTimeout(resolve, ms))
    running.delete(`${name}:${event.n}`)
  }
  const a = await Outbox.open({ redis: ra, partner: 'regrant', concurrencyLimit: 1, timeoutMs: 600, storeTimeoutMs: 200, pollIntervalMs: 20, send: sender('A', 550) })
  await until(() => a.isDeliverer())
  for (let n = 1; n <= 8; n++) await a.submit({ n })
  await until(() => running.size > 0)
  // Redis takes no writes for a while (a failover, a slow fsync): A's
  // renewals fail and it stops at its lease's stop, a send in flight.
  const lost = once(a, 'lost')
  await admin.call('CLIENT', 'PAUSE', '60000', 'WRITE')
  const [{ reason }] = await lost
  assert.equal(reason, 'expired')
  assert.ok(running.size > 0, 'a send of the lost grant runs on')
  const again = once(a, 'acquired')
  await admin.call('CLIENT', 'UNPAUSE')
  await again
  const b = await Outbox.open({ redis: rb, partner: 'regrant', concurrencyLimit: 1, timeoutMs: 100, storeTimeoutMs: 100, pollIntervalMs: 20, send: sender('B', 5) })
  await a.close()
  assert.equal(running.size, 0, 'close resolved after every send it started')
  await until(() => b.stats().removed > 0 && running.size === 0)
  assert.deepEqual(overlaps, [])
  await b.close()
})

test('a full Redis (maxmemory, noeviction) is drained by its holder: the lease and the removals still go through', { timeout: 30_000 }, async () => {
  const fullPort = await freePort()
  const full = await startRedis(fullPort, ['--maxmemory-policy', 'noeviction', '--appendonly', 'yes', '--dir', dir])
  try {
    const admin = await client(fullPort)
    let up = false
    const outbox = await Outbox.open({
      redis: await client(fullPort),
      partner: 'drained',
      ...FAST,
      send: async () => {
        if (!up) throw new Error('partner down')
      },
    })
    for (let n = 0; n < 200; n++) await outbox.submit({ n })
    for (let i = 0; i < 10; i++) await admin.set(`filler:${i}`, 'x'.repeat(100_000))
    await admin.config('SET', 'maxmemory', '100kb')
    await assert.rejects(outbox.submit({ n: 200 }), (e) => e instanceof StoreUnavailableError && !e.ambiguous)
    up = true
    await until(() => outbox.stats().removed === 200)
    assert.equal(await admin.xlen(logKey('drained')), 0)
    assert.ok(outbox.isDeliverer(), 'it kept its lease, renewed at maxmemory')
    await outbox.close()
  } finally {
    full.kill('SIGKILL')
  }
})

test('a lease granted while closing is given back: the next process delivers at once', { timeout: 30_000 }, async () => {
  const redis = await client()
  const a = await Outbox.open({ redis, partner: 'brief', ...FAST, send: async () => {} })
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(await a.close(), { unremoved: 0, lapsed: false })
  assert.equal(await redis.exists('halfopen:outbox:v1:{brief}:lease'), 0)
  const b = await Outbox.open({ redis, partner: 'brief', ...FAST, send: async () => {} })
  await once(b, 'acquired')
  await b.close()
})

test('a holder that closes removes what it delivered before it gives the lease back: the next holder sends nothing twice', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  const sent = []
  const a = await Outbox.open({ redis, partner: 'handback', ...FAST, send: async (event) => sent.push(event.n) })
  // What the log holds when the lease goes back (the release is the lease script with TTL 0).
  let atRelease = null
  const lease = redis.halfopenOutboxLease
  redis.halfopenOutboxLease = async (...args) => {
    if (args[4] === '0') atRelease = await admin.xlen(logKey('handback'))
    return lease.apply(redis, args)
  }
  // The first removal fails (its retry is then pending), and the holder closes at once.
  const pipeline = redis.pipeline.bind(redis)
  let failed = false
  redis.pipeline = () => {
    const p = pipeline()
    const xdel = p.xdel.bind(p)
    p.xdel = (...args) => {
      if (!failed) {
        failed = true
        p.exec = async () => Promise.reject(new Error('the removal is lost'))
      }
      return xdel(...args)
    }
    return p
  }
  const closed = new Promise((resolve) => a.on('storeError', ({ operation }) => operation === 'remove' && resolve(a.close())))
  for (let n = 0; n < 50; n++) a.submit({ n })
  assert.deepEqual(await closed, { unremoved: 0, lapsed: false })
  assert.ok(sent.length >= 1 && sent.every((n, i) => n === i), `${sent.length} delivered in order`)
  assert.equal(atRelease, 50 - sent.length, 'every delivered event was out of the log before the lease went back')
  const again = []
  const b = await Outbox.open({ redis: admin, partner: 'handback', ...FAST, send: async (event) => again.push(event.n) })
  await once(b, 'acquired')
  await b.submit({ n: 50 })
  await until(() => again.includes(50))
  assert.deepEqual(again, Array.from({ length: 51 - sent.length }, (_, i) => sent.length + i), 'the rest, once each')
  await b.close()
})

test('a removal that fails as the holder closes is retried while the lease leaves room: close still removes what it delivered', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  let release
  const gate = new Promise((resolve) => {
    release = resolve
  })
  const sent = []
  // (A lease of 9 s: room for a failed removal and its retry after the renewal as close begins.)
  const options = { ...FAST, timeoutMs: 2_000 }
  const a = await Outbox.open({
    redis,
    partner: 'closeretry',
    ...options,
    send: async (event) => {
      await gate
      sent.push(event.n)
    },
  })
  const errors = []
  // The first removal failing (writes paused past the store timeout): Redis takes writes again.
  a.on('storeError', ({ operation }) => {
    errors.push(operation)
    if (operation === 'remove') admin.call('CLIENT', 'UNPAUSE')
  })
  for (let n = 0; n < 5; n++) await a.submit({ n })
  await until(() => a.stats().held > 0)
  // As close renews the lease (confirmed), Redis stops taking writes; then the send in flight ends.
  const lease = redis.halfopenOutboxLease
  redis.halfopenOutboxLease = async (...args) => {
    const reply = await lease.apply(redis, args)
    if (args[4] !== '0') {
      await admin.call('CLIENT', 'PAUSE', '60000', 'WRITE')
      release()
    }
    return reply
  }
  assert.deepEqual(await a.close(), { unremoved: 0, lapsed: false })
  assert.deepEqual(sent, [0])
  assert.deepEqual(errors, ['remove'], 'one failed removal, then its retry went through')
  assert.deepEqual(
    (await admin.xrange(logKey('closeretry'), '-', '+')).map(([, fields]) => JSON.parse(fields[fields.indexOf('p') + 1]).n),
    [1, 2, 3, 4],
    'the delivered event is out of the log, the rest is in it',
  )
})

/**
 * A holder of three events whose first send is held until its close has
 * renewed the lease (the others stay in the log): then `after()` runs (and
 * `before()` just before that renewal), and that send ends.
 */
async function closingHolder(partner, { before = async () => {}, after }) {
  const redis = await client()
  let release
  const gate = new Promise((resolve) => {
    release = resolve
  })
  const sent = []
  const a = await Outbox.open({
    redis,
    partner,
    // (A lease of 9 s: room for every try.)
    ...FAST,
    timeoutMs: 2_000,
    send: async (event) => {
      await gate
      sent.push(event.n)
    },
  })
  const errors = []
  a.on('storeError', ({ operation }) => errors.push(operation))
  for (let n = 0; n < 3; n++) await a.submit({ n })
  await until(() => a.stats().held > 0)
  const lease = redis.halfopenOutboxLease
  let closing = false
  redis.halfopenOutboxLease = async (...args) => {
    if (!closing || args[4] === '0') return lease.apply(redis, args)
    closing = false
    await before()
    const reply = await lease.apply(redis, args)
    await after(redis)
    release()
    return reply
  }
  const close = () => {
    closing = true
    return a.close()
  }
  return { close, sent, errors }
}

test('a removal that keeps failing as the holder closes is tried four times, then close ends, saying so', { timeout: 30_000 }, async () => {
  const admin = await client()
  // Writes paused for good once the close renewed the lease (a Redis that does not come back in time).
  const { close, sent, errors } = await closingHolder('closefails', { after: () => admin.call('CLIENT', 'PAUSE', '60000', 'WRITE') })
  try {
    const closed = await close()
    assert.equal(closed.unremoved, 1)
    assert.deepEqual(sent, [0])
    assert.deepEqual(errors.slice(0, 4), ['remove', 'remove', 'remove', 'remove'], 'four tries')
    assert.equal(errors.filter((e) => e === 'remove').length, 4, 'and no fifth')
  } finally {
    await admin.call('CLIENT', 'UNPAUSE')
  }
})

test('a closing renewal Redis refuses (another process holds the lease) stops the retries: one try only', { timeout: 30_000 }, async () => {
  const admin = await client()
  const leaseKey = 'halfopen:outbox:v1:{closetaken}:lease'
  const { close, sent, errors } = await closingHolder('closetaken', {
    // As the close renews it, the lease has run out and another process holds it.
    before: () => admin.set(leaseKey, 'elsewhere 99', 'PX', 60_000),
    after: () => admin.call('CLIENT', 'PAUSE', '60000', 'WRITE'),
  })
  try {
    assert.deepEqual(await close(), { unremoved: 1, lapsed: true })
    assert.deepEqual(sent, [0])
    assert.deepEqual(errors, ['remove', 'lease'], 'one removal try, then the release (paused too)')
  } finally {
    await admin.call('CLIENT', 'UNPAUSE')
  }
  assert.equal(await admin.get(leaseKey), 'elsewhere 99')
})

test('a client whose pipeline() throws at once: close still ends and gives the lease back', { timeout: 30_000 }, async () => {
  const admin = await client()
  const { close, sent, errors } = await closingHolder('closethrows', {
    after: async (redis) => {
      redis.pipeline = () => {
        throw new Error('thrown at once')
      }
    },
  })
  assert.deepEqual(await close(), { unremoved: 1, lapsed: false })
  assert.deepEqual(sent, [0])
  assert.deepEqual(errors, ['remove', 'remove', 'remove', 'remove'], 'four tries, each a failure')
  assert.equal(await admin.exists('halfopen:outbox:v1:{closethrows}:lease'), 0, 'given back')
})

test('a lease that ran out before close gave it back is said (lapsed), and the next holder keeps its lease', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  const leaseKey = 'halfopen:outbox:v1:{lapsed}:lease'
  const a = await Outbox.open({ redis, partner: 'lapsed', ...FAST, send: async () => {} })
  await once(a, 'acquired')
  // As the close renews it, the lease has run out and another process holds it.
  const lease = redis.halfopenOutboxLease
  let closing = false
  redis.halfopenOutboxLease = async (...args) => {
    if (closing && args[4] !== '0') await admin.set(leaseKey, 'elsewhere 99', 'PX', 60_000)
    return lease.apply(redis, args)
  }
  closing = true
  assert.deepEqual(await a.close(), { unremoved: 0, lapsed: true })
  assert.equal(await admin.get(leaseKey), 'elsewhere 99', "close gave back only its own lease")
  // A renewal Redis does not answer: it may lapse, and close says so.
  redis.halfopenOutboxLease = lease
  await admin.del(leaseKey)
  const b = await Outbox.open({ redis, partner: 'lapsed', ...FAST, send: async () => {} })
  await once(b, 'acquired')
  redis.halfopenOutboxLease = async (...args) => (args[4] === '0' ? lease.apply(redis, args) : Promise.reject(new Error('no answer')))
  const errors = []
  b.on('storeError', ({ operation }) => errors.push(operation))
  assert.deepEqual(await b.close(), { unremoved: 0, lapsed: true })
  assert.deepEqual(errors, ['lease'])
  assert.equal(await admin.exists(leaseKey), 0)
})

test("an event its dispatcher does not take (a bound) is a dead letter ('full'), never skipped silently", { timeout: 30_000 }, async () => {
  const redis = await client()
  const sent = []
  const outbox = await Outbox.open({ redis, partner: 'refusedelse', ...FAST, send: async (event) => sent.push(event.n) })
  await once(outbox, 'acquired')
  const d = outbox._dispatcher
  const submit = d.submit.bind(d)
  d.submit = (entry, options) => (entry.event.n === 3 ? Promise.reject(new RetentionFullError('refusedelse')) : submit(entry, options))
  const dead = []
  outbox.on('dead', ({ key, reason, error }) => dead.push([key, reason, error instanceof RetentionFullError]))
  for (let n = 0; n < 6; n++) await outbox.submit({ n }, { key: `e${n}` })
  await until(() => sent.length === 5 && dead.length === 1)
  assert.deepEqual(sent, [0, 1, 2, 4, 5])
  assert.deepEqual(dead, [['e3', 'full', true]])
  await outbox.close()
  const letters = await redis.xrange(deadKey('refusedelse'), '-', '+')
  assert.deepEqual(
    letters.map(([, f]) => f[f.indexOf('r') + 1]),
    ['full'],
  )
  assert.equal(await redis.xlen(logKey('refusedelse')), 0)
})

test('a lease granted after its call timed out is given back by close; a client that throws at once does not stall close', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  const leaseKey = 'halfopen:outbox:v1:{late}:lease'
  // (Wrapped as open returns: its first lease call is at the next turn.)
  const a = await Outbox.open({ redis, partner: 'late', ...FAST, send: async () => {} })
  const lease = redis.halfopenOutboxLease
  let landed
  const granted = new Promise((resolve) => (landed = resolve))
  let calls = 0
  redis.halfopenOutboxLease = async (...args) => {
    if (args[4] === '0') return lease.apply(redis, args)
    // The first call reaches Redis after the store timeout (500 ms) gave up on it; later ones fail.
    if (calls++ > 0) throw new Error('no answer')
    await new Promise((resolve) => setTimeout(resolve, 700))
    const reply = await lease.apply(redis, args)
    landed(reply)
    return reply
  }
  const [held] = await granted
  assert.equal(held, 1, 'Redis granted it')
  assert.equal(a.isDeliverer(), false, 'this process never heard the grant')
  assert.deepEqual(await a.close(), { unremoved: 0, lapsed: false })
  assert.equal(await admin.exists(leaseKey), 0, 'given back: the next process need not wait a lease')

  const sync = await client()
  const b = await Outbox.open({ redis: sync, partner: 'late', ...FAST, send: async () => {} })
  sync.halfopenOutboxLease = () => {
    throw new Error('thrown at once')
  }
  await once(b, 'storeError')
  assert.deepEqual(await b.close(), { unremoved: 0, lapsed: false })
})

test('listeners: one that throws or rejects is a warning; the others still hear, the event is still removed', { timeout: 30_000 }, async () => {
  const redis = await client()
  const warnings = []
  const onWarning = (w) => warnings.push(w.code)
  process.on('warning', onWarning)
  try {
    const outbox = await Outbox.open({ redis, partner: 'listeners', ...FAST, send: async () => {} })
    let second = 0
    outbox.on('delivered', () => {
      throw new Error('listener bug')
    })
    outbox.on('delivered', async () => {
      throw new Error('async listener bug')
    })
    outbox.on('delivered', () => second++)
    await outbox.submit({ n: 1 })
    await until(() => outbox.stats().removed === 1 && warnings.length >= 2)
    assert.equal(second, 1)
    assert.deepEqual(warnings, ['HALFOPEN_CALLBACK_ERROR', 'HALFOPEN_CALLBACK_ERROR'])
    await outbox.close()
  } finally {
    process.off('warning', onWarning)
  }
})

test('a serializer for values JSON cannot hold: events go through as themselves; the default refuses them at any depth', { timeout: 30_000 }, async () => {
  const redis = await client()
  const got = []
  const serializer = { encode: (m) => JSON.stringify([...m]), decode: (text) => new Map(JSON.parse(text)) }
  const outbox = await Outbox.open({ redis, partner: 'maps', ...FAST, serializer, send: async (m) => got.push(m) })
  await outbox.submit(new Map([['a', 1]]))
  await until(() => outbox.stats().removed === 1)
  assert.ok(got[0] instanceof Map && got[0].get('a') === 1)
  assert.equal(outbox.stats().dead, 0)
  await outbox.close()
  const plain = new Outbox({ redis, partner: 'maps', concurrencyLimit: 1, send: async () => {} })
  for (const event of [{ at: new Date() }, { n: Number.NaN }, { u: undefined }, [undefined], { nested: { m: new Map() } }, { f: () => 1 }]) {
    assert.throws(() => plain.submit(event), (e) => e instanceof TypeError && e.option === 'serializer')
  }
  assert.throws(() => new Outbox({ redis, partner: 'x', concurrencyLimit: 1, send: async () => {}, pageSize: 2 ** 32 + 5 }), (e) => e.option === 'pageSize' && e.problem === 'too_large')
  assert.throws(() => new Outbox({ redis, partner: 'x', concurrencyLimit: 1, send: async () => {}, storeTimeoutMs: 0.5 }), (e) => e.option === 'storeTimeoutMs' && e.problem === 'too_small')
  await plain.close()
})

test('a dead letter retried after a late answer is written once; close waits for a pipeline already sent', { timeout: 30_000 }, async () => {
  const [redis, admin] = [await client(), await client()]
  const refused = new Error('400')
  const outbox = await Outbox.open({ redis, partner: 'once', ...FAST, storeTimeoutMs: 200, isFailure: (e) => e !== refused, send: async () => Promise.reject(refused) })
  await once(outbox, 'acquired')
  const dead = once(outbox, 'dead')
  await outbox.submit({ n: 1 })
  await dead
  // Its move to the dead letters answered late (writes paused past the store timeout), then retried.
  await admin.call('CLIENT', 'PAUSE', '500', 'WRITE')
  await until(() => outbox.stats().removed === 1)
  assert.equal(await admin.xlen(deadKey('once')), 1)
  // Stored, or refused if Redis still pauses writes (its move may have gone
  // out before the pause did): settled either way, handled at once.
  let settled = false
  const late = outbox.submit({ n: 2 }).then(
    () => (settled = true),
    (err) => {
      assert.ok(err instanceof StoreUnavailableError, err)
      settled = true
    },
  )
  await new Promise((resolve) => setImmediate(resolve))
  await outbox.close()
  assert.ok(settled, 'the submit out settled before close resolved')
  await late
})

test('a restart into a backlog of 20,000 (40 pages) holds at most two pages in memory and delivers it all in order', { timeout: 60_000 }, async () => {
  const redis = await client()
  const log = logKey('backlog')
  for (let i = 0; i < 20_000; i += 10_000) {
    const pipe = redis.pipeline()
    for (let j = i; j < i + 10_000; j++) pipe.xadd(log, '*', 'p', JSON.stringify({ n: j }))
    await pipe.exec()
  }
  let next = 0
  let outOfOrder = 0
  const outbox = await Outbox.open({ redis, partner: 'backlog', ...FAST, pageSize: 500, send: async (e) => (e.n === next++ ? null : outOfOrder++) })
  let most = 0
  outbox.on('delivered', () => (most = Math.max(most, outbox.stats().held)))
  await until(() => outbox.stats().removed === 20_000)
  assert.equal(outOfOrder, 0)
  assert.ok(most <= 1_000, `${most} events held at most`)
  assert.equal(await redis.xlen(log), 0)
  await outbox.close()
})

test('the breaker goes with the lease: the next holder resumes an open breaker (no trip of its own), one configured otherwise starts closed with a warning', { timeout: 30_000 }, async () => {
  const redis = await client()
  const partner = 'carried'
  const options = { ...FAST, failureThreshold: 3, openTimeoutMs: 1_000, maxOpenTimeoutMs: 1_000 }
  let sentByA = 0
  const down = async () => {
    sentByA += 1
    throw new Error('partner down')
  }
  const a = await Outbox.open({ redis, partner, ...options, send: down })
  const opened = once(a, 'open')
  for (let n = 0; n < 5; n++) await a.submit({ n })
  await opened
  // The change went to Redis with a renewal, before any close.
  await until(async () => JSON.parse((await redis.hget(`halfopen:outbox:v1:{${partner}}:breaker`, 's')) ?? '{}').phase === 'open')
  await a.close()

  // The next holder: open at once, and its first send is the probe after the open period.
  const order = []
  const b = await Outbox.open({ redis, partner, ...options, send: async (event) => order.push(`send ${event.n}`) })
  const [acquired] = await once(b, 'acquired')
  assert.equal(acquired.breaker, 'resumed')
  assert.equal(b.getState(), 'OPEN')
  b.on('halfOpen', () => order.push('halfOpen'))
  await until(() => b.stats().removed === 5)
  assert.deepEqual(order, ['halfOpen', 'send 0', 'send 1', 'send 2', 'send 3', 'send 4'])
  assert.equal(b.getState(), 'CLOSED')
  await b.close()

  // Its state is left closed now; one configured otherwise does not take it (a warning says so).
  const warned = once(process, 'warning')
  const c = await Outbox.open({ redis, partner, ...options, failureThreshold: 4, send: async () => {} })
  const [cAcquired] = await once(c, 'acquired')
  assert.equal(cAcquired.breaker, 'config_mismatch')
  const [warning] = await warned
  assert.equal(warning.code, 'HALFOPEN_STATE_NOT_RESUMED')
  assert.equal(warning.kind, 'config_mismatch')
  assert.equal(c.getState(), 'CLOSED')
  await c.close()
  assert.equal(sentByA, 3, 'A tripped after its 3 failures')
})

test('a breaker state left longer ago than its open period resumes past it (aged by Redis\'s clock); garbage left in Redis is a warning, never a crash', { timeout: 30_000 }, async () => {
  const redis = await client()
  const partner = 'carried-aged'
  const options = { ...FAST, failureThreshold: 1, openTimeoutMs: 300, maxOpenTimeoutMs: 300 }
  const a = await Outbox.open({ redis, partner, ...options, send: async () => Promise.reject(new Error('partner down')) })
  const opened = once(a, 'open')
  await a.submit({ n: 0 })
  await opened
  await a.close()
  const left = await redis.hget(`halfopen:outbox:v1:{${partner}}:breaker`, 's')
  assert.equal(JSON.parse(left).phase, 'open')
  // Redis's own clock says when the open period is over.
  const [seconds, micros] = await redis.time()
  const over = Number(seconds) * 1000 + Number(micros) / 1000 + 300
  await until(async () => {
    const [s, us] = await redis.time()
    return Number(s) * 1000 + Number(us) / 1000 > over + 1
  })
  const b = await Outbox.open({ redis, partner, ...options, send: async () => {} })
  const [acquired] = await once(b, 'acquired')
  assert.equal(acquired.breaker, 'resumed')
  assert.notEqual(b.getState(), 'OPEN', 'the open period ended before it was resumed')
  await until(() => b.stats().removed === 1)
  await b.close()

  await redis.hset(`halfopen:outbox:v1:{${partner}}:breaker`, 's', '{"version":3,"garbage', 't', '0')
  const warned = once(process, 'warning')
  const c = await Outbox.open({ redis, partner, ...options, send: async () => {} })
  const [cAcquired] = await once(c, 'acquired')
  assert.equal(cAcquired.breaker, 'malformed')
  assert.equal((await warned)[0].kind, 'malformed')
  assert.equal(c.getState(), 'CLOSED')
  await c.close()
})

// Regressions from the hostile review of the carried breaker state.

test('a grant whose answer came too late still hands on the state left: the next call, which finds the lease held, resumes it', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  const partner = 'carried-late'
  const options = { ...FAST, failureThreshold: 1, openTimeoutMs: 60_000, maxOpenTimeoutMs: 60_000 }
  const a = await Outbox.open({ redis, partner, ...options, send: async () => Promise.reject(new Error('partner down')) })
  const opened = once(a, 'open')
  await a.submit({ n: 0 })
  await opened
  await a.close()
  // B's first lease call is granted, but its answer comes after the store timeout.
  const late = await client()
  const b = new Outbox({ redis: late, partner, ...options, send: async () => Promise.reject(new Error('partner down')) })
  const lease = late.halfopenOutboxLease
  let first = true
  late.halfopenOutboxLease = async (...args) => {
    const reply = await lease.apply(late, args)
    if (first) {
      first = false
      await new Promise((resolve) => setTimeout(resolve, 700))
    }
    return reply
  }
  const [storeError] = await once(b, 'storeError')
  assert.equal(storeError.operation, 'lease')
  const [acquired] = await once(b, 'acquired')
  assert.equal(acquired.breaker, 'resumed')
  assert.equal(b.getState(), 'OPEN')
  await b.close()
  assert.equal(JSON.parse(await admin.hget(`halfopen:outbox:v1:{${partner}}:breaker`, 's')).phase, 'open', 'what B left is still open')
})

test('a holder whose lease lapsed in Redis and is granted again keeps the newer state it carried, not the older one stored', { timeout: 30_000 }, async () => {
  const redis = await client()
  const admin = await client()
  const partner = 'carried-regrant'
  const key = (what) => `halfopen:outbox:v1:{${partner}}:${what}`
  const a = new Outbox({ redis, partner, ...FAST, failureThreshold: 1, openTimeoutMs: 60_000, maxOpenTimeoutMs: 60_000, send: async () => Promise.reject(new Error('partner down')) })
  await once(a, 'acquired')
  await until(async () => (await admin.hget(key('breaker'), 's')) !== null)
  assert.equal(JSON.parse(await admin.hget(key('breaker'), 's')).phase, 'closed')
  // The lease lapses in Redis (evicted, a failover) just as the breaker opens.
  const lease = redis.halfopenOutboxLease
  let drop = false
  let carried = null
  redis.halfopenOutboxLease = async (...args) => {
    if (drop && args[4] !== '0') {
      drop = false
      carried = JSON.parse(args[5]).phase
      await admin.del(key('lease'))
    }
    return lease.apply(redis, args)
  }
  a.once('open', () => {
    drop = true
  })
  const opens = []
  a.on('open', () => opens.push(a.stats().epoch))
  const regranted = once(a, 'acquired')
  await a.submit({ n: 1 })
  const [acquired] = await regranted
  assert.equal(carried, 'open')
  assert.equal(acquired.breaker, 'resumed')
  assert.equal(a.getState(), 'OPEN', 'its own newest state: open, not tripped again')
  assert.equal(JSON.parse(await admin.hget(key('breaker'), 's')).phase, 'open')
  assert.equal(opens.length, 1, 'opened once')
  await a.close()
})

test('a renewal answered after its holder stopped locally hands its state back: the grant it resumes is its own, not a fresh breaker', { timeout: 30_000 }, async () => {
  const { NativeOutbox, outboxLeaseScript } = require('../native.js')
  const redis = await client()
  redis.defineCommand('leaseUnderTest', { numberOfKeys: 3, lua: outboxLeaseScript() })
  const keys = ['late-renewal:lease', 'late-renewal:epoch', 'late-renewal:breaker']
  // The core's clock is the test's (ms): a lease of 3,000, stops sending at 1,000 before its end.
  const n = new NativeOutbox({ seed: '0123456789abcdef', sendTimeoutMs: 500 }, 0)
  let t = 0
  const answer = (reply) => n.leaseAnswered(t, [reply[0], reply[1]], typeof reply[2] === 'string' ? reply[2] : null, reply.length > 2 ? reply[3] : null)
  n.leaseCall(t)
  answer(await redis.leaseUnderTest(...keys, ...n.leaseArgs('tok', '', n.epoch(), false)))
  const event = () => {
    const e = n.pollEvent()
    return e && `${e.kind} ${e.epoch ?? e.reason}`
  }
  assert.equal(event(), 'acquired 1')
  t = 1_000
  n.leaseCall(t)
  answer(await redis.leaseUnderTest(...keys, ...n.leaseArgs('tok', '{"open":1}', n.epoch(), false)))
  // Redis does not answer the next renewals, but one sent just before the stop, answered just after it.
  for (t = 2_000; ; t += 1) {
    if (n.leaseCall(t) === null) continue
    if (t >= 3_700) break
    n.leaseFailed(t + 1)
  }
  const reply = await redis.leaseUnderTest(...keys, ...n.leaseArgs('tok', '{"open":2}', n.epoch(), false))
  const sent = t
  t = Math.max(4_001, t + 1)
  assert.ok(t - sent < 1_000, 'within the store timeout')
  n.handleTimeout(t)
  assert.equal(event(), 'lost expired')
  answer(reply)
  assert.equal(event(), 'acquired 1')
  assert.equal(n.takeLeft(t)?.state, '{"open":2}', 'the state it carried, handed back with the grant')
})

test('while removals stall, the holder reads no more than four pages not yet out of the log (what a crash would send again)', { timeout: 30_000 }, async () => {
  const redis = await client()
  const partner = 'stalled-removals'
  let stalled = true
  let unstall
  const released = new Promise((resolve) => (unstall = resolve))
  const pipeline = redis.pipeline.bind(redis)
  redis.pipeline = () => {
    const p = pipeline()
    const xdel = p.xdel.bind(p)
    p.xdel = (...args) => {
      if (stalled) {
        const exec = p.exec.bind(p)
        p.exec = async () => {
          await released
          return exec()
        }
      }
      return xdel(...args)
    }
    return p
  }
  // A backlog, stored before the holder opens (its pages are full).
  const fill = redis.pipeline()
  for (let n = 0; n < 1_000; n++) fill.xadd(logKey(partner), '*', 'p', JSON.stringify({ n }))
  await fill.exec()
  let sent = 0
  let most = 0
  let reached
  const fourPages = new Promise((resolve) => (reached = resolve))
  const outbox = await Outbox.open({
    redis,
    partner,
    ...FAST,
    concurrencyLimit: 8,
    send: async () => {
      const { held, removing } = outbox.stats()
      most = Math.max(most, held + removing)
      if (++sent === 256) reached()
    },
  })
  await fourPages
  // Unbounded, the holder would go on reading and sending meanwhile.
  await new Promise((resolve) => setTimeout(resolve, 300))
  assert.equal(sent, 256, 'four pages sent, none more while their removals are out')
  assert.ok(most <= 256, `${most} read and not out of the log`)
  stalled = false
  unstall()
  await until(() => outbox.stats().removed === 1_000)
  await outbox.close()
})
