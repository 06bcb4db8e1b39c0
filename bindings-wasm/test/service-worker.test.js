// A module service worker may not await at the top of a module, so the
// browser entry (which does) cannot load in one: the `halfopen-wasm/manual`
// entry initialises when told. Bundled by esbuild, registered by a page on
// loopback in a real headless Chromium: the worker runs a breaker and
// answers the page; a worker bundled from the browser entry fails to
// install (what the manual entry is for).

import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, extname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const DIST = join(HERE, '..', 'dist')
const ESBUILD = join(HERE, '..', 'node_modules', '.bin', 'esbuild')
const CHROMIUM = '/usr/bin/chromium'
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' }

const WORKER = (entry) => `import * as halfopen from '${entry}'
self.addEventListener('message', (event) => {
  event.waitUntil((async () => {
    if (halfopen.init) await halfopen.init()
    const b = new halfopen.CircuitBreaker({ name: 'sw', failureThreshold: 1 })
    await b.execute(async () => { throw new Error('down') }).catch(() => {})
    const refused = await b.execute(async () => 'never').catch((err) => err)
    event.source.postMessage(JSON.stringify([b.getState(), refused instanceof halfopen.CircuitBreakerOpenError]))
  })().catch((err) => event.source.postMessage('error: ' + err)))
})
`

// The page reports what it saw to the server (a DOM dump happens before a
// service worker starts).
const PAGE = `<!doctype html><html><body><script>
const report = (text) => fetch('/result?' + encodeURIComponent(text))
navigator.serviceWorker.addEventListener('message', (e) => report(e.data))
navigator.serviceWorker.register('sw.js', { type: 'module' }).catch((err) => report('not installed: ' + err.name))
navigator.serviceWorker.ready.then((registration) => registration.active.postMessage('go'))
</script></body></html>`

/** Serves `dir` on loopback; `result` resolves to the first report the page makes. */
function serve(dir) {
  let reported
  const result = new Promise((resolve) => {
    reported = resolve
  })
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x')
    if (url.pathname === '/result') {
      reported(decodeURIComponent(url.search.slice(1)))
      return res.writeHead(204).end()
    }
    const file = join(dir, url.pathname)
    if (!file.startsWith(dir) || !existsSync(file)) return res.writeHead(404).end()
    res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream' }).end(readFileSync(file))
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, result })))
}

/** What the page reports once the worker answered (or failed to install), in headless Chromium. */
async function pageSays(entry) {
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-wasm-sw-'))
  let server
  let browser
  try {
    mkdirSync(join(dir, 'node_modules'))
    cpSync(DIST, join(dir, 'node_modules', 'halfopen-wasm'), { recursive: true })
    writeFileSync(join(dir, 'sw-src.js'), WORKER(entry))
    const args = ['sw-src.js', '--bundle', '--format=esm', '--platform=browser', '--target=es2022', '--outfile=out/sw.js', '--log-level=error']
    execFileSync(ESBUILD, args, { cwd: dir, encoding: 'utf8' })
    cpSync(join(DIST, 'halfopen_wasm_bg.wasm'), join(dir, 'out', 'halfopen_wasm_bg.wasm'))
    writeFileSync(join(dir, 'out', 'index.html'), PAGE)
    const served = await serve(join(dir, 'out'))
    server = served.server
    const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run']
    flags.push('--disable-background-networking', '--disable-component-update', '--disable-sync')
    // A debugging port keeps the headless browser running until it is stopped.
    flags.push(`--user-data-dir=${join(dir, 'profile')}`, '--remote-debugging-port=0')
    // Its own process group: stopping it stops its helper processes too.
    browser = spawn(CHROMIUM, [...flags, `http://127.0.0.1:${server.address().port}/index.html`], { stdio: 'ignore', detached: true })
    const exited = once(browser, 'exit').then(() => 'the browser exited before the page reported')
    return await Promise.race([served.result, exited])
  } finally {
    if (browser !== undefined) {
      const gone = browser.exitCode === null ? once(browser, 'exit') : undefined
      try {
        process.kill(-browser.pid)
      } catch {} // (the group is gone already)
      await gone
    }
    server?.close()
    // A helper may still be closing its files in the profile as it exits: tried again then.
    rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 })
  }
}

test('a module service worker runs a breaker through the manual entry; the browser entry cannot load there', async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make test installs Debian's chromium`)
  assert.equal(await pageSays('halfopen-wasm/manual'), JSON.stringify(['OPEN', true]))
  assert.match(await pageSays('halfopen-wasm'), /^not installed: TypeError/)
})

test('the manual entry in Node: a class used before init() says so; init() is one promise', async () => {
  const manual = await import(join(DIST, 'manual.js'))
  assert.throws(() => new manual.CircuitBreaker({ name: 'early' }), /not instantiated: .* await init\(\) first/)
  const bytes = readFileSync(join(DIST, 'halfopen_wasm_bg.wasm'))
  const first = manual.init(bytes)
  assert.equal(manual.init(), first)
  await first
  assert.equal(new manual.CircuitBreaker({ name: 'late' }).getState(), 'CLOSED')
})
