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
  optionOrder,
} from './halfopen_wasm.js'

let stackPointer = null
/** Each numeric option's place in the flattened options (options.rs). */
let optionIndex = null

/** Takes the module's exports once it is instantiated. */
export function attach(exports) {
  stackPointer = exports.__stack_pointer
  optionIndex = new Map(optionOrder().split(',').map((name, i) => [name, i]))
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

/** A licence (flat.rs: kind, generation, untilMs, gauge, slowAfterMs,
 * room, limited, pending); none for an empty one (no such breaker). */
function licenceOf(f) {
  if (f.length === 0) return null
  return {
    kind: f[0],
    generation: f[1],
    untilMs: f[2],
    gauge: f[3],
    slowAfterMs: f[4],
    room: f[5],
    limited: f[6] !== 0,
    pending: f[7] !== 0,
  }
}

const STATE_NAMES = ['closed', 'half_open', 'open']

/** Metrics (flat.rs: the state's gauge, then the numbers in
 * `NativeMetrics` order); an absent (NaN) one is left out, as napi does. */
function metricsOf(f) {
  if (f.length === 0) return null
  // The addon's order: the fields always there, then those that may be absent.
  const m = {
    state: STATE_NAMES[f[0]],
    admitted: f[1],
    successes: f[2],
    failures: f[3],
    slow: f[4],
    rejections: f[5],
    ignored: f[6],
    cancelled: f[7],
    stale: f[8],
    opens: f[9],
    opensLast24h: f[10],
    timeClosedMs: f[11],
    timeOpenMs: f[12],
    timeHalfOpenMs: f[13],
    consecutiveFailures: f[21],
    windowCalls: f[22],
    windowFailures: f[23],
    windowSlow: f[24],
    probesInFlight: f[25],
    probeSuccesses: f[26],
    inFlight: f[27],
    meanTimeOpenMs: f[14],
    errorRate: f[15],
    latencyCount: f[16],
    latencyP50Ms: f[17],
    latencyP95Ms: f[18],
    latencyP99Ms: f[19],
    latencyMaxMs: f[20],
    concurrencyLimit: f[28],
  }
  for (const key of Object.keys(m)) if (Number.isNaN(m[key])) delete m[key]
  return m
}

/** Transitions (flat.rs: name, from, to, reason, atMs for each). */
function transitionsOf(f) {
  const list = []
  for (let i = 0; i < f.length; i += 5) {
    const t = { from: f[i + 1], to: f[i + 2], reason: f[i + 3], atMs: f[i + 4] }
    list.push(f[i] === undefined ? t : { name: f[i], ...t })
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

/** Dispatcher events (flat.rs: kind, seq, reason, attempts, then a transition's from, to, reason, atMs). */
function eventsOf(f) {
  const list = []
  for (let i = 0; i < f.length; i += 8) {
    const kind = f[i]
    if (kind === 'transition') {
      list.push({ kind, transition: { from: f[i + 4], to: f[i + 5], reason: f[i + 6], atMs: f[i + 7] } })
    } else if (kind === 'dead') {
      list.push({ kind, seq: f[i + 1], reason: f[i + 2], attempts: f[i + 3] })
    } else {
      list.push({ kind, seq: f[i + 1] })
    }
  }
  return list
}

/** Retention stats (flat.rs: `NativeRetentionStats` in order). */
const statsOf = (f) => ({
  retained: f[0],
  inFlight: f[1],
  bytes: f[2],
  submitted: f[3],
  refused: f[4],
  sent: f[5],
  delivered: f[6],
  failed: f[7],
  dead: f[8],
  dropped: f[9],
})

/** A refusal (flat.rs: gauge, reason, pending). */
const refusalOf = (f) => ({ gauge: f[0], reason: f[1], pending: f[2] })

/** `method` of the module's class, guarded; `parse` turns its result into the addon's. */
function guarded(method, parse = same) {
  // Five parameters, no rest: the hot calls (acquire, record) stay cheap.
  return function (a, b, c, d, e) {
    const entered = stackPointer?.value
    try {
      return parse(method.call(this, a, b, c, d, e))
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
    'admitLicensed',
    'recordSuccesses',
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
    'manual',
    'takeTransitions',
    'licence',
    'refusal',
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
  { takeTransitions: transitionsOf, licence: licenceOf, refusal: refusalOf, metrics: metricsOf },
  ['size', 'evictions'],
)

export const NativeDispatcher = guardedClass(
  OptionsDispatcher,
  ['load', 'submit', 'next', 'report', 'handleTimeout', 'pollTimeoutMs', 'takeEvents', 'forceOpen', 'forceOpenAtLeast', 'release', 'state', 'stats', 'metrics', 'prometheus', 'snapshotJson', 'snapshotBytes', 'held', 'defaultSendTimeoutMs', 'maxNameBytes'],
  { next: Array.from, held: Array.from, takeEvents: eventsOf, stats: statsOf, metrics: metricsOf },
)
