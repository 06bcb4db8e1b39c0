// The native half: the wasm module's classes under the names and methods of
// the Node addon's (bindings-node/native.d.ts). Objects come out of the
// module as JSON text, parsed here. Every call goes through `back`: a call
// that did not return normally (a trap, or the JavaScript stack running out
// inside the module) leaves the module's shadow stack pointer where that
// call had moved it; it is put back (no module frame is active here: the
// module never calls back into JavaScript that calls it), so that only the
// interrupted object is lost (it says it is poisoned), never the module.
// The entry module of the platform (node.js, workerd.js, browser.js)
// initialises the module and passes its exports to `attach`.

import { NativeBreaker as WasmBreaker, NativeRegistry as WasmRegistry } from './halfopen_wasm.js'

let stackPointer = null
let stackBase = 0

/** Takes the module's exports once it is instantiated. */
export function attach(exports) {
  stackPointer = exports.__stack_pointer
  stackBase = stackPointer.value
}

/** Puts the stack pointer back after a call that threw, and rethrows. */
function back(err) {
  if (stackPointer !== null) stackPointer.value = stackBase
  return err
}

export class NativeBreaker extends WasmBreaker {
  acquire(nowMs) {
    try {
      return super.acquire(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  refusalReason() {
    try {
      return super.refusalReason()
    } catch (err) {
      throw back(err)
    }
  }
  record(generation, issuedAtMs, outcomeCode, nowMs) {
    try {
      return super.record(generation, issuedAtMs, outcomeCode, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  licence(nowMs) {
    try {
      return JSON.parse(super.licenceJson(nowMs))
    } catch (err) {
      throw back(err)
    }
  }
  admitLicensed(count, firstMs) {
    try {
      return super.admitLicensed(count, firstMs)
    } catch (err) {
      throw back(err)
    }
  }
  recordSuccesses(generation, count, atMs) {
    try {
      return super.recordSuccesses(generation, count, atMs)
    } catch (err) {
      throw back(err)
    }
  }
  countRejections(count, nowMs) {
    try {
      return super.countRejections(count, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  takeTransitions() {
    try {
      return JSON.parse(super.takeTransitionsJson())
    } catch (err) {
      throw back(err)
    }
  }
  retryAfter(nowMs) {
    try {
      return super.retryAfter(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  mode(nowMs) {
    try {
      return super.mode(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  forceOpen(nowMs, forMs) {
    try {
      return super.forceOpen(nowMs, forMs)
    } catch (err) {
      throw back(err)
    }
  }
  forceClose(nowMs) {
    try {
      return super.forceClose(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  disable(nowMs) {
    try {
      return super.disable(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  release(nowMs) {
    try {
      return super.release(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  reset(nowMs) {
    try {
      return super.reset(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  handleTimeout(nowMs) {
    try {
      return super.handleTimeout(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  pollTimeoutMs() {
    try {
      return super.pollTimeoutMs()
    } catch (err) {
      throw back(err)
    }
  }
  metrics(nowMs) {
    try {
      return JSON.parse(super.metricsJson(nowMs))
    } catch (err) {
      throw back(err)
    }
  }
  prometheus(name, nowMs) {
    try {
      return super.prometheus(name, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  snapshotJson(nowMs) {
    try {
      return super.snapshotJson(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  snapshotBytes(nowMs) {
    try {
      return super.snapshotBytes(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  restore(json, bytes, nowMs) {
    try {
      return super.restore(json, bytes, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  __panicForTests() {
    try {
      return super.__panicForTests()
    } catch (err) {
      throw back(err)
    }
  }
}

export class NativeRegistry extends WasmRegistry {
  configure(name, options, nowMs) {
    try {
      return super.configure(name, options, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  acquire(name, nowMs) {
    try {
      return super.acquire(name, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  record(name, generation, issuedAtMs, outcomeCode, nowMs) {
    try {
      return super.record(name, generation, issuedAtMs, outcomeCode, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  manual(name, op, nowMs, forMs) {
    try {
      return super.manual(name, op, nowMs, forMs)
    } catch (err) {
      throw back(err)
    }
  }
  takeTransitions() {
    try {
      return JSON.parse(super.takeTransitionsJson())
    } catch (err) {
      throw back(err)
    }
  }
  licence(name, nowMs) {
    try {
      return JSON.parse(super.licenceJson(name, nowMs))
    } catch (err) {
      throw back(err)
    }
  }
  refusal(name, nowMs) {
    try {
      return JSON.parse(super.refusalJson(name, nowMs))
    } catch (err) {
      throw back(err)
    }
  }
  retryAfter(name, nowMs) {
    try {
      return super.retryAfter(name, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  mode(name, nowMs) {
    try {
      return super.mode(name, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  metrics(name, nowMs) {
    try {
      return JSON.parse(super.metricsJson(name, nowMs))
    } catch (err) {
      throw back(err)
    }
  }
  names() {
    try {
      return super.names()
    } catch (err) {
      throw back(err)
    }
  }
  has(name) {
    try {
      return super.has(name)
    } catch (err) {
      throw back(err)
    }
  }
  get size() {
    try {
      return super.size
    } catch (err) {
      throw back(err)
    }
  }
  get evictions() {
    try {
      return super.evictions
    } catch (err) {
      throw back(err)
    }
  }
  prometheus(nowMs) {
    try {
      return super.prometheus(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  snapshotJson(nowMs) {
    try {
      return super.snapshotJson(nowMs)
    } catch (err) {
      throw back(err)
    }
  }
  restoreJson(json, nowMs) {
    try {
      return super.restoreJson(json, nowMs)
    } catch (err) {
      throw back(err)
    }
  }
}
