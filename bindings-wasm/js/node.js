// Node (ESM, and CommonJS through require(esm)): the module read from the
// package's folder and compiled synchronously.
import { readFileSync } from 'node:fs'
import { initSync } from './halfopen_wasm.js'
import { attach } from './native.js'

attach(initSync({ module: readFileSync(new URL('./halfopen_wasm_bg.wasm', import.meta.url)) }))

export * from './index.js'
