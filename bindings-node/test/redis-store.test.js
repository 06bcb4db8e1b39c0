'use strict'
// halfopen/redis-store against a real redis-server: what it writes and
// reads, in order, one MULTI per event-loop turn; corrupt contents are a
// SnapshotError naming what is wrong, and nothing is deleted.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const net = require('node:net')
const Redis = require('ioredis')
const { Dispatcher, SnapshotError } = require('..')
const { RedisStore } = require('../redis-store.js')

let server
let redis

before(async () => {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
  server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  redis = new Redis({ host: '127.0.0.1', port })
})

after(async () => {
  await redis.quit()
  server.kill()
})

test('operations apply in call order, a turn in one MULTI; load reads only', async () => {
  const store = new RedisStore(redis, { key: 'order' })
  const writes = []
  const multi = redis.multi.bind(redis)
  redis.multi = (commands) => {
    writes.push(commands?.length)
    return multi(commands)
  }
  const done = []
  for (let i = 0; i < 10_000; i++) done.push(store.add(i, { i }))
  done.push(store.remove(5), store.save({ v: 1 }))
  await Promise.all(done)
  redis.multi = multi
  assert.deepEqual(writes, [10_003], 'one MULTI for the turn (a removal is two commands: the message and its key)')
  const first = await store.load()
  assert.equal(first.messages.length, 9_999)
  assert.deepEqual(first.messages.slice(0, 6).map(([seq]) => seq), [0, 1, 2, 3, 4, 6])
  assert.deepEqual(first.snapshot, { v: 1 })
  assert.deepEqual((await store.load()).snapshot, { v: 1 }, 'load deletes nothing')
  await store.save(null)
  assert.equal((await store.load()).snapshot, null)
  await store.clear()
  assert.equal(await redis.exists('order:messages'), 0)
})

test('corrupt contents are a SnapshotError naming what is wrong, and nothing is deleted', async () => {
  const store = new RedisStore(redis, { key: 'corrupt' })
  await redis.set('corrupt:state', '{not json')
  await assert.rejects(store.load(), (err) => err instanceof SnapshotError && err.kind === 'malformed' && /corrupt:state/.test(err.message))
  assert.equal(await redis.get('corrupt:state'), '{not json', 'the state is kept')
  await redis.del('corrupt:state')
  await redis.hset('corrupt:messages', '3', '{bad')
  await assert.rejects(store.load(), (err) => err instanceof SnapshotError && err.kind === 'corrupt' && /message 3/.test(err.message))
  await redis.hset('corrupt:messages', '3', '"fine"', 'x', '"y"')
  await assert.rejects(store.load(), (err) => err instanceof SnapshotError && /"x"/.test(err.message))
  assert.equal(await redis.hlen('corrupt:messages'), 2)
  const send = () => {}
  await assert.rejects(Dispatcher.open({ name: 'c', concurrencyLimit: 1, store, send }), SnapshotError)
})

test('a graceful restart through Redis delivers nothing twice; the state taken back is forgotten', async () => {
  const store = new RedisStore(redis, { key: 'restart' })
  const sent = []
  const options = { name: 'r', concurrencyLimit: 1, store, send: (m) => void sent.push(m) }
  const first = await Dispatcher.open(options)
  first.forceOpen()
  for (let i = 0; i < 100; i++) first.submit(i)
  await first.close()
  assert.equal(await redis.hlen('restart:messages'), 100)
  const second = await Dispatcher.open(options)
  await second.persisted()
  assert.equal(await redis.exists('restart:state'), 0, 'taken back, then forgotten')
  assert.equal(second.getState(), 'OPEN', 'still held open, as it was saved')
  second.release()
  await second.drained()
  await second.persisted()
  assert.deepEqual(sent, [...Array(100).keys()])
  assert.equal(await redis.hlen('restart:messages'), 0)
})

test('each message keeps its key in Redis: a graceful restart and a crash restart send it with the same key', async () => {
  const store = new RedisStore(redis, { key: 'keys' })
  const seen = []
  const options = { name: 'k', concurrencyLimit: 1, store, timeoutMs: null }
  const first = await Dispatcher.open({ ...options, send: () => {} })
  first.forceOpen()
  first.submit('a')
  first.submit('b', { key: 'order-7' })
  await first.close()
  const [keyA] = await redis.hvals('keys:keys')
  assert.match(keyA, /^[0-9a-f]{16}-0$/)
  assert.deepEqual((await store.load()).messages, [[0, 'a', keyA], [1, 'b', 'order-7']])
  // A graceful restart; then a crash with 'a' in flight.
  const second = await Dispatcher.open({ ...options, send: (m, { key }) => seen.push([m, key]) && new Promise(() => {}) })
  second.release()
  await second.persisted()
  const third = await Dispatcher.open({ ...options, send: (m, { key }) => void seen.push([m, key]) })
  await third.drained()
  await third.persisted()
  assert.deepEqual(seen, [['a', keyA], ['a', keyA], ['b', 'order-7']])
  assert.equal(await redis.exists('keys:messages', 'keys:keys'), 0, 'delivered: messages and keys removed')
  await store.add(5, 'c', 'k5')
  await store.clear()
  assert.equal(await redis.exists('keys:keys'), 0, 'clear forgets the keys too')
})

test('an empty key in Redis is a SnapshotError naming it, not a TypeError about the store', async () => {
  const store = new RedisStore(redis, { key: 'badkey' })
  await redis.hset('badkey:messages', '0', '"a"')
  await redis.hset('badkey:keys', '0', '')
  await assert.rejects(store.load(), (err) => err instanceof SnapshotError && err.kind === 'corrupt' && /badkey:keys/.test(err.message))
  await assert.rejects(Dispatcher.open({ name: 'b', concurrencyLimit: 1, store, send: () => {} }), SnapshotError)
  await redis.del('badkey:messages', 'badkey:keys')
})

test('the Dispatcher needs no global crypto (Node 18 has none): its keys come from node:crypto', () => {
  const { spawnSync } = require('node:child_process')
  const script = `delete globalThis.crypto
const { Dispatcher } = require(${JSON.stringify(require.resolve('..'))})
const d = new Dispatcher({ name: 'n18', concurrencyLimit: 1, timeoutMs: null, send: (m, { key }) => console.log(key) })
d.submit('a').then(() => d.close())`
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout.trim(), /^[0-9a-f]{16}-0$/)
})
