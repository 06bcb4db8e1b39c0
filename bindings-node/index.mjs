// ESM entry: the same classes as the CommonJS entry.
import halfopen from './index.js'

export const {
  backend,
  CircuitBreaker,
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  DeadLetterError,
  Dispatcher,
  Registry,
  RegistryFullError,
  RetentionFullError,
  RetentionQueue,
  SnapshotError,
} = halfopen
export default halfopen
