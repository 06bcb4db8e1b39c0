'use strict'
// The packed values' codes are written once, in src/wire.rs: lib/wire.js
// decodes with the same ones the native half in use (the addon, or the
// WebAssembly module under HALFOPEN_BACKEND=wasm) says it encodes with.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const native = require('../native.js')
const wire = require('../lib/wire.js')

test(`lib/wire.js decodes with the codes the ${native.backend} half encodes with`, () => {
  assert.deepEqual({ ...native.wireCodes() }, wire.CODES)
  assert.deepEqual(wire.OUTCOMES.map((name) => wire.OUTCOME_CODES[name]), [0, 1, 2, 3])
  for (const [name, code] of Object.entries({ SUCCESS: 'success', FAILURE: 'failure', IGNORED: 'ignored', CANCELLED: 'cancelled' })) {
    assert.equal(wire.OUTCOMES[wire[name]], code)
  }
  assert.equal(wire.CODES.licenceKinds[wire.ADMIT], 'admit')
  assert.equal(wire.CODES.licenceKinds[wire.REJECT], 'reject')
})

test('the packed retention values decode to what they say', () => {
  const { NativeDispatcher } = native
  const d = new NativeDispatcher({ failureThreshold: 1, concurrencyLimit: 1 }, false, {})
  const first = wire.submitted(d.submit(10, 0))
  assert.deepEqual(first, { status: 'send', seq: 0, events: false })
  assert.deepEqual(wire.submitted(d.submit(10, 0)), { status: 'retained', seq: 1, events: false })
  // The failure trips the breaker: a transition event waits.
  assert.deepEqual(wire.reportedOf(d.report(0, wire.FAILURE, 1)), { result: 'retained', events: true })
  d.takeEvents()
  assert.deepEqual(wire.reportedOf(d.report(0, wire.SUCCESS, 1)), { result: 'unknown', events: false })
  assert.deepEqual(wire.nextOf(d.next(2)), { seqs: [], events: false })
})
