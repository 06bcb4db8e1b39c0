// The native half: the wasm module's classes, under the names and methods of
// the Node addon's (bindings-node/native.d.ts). The entry module the
// platform loads (node.js, workerd.js, browser.js) has initialised it.
export { NativeBreaker, NativeRegistry } from './halfopen_wasm.js'
