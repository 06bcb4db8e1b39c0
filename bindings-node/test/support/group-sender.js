'use strict'
// One sender process of a group, driven by group-fleet.test.js over IPC:
// it sends to a local upstream one call at a time, as long as it lives,
// through a breaker in the group, and says so of its transitions: `joined`,
// `open` (once no call of its own is in flight: every call it admitted
// before opening has reached the upstream), `halfOpen`, `close`. Each call
// says in a header the state it was admitted in (a probe: HALF_OPEN).
// Arguments: the Redis port, the upstream's URL, the group's name.

const ipc = typeof process.send === 'function'
if (!ipc) process.exit(0)

const Redis = require('ioredis')
const { CircuitBreaker } = require('../..')
const MEMBER = require('./group-options.js')

const [port, upstream, group] = process.argv.slice(2)
const redis = new Redis({ host: '127.0.0.1', port: Number(port), enableOfflineQueue: false, maxRetriesPerRequest: 0 })
redis.on('error', () => {})
// A store timeout no loopback Redis misses under load: a process that
// decides alone (its exchange late) would probe by itself, by design.
const breaker = new CircuitBreaker({
  ...MEMBER.breaker,
  group: { ...MEMBER.group, flushIntervalMs: 200, storeTimeoutMs: 200, redis, name: group },
})
breaker.on('groupDegraded', (e) => process.send({ what: 'degraded', error: String(e.error) }))
let inflight = Promise.resolve()
breaker.on('open', (e) => inflight.then(() => process.send({ what: 'open', reason: e.reason })))
breaker.on('halfOpen', () => process.send({ what: 'halfOpen' }))
breaker.on('close', () => process.send({ what: 'close' }))
process.on('disconnect', () => process.exit(0))

const joined = setInterval(() => {
  if (breaker.groupStatus().phase !== null) {
    clearInterval(joined)
    process.send({ what: 'joined' })
  }
}, 10)

async function call() {
  const response = await fetch(upstream, { headers: { 'x-state': breaker.getState() } })
  await response.arrayBuffer()
  if (!response.ok) throw new Error(`upstream ${response.status}`)
}

async function main() {
  for (;;) {
    inflight = breaker.execute(call).catch(() => {})
    await inflight
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}
main()
