// The native half: the wasm module's classes under the names and methods of
// the Node addon's (bindings-node/native.d.ts). Options go into the module
// flattened, and objects come out of it flat (bindings-wasm/src/options.rs
// and flat.rs say how); here they are built back into the addon's objects,
// as literals (no setter on Object.prototype can run). Every call is
// guarded: a call that did not return normally (a trap, or the JavaScript
// stack running out inside the module) leaves the module's shadow stack
// pointer where that call had moved it; it is put back to where it was when
// the call began (which is right also for a call made while another is
// active), so that only the interrupted object is lost (it says it is
// poisoned), never the module. The entry module of the platform (node.js,
// workerd.js, browser.js) initialises the module and passes its exports to
// `attach`.

import {
  NativeBreaker as WasmBreaker,
  NativeDispatcher as WasmDispatcher,
  NativeRegistry as WasmRegistry,
  flatFields,
  optionOrder,
} from './halfopen_wasm.js'

// The codes of the packed values (src/wire.rs of the Node package) and the
// flat records' fields (src/flat.rs), for the tests.
export { flatFields, opentelemetryInstruments, wireCodes } from './halfopen_wasm.js'

// No group mode here (it runs a Redis script through a Node client): the
// `group` option is refused with a TypeError (lib/group.js).
export const groupKeys = undefined
export const groupScript = undefined

let stackPointer = null
/** Each numeric option's place in the flattened options (options.rs). */
let optionIndex = null
/** Each flat record's fields: `at[record][field]` is the field's place,
 * `at[record]._count` how many values a record has (flat.rs `flatFields`:
 * the order is written there only). */
let at = null

/** Takes the module's exports once it is instantiated. */
export function attach(exports) {
  stackPointer = exports.__stack_pointer
  optionIndex = new Map(optionOrder().split(',').map((name, i) => [name, i]))
  at = {}
  for (const entry of flatFields().split(';')) {
    const [record, list] = entry.split('=')
    const names = list.split(',')
    at[record] = { _count: names.length }
    names.forEach((name, i) => {
      at[record][name] = i
    })
  }
}

const same = (result) => result

/** The translated options object (lib/options.js) as the module's
 * arguments: preset, values, the bits of those given, the bits of those
 * `null` (`unset`). */
function flatOptions(options) {
  if (optionIndex === null) throw new Error("halfopen-wasm: the module is not instantiated: with 'halfopen-wasm/manual', await init() first")
  const values = new Float64Array(optionIndex.size)
  let given = 0
  let unset = 0
  let preset
  for (const [key, value] of Object.entries(options)) {
    if (key === 'preset') {
      preset = value
    } else if (key === 'unset') {
      for (const name of value) {
        if (!optionIndex.has(name)) throw new TypeError(`halfopen-wasm: option ${name}: not translated`)
        unset |= 1 << optionIndex.get(name)
      }
    } else if (value !== undefined && value !== null) {
      const i = optionIndex.get(key)
      if (i === undefined || typeof value !== 'number') throw new TypeError(`halfopen-wasm: option ${key}: not translated`)
      values[i] = value
      given |= 1 << i
    }
  }
  return [preset, values, given, unset]
}

/** A licence (flat.rs); none for an empty one (no such breaker). */
function licenceOf(f) {
  if (f.length === 0) return null
  const p = at.licence
  return {
    kind: f[p.kind],
    generation: f[p.generation],
    untilMs: f[p.untilMs],
    gauge: f[p.gauge],
    slowAfterMs: f[p.slowAfterMs],
    room: f[p.room],
    bucketDecides: f[p.bucketDecides] !== 0,
    refusal: f[p.refusal],
    limited: f[p.limited] !== 0,
    pending: f[p.pending] !== 0,
  }
}

const STATE_NAMES = ['closed', 'half_open', 'open']

/** Metrics (flat.rs: `state` as its gauge); an absent (NaN) one is left
 * out, as napi does. */
