'use strict'
// The package as npm delivers it: `npm pack`, install the tarball in a fresh
// folder, then `require` it, `import` it, and type-check a TypeScript user of
// it with `tsc --strict`.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const PACKAGE = path.join(__dirname, '..')
const TSC = path.join(PACKAGE, 'node_modules', '.bin', 'tsc')

test('the packed tarball installs, loads from CommonJS and ESM, and type-checks', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-pack-'))
  try {
    const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: PACKAGE, encoding: 'utf8' })
    const tarball = path.join(dir, out.trim().split('\n').pop())
    execFileSync('npm', ['init', '-y'], { cwd: dir, stdio: 'ignore' })
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', tarball], { cwd: dir, stdio: 'ignore' })
    const listed = fs.readdirSync(path.join(dir, 'node_modules', 'halfopen')).sort()
    for (const file of ['addon.js', 'index.d.ts', 'index.js', 'index.mjs', 'native.d.ts', 'native.js', 'package.json', 'redis-store.js', 'redis-store.d.ts', 'wasm']) {
      assert.ok(listed.includes(file), `${file} is in the package (${listed})`)
    }
    assert.ok(listed.some((f) => f.endsWith('.node')), 'the native addon is in the package')
    assert.ok(!listed.includes('src') && !listed.includes('test'), 'sources and tests stay out')

    const cjs = `const { CircuitBreaker } = require('halfopen')
      const b = new CircuitBreaker({ name: 'cjs' })
      b.execute(async () => 42).then((v) => console.log(v, b.getState()))`
    assert.equal(execFileSync('node', ['-e', cjs], { cwd: dir, encoding: 'utf8' }).trim(), '42 CLOSED')
    const esm = `import { CircuitBreaker, CircuitBreakerOpenError } from 'halfopen'
      const b = new CircuitBreaker({ name: 'esm' })
      b.forceOpen()
      b.execute(async () => 1).catch((e) => console.log(e instanceof CircuitBreakerOpenError, e.retryAfterMs))`
    const printed = execFileSync('node', ['--input-type=module', '-e', esm], { cwd: dir, encoding: 'utf8' })
    assert.equal(printed.trim(), 'true Infinity')

    fs.writeFileSync(
      path.join(dir, 'use.ts'),
      `import { CircuitBreaker, CircuitBreakerOpenError, DeadLetterError, Dispatcher, RetentionFullError, RetentionQueue, type CircuitState } from 'halfopen'
import type { RedisStore } from 'halfopen/redis-store'
const breaker = new CircuitBreaker({ name: 'ts', failureThreshold: 5, windowMs: 60_000, openTimeoutMs: 30_000, halfOpenMaxAttempts: 3 })
const state: CircuitState = breaker.getState()
breaker.on('open', (t) => console.log(t.reason, t.atMs))
async function send(): Promise<number> {
  try {
    return await breaker.execute(async () => 200)
  } catch (err) {
    if (err instanceof CircuitBreakerOpenError) return err.retryAfterMs
    throw err
  }
}
void send().then((n: number) => console.log(n, state, breaker.metrics().admitted))
const dispatcher = new Dispatcher<{ id: number }>({
  name: 'partner', preset: 'partnerWebhook', concurrencyLimit: 1, maxMessages: 10_000,
  send: async (event, { signal }) => { if (signal?.aborted) throw new Error(String(event.id)) },
})
dispatcher.on('dead', (e) => console.log(e.message.id, e.reason))
dispatcher.submit({ id: 1 }).catch((err) => {
  if (err instanceof DeadLetterError) console.log(err.reason)
  else if (err instanceof RetentionFullError) console.log(err.dispatcherName)
})
const queue = new RetentionQueue<string>({ name: 'q', concurrencyLimit: 1 })
const submitted = queue.submit('m')
if (submitted.status !== 'refused') console.log(queue.report(submitted.seq, 'success'))
const store: RedisStore<{ id: number }> | undefined = undefined
void store
`,
    )
    const typeRoots = path.join(PACKAGE, 'node_modules', '@types')
    const tsc = ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022']
    try {
      execFileSync(TSC, [...tsc, '--typeRoots', typeRoots, '--types', 'node', 'use.ts'], { cwd: dir, encoding: 'utf8' })
    } catch (err) {
      assert.fail(`tsc: ${err.stdout}`)
    }

    // Where no prebuilt binary is installed (here: the addon removed), the
    // package loads its WebAssembly build and says so.
    const installed = path.join(dir, 'node_modules', 'halfopen')
    assert.equal(execFileSync('node', ['-p', "require('halfopen').backend"], { cwd: dir, encoding: 'utf8' }).trim(), 'native')
    for (const f of fs.readdirSync(installed)) if (f.endsWith('.node')) fs.rmSync(path.join(installed, f))
    const fallback = `const { backend, CircuitBreaker } = require('halfopen')
      const b = new CircuitBreaker({ name: 'fallback' })
      b.execute(async () => 7).then((v) => console.log(backend, v, b.getState()))`
    const ran = spawnSync('node', ['-e', fallback], { cwd: dir, encoding: 'utf8' })
    assert.equal(ran.stdout.trim(), 'wasm 7 CLOSED', ran.stderr)
    assert.match(ran.stderr, /HALFOPEN_WASM_FALLBACK/, 'the fallback is announced')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
