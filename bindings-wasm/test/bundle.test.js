// The package in a browser bundle: esbuild (platform "browser", so the
// package's "browser" entry and no Node module) bundles an app that imports
// it; a page served on loopback loads the bundle, with the module fetched
// beside it, in a real headless Chromium (Debian's, which `make test`
// installs), and writes what it saw into the page.

import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, extname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const HERE = dirname(fileURLToPath(import.meta.url))
const DIST = join(HERE, '..', 'dist')
const ESBUILD = join(HERE, '..', 'node_modules', '.bin', 'esbuild')

const APP = `import { CircuitBreaker, CircuitBreakerOpenError } from 'halfopen-wasm'
const b = new CircuitBreaker({ name: 'page', failureThreshold: 1 })
await b.execute(async () => { throw new Error('down') }).catch(() => {})
const refused = await b.execute(async () => 'never').catch((err) => err)
document.body.textContent = JSON.stringify([b.getState(), refused instanceof CircuitBreakerOpenError, b.toBytes() instanceof Uint8Array])
`

const PAGE = '<!doctype html><html><head><script type="module" src="app.js"></script></head><body>pending</body></html>'
const CHROMIUM = '/usr/bin/chromium'
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' }

/** Serves `dir` on loopback; resolves to the server. */
function serve(dir) {
  const server = createServer((req, res) => {
    const file = join(dir, new URL(req.url, 'http://x').pathname)
    if (!file.startsWith(dir) || !existsSync(file)) return res.writeHead(404).end()
    res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream' }).end(readFileSync(file))
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** The page's DOM after its scripts ran, in headless Chromium. */
async function dumpDom(url, profile) {
  const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run']
  // Without these, Chromium keeps trying to reach hosts this machine cannot.
  flags.push('--disable-background-networking', '--disable-component-update', '--disable-sync')
  flags.push(`--user-data-dir=${profile}`, '--virtual-time-budget=10000', '--dump-dom', url)
  const { stdout } = await promisify(execFile)(CHROMIUM, flags, { timeout: 60_000 })
  return stdout
}

test('an app importing the package bundles for the browser and runs in Chromium', async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make test installs Debian's chromium`)
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-wasm-bundle-'))
  let server
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
    writeFileSync(join(dir, 'out', 'index.html'), PAGE)
    server = await serve(join(dir, 'out'))
    const dom = await dumpDom(`http://127.0.0.1:${server.address().port}/index.html`, join(dir, 'profile'))
    const body = dom.match(/<body>(.*)<\/body>/s)?.[1]
    assert.deepEqual(JSON.parse(body), ['OPEN', true, true], dom)
  } finally {
    server?.close()
    // Chromium's helpers may still be closing their files in the profile as they exit: tried again then.
    rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 })
  }
})
