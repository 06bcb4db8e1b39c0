'use strict'
// One sender process of a group, driven by group-fleet.test.js over IPC:
// it sends to a local upstream one call at a time, as long as it lives,
// through a breaker in the group, and says so of its transitions: `joined`,
// `open` (once no call of its own is in flight: every call it admitted
// before opening has reached the upstream), `halfOpen`, `close`,
// `degraded`, `recovered`, and each call that failed. Each call
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
  group: { ...MEMBER.group, flushIntervalMs: 500, storeTimeoutMs: 500, redis, name: group },
})
breaker.on('groupDegraded', (e) => process.send({ what: 'degraded', error: String(e.error) }))
breaker.on('groupRecovered', () => process.send({ what: 'recovered' }))
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
    // A call that fails while the upstream is well is said (a call must
    // never fail because Redis did).
    inflight = breaker.execute(call).catch((err) => process.send({ what: 'call failed', error: String(err) }))
    await inflight
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
main()
