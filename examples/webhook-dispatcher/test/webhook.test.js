'use strict'
// The example for real (run.js: redis-server with AOF, two local partners
// over HTTP, three sender processes and a fourth for the rolling deploy).
// At each partner every event is processed once (a repeat, answered by key,
// is always of an ambiguous outcome the run names) and in each process's
// order; the epochs of the deliveries never go back (one deliverer at a
// time, also counting the repeats); submits during the Redis crash were
// refused, never accepted without being stored, and nothing stored was
// lost; B got its events while A was down; the heir of a holder killed
// while A was down resumed its open breaker; a killed holder's log was taken
// over; the graceful handover repeated only what its holder said it could
// not remove; Redis holds nothing at the end. (That a handover removes
// before it gives the lease back is tested, deterministically, in the
// package's outbox.test.js.)

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

test('three processes, a partner outage, Redis and two holders killed, a rolling deploy: every event once, in order, the breaker carried', () => {
  const events = 24_000
  const out = execFileSync('node', ['run.js', '--json', '--events', String(events)], { cwd: path.join(__dirname, '..'), encoding: 'utf8', timeout: 240_000 })
  const r = JSON.parse(out.trim().split('\n').pop())
  for (const p of [r.a, r.b]) {
    assert.equal(p.processed, p.submitted, 'every event processed')
    assert.equal(p.outOfOrder, 0, "each process's events in its order")
    assert.equal(p.epochsBack, 0, 'one deliverer at a time: the epochs never go back')
    assert.deepEqual(
      Object.keys(p.why).filter((why) => why === 'unexplained'),
      [],
      JSON.stringify({
        unexplained: r.unexplained,
        grants: r.grants,
        takeover: r.a.takeover,
      }),
    )
    assert.equal(p.storedAfter, 0, 'Redis holds nothing once all is delivered')
  }
  assert.ok(r.crash.refused > 0, 'submits during the crash were refused')
  assert.ok(r.crash.storedAfterCrash >= events && r.crash.storedAfterCrash <= events + r.crash.ambiguous, `A's log: ${r.crash.storedAfterCrash}`)
  assert.equal(r.b.deliveredWhileADown, r.b.submitted, 'B got every event while A was down')
  assert.notEqual(r.a.takeover.by, r.a.takeover.killed)
  // The breaker went with the lease: the heir of a holder killed while A was down probed once, then opened.
  assert.notEqual(r.a.resumed.by, r.a.resumed.killed)
  assert.equal(r.a.resumed.breaker, 'resumed')
  assert.equal(r.a.resumed.callsBeforeOpen, 1, 'one probe, not five failures of its own')
  assert.ok(r.a.deploy.held, 'the process stopped in the deploy held the lease')
  if (!r.a.deploy.lapsed) assert.ok(r.a.deploy.repeats <= r.a.deploy.unremoved, 'a graceful handover repeats only what its holder could not remove')
  console.log(
    `repeats deduplicated by key: A ${r.a.repeats} (${JSON.stringify(r.a.why)}), B ${r.b.repeats}; takeover after the kill ${r.a.takeover.ms} ms; ` +
      `A while down: ${r.a.callsWhileDown} calls, ${r.a.opens} opens`,
  )
})
