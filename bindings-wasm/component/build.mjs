// Builds the WebAssembly component into dist/: the crate for
// wasm32-unknown-unknown (profile `wasm`), wasm-opt -Oz (binaryen from the
// wasm package's node_modules), `wasm-tools component new` (no WASI, so no
// adapter and no imports), `wasm-tools validate`; then jco transpiles it
// into dist/js/ for Node.
//   node build.mjs            (run by `make component-build`; WASM_TOOLS
//                             names the wasm-tools binary, default the
//                             project's .venv)

import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FEATURES } from '../build.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = join(HERE, '..', '..')
const DIST = join(HERE, 'dist')
const MODULE = join(ROOT, 'target', 'wasm32-unknown-unknown', 'wasm', 'halfopen_component.wasm')
const OPTIMISED = join(ROOT, 'target', 'halfopen_component.opt.wasm')
const WASM_TOOLS = process.env.WASM_TOOLS || join(ROOT, '.venv', 'bin', 'wasm-tools')

const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit', cwd: ROOT })

run('cargo', ['build', '-q', '-p', 'halfopen-component', '--target', 'wasm32-unknown-unknown', '--profile', 'wasm'])
const wasmOpt = join(ROOT, 'bindings-wasm', 'node_modules', '.bin', 'wasm-opt')
run(wasmOpt, ['-Oz', ...FEATURES.map((f) => `--enable-${f}`), MODULE, '-o', OPTIMISED])
rmSync(DIST, { recursive: true, force: true })
mkdirSync(DIST)
const component = join(DIST, 'halfopen.wasm')
run(WASM_TOOLS, ['component', 'new', OPTIMISED, '-o', component])
run(WASM_TOOLS, ['validate', component])
run(join(HERE, 'node_modules', '.bin', 'jco'), ['transpile', component, '-o', join(DIST, 'js'), '--name', 'halfopen', '--quiet'])
// jco writes ES modules.
writeFileSync(join(DIST, 'js', 'package.json'), '{"type":"module"}\n')
