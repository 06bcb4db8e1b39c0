// Runs the edge worker in the real workerd on loopback: writes its config
// (the worker, halfopen-wasm from bindings-wasm/dist as a bundler would
// resolve it with the "workerd" condition, the hosts' Durable Objects kept
// on disk) and starts workerd.
//   node serve.mjs [port] [storage folder]     (make wasm-build first)

import { spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const DIST = join(HERE, '..', '..', 'bindings-wasm', 'dist')
export const WORKERD = join(HERE, '..', '..', 'bindings-wasm', 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd')

function filesUnder(dir, root = dir) {
  return readdirSync(dir).flatMap((f) => {
    const path = join(dir, f)
    return statSync(path).isDirectory() ? filesUnder(path, root) : [relative(root, path)]
  })
}

/** Writes the worker's folder and config; returns the config's path. */
export function writeConfig({ port, storage, vars = {} }) {
  const dir = mkdtempSync(join(tmpdir(), 'halfopen-edge-'))
  const pkg = join(dir, 'node_modules', 'halfopen-wasm')
  cpSync(DIST, pkg, { recursive: true })
  cpSync(join(HERE, 'worker.js'), join(dir, 'worker.js'))
  // `import 'halfopen-wasm'` resolves to the package's workerd entry, as
  // wrangler (esbuild, condition "workerd") would bundle it.
  writeFileSync(join(dir, 'halfopen-wasm.js'), "export * from './node_modules/halfopen-wasm/workerd.js'\n")
  mkdirSync(storage, { recursive: true })
  const modules = [
    '(name = "worker.js", esModule = embed "worker.js")',
    '(name = "halfopen-wasm", esModule = embed "halfopen-wasm.js")',
    ...filesUnder(pkg)
      .filter((f) => f.endsWith('.js') || f.endsWith('.wasm'))
      .map((f) => {
        const name = `node_modules/halfopen-wasm/${f}`
        return `(name = "${name}", ${f.endsWith('.wasm') ? 'wasm' : 'esModule'} = embed "${name}")`
      }),
  ]
  const bindings = [
    '(name = "HOST", durableObjectNamespace = "Host")',
    ...Object.entries(vars).map(([k, v]) => `(name = ${JSON.stringify(k)}, text = ${JSON.stringify(String(v))})`),
  ]
  const config = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "edge", worker = .edge),
    (name = "loopback", network = (allow = ["public", "private", "local"])),
    (name = "storage", disk = (path = ${JSON.stringify(storage)}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "edge")],
);
const edge :Workerd.Worker = (
  modules = [
    ${modules.join(',\n    ')}
  ],
  bindings = [${bindings.join(', ')}],
  durableObjectNamespaces = [(className = "Host", uniqueKey = "halfopen-edge-host")],
  durableObjectStorage = (localDisk = "storage"),
  globalOutbound = "loopback",
  compatibilityDate = "2025-05-05",
);
`
  const path = join(dir, 'config.capnp')
  writeFileSync(path, config)
  return path
}

/** Starts workerd serving the worker; resolves once it listens. */
export function serve(options) {
  const config = writeConfig(options)
  const child = spawn(WORKERD, ['serve', '--experimental', config], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (d) => (output += d))
  child.stderr.on('data', (d) => (output += d))
  const ready = (async () => {
    for (let i = 0; i < 200; i++) {
      if (child.exitCode !== null) throw new Error(`workerd exited: ${output}`)
      try {
        await fetch(`http://127.0.0.1:${options.port}/`)
        return
      } catch {
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    throw new Error(`workerd did not listen: ${output}`)
  })()
  return ready.then(() => ({ child, output: () => output }))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? 8787)
  const storage = process.argv[3] ?? join(tmpdir(), 'halfopen-edge-storage')
  serve({ port, storage }).then(({ child }) => {
    console.log(`edge worker on http://127.0.0.1:${port}/<host:port>/<path> (state in ${storage})`)
    child.stdout.pipe(process.stdout)
    child.stderr.pipe(process.stderr)
  })
}
