// Issue 21 §5: an output the module's memory cannot hold (the exposition of a
// registry of many long names repeats each name in every family; a snapshot
// copies every name) is a RangeError with code HALFOPEN_OUT_OF_MEMORY, not a
// trap; the registry and the module go on. The module's memory is capped at
// 64 MiB (V8's --wasm-max-mem-pages) in a child process.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'

const child = `
const { Registry } = await import(${JSON.stringify(new URL('../dist/node.js', import.meta.url).href)})
const names = 26000 // 26 MB of names in a 64 MiB memory: the exposition is about 14 times that, their list another copy
const name = (i) => String(i).padStart(8, '0') + 'n'.repeat(1016) // 1024 bytes, the longest
const registry = new Registry({ capacity: 2 ** 20, clock: () => 0 })
for (let i = 0; i < names; i++) registry.get(name(i)).forceOpen()
const outcome = (f) => {
  try {
    const value = f()
    return { ok: typeof value === 'string' ? value.length : JSON.stringify(value).length }
  } catch (err) {
    return { name: err.name, code: err.code, message: err.message }
  }
}
const small = new Registry({ clock: () => 0 })
small.get('a').forceOpen()
console.log(JSON.stringify({
  prometheus: outcome(() => registry.prometheus()),
  snapshot: outcome(() => registry.toJSON()),
  again: outcome(() => registry.prometheus()),
  names: outcome(() => registry.names()),
  size: registry.size,
  state: registry.get(name(7)).getState(),
  small: small.prometheus().includes('name="a"'),
}))
`

test('an exposition or snapshot too large for the memory is a RangeError HALFOPEN_OUT_OF_MEMORY, and everything goes on', () => {
  const run = spawnSync(process.execPath, ['--wasm-max-mem-pages=1024', '--input-type=module', '-e', child], { encoding: 'utf8' })
  assert.equal(run.status, 0, run.stderr)
  const seen = JSON.parse(run.stdout)
  const oom = { name: 'RangeError', code: 'HALFOPEN_OUT_OF_MEMORY', message: 'out of memory: the exposition did not fit' }
  assert.deepEqual(seen.prometheus, oom)
  assert.deepEqual(seen.again, oom, 'what it built was freed: the same again, not a poisoned registry')
  // A snapshot needs another copy of every name: out of memory, or whole.
  if (seen.snapshot.ok === undefined) {
    assert.deepEqual(seen.snapshot, { ...oom, message: 'out of memory: the snapshot did not fit' })
  } else {
    assert.ok(seen.snapshot.ok > 26000 * 1024)
  }
  // Every name once more does not fit either (it trapped, and the registry was lost).
  assert.deepEqual(seen.names, { ...oom, message: 'out of memory: the names did not fit' })
  assert.equal(seen.size, 26000)
  assert.equal(seen.state, 'OPEN')
  assert.equal(seen.small, true)
})
