'use strict'
// The example for real (redis-server, two local partners over HTTP, the
// sender): 100,000 events while partner A is down. Every event is processed
// exactly once and in order at each partner (delivery is at least once: a
// send that timed out on a loaded machine is sent again with the same key,
// and the partner, deduplicating by it, answers without processing it); A saw only the calls that
// opened its breaker and one probe per open period; no more than the bound
// was held; B got all of its events while A was still down, its breaker
// never opening.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

test('100,000 events through a partner outage: nothing lost, nothing twice, in order, the healthy partner unaffected', () => {
  const out = execFileSync('node', ['run.js', '--json', '--events', '100000'], { cwd: path.join(__dirname, '..'), encoding: 'utf8', timeout: 240_000 })
  const r = JSON.parse(out.trim().split('\n').pop())
  for (const p of [r.a, r.b]) {
    assert.equal(p.delivered, 50_000)
    assert.equal(p.missing, 0)
    assert.equal(p.twice, 0, 'no event processed twice: a repeat always carried its first key')
    assert.equal(p.outOfOrder, 0)
  }
  console.log(`sent again after an ambiguous outcome (deduplicated by key): A ${r.a.duplicates}, B ${r.b.duplicates}`)
  // Five failures open the breaker; after that only the probes, one per open period.
  assert.equal(r.a.callsWhileDown, 5 + (r.a.opens - 1), `calls while down ${r.a.callsWhileDown}, opens ${r.a.opens}`)
  assert.ok(r.a.opens >= 2, 'the outage outlasted an open period')
  assert.ok(r.a.maxHeld <= r.maxMessages, `held ${r.a.maxHeld} > bound ${r.maxMessages}`)
  assert.equal(r.a.maxHeld, 50_000, 'every event for A was held at some point: it was down throughout')
  assert.equal(r.a.stats.dead + r.a.stats.dropped + r.a.stats.refused, 0)
  assert.equal(r.b.opens, 0)
  assert.equal(r.b.deliveredWhileADown, 50_000, 'B got every event while A was still down')
  assert.equal(r.storedAfter, 0, 'Redis holds nothing once all is delivered')
})
