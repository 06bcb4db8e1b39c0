'use strict'
// The choice of native half (native.js): the prebuilt addon where there is
// one, the WebAssembly build where there is none (announced once), and
// HALFOPEN_BACKEND to choose. (The package's API tests run against the
// fallback too: `make test-wasm`, HALFOPEN_BACKEND=wasm.)

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const PACKAGE = path.join(__dirname, '..')

/** Runs `code` in a copy of the package without its .node binary. */
function withoutBinary(code, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-nobin-'))
  try {
    for (const f of ['index.js', 'native.js', 'addon.js', 'package.json', 'lib', 'wasm']) {
      fs.cpSync(path.join(PACKAGE, f), path.join(dir, f), { recursive: true })
    }
    return spawnSync('node', ['-e', code], { cwd: dir, encoding: 'utf8', env: { ...process.env, HALFOPEN_BACKEND: '', ...env } })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const SEED = `const { backend, CircuitBreaker } = require('.')
  const b = new CircuitBreaker({ name: 'gw', failureThreshold: 2, windowMs: 60000, openTimeoutMs: 30000 })
  const fail = () => Promise.reject(new Error('down'))
  b.execute(fail).catch(() => b.execute(fail)).catch(() => console.log(backend, b.getState(), b.retryAfterMs() > 29000))`

test('without a prebuilt binary the WebAssembly build runs, the same API, announced once', () => {
  const out = withoutBinary(SEED)
  assert.equal(out.stdout.trim(), 'wasm OPEN true', out.stderr)
  assert.equal(out.stderr.match(/HALFOPEN_WASM_FALLBACK/g)?.length, 1, out.stderr)
})

test('HALFOPEN_BACKEND=wasm chooses it quietly; =native refuses the fallback; anything else is an error', () => {
  const quiet = withoutBinary(SEED, { HALFOPEN_BACKEND: 'wasm' })
  assert.equal(quiet.stdout.trim(), 'wasm OPEN true')
  assert.doesNotMatch(quiet.stderr, /HALFOPEN_WASM_FALLBACK/)
  const refused = withoutBinary(SEED, { HALFOPEN_BACKEND: 'native' })
  assert.notEqual(refused.status, 0)
  assert.match(refused.stderr, /Cannot find native binding/)
  const bogus = withoutBinary(SEED, { HALFOPEN_BACKEND: 'gpu' })
  assert.match(bogus.stderr, /HALFOPEN_BACKEND must be "native" or "wasm"/)
})

test('with the binary the addon runs', () => {
  const out = spawnSync('node', ['-p', "require('.').backend"], { cwd: PACKAGE, encoding: 'utf8', env: { ...process.env, HALFOPEN_BACKEND: '' } })
  assert.equal(out.stdout.trim(), 'native', out.stderr)
})

test('a binary that is there but does not load is named in the warning, with its error', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-broken-'))
  try {
    for (const f of ['index.js', 'native.js', 'addon.js', 'package.json', 'lib', 'wasm']) {
      fs.cpSync(path.join(PACKAGE, f), path.join(dir, f), { recursive: true })
    }
    fs.writeFileSync(path.join(dir, 'halfopen.linux-x64-gnu.node'), 'not an ELF file, long enough to be read as one'.repeat(100))
    const out = spawnSync('node', ['-e', "console.log(require('.').backend)"], { cwd: dir, encoding: 'utf8', env: { ...process.env, HALFOPEN_BACKEND: '' } })
    assert.equal(out.stdout.trim(), 'wasm')
    assert.match(out.stderr, /a native binding that did not load \(.*(invalid ELF header|file too short)/, out.stderr)
    // Without the WebAssembly build either, the error says what failed, not a Node version.
    fs.rmSync(path.join(dir, 'wasm', 'halfopen_wasm_bg.wasm'))
    const failed = spawnSync('node', ['-e', "require('.')"], { cwd: dir, encoding: 'utf8', env: { ...process.env, HALFOPEN_BACKEND: 'wasm' } })
    assert.match(failed.stderr, /HALFOPEN_BACKEND=wasm, but the WebAssembly build did not load: .*ENOENT/, failed.stderr)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