function metricsOf(f) {
  if (f.length === 0) return null
  const p = at.metrics
  // The addon's order: the fields always there, then those that may be absent.
  const m = {
    state: STATE_NAMES[f[p.state]],
    admitted: f[p.admitted],
    successes: f[p.successes],
    failures: f[p.failures],
    slow: f[p.slow],
    rejections: f[p.rejections],
    ignored: f[p.ignored],
    cancelled: f[p.cancelled],
    stale: f[p.stale],
    opens: f[p.opens],
    opensLast24h: f[p.opensLast24h],
    timeClosedMs: f[p.timeClosedMs],
    timeOpenMs: f[p.timeOpenMs],
    timeHalfOpenMs: f[p.timeHalfOpenMs],
    consecutiveFailures: f[p.consecutiveFailures],
    windowCalls: f[p.windowCalls],
    windowFailures: f[p.windowFailures],
    windowSlow: f[p.windowSlow],
    probesInFlight: f[p.probesInFlight],
    probeSuccesses: f[p.probeSuccesses],
    inFlight: f[p.inFlight],
    meanTimeOpenMs: f[p.meanTimeOpenMs],
    errorRate: f[p.errorRate],
    latencyCount: f[p.latencyCount],
    latencyP50Ms: f[p.latencyP50Ms],
    latencyP95Ms: f[p.latencyP95Ms],
    latencyP99Ms: f[p.latencyP99Ms],
    latencyMaxMs: f[p.latencyMaxMs],
    concurrencyLimit: f[p.concurrencyLimit],
  }
  for (const key of Object.keys(m)) if (Number.isNaN(m[key])) delete m[key]
  return m
}

/** Transitions (flat.rs: one after another; `name` only from a registry). */
function transitionsOf(f) {
  const p = at.transition
  const list = []
  for (let i = 0; i < f.length; i += p._count) {
    const t = { from: f[i + p.from], to: f[i + p.to], reason: f[i + p.reason], atMs: f[i + p.atMs] }
    const name = f[i + p.name]
    list.push(name === undefined ? t : { name, ...t })
  }
  return list
}

/** The retention options (lib/retention.js) as the module's arguments:
 * the numbers (in dispatcher.rs's order), the bits of those given, overflow, probe. */
function flatRetention(r) {
  const numbers = [r.maxMessages, r.maxBytes, r.maxAttempts, r.maxAgeMs, r.releasePerSecond, r.releaseBurst]
  let given = 0
  numbers.forEach((v, i) => {
    if (typeof v === 'number') given |= 1 << i
  })
  return [new Float64Array(numbers.map((v) => (typeof v === 'number' ? v : 0))), given, r.overflow, r.probe]
}

/** Dispatcher events (flat.rs: one after another, a transition's fields after the event's own). */
function eventsOf(f) {
  const p = at.event
  const list = []
  for (let i = 0; i < f.length; i += p._count) {
    const kind = f[i + p.kind]
    if (kind === 'transition') {
      const transition = { from: f[i + p.from], to: f[i + p.to], reason: f[i + p.transitionReason], atMs: f[i + p.atMs] }
      list.push({ kind, transition })
    } else if (kind === 'dead') {
      list.push({ kind, seq: f[i + p.seq], reason: f[i + p.reason], attempts: f[i + p.attempts] })
    } else {
      list.push({ kind, seq: f[i + p.seq] })
    }
  }
  return list
}

/** Retention stats (flat.rs). */
function statsOf(f) {
  const p = at.stats
  return {
    retained: f[p.retained],
    inFlight: f[p.inFlight],
    bytes: f[p.bytes],
    submitted: f[p.submitted],
    refused: f[p.refused],
    sent: f[p.sent],
    delivered: f[p.delivered],
    failed: f[p.failed],
    dead: f[p.dead],
    dropped: f[p.dropped],
  }
}

/** `method` of the module's class, guarded; `parse` turns its result into the addon's. */
function guarded(method, parse = same) {
  // Six parameters (the most a method takes: a registry's `handOver`), no
  // rest: the hot calls (acquire, record) stay cheap.
  return function (a, b, c, d, e, f) {
    const entered = stackPointer?.value
    try {
      return parse(method.call(this, a, b, c, d, e, f))
    } catch (err) {
      throw unwound(entered, err)
    }
  }
}

