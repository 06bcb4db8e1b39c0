// The WebAssembly fallback of the package's native half (../native.js):
// halfopen-wasm's module and its translation to the addon's classes (copied
// here from bindings-wasm/dist by its build), compiled synchronously from the
// file beside this one.
import { readFileSync } from 'node:fs'
import { initSync } from './halfopen_wasm.js'
import { attach } from './native.js'

attach(initSync({ module: readFileSync(new URL('./halfopen_wasm_bg.wasm', import.meta.url)) }))

export { NativeBreaker, NativeDispatcher, NativeRegistry, opentelemetryInstruments, wireCodes } from './native.js'
