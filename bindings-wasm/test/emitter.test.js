// The small EventEmitter of halfopen-wasm (lib/platform.js) against Node's,
// on the same scripts: what a listener sees, in which order, with which
// `this`, and what the table holds after.

import assert from 'node:assert/strict'
import { EventEmitter as NodeEmitter } from 'node:events'
import { test } from 'node:test'
import { EventEmitter } from '../dist/lib/platform.js'

/** Runs `script` on a fresh emitter of `Kind`; returns what it logged. */
function trace(Kind, script) {
  const log = []
  const e = new Kind()
  script(e, log)
  return log
}

const SCRIPTS = {
  'once, off and on inside emit': (e, log) => {
    const a = () => {
      log.push('a')
      e.off('x', b)
      e.on('x', () => log.push('late'))
    }
    const b = () => log.push('b')
    e.once('x', a)
    e.on('x', b)
    e.emit('x')
    e.emit('x')
    log.push(e.listenerCount('x'))
  },
  'names are property keys; symbols stay symbols': (e, log) => {
    const s = Symbol('s')
    e.on(1, () => log.push('one'))
    e.on(s, () => log.push('symbol'))
    e.on('b', () => {})
    e.on('2', () => {})
    log.push(e.emit('1'), e.emit(s), e.emit('s'))
    log.push(e.eventNames().map(String).join(','))
  },
  'a once wrapper called by hand runs as the emitter, once': (e, log) => {
    e.once('x', function () {
      log.push(this === e)
    })
    const [wrapper] = e.rawListeners('x')
    wrapper()
    wrapper()
    log.push(e.listenerCount('x'))
  },
  'listenerCount of one listener, prependOnceListener, max listeners': (e, log) => {
    const f = () => log.push('f')
    e.on('x', f)
    e.on('x', () => log.push('g'))
    e.prependOnceListener('x', () => log.push('first'))
    log.push(e.listenerCount('x', f))
    e.emit('x')
    e.setMaxListeners(1)
    log.push(e.getMaxListeners())
  },
  'removeListener takes the latest of a listener added twice': (e, log) => {
    const f = (n) => log.push(n)
    e.on('x', f)
    e.on('x', () => log.push('mid'))
    e.on('x', f)
    e.removeListener('x', f)
    e.emit('x', 1)
    e.removeAllListeners()
    log.push(e.eventNames().length)
  },
}

for (const [name, script] of Object.entries(SCRIPTS)) {
  test(name, () => assert.deepEqual(trace(EventEmitter, script), trace(NodeEmitter, script)))
}

test('a listener that is not a function is refused, as by Node', () => {
  for (const method of ['on', 'once', 'off', 'removeListener', 'prependListener']) {
    assert.throws(() => new EventEmitter()[method]('x', 5), TypeError)
    assert.throws(() => new NodeEmitter()[method]('x', 5), TypeError)
  }
})
