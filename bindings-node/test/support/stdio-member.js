'use strict'
// One Node sender process of a group, driven over stdin/stdout by a test in
// another language (bindings-python/tests/test_group.py mixes Node and
// Python processes in one group). Arguments: the Redis port, the group's
// name. Commands, one per line: `fail N`, `probe N` (answers `probed K`:
// the probes admitted), `report` (the probes succeed). It says `joined`,
// `open` and `close` as they happen.

// Run as a test file (the test runner runs every file under test/), it has
// no arguments: nothing to do.
if (process.argv.length < 4) process.exit(0)

const readline = require('node:readline')
const Redis = require('ioredis')
const { CircuitBreaker } = require('../..')

const redis = new Redis({ host: '127.0.0.1', port: Number(process.argv[2]), enableOfflineQueue: false, maxRetriesPerRequest: 0 })
redis.on('error', () => {})
const breaker = new CircuitBreaker({
  name: 'wa',
  failureThreshold: 5,
  windowMs: 60_000,
  openTimeoutMs: 400,
  halfOpenMaxAttempts: 2,
  probeTimeoutMs: 1_000,
  group: { redis, name: process.argv[3], flushIntervalMs: 50, storeTimeoutMs: 40, quorum: 2 },
})
const say = (line) => process.stdout.write(`${line}\n`)
breaker.on('open', () => {
  say('open')
  // Calls keep coming and are refused: a probe would serve them.
  breaker.execute(() => Promise.resolve(1)).catch(() => {})
})
breaker.on('close', () => say('close'))
const permits = []

const joined = setInterval(() => {
  if (breaker.groupStatus().phase !== null) {
    clearInterval(joined)
    say('joined')
  }
}, 10)

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  const [what, n] = line.trim().split(' ')
  if (what === 'fail') {
    for (let i = 0; i < Number(n); i++) await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {})
  } else if (what === 'probe') {
    let admitted = 0
    for (let i = 0; i < Number(n); i++) {
      const p = breaker.tryAcquire()
      if (p.admitted) {
        permits.push(p)
        admitted++
      }
    }
    say(`probed ${admitted}`)
  } else if (what === 'report') {
    for (const p of permits.splice(0)) breaker.record(p, 'success')
  }
})
process.stdin.on('end', () => process.exit(0))
