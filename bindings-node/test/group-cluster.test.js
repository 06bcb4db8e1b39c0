'use strict'
// The `group` option on a Redis Cluster of three masters on loopback (every
// key of a group shares one hash slot), and the store calls counted by Redis
// itself (INFO commandstats): at most one script call per process per flush
// interval, plus those transitions ask for. And an Outbox on the same
// cluster (its keys share one slot too).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const { once } = require('node:events')
const { mkdtempSync, rmSync } = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { CircuitBreaker, Outbox } = require('..')
const { freePort, startRedis } = require('./support/redis-server.js')

const servers = []
const ports = []
let dir
let cluster

/** A free port whose cluster bus port (10000 above) is a port, and free. */
async function clusterPort() {
  for (;;) {
    const port = await freePort()
    if (port + 10_000 >= 65_536) continue
    const bus = await new Promise((resolve) => {
      const s = net.createServer()
      s.once('error', () => resolve(false))
      s.listen(port + 10_000, '127.0.0.1', () => s.close(() => resolve(true)))
    })
    if (bus) return port
  }
}

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'halfopen-cluster-'))
  for (let i = 0; i < 3; i++) {
    const port = await clusterPort()
    const cwd = path.join(dir, String(i))
    execFileSync('mkdir', ['-p', cwd])
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf']
    servers.push(await startRedis(port, args, { cwd }))
    ports.push(port)
  }
  execFileSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' })
  // The cluster's own word that every slot is served.
  while (!execFileSync('redis-cli', ['-p', String(ports[0]), 'cluster', 'info']).toString().includes('cluster_state:ok')) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  cluster = new Redis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })))
  await once(cluster, 'ready')
})

after(async () => {
  cluster.disconnect()
  for (const s of servers) s.kill()
  rmSync(dir, { recursive: true, force: true })
})

function member(name) {
  return new CircuitBreaker({
    name: 'wa',
    failureThreshold: 5,
    windowMs: 60_000,
    openTimeoutMs: 300,
    halfOpenMaxAttempts: 1,
    probeTimeoutMs: 1_000,
    group: { redis: cluster, name, flushIntervalMs: 50, storeTimeoutMs: 50 },
  })
}

async function until(check) {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 20))
}

test('on a Redis Cluster, members open together on spread failures and one probe closes them', { timeout: 30_000 }, async () => {
  const [a, b] = [member('cluster'), member('cluster')]
  await until(() => a.groupStatus().phase === 'closed' && b.groupStatus().phase === 'closed')
  const opened = [once(a, 'open'), once(b, 'open')]
  for (const x of [a, a, a, b, b]) await assert.rejects(x.execute(() => Promise.reject(new Error('down'))))
  await Promise.all(opened)
  // Calls keep coming and are refused: a probe would serve them.
  for (const x of [a, b]) await assert.rejects(x.execute(() => Promise.resolve(1)))
  await until(() => a.groupStatus().phase === 'half_open' && b.groupStatus().phase === 'half_open')
  const probes = [a, b].map((x) => [x, x.tryAcquire()]).filter(([, p]) => p.admitted)
  assert.equal(probes.length, 1, 'one probe for the group')
  const closed = [once(a, 'close'), once(b, 'close')]
  const [holder, permit] = probes[0]
  holder.record(permit, 'success')
  await Promise.all(closed)
  for (const x of [a, b]) x.leaveGroup()
})

test('Redis counts at most one script call per process per flush interval, plus transitions', { timeout: 30_000 }, async () => {
  const node = new Redis({ host: '127.0.0.1', port: ports[0] })
  const nodes = ports.map((port) => new Redis({ host: '127.0.0.1', port }))
  await Promise.all(nodes.map((n) => n.config('RESETSTAT')))
  const started = performance.now()
  const members = [member('counted'), member('counted'), member('counted')]
  for (let i = 0; i < 2_000; i++) for (const x of members) await x.execute(() => Promise.resolve(1))
  await new Promise((resolve) => setTimeout(resolve, 500))
  for (const x of members) x.leaveGroup()
  const elapsed = performance.now() - started
  let calls = 0
  for (const n of nodes) {
    const stats = await n.info('commandstats')
    for (const name of ['evalsha', 'eval']) {
      const m = stats.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`))
      if (m) calls += Number(m[1])
    }
  }
  // No transition here: every exchange is a flush interval's, and the first;
  // ioredis loads the script once per node (a refused EVALSHA, then EVAL).
  const bound = members.length * (Math.floor(elapsed / 50) + 1) + 2 * nodes.length
  assert.ok(calls > 0 && calls <= bound, `${calls} script calls in ${Math.round(elapsed)} ms for ${members.length} members (bound ${bound})`)
  node.disconnect()
  for (const n of nodes) n.disconnect()
})

test('an Outbox on a Redis Cluster: two clients submit, one delivers in order, a dead letter is kept, the other takes over', { timeout: 30_000 }, async () => {
  const other = new Redis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })))
  await once(other, 'ready')
  const got = []
  const options = {
    partner: 'clustered',
    concurrencyLimit: 1,
    timeoutMs: 200,
    storeTimeoutMs: 500,
    pollIntervalMs: 20,
    isFailure: (err) => err.message !== 'refused',
    send: async (event) => {
      if (event.n === 7) throw new Error('refused')
      got.push(event.n)
    },
  }
  const a = await Outbox.open({ redis: cluster, ...options })
  await once(a, 'acquired')
  const b = await Outbox.open({ redis: other, ...options })
  for (let n = 0; n < 200; n++) await (n % 2 === 0 ? a : b).submit({ n }, { key: `k${n}` })
  await until(() => got.length === 199)
  assert.deepEqual(
    got,
    Array.from({ length: 200 }, (_, n) => n).filter((n) => n !== 7),
  )
  assert.equal((await a.close()).unremoved, 0)
  await once(b, 'acquired')
  await b.submit({ n: 200 })
  await until(() => got.length === 200)
  assert.equal(got.at(-1), 200)
  await b.close()
  assert.equal(await cluster.xlen('halfopen:outbox:v1:{clustered}:log'), 0)
  const dead = await cluster.xrange('halfopen:outbox:v1:{clustered}:dead', '-', '+')
  assert.deepEqual(
    dead.map(([, fields]) => [fields[fields.indexOf('k') + 1], fields[fields.indexOf('r') + 1]]),
    [['k7', 'refused']],
  )
  other.disconnect()
})
