// What a Registry's breakers cost in the module's memory: the memory grown
// (64 KiB pages) while a registry takes N names of 25 bytes, each used once,
// divided by N (the breaker, its metrics, the name, the index, the
// allocator's slack). `node bench/memory.mjs` after `make wasm-build`.
import { readFileSync } from 'node:fs'
import { initSync } from '../dist/halfopen_wasm.js'
import { attach } from '../dist/native.js'

const exports = initSync({ module: readFileSync(new URL('../dist/halfopen_wasm_bg.wasm', import.meta.url)) })
attach(exports)
const { Registry } = await import('../dist/index.js')
for (const n of [10_000, 100_000, 300_000]) {
  const registry = new Registry({ capacity: 1 << 20 })
  const before = exports.memory.buffer.byteLength
  for (let i = 0; i < n; i++) {
    const keyed = registry.get(`host-${String(i).padStart(6, '0')}.example.com`)
    keyed.record(keyed.tryAcquire(), 'success')
  }
  const grown = exports.memory.buffer.byteLength - before
  console.log(`${n} names: ${Math.round(grown / n)} bytes per breaker in the module's memory`)
}
