// Hosts that may neither await at the top of a module (a module service
// worker) nor import a `.wasm` as a module: nothing happens on import; call
// `init()` once, and await it, before any class is used (in a service
// worker: in the install or the first fetch event, through `waitUntil`).
//   import { init, CircuitBreaker } from 'halfopen-wasm/manual'
//   await init()          // fetches halfopen_wasm_bg.wasm beside this file
//   await init(source)    // or: a URL, a Response, bytes, a WebAssembly.Module
import initModule from './halfopen_wasm.js'
import { attach } from './native.js'

let ready = null

/** Instantiates the module (once: later calls give the same promise). */
export function init(source = new URL('./halfopen_wasm_bg.wasm', import.meta.url)) {
  ready ??= initModule({ module_or_path: source }).then(attach, (err) => {
    ready = null // a failed load may be tried again
    throw err
  })
  return ready
}

export * from './index.js'
