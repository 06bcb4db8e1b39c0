// workerd (Cloudflare Workers): the module comes compiled, as an import; a
// worker may not compile code at run time.
import wasmModule from './halfopen_wasm_bg.wasm'
import { initSync } from './halfopen_wasm.js'
import { attach } from './native.js'

attach(initSync({ module: wasmModule }))

// Without FinalizationRegistry (a compatibility date before 2025-05-05, and
// no `enable_weak_ref` flag) a breaker's memory in the module is never freed.
if (typeof FinalizationRegistry === 'undefined') {
  console.warn(
    'halfopen-wasm: this worker has no FinalizationRegistry, so the memory of breakers it drops is never freed: ' +
      'set its compatibility date to 2025-05-05 or later, or add the enable_weak_ref flag.',
  )
}

export * from './index.js'
