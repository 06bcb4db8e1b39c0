// Runs code inside the real workerd: writes a worker (its modules, the
// halfopen-wasm package from dist/ under `halfopen/`) and a config into a
// temporary folder, and runs `workerd test` on it, or serves it.

import { execFile, spawn } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
export const DIST = join(HERE, '..', 'dist')
export const WORKERD = join(HERE, '..', 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd')

function filesUnder(dir, root = dir) {
  return readdirSync(dir).flatMap((f) => {
    const path = join(dir, f)
    return statSync(path).isDirectory() ? filesUnder(path, root) : [relative(root, path)]
  })
}

/** The capnp line of one module, by the file's kind. */
function moduleLine(name) {
  const kind = name.endsWith('.wasm') ? 'wasm' : name.endsWith('.json') ? 'json' : 'esModule'
  return `(name = ${JSON.stringify(name)}, ${kind} = embed ${JSON.stringify(name)})`
}

/**
 * A worker folder: `modules` ({ name: source }, the first is the main
 * module) beside the package; returns the folder and its config's path.
 */
export function writeWorker(modules, { flags = ['nodejs_compat'], port, date = '2025-05-05' } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-workerd-'))
  cpSync(DIST, join(dir, 'halfopen'), { recursive: true, filter: (src) => !src.endsWith('.d.ts') && !src.endsWith('.json') && !src.endsWith('.md') })
  for (const [name, source] of Object.entries(modules)) writeFileSync(join(dir, name), source)
  const packaged = filesUnder(join(dir, 'halfopen')).map((f) => `halfopen/${f}`)
  const names = [...Object.keys(modules), ...packaged]
  const config = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker)],${port === undefined ? '' : `
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],`}
);
const worker :Workerd.Worker = (
  modules = [
    ${names.map(moduleLine).join(',\n    ')}
  ],
  compatibilityDate = "${date}",
  compatibilityFlags = ${JSON.stringify(flags)},
);
`
  writeFileSync(join(dir, 'config.capnp'), config)
  return { dir, config: join(dir, 'config.capnp') }
}

/** Runs `workerd test` on a worker; resolves to { code, stdout, stderr }. */
export function workerdTest(config) {
  return new Promise((resolve) => {
    execFile(WORKERD, ['test', config], { timeout: 300_000, maxBuffer: 1 << 26 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr })
    })
  })
}

/** Serves a worker (written with a `port`); resolves once it answers `path`. */
export async function serveWorker(config, port, path = '/') {
  const child = spawn(WORKERD, ['serve', config], { stdio: 'ignore' })
  for (;;) {
    if (child.exitCode !== null) throw new Error(`workerd exited with ${child.exitCode}`)
    try {
      const r = await fetch(`http://127.0.0.1:${port}${path}`)
      await r.text()
      return child
    } catch {
      await new Promise((r) => setTimeout(r, 5))
    }
  }
}
