// The package as npm delivers it: `npm pack` of dist/, the tarball
// installed in a fresh folder, then imported (ESM), required (CommonJS,
// through Node's require of ES modules), and a TypeScript user of it
// type-checked with `tsc --strict` (no Node types: the package needs none).

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'

const HERE = dirname(fileURLToPath(import.meta.url))
const DIST = join(HERE, '..', 'dist')
const TSC = join(HERE, '..', 'node_modules', '.bin', 'tsc')

test('the packed tarball installs, loads from ESM and CommonJS, and type-checks', () => {
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-wasm-pack-'))
  try {
    const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: DIST, encoding: 'utf8' })
    const tarball = join(dir, out.trim().split('\n').pop())
    execFileSync('npm', ['init', '-y'], { cwd: dir, stdio: 'ignore' })
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', tarball], { cwd: dir, stdio: 'ignore' })
    const installed = join(dir, 'node_modules', 'halfopen-wasm')
    const listed = readdirSync(installed).sort()
    for (const file of ['browser.js', 'index.d.ts', 'node.js', 'workerd.js', 'halfopen_wasm_bg.wasm', 'lib', 'package.json']) {
      assert.ok(listed.includes(file), `${file} is in the package (${listed})`)
    }
    // The README npm shows is this package's own (build.mjs copies it into dist/).
    assert.equal(readFileSync(join(installed, 'README.md'), 'utf8'), readFileSync(join(HERE, '..', 'README.md'), 'utf8'))
    assert.match(readFileSync(join(installed, 'README.md'), 'utf8'), /^# halfopen-wasm — /)
    const wasm = readFileSync(join(installed, 'halfopen_wasm_bg.wasm'))
    console.log(`halfopen_wasm_bg.wasm: ${wasm.length} bytes, ${gzipSync(wasm, { level: 9 }).length} gzipped; tarball ${statSync(tarball).size} bytes`)

    const esm = `import { CircuitBreaker, CircuitBreakerOpenError } from 'halfopen-wasm'
      const b = new CircuitBreaker({ name: 'esm' })
      b.forceOpen()
      b.execute(async () => 1).catch((e) => console.log(e instanceof CircuitBreakerOpenError, e.retryAfterMs))`
    assert.equal(execFileSync('node', ['--input-type=module', '-e', esm], { cwd: dir, encoding: 'utf8' }).trim(), 'true Infinity')
    const cjs = `const { CircuitBreaker } = require('halfopen-wasm')
      const b = new CircuitBreaker({ name: 'cjs' })
      b.execute(async () => 42).then((v) => console.log(v, b.getState()))`
    const printed = execFileSync('node', ['-e', cjs], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    assert.equal(printed.trim(), '42 CLOSED')

    writeFileSync(
      join(dir, 'use.ts'),
      `import { CircuitBreaker, CircuitBreakerOpenError, Registry, type CircuitState } from 'halfopen-wasm'
const breaker = new CircuitBreaker({ name: 'ts', failureThreshold: 5, windowMs: 60_000, openTimeoutMs: 30_000 })
const state: CircuitState = breaker.getState()
breaker.on('open', (t) => console.log(t.reason, t.atMs))
const saved: Uint8Array = breaker.toBytes()
const again: CircuitBreaker = CircuitBreaker.fromBytes({ name: 'ts' }, saved)
const hosts = new Registry({ failureThreshold: 3 })
async function send(): Promise<number> {
  try {
    return await hosts.get('api.example.com').execute(async () => 200)
  } catch (err) {
    if (err instanceof CircuitBreakerOpenError) return err.retryAfterMs
    throw err
  }
}
void send().then((n: number) => console.log(n, state, again.metrics().admitted))
`,
    )
    mkdirSync(join(dir, 'no-types'))
    const tsc = ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022']
    try {
      execFileSync(TSC, [...tsc, '--lib', 'es2022,dom', '--typeRoots', join(dir, 'no-types'), 'use.ts'], { cwd: dir, encoding: 'utf8' })
    } catch (err) {
      assert.fail(`tsc: ${err.stdout}`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the module stays near its measured size: no float formatting crept back in', () => {
  // 264 KB with a registry's name evicted last (+0.6 KB: 263,412 →
  // 264,002 bytes), 262 KB with the OpenTelemetry instrument table (its names and
  // descriptions, +3.5 KB), 258 KB with the snapshots read and written by serde_json and postcard
  // (issue 22 §8: +66 KB), 191 KB with the wire codes built with js-sys, the flat records' field
  // names and the problem codes (issue 22), 187 KB with the core's
  // configure rule, 185 KB with
  // fallible outputs (issue 21: 182 KB before them), 179 KB with retention,
  // 141 KB before it (BENCHMARKS.md, `python3 bindings-wasm/bench/size.py`).
  // Formatting one f64 into a message once added 16 KB: this catches that.
  const size = statSync(join(HERE, '..', 'dist', 'halfopen_wasm_bg.wasm')).size
  assert.ok(size <= 265_000, `the module is ${size} bytes`)
})
