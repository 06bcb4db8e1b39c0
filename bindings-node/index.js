'use strict'
// halfopen for Node.js: a drop-in for the seed's TypeScript CircuitBreaker.
// Every decision is made by the Rust core (native.js loads it: the prebuilt
// addon, or its WebAssembly build where there is none); lib/ holds
// the translation, by concern:
//   options.js  option types, names, the translation to the addon's numbers
//   errors.js   error classes, the one decoder of the addon's errors,
//               the channel for errors thrown by user callbacks
//   clock.js    clock readings (validated, never backwards)
//   events.js   events in the core's order, safe from throwing listeners
//   call.js     the one call path (`execute`), shared by every breaker
//   breaker.js  CircuitBreaker, with the licensed fast path
//   registry.js Registry and its keyed breakers
//   retention.js RetentionQueue: the core's retaining dispatcher, sans-IO
//   dispatcher.js Dispatcher: a RetentionQueue that sends, with promises
//   outbox.js   Outbox: a partner's durable log on Redis, one deliverer at a time

const { backend } = require('./native.js')
const { CircuitBreaker } = require('./lib/breaker.js')
const { Registry } = require('./lib/registry.js')
const { Dispatcher } = require('./lib/dispatcher.js')
const { Outbox } = require('./lib/outbox.js')
const { RetentionQueue } = require('./lib/retention.js')
const {
  CircuitBreakerOpenError,
  CircuitBreakerTimeoutError,
  DeadLetterError,
  isRefusal,
  RegistryFullError,
  RetentionFullError,
  SnapshotError,
  StoreUnavailableError,
} = require('./lib/errors.js')

module.exports = {
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
}
