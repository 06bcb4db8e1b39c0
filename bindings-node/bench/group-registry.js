'use strict'
// A grouped Registry's exchange (issue 23): one round of a registry of N
// names (every name due, in calls of at most 100 names, one after the
// other) against a local redis-server: the round's time from its first
// call to its last answer (the core's requests and answers included), its
// calls, and the Redis time per name (INFO commandstats). Medians of 5
// rounds. Run: `cd bindings-node && node bench/group-registry.js [names]`.

const { spawn } = require('node:child_process')
const { once } = require('node:events')
const net = require('node:net')
const Redis = require('ioredis')
const { Registry } = require('..')

const FLUSH_MS = 1_000
const ROUNDS = 5

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function scriptStats(admin) {
  const stats = await admin.info('commandstats')
  let calls = 0
  let usec = 0
  for (const name of ['evalsha', 'eval']) {
    const m = stats.match(new RegExp(`cmdstat_${name}:calls=(\\d+),usec=(\\d+)`))
    if (m) {
      calls += Number(m[1])
      usec += Number(m[2])
    }
  }
  return { calls, usec }
}

async function measure(port, names) {
  const redis = new Redis({ host: '127.0.0.1', port })
  const admin = new Redis({ host: '127.0.0.1', port })
  await Promise.all([once(redis, 'ready'), once(admin, 'ready')])
  const registry = new Registry({ capacity: Math.max(names, 100), group: { redis, name: `bench-${names}`, flushIntervalMs: FLUSH_MS } })
  // Each script call, timed: a round is the calls within one flush interval.
  const calls = []
  const exchange = redis.halfopenGroupExchanges.bind(redis)
  redis.halfopenGroupExchanges = async (...args) => {
    const started = performance.now()
    const reply = await exchange(...args)
    calls.push([started, performance.now()])
    return reply
  }
  for (let i = 0; i < names; i++) await registry.get(`n${i}`).execute(() => 1)
  while (registry.groupStatus().answered < names) await new Promise((resolve) => setTimeout(resolve, 10))
  const rounds = []
  for (let r = 0; r < ROUNDS; r++) {
    // Every name changed: a success each.
    for (let i = 0; i < names; i++) await registry.get(`n${i}`).execute(() => 1)
    calls.length = 0
    await admin.config('RESETSTAT')
    const perRound = Math.ceil(names / 100)
    while (calls.length < perRound) await new Promise((resolve) => setTimeout(resolve, 5))
    const stats = await scriptStats(admin)
    rounds.push({ ms: calls.at(-1)[1] - calls[0][0], calls: calls.length, redisUsPerName: stats.usec / names })
  }
  registry.leaveGroup()
  redis.disconnect()
  admin.disconnect()
  return {
    names,
    callsPerRound: median(rounds.map((r) => r.calls)),
    roundMs: median(rounds.map((r) => r.ms)),
    redisUsPerName: median(rounds.map((r) => r.redisUsPerName)),
  }
}

async function main() {
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  console.log('| names | calls a round | round (first call to last answer) | Redis time per name |')
  console.log('|---:|---:|---:|---:|')
  try {
    for (const names of (process.argv[2] ? [Number(process.argv[2])] : [100, 1_000, 10_000])) {
      const m = await measure(port, names)
      console.log(`| ${names.toLocaleString('en')} | ${m.callsPerRound} | ${m.roundMs.toFixed(1)} ms | ${m.redisUsPerName.toFixed(1)} µs |`)
    }
  } finally {
    server.kill()
  }
}

main()
