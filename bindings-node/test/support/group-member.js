'use strict'
// One sender process of a group, driven by a test: over IPC by its Node
// parent (group.test.js: messages `{ do: 'fail' | 'probe' | 'report', times }`,
// answers `{ what, ... }`), or over stdin/stdout by a test in another
// language (bindings-python/tests/test_group.py mixes Node and Python
// processes in one group: lines `fail N`, `probe N`, `report`, answers
// `joined`, `open`, `probed K`, `close`). Arguments: the Redis port, the
// group's name (default 'fleet').

// Run as a test file (the test runner runs every file under test/), it has
// neither a parent to talk to nor arguments: nothing to do.
const ipc = typeof process.send === 'function'
if (!ipc && process.argv.length < 3) process.exit(0)

const readline = require('node:readline')
const Redis = require('ioredis')
const { CircuitBreaker } = require('../..')
const MEMBER = require('./group-options.js')

const redis = new Redis({ host: '127.0.0.1', port: Number(process.argv[2]), enableOfflineQueue: false, maxRetriesPerRequest: 0 })
redis.on('error', () => {})
const breaker = new CircuitBreaker({ ...MEMBER.breaker, group: { ...MEMBER.group, redis, name: process.argv[3] ?? 'fleet' } })
const say = (what, more = {}) => {
  if (ipc) process.send({ what, ...more })
  else process.stdout.write(`${[what, ...Object.values(more)].join(' ')}\n`)
}
breaker.on('open', (e) => {
  say('open', ipc ? { reason: e.reason } : {})
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

async function command(what, times) {
  if (what === 'fail') {
    for (let i = 0; i < times; i++) await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {})
    if (!ipc) return
    // The group's half-open, when this process sees it.
    const seen = setInterval(() => {
      if (breaker.groupStatus().phase === 'half_open') {
        clearInterval(seen)
        say('half_open_seen')
      }
    }, 10)
  } else if (what === 'probe') {
    let admitted = 0
    for (let i = 0; i < times; i++) {
      const p = breaker.tryAcquire()
      if (p.admitted) {
        permits.push(p)
        admitted++
      }
    }
    say('probed', { admitted: ipc ? permits.length : admitted })
  } else if (what === 'report') {
    for (const p of permits.splice(0)) breaker.record(p, 'success')
  }
}

if (ipc) process.on('message', (m) => command(m.do, m.times))
else {
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const [what, n] = line.trim().split(' ')
    command(what, Number(n))
  })
  process.stdin.on('end', () => process.exit(0))
}
