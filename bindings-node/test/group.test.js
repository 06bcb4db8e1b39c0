'use strict'
// The `group` option against a real redis-server: breakers of one group
// (members, as several processes would be; one test runs them in child
// processes) trip together on failures spread among them, probe once for
// the group, close together; a killed Redis leaves each deciding alone
// (no call waits or fails), and a restarted one is adopted again. Every
// wait is for the system's own answer (an event, a state), never a margin.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const Redis = require('ioredis')
const { CircuitBreaker } = require('..')
const { groupKeys } = require('../native.js')
const MEMBER = require('./support/group-options.js')
const { freePort, startRedis: redisOn } = require('./support/redis-server.js')

let port
let server
const clients = []

async function startRedis() {
  server = await redisOn(port)
}

function client() {
  // No offline queue: while Redis is down a command fails at once.
  const r = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
  r.on('error', () => {})
  clients.push(r)
  return r
}

before(async () => {
  port = await freePort()
  await startRedis()
})

after(async () => {
  for (const r of clients) r.disconnect()
  server.kill()
})

/** Resolves when `check()` holds, checking after each of `breaker`'s events or every 20 ms. */
async function until(check) {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 20))
}

const fail = () => Promise.reject(new Error('upstream down'))
const ok = () => Promise.resolve('ok')

/** Each member's record in group `key` (core/src/group/store.lua): id -> { seen, failed } (µs, store time). */
async function records(redis, key) {
  const all = await redis.hgetall(key)
  const out = new Map()
  for (const [field, value] of Object.entries(all)) {
    if (!field.startsWith('m:')) continue
    const [seen, failed] = value.split(',').map(Number)
    out.set(field.slice(2), { seen, failed })
  }
  return out
}

function member(group, options = {}) {
  return new CircuitBreaker({ ...MEMBER.breaker, ...options, group: { ...MEMBER.group, redis: client(), name: group } })
}

test('the group option is checked: type, range and backend errors name the option', { timeout: 30_000 }, () => {
  const redis = client()
  assert.throws(() => new CircuitBreaker({ name: 'x', group: 1 }), (e) => e instanceof TypeError && e.option === 'group')
  assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis: {}, name: 'g' } }), (e) => e.option === 'group.redis')
  assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis, name: '' } }), (e) => e.option === 'group.name')
  // Each exchange sends every key: a name is at most 1024 bytes.
  assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis, name: 'n'.repeat(1025) } }), (e) => e.option === 'group.name')
  assert.throws(
    () => new CircuitBreaker({ name: 'x', group: { redis, name: 'g', flushIntervalMs: 0 } }),
    (e) => e.option === 'group.flushIntervalMs' && e.problem === 'zero' && e.message === 'option group.flushIntervalMs must not be zero',
  )
  assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis, name: 'g', flush: 1 } }), (e) => e.option === 'group.flush')
  assert.throws(
    () => new CircuitBreaker({ name: 'x', group: { redis, name: 'g', flushIntervalMs: Number.NaN } }),
    (e) => e instanceof RangeError && e.option === 'group.flushIntervalMs' && e.problem === 'not_finite',
  )
  // Ranges are the core's: zero, a timeout longer than the interval, a quorum of 0.
  for (const [option, value, problem] of [
    ['flushIntervalMs', 0, 'zero'],
    ['storeTimeoutMs', 5_000, 'too_large'],
    ['quorum', 0, 'zero'],
    ['leaseMs', 1, 'too_small'],
    ['leaseMs', 2 * 86_400_000, 'too_large'],
    ['memberTtlMs', 1e300, 'too_large'],
    ['flushIntervalMs', 1, 'too_small'],
  ]) {
    assert.throws(
      () => new CircuitBreaker({ name: 'x', group: { redis, name: 'g', [option]: value } }),
      (e) => e instanceof RangeError && e.option === `group.${option}` && e.problem === problem,
      option,
    )
  }
})

test('a group name that would split the hash tag is refused; a flush interval alone needs no store timeout', { timeout: 30_000 }, () => {
  const redis = client()
  for (const name of ['}x', 'a{b']) {
    assert.throws(() => new CircuitBreaker({ name: 'x', group: { redis, name } }), (e) => e instanceof RangeError && e.option === 'group.name')
  }
  const b = new CircuitBreaker({ name: 'x', group: { redis, name: 'g', flushIntervalMs: 100 } })
  assert.equal(b.groupStatus().member.length, 16)
  b.leaveGroup()
  assert.equal(b.groupStatus(), null, 'in no group after leaving')
})

