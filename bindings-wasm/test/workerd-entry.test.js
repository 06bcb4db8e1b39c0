// The workerd entry in workerd without Node's modules (no nodejs_compat):
// a breaker works; the memory of dropped breakers is freed where the worker
// has FinalizationRegistry, and the entry warns where it has not.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { workerdTest, writeWorker } from '../support/workerd.js'

const MAIN = `
import { CircuitBreaker, CircuitBreakerOpenError } from './halfopen/workerd.js'
export default {
  async test() {
    const b = new CircuitBreaker({ name: 'edge', failureThreshold: 1, clock: () => Date.now() })
    await b.execute(async () => { throw new Error('down') }).catch(() => {})
    const refused = await b.execute(async () => 'never').catch((err) => err)
    if (!(refused instanceof CircuitBreakerOpenError)) throw new Error('not refused: ' + refused)
    const snapshot = b.toBytes()
    if (!(snapshot instanceof Uint8Array)) throw new Error('bytes')
    console.log('edge breaker', b.getState(), typeof FinalizationRegistry)
  },
}
`

test('the workerd entry runs without nodejs_compat, with weak references from 2025-05-05', async () => {
  const { config } = writeWorker({ 'main.js': MAIN }, { flags: [] })
  const { code, stdout, stderr } = await workerdTest(config)
  assert.equal(code, 0, stdout + stderr)
  assert.match(stdout + stderr, /edge breaker OPEN function/)
  assert.doesNotMatch(stdout + stderr, /never freed/)
})

test('without FinalizationRegistry the entry warns that dropped breakers are never freed', async () => {
  const { config } = writeWorker({ 'main.js': MAIN }, { flags: [], date: '2025-01-01' })
  const { code, stdout, stderr } = await workerdTest(config)
  assert.equal(code, 0, stdout + stderr)
  assert.match(stdout + stderr, /edge breaker OPEN undefined/)
  assert.match(stdout + stderr, /never freed: set its compatibility date to 2025-05-05 or later/)
})
