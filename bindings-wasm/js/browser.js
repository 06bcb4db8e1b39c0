// Browsers and bundlers: the module fetched beside this file and compiled
// asynchronously (a main thread may not compile a module this size
// synchronously), before any class is used.
import init from './halfopen_wasm.js'
import { attach } from './native.js'

attach(await init({ module_or_path: new URL('./halfopen_wasm_bg.wasm', import.meta.url) }))

export * from './index.js'