test('failures spread over members open the group, though none trips alone, and every member follows', { timeout: 30_000 }, async () => {
  const [a, b, c] = [member('spread'), member('spread'), member('spread')]
  const degraded = []
  for (const x of [a, b, c]) x.on('groupDegraded', (e) => degraded.push(e.error.message))
  await until(() => [a, b, c].every((x) => x.groupStatus().phase === 'closed'))
  // A client still connecting when its process starts is no outage: an
  // exchange sent before it is ready fails at once (no offline queue), so
  // the only degradation there may be is an answer a loaded machine made
  // late.
  assert.ok(degraded.every((m) => /did not answer within/.test(m)), degraded.join('; '))
  // Five failures in all: 2 + 2 + 1, none reaches 5 alone.
  for (const [x, n] of [[a, 2], [b, 2], [c, 1]]) {
    for (let i = 0; i < n; i++) await assert.rejects(x.execute(fail), /upstream down/)
  }
  assert.deepEqual([a, b, c].map((x) => x.getState()), ['CLOSED', 'CLOSED', 'CLOSED'])
  const opened = [a, b, c].map((x) => once(x, 'open'))
  const events = await Promise.all(opened)
  assert.deepEqual(events.map(([e]) => e.reason), ['failure_threshold', 'failure_threshold', 'failure_threshold'])
  // Open everywhere: a call is rejected at once, without Redis.
  for (const x of [a, b, c]) await assert.rejects(x.execute(ok), (e) => e.code === 'EOPENBREAKER' || e.name === 'CircuitBreakerOpenError')
  for (const x of [a, b, c]) x.leaveGroup()
})

test('one probe round for the group: one member probes, the others wait, and its successes close them all', { timeout: 30_000 }, async () => {
  const members = [member('probe'), member('probe'), member('probe')]
  await until(() => members.every((x) => x.groupStatus().phase === 'closed'))
  for (const x of members) {
    for (let i = 0; i < 2; i++) await assert.rejects(x.execute(fail))
  }
  await until(() => members.every((x) => x.getState() === 'OPEN'))
  // Calls keep coming and are refused: a probe would serve them.
  for (const x of members) await assert.rejects(x.execute(ok))
  await until(() => members.every((x) => x.groupStatus().phase === 'half_open'))
  // Every member asks as hard as it can: two probes in all, from one member.
  const permits = []
  for (let round = 0; round < 3; round++) {
    for (const x of members) {
      const p = x.tryAcquire()
      if (p.admitted) permits.push([x, p])
      else assert.equal(p.reason, 'probes_busy')
    }
  }
  assert.equal(permits.length, 2, 'halfOpenMaxAttempts for the whole group')
  assert.equal(new Set(permits.map(([x]) => x)).size, 1, 'from one member')
  const closed = members.map((x) => once(x, 'close'))
  for (const [x, p] of permits) x.record(p, 'success')
  await Promise.all(closed)
  assert.deepEqual(members.map((x) => x.getState()), ['CLOSED', 'CLOSED', 'CLOSED'])
  for (const x of members) x.leaveGroup()
})

test('one member whose calls fail does not open the group', { timeout: 30_000 }, async () => {
  const [bad, good1, good2] = [member('poison'), member('poison'), member('poison')]
  await until(() => [bad, good1, good2].every((x) => x.groupStatus().phase === 'closed'))
  for (let i = 0; i < 6; i++) {
    await assert.rejects(bad.execute(fail))
    await good1.execute(ok)
    await good2.execute(ok)
  }
  assert.equal(bad.getState(), 'OPEN', 'it opens alone')
  // Redis itself says when: the bad member's failures are in, then each good
  // member exchanged twice after (a trip seen at the first would have been
  // proposed at the second).
  // A client of the test's own, which waits for its connection.
  const redis = new Redis({ host: '127.0.0.1', port })
  clients.push(redis)
  const [register] = groupKeys('poison')
  const id = (x) => BigInt(`0x${x.groupStatus().member}`).toString()
  const pause = () => new Promise((resolve) => setTimeout(resolve, 10))
  while (!((await records(redis, register)).get(id(bad))?.failed > 0)) await pause()
  const lastSeen = async () => {
    const all = await records(redis, register)
    return [good1, good2].map((x) => all.get(id(x))?.seen ?? 0)
  }
  for (let round = 0; round < 2; round++) {
    const since = Math.max(...(await lastSeen()))
    while ((await lastSeen()).some((at) => at <= since)) await pause()
  }
  assert.notEqual(await redis.hget(register, 'phase'), 'open')
  const seen = (x) => x.groupStatus().phase
  assert.deepEqual([seen(good1), seen(good2)], ['closed', 'closed'])
  assert.deepEqual([good1.getState(), good2.getState()], ['CLOSED', 'CLOSED'])
  for (const x of [bad, good1, good2]) x.leaveGroup()
})

