// ESM entry: the same classes as the CommonJS entry.
import halfopen from './index.js'

export const { CircuitBreaker, CircuitBreakerOpenError, CircuitBreakerTimeoutError, Registry, RegistryFullError, SnapshotError } =
  halfopen
export default halfopen
