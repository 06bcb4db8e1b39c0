// The seed scenarios of the conformance suite (tests/conformance/seed_*.json)
// against the component in Node, through jco's transpiled module
// (dist/js/, made by build.mjs): the suite's milliseconds are the
// interface's microseconds (BigInt). A runner fails on an unknown key or op.

import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { breaker as wit } from '../dist/js/halfopen.js'

const SUITE = new URL('../../../tests/conformance/', import.meta.url)
const FILES = ['seed_000_whatsapp.json', 'seed_001_webhook.json']
const us = (ms) => BigInt(ms) * 1000n
const snake = (name) => name.replaceAll('-', '_')

function configOf(spec) {
  const keys = Object.keys(spec)
  assert.deepEqual(keys.filter((k) => k !== 'preset'), [], `config keys this runner reads: preset only, got ${keys}`)
  const presets = { whatsapp_gateway: wit.whatsappGateway, partner_webhook: wit.partnerWebhook, sender: wit.sender }
  const preset = spec.preset ?? 'whatsapp_gateway'
  assert.ok(preset in presets, `unknown preset ${preset}`)
  return presets[preset]()
}

function checkTransitions(seen, step) {
  const want = step.transitions ?? (step.transition ? [step.transition] : [])
  assert.equal(seen.length, want.length, `transitions ${JSON.stringify(seen, (_, v) => (typeof v === 'bigint' ? Number(v) : v))}`)
  seen.forEach((got, i) => {
    const w = want[i]
    assert.deepEqual(
      { from: snake(got.from), to: snake(got.to), reason: snake(got.reason) },
      { from: w.from, to: w.to, reason: w.reason },
    )
    if ('at' in w) assert.equal(got.at, us(w.at))
  })
}

function checkRetry(gotUs, want) {
  if (want === null) assert.equal(gotUs, undefined)
  else if (typeof want === 'object') assert.ok(gotUs >= us(want.min) && gotUs <= us(want.max), `${gotUs} µs not in ${JSON.stringify(want)}`)
  else assert.equal(gotUs, us(want))
}

function run(testCase) {
  const b = wit.Breaker.create(configOf(testCase.config), false)
  const permits = new Map()
  let clock = 0n
  for (const step of testCase.steps) {
    const allowed = {
      acquire: ['permit', 'rejected', 'transition'],
      record: ['permit', 'outcome', 'transition'],
      call: ['outcome', 'duration_ms', 'repeat', 'transition', 'transitions'],
      expect: ['state', 'retry_after_ms', 'mode', 'counts', 'metrics', 'poll_timeout_ms'],
      force_open: ['for_ms', 'transition', 'transitions'],
    }[step.op]
    assert.ok(allowed, `unknown op ${step.op}`)
    for (const key of Object.keys(step)) assert.ok(['op', 'at', ...allowed].includes(key), `unknown key ${key}`)
    if ('at' in step) clock = us(step.at)
    const seen = []
    if (step.op === 'acquire') {
      const admission = b.tryAcquire(clock)
      if (admission.transition) seen.push(admission.transition)
      if (admission.decision.tag === 'ok') {
        assert.ok('permit' in step, 'expected a refusal, the call was admitted')
        permits.set(step.permit, admission.decision.val)
      } else {
        assert.ok('rejected' in step, 'expected admission')
        const r = admission.decision.val
        if ('state' in step.rejected) assert.equal(snake(r.state), step.rejected.state)
        if ('reason' in step.rejected) assert.equal(snake(r.reason), step.rejected.reason)
        if ('retry_after_ms' in step.rejected) checkRetry(r.retryAfter, step.rejected.retry_after_ms)
      }
    } else if (step.op === 'record') {
      const t = b.record(permits.get(step.permit), step.outcome, clock)
      permits.delete(step.permit)
      if (t) seen.push(t)
    } else if (step.op === 'call') {
      const end = clock + us(step.duration_ms ?? 0)
      const taken = []
      for (let i = 0; i < (step.repeat ?? 1); i++) {
        const admission = b.tryAcquire(clock)
        if (admission.transition) seen.push(admission.transition)
        assert.equal(admission.decision.tag, 'ok', `call ${i} was rejected`)
        taken.push(admission.decision.val)
      }
      for (const permit of taken) {
        const t = b.record(permit, step.outcome, end)
        if (t) seen.push(t)
      }
      clock = end
    } else if (step.op === 'force_open') {
      seen.push(...b.forceOpen(clock, 'for_ms' in step ? us(step.for_ms) : undefined))
    } else {
      if ('state' in step) assert.equal(snake(b.state(clock)), step.state)
      if ('retry_after_ms' in step) checkRetry(b.retryAfter(clock), step.retry_after_ms)
      if ('mode' in step) assert.equal(snake(b.mode(clock).tag), step.mode)
      if ('poll_timeout_ms' in step) {
        const want = step.poll_timeout_ms
        assert.equal(b.pollTimeout(), want === null ? undefined : us(want))
      }
      if ('counts' in step) {
        const c = b.counts(clock)
        for (const [k, v] of Object.entries(step.counts)) {
          const name = k.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase())
          assert.ok(name in c, `unknown count ${k}`)
          assert.equal(c[name], v, `counts.${k}`)
        }
      }
      if ('metrics' in step) {
        const m = b.metrics(clock)
        for (const [k, v] of Object.entries(step.metrics)) {
          const name = k.replace(/_ms$/, '').replace(/_([a-z0-9])/g, (_, ch) => ch.toUpperCase())
          assert.ok(name in m || name === 'opensLast24h', `unknown metric ${k}`)
          const got = name === 'opensLast24h' ? m.opensLast24h : m[name]
          const value = typeof got === 'bigint' ? Number(got) / (k.endsWith('_ms') ? 1000 : 1) : got
          assert.equal(value, v, `metrics.${k}`)
        }
      }
    }
    if (step.op !== 'expect') checkTransitions(seen, step)
  }
}

let scenarios = 0
for (const file of FILES) {
  const suite = JSON.parse(readFileSync(new URL(file, SUITE), 'utf8'))
  assert.equal(suite.format, 1)
  for (const testCase of suite.cases) {
    scenarios++
    test(`${file.replace('.json', '')}::${testCase.description}`, () => run(testCase))
  }
}
test('every seed scenario is run', () => {
  assert.equal(scenarios, 14)
  console.log(`seed scenarios through the component in Node (jco): ${scenarios}`)
})
