// The package in a browser bundle: esbuild (platform "browser", so the
// package's "browser" entry and no Node module) bundles an app that imports
// it; the bundle then runs with the module fetched beside it, as a page
// would load it (here in Node, with a `fetch` that serves files: there is no
// browser on this machine).

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const DIST = join(HERE, '..', 'dist')
const ESBUILD = join(HERE, '..', 'node_modules', '.bin', 'esbuild')

const APP = `import { CircuitBreaker, CircuitBreakerOpenError } from 'halfopen-wasm'
const b = new CircuitBreaker({ name: 'page', failureThreshold: 1 })
await b.execute(async () => { throw new Error('down') }).catch(() => {})
const refused = await b.execute(async () => 'never').catch((err) => err)
export const result = [b.getState(), refused instanceof CircuitBreakerOpenError, b.toBytes() instanceof Uint8Array]
`

const RUN = `import { readFileSync } from 'node:fs'
globalThis.fetch = async (url) =>
  new Response(readFileSync(new URL(url)), { headers: { 'content-type': 'application/wasm' } })
const { result } = await import('./out/app.js')
console.log(JSON.stringify(result))
`

test('an app importing the package bundles for the browser and runs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-wasm-bundle-'))
  try {
    mkdirSync(join(dir, 'node_modules'))
    cpSync(DIST, join(dir, 'node_modules', 'halfopen-wasm'), { recursive: true })
    writeFileSync(join(dir, 'app.js'), APP)
    const args = ['app.js', '--bundle', '--format=esm', '--platform=browser', '--target=es2022', '--outdir=out']
    execFileSync(ESBUILD, [...args, '--log-level=error'], { cwd: dir, encoding: 'utf8' })
    const bundle = readFileSync(join(dir, 'out', 'app.js'), 'utf8')
    assert.doesNotMatch(bundle, /from ["']node:|require\(["']node:/, 'no Node module in a browser bundle')
    assert.match(bundle, /halfopen_wasm_bg\.wasm/, 'the module is fetched beside the bundle')
    // What a bundler's asset handling does: the module next to the script.
    cpSync(join(DIST, 'halfopen_wasm_bg.wasm'), join(dir, 'out', 'halfopen_wasm_bg.wasm'))
    writeFileSync(join(dir, 'run.mjs'), RUN)
    const printed = execFileSync('node', ['run.mjs'], { cwd: dir, encoding: 'utf8' })
    assert.deepEqual(JSON.parse(printed), ['OPEN', true, true])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
