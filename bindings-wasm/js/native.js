// The native half: the wasm module's classes under the names and methods of
// the Node addon's (bindings-node/native.d.ts). Objects come out of the
// module as JSON text (`fooJson`), parsed here into `foo`'s result. Every
// call is guarded: a call that did not return normally (a trap, or the
// JavaScript stack running out inside the module) leaves the module's
// shadow stack pointer where that call had moved it; it is put back to
// where it was when the call began (which is right also for a call made
// while another is active: reading an options object can run a getter that
// calls in), so that only the interrupted object is lost (it says it is
// poisoned), never the module. The entry module of the platform (node.js,
// workerd.js, browser.js) initialises the module and passes its exports to
// `attach`.

import { NativeBreaker as WasmBreaker, NativeRegistry as WasmRegistry } from './halfopen_wasm.js'

let stackPointer = null

/** Takes the module's exports once it is instantiated. */
export function attach(exports) {
  stackPointer = exports.__stack_pointer
}

const same = (result) => result

/** A licence from JSON, where a number that is not finite is `null`: every
 * one of a licence's is `Infinity` then ("not by time", "no limit"). */
function licenceOf(text) {
  const licence = JSON.parse(text)
  if (licence !== null) {
    licence.untilMs ??= Infinity
    licence.slowAfterMs ??= Infinity
    licence.room ??= Infinity
  }
  return licence
}

/** `method` of the module's class, guarded; `parse` turns its result into the addon's. */
function guarded(method, parse = same) {
  // Five parameters, no rest: the hot calls (acquire, record) stay cheap.
  return function (a, b, c, d, e) {
    const entered = stackPointer?.value
    try {
      return parse(method.call(this, a, b, c, d, e))
    } catch (err) {
      if (entered !== undefined) stackPointer.value = entered
      throw err
    }
  }
}

/** A subclass of the module's `Base` whose methods (`names`) are guarded;
 * `json` maps a method to the module's method that returns its JSON. */
function guardedClass(Base, names, json, getters = []) {
  const Guarded = class extends Base {}
  for (const name of names) {
    const fromJson = Object.hasOwn(json, name)
    const method = Base.prototype[fromJson ? json[name] : name]
    const parse = !fromJson ? same : name === 'licence' ? licenceOf : JSON.parse
    Object.defineProperty(Guarded.prototype, name, { value: guarded(method, parse), writable: true, configurable: true })
  }
  for (const name of getters) {
    const get = guarded(Object.getOwnPropertyDescriptor(Base.prototype, name).get)
    Object.defineProperty(Guarded.prototype, name, { get, configurable: true })
  }
  return Guarded
}

export const NativeBreaker = guardedClass(
  WasmBreaker,
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
    '__panicForTests',
  ],
  { licence: 'licenceJson', takeTransitions: 'takeTransitionsJson', metrics: 'metricsJson' },
)

export const NativeRegistry = guardedClass(
  WasmRegistry,
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
  ],
  {
    takeTransitions: 'takeTransitionsJson',
    licence: 'licenceJson',
    refusal: 'refusalJson',
    metrics: 'metricsJson',
  },
  ['size', 'evictions'],
)
