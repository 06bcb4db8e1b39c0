// workerd (Cloudflare Workers): the module comes compiled, as an import; a
// worker may not compile code at run time.
import wasmModule from './halfopen_wasm_bg.wasm'
import { initSync } from './halfopen_wasm.js'

initSync({ module: wasmModule })

export * from './index.js'
