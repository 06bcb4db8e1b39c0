'use strict'
// A message's default size, the rule every runtime shares
// (tests/message_sizes.json; tests/conformance/README.md, "A message's size").

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { test } = require('node:test')
const { RetentionQueue } = require(process.env.HALFOPEN_PACKAGE || '..')

const SIZES = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'message_sizes.json'), 'utf8'))

function message(spec) {
  if ('string' in spec) return spec.string
  if ('binary' in spec) return Uint8Array.from(spec.binary)
  if ('json' in spec) return spec.json
  return () => 'a function has no JSON form'
}

for (const c of SIZES.cases) {
  test(c.description, () => {
    const queue = new RetentionQueue({ name: 'sizes', concurrencyLimit: 1, maxBytes: 1000 })
    queue.forceOpen() // held: the bytes stay counted
    if (c.error !== undefined) {
      assert.throws(() => queue.submit(message(c.message)), (err) => err instanceof TypeError && err.option === c.error)
      assert.equal(queue.stats().submitted, 0)
      return
    }
    assert.equal(queue.submit(message(c.message)).status, 'retained')
    assert.equal(queue.stats().bytes, c.bytes)
  })
}

test('an ArrayBuffer and a view of part of one weigh their bytes', () => {
  const queue = new RetentionQueue({ name: 'sizes', concurrencyLimit: 1 })
  queue.forceOpen()
  queue.submit(new ArrayBuffer(7))
  queue.submit(new Uint16Array(new ArrayBuffer(16), 2, 3))
  assert.equal(queue.stats().bytes, 7 + 6)
})

test('a SharedArrayBuffer weighs its bytes', () => {
  const queue = new RetentionQueue({ name: 'sizes', concurrencyLimit: 1 })
  queue.forceOpen()
  queue.submit(new SharedArrayBuffer(64))
  assert.equal(queue.stats().bytes, 64)
})

test('a cycle, a BigInt, a Map, a Set, a promise or a revoked proxy has no faithful JSON form: a TypeError naming size', () => {
  const queue = new RetentionQueue({ name: 'sizes', concurrencyLimit: 1 })
  const cycle = {}
  cycle.self = cycle
  const { proxy, revoke } = Proxy.revocable({}, {})
  revoke()
  for (const m of [cycle, { n: 10n }, undefined, new Map([[1, 2]]), new Set([1]), Promise.resolve(1), proxy]) {
    assert.throws(() => queue.submit(m), (err) => err instanceof TypeError && err.option === 'size')
  }
})