test('a killed Redis leaves every member deciding alone at once, and a restarted one is adopted again', { timeout: 30_000 }, async () => {
  const [a, b] = [member('outage'), member('outage')]
  await until(() => [a, b].every((x) => x.groupStatus().phase === 'closed'))
  const degraded = [a, b].map((x) => once(x, 'groupDegraded'))
  server.kill('SIGKILL')
  await once(server, 'exit')
  await Promise.all(degraded)
  assert.deepEqual([a.groupStatus().degraded, b.groupStatus().degraded], [true, true])
  // Calls neither wait nor fail for it; alone, a member still trips.
  assert.equal(await a.execute(ok), 'ok')
  for (let i = 0; i < 5; i++) await assert.rejects(a.execute(fail), /upstream down/)
  assert.equal(a.getState(), 'OPEN')
  assert.equal(b.getState(), 'CLOSED')
  const recovered = [a, b].map((x) => once(x, 'groupRecovered'))
  await startRedis()
  await Promise.all(recovered)
  // A Redis restarted empty: the group starts afresh, without a false open.
  await until(() => b.groupStatus().phase === 'closed')
  assert.equal(b.getState(), 'CLOSED')
  for (const x of [a, b]) x.leaveGroup()
})

test('a full Redis (maxmemory, noeviction) is an outage: each member decides alone until its writes fit again', { timeout: 30_000 }, async () => {
  const fullPort = await freePort()
  const full = await redisOn(fullPort, ['--maxmemory-policy', 'noeviction'])
  const admin = new Redis({ host: '127.0.0.1', port: fullPort })
  const r = new Redis({ host: '127.0.0.1', port: fullPort, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
  r.on('error', () => {})
  try {
    const b = new CircuitBreaker({ ...MEMBER.breaker, group: { ...MEMBER.group, redis: r, name: 'full' } })
    await until(() => b.groupStatus().phase === 'closed')
    const events = []
    b.on('groupDegraded', (e) => events.push(['degraded', e.error?.message]))
    b.on('groupRecovered', () => events.push(['recovered']))
    // Well past its limit (1 MB of data held, a limit far below it): every write is refused.
    for (let i = 0; i < 10; i++) await admin.set(`filler:${i}`, 'x'.repeat(100_000))
    await admin.config('set', 'maxmemory', '100kb')
    await until(() => events.length > 0)
    assert.equal(events[0][0], 'degraded')
    assert.match(events[0][1], /OOM/)
    // Redis's own count of the scripts it refused: three more, and the member stayed alone.
    const refused = async () => Number(/cmdstat_evalsha:.*failed_calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0)
    const seen = await refused()
    while ((await refused()) < seen + 3) await new Promise((resolve) => setTimeout(resolve, 20))
    assert.deepEqual(events.map((e) => e[0]), ['degraded'], 'no recovery while every write is refused')
    assert.equal(b.groupStatus().degraded, true)
    // Calls neither wait nor fail for it; alone, the member still trips.
    assert.equal(await b.execute(ok), 'ok')
    for (let i = 0; i < 5; i++) await assert.rejects(b.execute(fail), /upstream down/)
    assert.equal(b.getState(), 'OPEN')
    // Room again: the next retry is stored, and said once.
    const recovered = once(b, 'groupRecovered')
    await admin.config('set', 'maxmemory', '0')
    await recovered
    assert.deepEqual(events.map((e) => e[0]), ['degraded', 'recovered'])
    b.leaveGroup()
  } finally {
    r.disconnect()
    admin.disconnect()
    full.kill()
  }
})

test('a clock that fails is an exchange that fails: groupDegraded carries its TypeError; a throwing listener stops nothing', { timeout: 30_000 }, async () => {
  let reading = () => Date.now()
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  const a = member('bad-clock', { clock: () => reading() })
  await until(() => a.groupStatus().phase === 'closed')
  a.on('groupDegraded', () => {
    throw new Error('listener bug')
  })
  for (const bad of [() => Number.NaN, () => Infinity, () => 'soon', () => { throw new Error('clock bug') }]) {
    const degraded = once(a, 'groupDegraded')
    reading = bad
    const [{ error }] = await degraded
    assert.ok(error instanceof TypeError && error.option === 'clock', String(error))
    assert.equal(a.groupStatus().degraded, true)
    const recovered = once(a, 'groupRecovered')
    reading = () => Date.now()
    await recovered
    assert.equal(a.groupStatus().phase, 'closed')
  }
  // Each throw of the listener was a warning, and the exchanges went on.
  await until(() => warnings.filter((w) => w.code === 'HALFOPEN_CALLBACK_ERROR').length >= 4)
  process.off('warning', onWarning)
  a.leaveGroup()
})

test('the group has one adaptive limit: the calls admitted across members stay within it, and a failure halves it once', { timeout: 30_000 }, async () => {
  const keys = groupKeys('limit')
  const admin = client()
  const members = Array.from({ length: 10 }, () => member('limit', { adaptiveLimitMin: 1, adaptiveLimitMax: 1000 }))
  await until(() => members.every((x) => x.groupStatus().phase === 'closed'))
  const groupLimit = async () => {
    const [limit, epoch] = await admin.hmget(keys[0], 'limit', 'limit_epoch')
    return { limit: Number(limit), epoch: Number(epoch) }
  }
  /** Resolves once every member has exchanged since now (the store's own record of it). */
  const exchanged = async () => {
    const [s, us] = await admin.time()
    const since = Number(s) * 1e6 + Number(us)
    for (;;) {
      const scores = [...(await records(admin, keys[0])).values()].map((r) => r.seen)
      if (scores.length === members.length && scores.every((t) => t > since)) return
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  const burst = () => {
    const held = []
    for (const x of members) {
      for (let p = x.tryAcquire(); p.admitted; p = x.tryAcquire()) held.push([x, p])
    }
    return held
  }
  // Shares follow what each member last heard: one flush interval after
  // the last joined, every member's is from a view with all of them.
  await exchanged()
  await exchanged()
  let grew = 0
  for (let round = 0; round < 8; round++) {
    // Every member takes what its share admits, then they all succeed.
    const held = burst()
    const { limit } = await groupLimit()
    assert.ok(held.length <= limit, `round ${round}: ${held.length} calls admitted, the group's limit ${limit}`)
    if (round === 0) assert.ok(held.length < members.length, `below one call per member at the start: ${held.length}`)
    for (const [x, p] of held) x.record(p, 'success')
    grew = Math.max(grew, held.length)
    await exchanged()
    await exchanged()
  }
  const before = await groupLimit()
  assert.ok(before.limit > 3 && grew > 3, `the limit grew on successes: ${JSON.stringify(before)}, ${grew} at once`)
  // Three members fail at once: one cut for the group.
  const held = burst()
  for (const [x, p] of held) x.record(p, members.indexOf(x) % 4 === 0 ? 'failure' : 'success')
  await exchanged()
  await exchanged()
  const after = await groupLimit()
  assert.equal(after.epoch, before.epoch + 1, `one cut: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`)
  assert.ok(after.limit * 2 <= before.limit + members.length, `halved: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`)
  const again = burst()
  assert.ok(again.length <= after.limit, `${again.length} admitted after the cut, the limit ${after.limit}`)
  for (const [x, p] of again) x.record(p, 'success')
  for (const x of members) x.leaveGroup()
})

test('a force-open received by one member opens the whole group', { timeout: 30_000 }, async () => {
  const members = [member('forced'), member('forced'), member('forced')]
  await until(() => members.every((x) => x.groupStatus().phase === 'closed'))
  assert.throws(() => members[0].groupForceOpen(Number.NaN), (e) => e.option === 'ms' && e.problem === 'not_finite')
  assert.throws(() => new CircuitBreaker({ name: 'alone' }).groupForceOpen(1000), TypeError)
  const opened = once(members[2], 'open')
  members[0].groupForceOpen(60_000)
  assert.equal(members[0].getState(), 'OPEN', 'this one at once')
  const [{ reason }] = await opened
  assert.equal(reason, 'forced_open')
  await until(() => members.every((x) => x.getState() === 'OPEN'))
  await assert.rejects(members[1].execute(ok), (e) => e.code === 'HALFOPEN_OPEN' || e.name === 'CircuitBreakerOpenError')
  for (const x of members) x.leaveGroup()
})

test('a force-close or reset received by one member closes the whole group, saying so', { timeout: 30_000 }, async () => {
  for (const [method, reason] of [
    ['groupForceClose', 'forced_close'],
    ['groupReset', 'reset'],
  ]) {
    const members = [member(`closed-${reason}`), member(`closed-${reason}`), member(`closed-${reason}`)]
    await until(() => members.every((x) => x.groupStatus().phase === 'closed'))
    assert.throws(() => new CircuitBreaker({ name: 'alone' })[method](), TypeError)
    members[0].groupForceOpen(600_000)
    await until(() => members.every((x) => x.getState() === 'OPEN'))
    const closed = once(members[2], 'close')
    members[1][method]()
    assert.equal(members[1].getState(), 'CLOSED', 'this one at once')
    const [event] = await closed
    assert.equal(event.reason, reason)
    await until(() => members.every((x) => x.getState() === 'CLOSED' && x.groupStatus().phase === 'closed'))
    assert.equal(await members[0].execute(ok), 'ok')
    for (const x of members) x.leaveGroup()
  }
})

test('a clock stepped back keeps the exchanges going', { timeout: 30_000 }, async () => {
  let skew = 0
  const a = member('stepped', { clock: () => Date.now() - skew })
  await until(() => a.groupStatus().phase === 'closed')
  const admin = client()
  await until(() => admin.status === 'ready')
  const [key] = groupKeys('stepped')
  const score = async () => [...(await records(admin, key)).values()][0].seen
  skew += 30_000
  // The store's own record of its exchanges moves on, several times.
  const first = await score()
  let seen = first
  for (let i = 0; i < 3; i++) {
    while ((await score()) === seen) await new Promise((resolve) => setTimeout(resolve, 10))
    seen = await score()
  }
  assert.ok(seen > first)
  assert.equal(a.groupStatus().degraded, false)
  a.leaveGroup()
})

test('anything that stops an exchange fails it: groupDegraded carries the error', { timeout: 30_000 }, async () => {
  const a = member('stopped-exchange')
  await until(() => a.groupStatus().phase === 'closed')
  // Applying the answer throws (a clock that failed between two readings
  // of one exchange does the same).
  const boom = new TypeError('boom')
  const manual = a._manual
  a._manual = () => {
    throw boom
  }
  const [{ error }] = await once(a, 'groupDegraded')
  assert.equal(error, boom)
  a._manual = manual
  await once(a, 'groupRecovered')
  a.leaveGroup()
})

test('members in four processes open together and probe once', { timeout: 30_000 }, async (t) => {
  const child = path.join(__dirname, 'support', 'group-member.js')
  const children = [0, 1, 2, 3].map(() => fork(child, [String(port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  t.after(() => {
    for (const c of children) c.kill()
  })
  const said = (c, what) => new Promise((resolve) => c.on('message', (m) => m.what === what && resolve(m)))
  await Promise.all(children.map((c) => said(c, 'joined')))
  // Two failures in each process: 8 in all.
  const opened = children.map((c) => said(c, 'open'))
  for (const c of children) c.send({ do: 'fail', times: 2 })
  const reasons = (await Promise.all(opened)).map((m) => m.reason)
  assert.deepEqual(new Set(reasons), new Set(['failure_threshold']))
  // After the open period: each process tries 3 probes; 2 admitted in all.
  await Promise.all(children.map((c) => said(c, 'half_open_seen')))
  const tried = children.map((c) => said(c, 'probed'))
  for (const c of children) c.send({ do: 'probe', times: 3 })
  const admitted = (await Promise.all(tried)).map((m) => m.admitted)
  assert.equal(admitted.reduce((s, n) => s + n, 0), 2, `probes per process: ${admitted}`)
  const closed = children.map((c) => said(c, 'close'))
  for (const c of children) c.send({ do: 'report' })
  await Promise.all(closed)
})
