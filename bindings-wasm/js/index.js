// halfopen-wasm: the classes of the Node package `halfopen`, over the core
// compiled to WebAssembly. Import the package (its entry for the platform
// initialises the module), not this file.

/** The native half: this package has only the WebAssembly one. */
export const backend = 'wasm'
export { CircuitBreaker } from './lib/breaker.js'
export { Dispatcher } from './lib/dispatcher.js'
export {
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  DeadLetterError,
  isRefusal,
  RegistryFullError,
  RetentionFullError,
  SnapshotError,
} from './lib/errors.js'
export { Registry } from './lib/registry.js'
export { RetentionQueue } from './lib/retention.js'
