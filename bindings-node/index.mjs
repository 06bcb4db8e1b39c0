// ESM entry: the same classes as the CommonJS entry.
import halfopen from './index.js'

export const {
  backend,
  CircuitBreaker,
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  DeadLetterError,
  Dispatcher,
  isRefusal,
  Outbox,
  Registry,
  RegistryFullError,
  RetentionFullError,
  RetentionQueue,
  SnapshotError,
  StoreUnavailableError,
} = halfopen
export default halfopen