/** A subclass of `Base` (the module's class with the addon's constructor)
 * whose methods (`names`) are guarded; `built` maps a method to the
 * function that builds its result. */
function guardedClass(Base, names, built, getters = []) {
  const Guarded = class extends Base {}
  for (const name of names) {
    const method = Base.prototype[name]
    // (A parameter past the guard's six would arrive undefined.)
    if (method.length > 6) throw new Error(`halfopen-wasm: ${name} takes ${method.length} parameters, the guard passes 6`)
    const build = Object.hasOwn(built, name) ? built[name] : same
    Object.defineProperty(Guarded.prototype, name, { value: guarded(method, build), writable: true, configurable: true })
  }
  for (const name of getters) {
    const get = guarded(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Base.prototype), name).get)
    Object.defineProperty(Guarded.prototype, name, { get, configurable: true })
  }
  return Guarded
}

/** Puts the module's stack pointer back to `entered` (a call that did not return moved it) and rethrows `err`. */
function unwound(entered, err) {
  if (entered !== undefined) stackPointer.value = entered
  return err
}

// Constructors are guarded as methods are: a construction that did not
// return (the stack running out inside it) loses nothing but that object.

/** The module's breaker, built from an options object as the addon's is. */
class OptionsBreaker extends WasmBreaker {
  constructor(options, latencyHistogram) {
    const entered = stackPointer?.value
    try {
      super(...flatOptions(options), latencyHistogram)
    } catch (err) {
      throw unwound(entered, err)
    }
  }
}

/** The module's dispatcher, built from options objects as the addon's is. */
class OptionsDispatcher extends WasmDispatcher {
  constructor(options, latencyHistogram, retention) {
    const entered = stackPointer?.value
    try {
      super(...flatOptions(options), latencyHistogram, ...flatRetention(retention))
    } catch (err) {
      throw unwound(entered, err)
    }
  }
}

/** The module's registry, configured with options objects as the addon's is. */
class OptionsRegistry extends WasmRegistry {
  constructor(options, capacity) {
    const entered = stackPointer?.value
    try {
      super(...flatOptions(options), capacity)
    } catch (err) {
      throw unwound(entered, err)
    }
  }

  configure(name, options, nowMs) {
    return super.configure(name, ...flatOptions(options), nowMs)
  }
}

export const NativeBreaker = guardedClass(
  OptionsBreaker,
  [
    'acquire',
    'refusalReason',
    'record',
    'licence',
    'handOver',
    'countRejections',
    'takeTransitions',
    'retryAfter',
    'mode',
    'forceOpen',
    'forceOpenAtLeast',
    'forceClose',
    'disable',
    'release',
    'reset',
    'handleTimeout',
    'pollTimeoutMs',
    'metrics',
    'prometheus',
    'snapshotJson',
    'snapshotBytes',
    'restore',
    'maxNameBytes',
    '__panicForTests',
  ],
  { licence: licenceOf, takeTransitions: transitionsOf, metrics: metricsOf },
)

export const NativeRegistry = guardedClass(
  OptionsRegistry,
  [
    'configure',
    'acquire',
    'record',
    'handOver',
    'countRejections',
    'manual',
    'takeTransitions',
    'licence',
    'retryAfter',
    'mode',
    'metrics',
    'names',
    'has',
    'prometheus',
    'snapshotJson',
    'restoreJson',
    'maxNameBytes',
  ],
  { takeTransitions: transitionsOf, licence: licenceOf, metrics: metricsOf },
  ['size', 'evictions', 'lastEvicted'],
)

export const NativeDispatcher = guardedClass(
  OptionsDispatcher,
  ['load', 'submit', 'next', 'report', 'handleTimeout', 'pollTimeoutMs', 'takeEvents', 'forceOpen', 'forceOpenAtLeast', 'release', 'state', 'stats', 'metrics', 'prometheus', 'snapshotJson', 'snapshotBytes', 'held', 'defaultSendTimeoutMs', 'clockFailureRetryMs', 'maxNameBytes'],
  { next: Array.from, held: Array.from, takeEvents: eventsOf, stats: statsOf, metrics: metricsOf },
)
