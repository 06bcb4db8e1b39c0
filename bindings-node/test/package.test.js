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

/** Packs the package in `from` into `dir`; the tarball's path. */
function pack(from, dir) {
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: from, encoding: 'utf8' })
  return path.join(dir, out.trim().split('\n').pop())
}

test('the platform packages carry the main package\'s version, one per napi target', () => {
  const main = JSON.parse(fs.readFileSync(path.join(PACKAGE, 'package.json'), 'utf8'))
  const platforms = fs.readdirSync(path.join(PACKAGE, 'npm')).sort()
  assert.equal(platforms.length, main.napi.targets.length)
  for (const platform of platforms) {
    const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE, 'npm', platform, 'package.json'), 'utf8'))
    assert.equal(manifest.name, `halfopen-${platform}`)
    assert.equal(manifest.version, main.version, platform)
    assert.deepEqual(manifest.files, [manifest.main])
  }
  // (The packed main package names them in optionalDependencies: tests/test_dist.py.)
})

test('the ESM entry names every export of the CommonJS one', async () => {
  const esm = await import(path.join(PACKAGE, 'index.mjs'))
  assert.deepEqual(
    Object.keys(esm)
      .filter((k) => k !== 'default')
      .sort(),
    Object.keys(require(PACKAGE)).sort(),
  )
})

test('the packed main and platform packages install offline, pick this machine\'s binary, load from CommonJS and ESM, and type-check', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-pack-'))
  try {
    // This machine's platform package, with the binary `make node-build` made.
    const platform = path.join(dir, 'linux-x64-gnu')
    fs.mkdirSync(platform)
    fs.copyFileSync(path.join(PACKAGE, 'npm', 'linux-x64-gnu', 'package.json'), path.join(platform, 'package.json'))
    fs.copyFileSync(path.join(PACKAGE, 'halfopen.linux-x64-gnu.node'), path.join(platform, 'halfopen.linux-x64-gnu.node'))
    const tarballs = [pack(PACKAGE, dir), pack(platform, dir)]
    execFileSync('npm', ['init', '-y'], { cwd: dir, stdio: 'ignore' })
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', ...tarballs], { cwd: dir, stdio: 'ignore' })
    const listed = fs.readdirSync(path.join(dir, 'node_modules', 'halfopen')).sort()
    for (const file of ['addon.js', 'index.d.ts', 'index.js', 'index.mjs', 'native.d.ts', 'native.js', 'package.json', 'redis-store.js', 'redis-store.d.ts', 'wasm']) {
      assert.ok(listed.includes(file), `${file} is in the package (${listed})`)
    }
    assert.ok(!listed.some((f) => f.endsWith('.node')), 'the binary is in the platform package, not the main one')
    // The README npm shows is this package's own, not the project's front page.
    assert.equal(
      fs.readFileSync(path.join(dir, 'node_modules', 'halfopen', 'README.md'), 'utf8'),
      fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8'),
    )
    assert.match(fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8'), /^# halfopen — for Node\.js\n/)
    assert.ok(!listed.includes('src') && !listed.includes('test'), 'sources and tests stay out')
    assert.deepEqual(fs.readdirSync(path.join(dir, 'node_modules', 'halfopen-linux-x64-gnu')).sort(), ['halfopen.linux-x64-gnu.node', 'package.json'])

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
      `import { CircuitBreaker, CircuitBreakerOpenError, DeadLetterError, Dispatcher, isRefusal, Outbox, RetentionFullError, RetentionQueue, StoreUnavailableError, type CircuitState } from 'halfopen'
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
async function outbox(redis: unknown): Promise<string> {
  const box = await Outbox.open<{ id: number }>({
    redis, partner: 'partner-a', concurrencyLimit: 1, timeoutMs: 5_000,
    send: async (event, { key, epoch, signal }) => { if (signal?.aborted) throw new Error(key + event.id + epoch) },
  })
  box.on('dead', (e) => console.log(e.id, e.reason))
  try {
    return (await box.submit({ id: 1 }, { key: 'k' })).id
  } catch (err) {
    if (err instanceof StoreUnavailableError) return String(err.ambiguous)
    throw err
  } finally {
    await box.close()
  }
}
void outbox
const answered = new CircuitBreaker({ name: 'fb', preset: 'sender', fallback: (r) => r.retryAfterMs })
const fallen: Promise<string> = answered.execute(async () => 'sent', { fallback: (r) => r.breakerName + r.reason })
void fallen.catch((err: unknown) => (isRefusal(err) ? err.breakerName : ''))
`,
    )
    const typeRoots = path.join(PACKAGE, 'node_modules', '@types')
    const tsc = ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022']
    try {
      execFileSync(TSC, [...tsc, '--typeRoots', typeRoots, '--types', 'node', 'use.ts'], { cwd: dir, encoding: 'utf8' })
    } catch (err) {
      assert.fail(`tsc: ${err.stdout}`)
    }

    // Where no prebuilt binary is installed (here: the platform package
    // removed), the package loads its WebAssembly build and says so.
    assert.equal(execFileSync('node', ['-p', "require('halfopen').backend"], { cwd: dir, encoding: 'utf8' }).trim(), 'native')
    fs.rmSync(path.join(dir, 'node_modules', 'halfopen-linux-x64-gnu'), { recursive: true })
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
