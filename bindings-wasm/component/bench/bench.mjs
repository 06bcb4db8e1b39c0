// Per-call cost of the component through jco in Node, in one run beside the
// wasm-bindgen module and the Node addon (their native halves: the same
// acquire + record cycle, no JavaScript API around any of them), and the
// component's sizes. Medians of 7 rounds.
//   node bench/bench.mjs     (after `make component-build`, `make wasm-build`, `make node-build`)

import { execFileSync } from 'node:child_process'
import { readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { breaker as wit } from '../dist/js/halfopen.js'

const require = createRequire(import.meta.url)
const HERE = new URL('..', import.meta.url).pathname
const ROOT = join(HERE, '..', '..')
const addon = require(join(ROOT, 'bindings-node', 'native.js'))
const wasm = await import(join(ROOT, 'bindings-wasm', 'dist', 'native.js'))
await import(join(ROOT, 'bindings-wasm', 'dist', 'node.js'))

const N = 200_000
const ROUNDS = 7

function median(f) {
  const times = []
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint()
    f()
    times.push(Number(process.hrtime.bigint() - start) / N)
  }
  times.sort((a, b) => a - b)
  return times[ROUNDS >> 1]
}

function closedJco() {
  const b = wit.Breaker.create(wit.whatsappGateway(), false)
  let now = 0n
  return () => {
    for (let i = 0; i < N; i++) {
      now += 1000n
      const { decision } = b.tryAcquire(now)
      b.record(decision.val, 'success', now)
    }
  }
}

function closedNative(Kind) {
  const b = new Kind({}, false)
  let now = 0
  return () => {
    for (let i = 0; i < N; i++) {
      now += 1
      const code = b.acquire(now)
      b.record(code % 4294967296, now, 0, now)
    }
  }
}

function openJco() {
  const b = wit.Breaker.create(wit.whatsappGateway(), false)
  b.forceOpen(0n, undefined)
  return () => {
    for (let i = 0; i < N; i++) b.tryAcquire(1n)
  }
}

function openNative(Kind) {
  const b = new Kind({}, false)
  b.forceOpen(0, undefined)
  return () => {
    for (let i = 0; i < N; i++) b.acquire(1)
  }
}

const rows = [
  ['component through jco 1.12.0', closedJco(), openJco()],
  ['wasm-bindgen module (halfopen-wasm native half)', closedNative(wasm.NativeBreaker), openNative(wasm.NativeBreaker)],
  ['napi-rs addon (halfopen native half)', closedNative(addon.NativeBreaker), openNative(addon.NativeBreaker)],
]
console.log('| native half | acquire + record, closed (ns) | acquire, open (ns) |\n|---|---:|---:|')
for (const [name, closed, open] of rows) {
  console.log(`| ${name} | ${median(closed).toFixed(0)} | ${median(open).toFixed(0)} |`)
}

const component = join(HERE, 'dist', 'halfopen.wasm')
const unoptimised = join(ROOT, 'target', 'halfopen_component.raw.wasm')
const wasmTools = process.env.WASM_TOOLS || join(ROOT, '.venv', 'bin', 'wasm-tools')
const module = join(ROOT, 'target', 'wasm32-unknown-unknown', 'wasm', 'halfopen_component.wasm')
execFileSync(wasmTools, ['strip', module, '-o', join(ROOT, 'target', 'halfopen_component.stripped.wasm')])
execFileSync(wasmTools, ['component', 'new', join(ROOT, 'target', 'halfopen_component.stripped.wasm'), '-o', unoptimised])
const kb = (bytes) => `${(bytes / 1000).toFixed(0)} KB`
console.log(
  `\ncomponent: ${kb(statSync(unoptimised).size)} without wasm-opt (names stripped), ${kb(statSync(component).size)} with -Oz, ` +
    `${kb(gzipSync(readFileSync(component), { level: 9 }).length)} gzipped; ` +
    `the wasm-bindgen module: ${kb(statSync(join(ROOT, 'bindings-wasm', 'dist', 'halfopen_wasm_bg.wasm')).size)}`,
)
