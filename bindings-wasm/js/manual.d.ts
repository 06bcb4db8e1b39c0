export * from './index.js'

/**
 * Instantiates the WebAssembly module (once; later calls give the same
 * promise): from `source` (a URL, a Response, bytes, a compiled module),
 * or the `halfopen_wasm_bg.wasm` beside this file. Await it before any
 * class is used.
 */
export function init(source?: URL | string | Response | BufferSource | WebAssembly.Module): Promise<void>
