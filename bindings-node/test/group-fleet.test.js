'use strict'
// Ten sender processes in one group against a local upstream that starts
// failing (issue 23's fleet test): once every process has opened, the
// upstream sees no call but the lease holder's probes, at most
// `halfOpenMaxAttempts` a round for the whole group (not ten times that);
// when it recovers, one round of probes closes every process. Redis killed
// mid-run: every process decides alone, no call fails, and the group
// re-forms (without a false open) when it is back, empty. The upstream
// counts the calls itself, by the state each was admitted in; every wait
// is for the processes' own words, never a margin.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const http = require('node:http')
const path = require('node:path')
const MEMBER = require('./support/group-options.js')
const { freePort, startRedis: redisOn } = require('./support/redis-server.js')

let port
let server

async function startRedis() {
  server = await redisOn(port)
}

before(async () => {
  port = await freePort()
  await startRedis()
})

after(() => server.kill())

/** A local upstream that answers 503 while `state.failing`, counting calls by the state they were admitted in. */
async function upstreamServer(t) {
  const state = { failing: false, calls: { CLOSED: 0, HALF_OPEN: 0, OPEN: 0 } }
  const upstream = http.createServer((req, res) => {
    state.calls[req.headers['x-state']] += 1
    res.statusCode = state.failing ? 503 : 200
    res.end()
  })
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.after(() => upstream.close())
  return { state, url: `http://127.0.0.1:${upstream.address().port}/` }
}

/** Ten sender processes of group `name`; `said(c, what, check)` resolves on a child's next such message. */
function fleet(t, url, name) {
  const children = Array.from({ length: 10 }, () =>
    fork(path.join(__dirname, 'support', 'group-sender.js'), [String(port), url, name], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  )
  t.after(() => {
    for (const c of children) c.kill()
  })
  const said = (c, what, check = () => true) =>
    new Promise((resolve) => {
      const on = (m) => {
        if (m.what === what && check(m)) {
          c.off('message', on)
          resolve(m)
        }
      }
      c.on('message', on)
    })
  const heard = (what) => {
    const all = []
    for (const c of children) c.on('message', (m) => m.what === what && all.push(m))
    return all
  }
  return { children, said, heard }
}

test('ten processes: no call but the lease holder\'s probes while the group is open, one round for all', { timeout: 60_000 }, async (t) => {
  const { state, url } = await upstreamServer(t)
  const { calls } = state
  const { children, said, heard } = fleet(t, url, 'fleet-of-ten')
  const anyOf = (what, check) => Promise.race(children.map((c) => said(c, what, check)))
  await Promise.all(children.map((c) => said(c, 'joined')))
  // A process whose store is late decides alone (and may probe by itself):
  // none must be, for the bounds below to be the group's.
  const degraded = heard('degraded')

  state.failing = true
  await Promise.all(children.map((c) => said(c, 'open')))
  // Every process open, none with a call of its own out: from here until
  // the upstream recovers, only probes reach it.
  const atOpen = { ...calls }
  const reopened = anyOf('open', (m) => m.reason === 'probe_failed')
  await reopened
  const probes = calls.HALF_OPEN - atOpen.HALF_OPEN
  assert.equal(calls.CLOSED - atOpen.CLOSED, 0, 'no call from a closed breaker while the group is open')
  assert.ok(probes >= 1 && probes <= MEMBER.breaker.halfOpenMaxAttempts, `${probes} probes in the round, for ten processes`)

  state.failing = false
  const beforeRecovery = { ...calls }
  await Promise.all(children.map((c) => said(c, 'close')))
  const recoveryProbes = calls.HALF_OPEN - beforeRecovery.HALF_OPEN
  // The probes of the rounds until one succeeded: each round's from one process.
  assert.ok(recoveryProbes >= 1, 'the group closed on probes')
  assert.equal(calls.OPEN, 0, 'no call admitted by an open breaker')
  assert.deepEqual(degraded, [], 'every exchange answered in time')
})

test('Redis killed mid-run: every process decides alone, no call fails; back empty, the group re-forms without a false open', { timeout: 60_000 }, async (t) => {
  const { state, url } = await upstreamServer(t)
  const { children, said, heard } = fleet(t, url, 'fleet-killed')
  await Promise.all(children.map((c) => said(c, 'joined')))
  const failed = heard('call failed')
  const opened = heard('open')
  const degraded = children.map((c) => said(c, 'degraded'))
  server.kill('SIGKILL')
  await Promise.all(degraded)
  // Each process goes on sending, alone.
  const before = state.calls.CLOSED
  const recovered = children.map((c) => said(c, 'recovered'))
  await new Promise((resolve) => {
    const check = setInterval(() => {
      if (state.calls.CLOSED >= before + 100) {
        clearInterval(check)
        resolve()
      }
    }, 10)
  })
  await startRedis()
  await Promise.all(recovered)
  assert.deepEqual(failed, [], 'no call failed because Redis did')
  assert.deepEqual(opened, [], 'no open, alone or after Redis came back empty')
})
