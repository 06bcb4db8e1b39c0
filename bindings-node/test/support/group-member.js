'use strict'
// One sender process of group.test.js: a breaker in the group 'fleet' on the
// Redis at the port given, driven by its parent over IPC ('fail', 'probe',
// 'report'), telling it what happens ('joined', 'open', 'half_open_seen',
// 'probed', 'close').

// Run as a test file (the test runner runs every file under test/), it has
// no parent to talk to: nothing to do.
if (typeof process.send !== 'function') process.exit(0)

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
  group: { redis, name: 'fleet', flushIntervalMs: 50, storeTimeoutMs: 40 },
})
const say = (what, more = {}) => process.send({ what, ...more })
breaker.on('open', (e) => {
  say('open', { reason: e.reason })
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

process.on('message', async (m) => {
  if (m.do === 'fail') {
    for (let i = 0; i < m.times; i++) await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {})
    // The group's half-open, when this process sees it.
    const seen = setInterval(() => {
      if (breaker.groupStatus().phase === 'half_open') {
        clearInterval(seen)
        say('half_open_seen')
      }
    }, 10)
  } else if (m.do === 'probe') {
    for (let i = 0; i < m.times; i++) {
      const p = breaker.tryAcquire()
      if (p.admitted) permits.push(p)
    }
    say('probed', { admitted: permits.length })
  } else if (m.do === 'report') {
    for (const p of permits) breaker.record(p, 'success')
  }
})
