// Builds the npm package `halfopen-wasm` into dist/ (and the Node package's
// WebAssembly fallback into bindings-node/wasm/): the core's wasm module
// (cargo, wasm-bindgen --target web, wasm-opt -Oz), the platform entries of
// js/, and the Node package's JavaScript half (bindings-node/lib), turned
// from CommonJS into ES modules: one JavaScript half for both packages.
//   node build.mjs            (run by `make wasm-build`)

import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = join(HERE, '..')
const DIST = join(HERE, 'dist')
const NODE_LIB = join(ROOT, 'bindings-node', 'lib')
const WASM = join(ROOT, 'target', 'wasm32-unknown-unknown', 'wasm', 'halfopen_wasm.wasm')
// What rustc emits for wasm32-unknown-unknown by default, for wasm-opt.
export const FEATURES = ['bulk-memory', 'nontrapping-float-to-int', 'sign-ext', 'mutable-globals', 'reference-types', 'multivalue']

const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { stdio: 'inherit', cwd: ROOT, ...opts })

/**
 * A file of bindings-node/lib as an ES module. The Node package keeps one
 * style that makes this mechanical: `const { a, b } = require('x')` at the
 * top, one `module.exports = { a, b }` at the end; anything else fails.
 */
export function toEsm(source, file) {
  let out = source.replace(/^'use strict'\n/, '')
  out = out.replace(/^const (\{[^}]*\}) = require\('([^']+)'\)$/gm, "import $1 from '$2'")
  out = out.replace(/^module\.exports = \{([^}]*)\}\n?$/m, (_, names) => {
    for (const name of names.split(',').map((n) => n.trim()).filter(Boolean)) {
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) throw new Error(`${file}: module.exports holds ${name}, not a name`)
    }
    return `export {${names}}\n`
  })
  for (const leftover of ['require(', 'module.exports', 'exports.', '__dirname', "'node:"]) {
    if (out.includes(leftover)) throw new Error(`${file}: ${leftover} left after the conversion to an ES module`)
  }
  return out
}

function main() {
  run('cargo', ['build', '-q', '-p', 'halfopen-wasm', '--target', 'wasm32-unknown-unknown', '--profile', 'wasm'])
  rmSync(DIST, { recursive: true, force: true })
  mkdirSync(join(DIST, 'lib'), { recursive: true })
  run('wasm-bindgen', ['--target', 'web', '--out-dir', DIST, '--out-name', 'halfopen_wasm', WASM])
  const bg = join(DIST, 'halfopen_wasm_bg.wasm')
  const wasmOpt = join(HERE, 'node_modules', '.bin', 'wasm-opt')
  run(wasmOpt, ['-Oz', ...FEATURES.map((f) => `--enable-${f}`), bg, '-o', bg])
  for (const file of readdirSync(join(HERE, 'js'))) {
    const to = file === 'platform.js' ? join(DIST, 'lib', file) : join(DIST, file)
    copyFileSync(join(HERE, 'js', file), to)
  }
  for (const file of readdirSync(NODE_LIB)) {
    if (file === 'platform.js' || !file.endsWith('.js')) continue
    writeFileSync(join(DIST, 'lib', file), toEsm(readFileSync(join(NODE_LIB, file), 'utf8'), file))
  }
  const types = readFileSync(join(ROOT, 'bindings-node', 'index.d.ts'), 'utf8')
    .replace("import { EventEmitter } from 'node:events'", "import { EventEmitter } from './events.js'")
    .replace(/\bBuffer\b/g, 'Uint8Array')
  writeFileSync(join(DIST, 'index.d.ts'), types)
  const pkg = JSON.parse(readFileSync(join(HERE, 'package.json'), 'utf8'))
  writeFileSync(join(DIST, 'package.json'), `${JSON.stringify(pkg.publish, null, 2)}\n`)
  copyFileSync(join(HERE, 'README.md'), join(DIST, 'README.md'))
  // The Node package's fallback where it has no prebuilt binary (its native.js).
  const fallback = join(ROOT, 'bindings-node', 'wasm')
  for (const file of ['halfopen_wasm.js', 'halfopen_wasm_bg.wasm', 'native.js']) copyFileSync(join(DIST, file), join(fallback, file))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main()
