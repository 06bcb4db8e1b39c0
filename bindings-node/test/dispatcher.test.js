'use strict'
// The Dispatcher: seed 001's promise (nothing lost, in order, paced), its
// promises and events, its bad inputs and hostile callbacks, and a store's
// restart paths. Time is an injected clock; sends are promises the test
// settles. Run against both packages (HALFOPEN_PACKAGE: the wasm one).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { DeadLetterError, Dispatcher, RetentionFullError } = require(process.env.HALFOPEN_PACKAGE || '..')

/** A partner the test controls: every send waits until the test settles it. */
function partner() {
  const calls = []
  const send = (message, { signal }) =>
    new Promise((resolve, reject) => {
      calls.push({ message, signal, resolve, reject })
    })
  return { calls, send }
}

const tick = () => new Promise((resolve) => setImmediate(resolve))

function dispatcher(extra = {}) {
  const clock = { now: 0 }
  const p = partner()
  const d = new Dispatcher({
    name: 'partner-a',
    preset: 'partnerWebhook',
    concurrencyLimit: 1,
    clock: () => clock.now,
    send: p.send,
    // The test settles every send (the default timeout is real time).
    timeoutMs: null,
    ...extra,
  })
  return { clock, p, d }
}

test('an outage: nothing lost, delivered once and in order, only probes reach the partner while open', async () => {
  const { clock, p, d } = dispatcher({ concurrencyLimit: 4 })
  const transitions = []
  d.on('stateChange', (t) => transitions.push(`${t.from}>${t.to}`))
  const delivered = []
  const promises = []
  for (let i = 0; i < 200; i++) promises.push(d.submit(i).then(() => delivered.push(i)))
  // Down: every call fails until the breaker opens (five in a row).
  let failures = 0
  while (d.getState() === 'CLOSED') {
    p.calls.shift().reject(new Error('503'))
    failures += 1
    await tick()
  }
  assert.equal(failures, 5)
  for (const call of p.calls.splice(0)) call.reject(new Error('503'))
  await tick()
  assert.equal(d.stats().inFlight, 0)
  // Two open periods of 10 s pass with the partner still down: one probe each.
  for (let round = 1; round <= 2; round++) {
    clock.now += 10_000
    d.poll()
    assert.equal(p.calls.length, 1, 'one probe while half-open')
    p.calls.shift().reject(new Error('503'))
    await tick()
    assert.equal(d.getState(), 'OPEN')
  }
  // Back: the probe succeeds, then the backlog goes four at a time.
  clock.now += 10_000
  d.poll()
  let most = 0
  while (delivered.length < 200) {
    most = Math.max(most, p.calls.length)
    const call = p.calls.shift()
    assert.ok(call, 'a send is in flight until everything is delivered')
    call.resolve()
    await tick()
  }
  await Promise.all(promises)
  assert.deepEqual(delivered, [...Array(200).keys()])
  assert.ok(most <= 4, `at most the limit in flight, got ${most}`)
  assert.deepEqual(transitions.slice(0, 2), ['CLOSED>OPEN', 'OPEN>HALF_OPEN'])
  assert.equal(transitions.at(-1), 'HALF_OPEN>CLOSED')
  const s = d.stats()
  assert.equal(s.delivered, 200)
  assert.equal(s.retained + s.inFlight + s.dead + s.dropped, 0)
  await d.drained()
})

test('a full queue rejects with RetentionFullError at once and holds nothing of the message', async () => {
  const { d } = dispatcher({ maxMessages: 2 })
  d.submit('a')
  d.submit('b')
  // A rejection, as for every other way a submission can end: `.catch()` sees it.
  const refused = d.submit('c')
  assert.equal(d.stats().refused, 1, 'refused at once')
  assert.equal(d.stats().retained + d.stats().inFlight, 2)
  await assert.rejects(refused, RetentionFullError)
})

test('maxBytes counts UTF-8 bytes of strings by default, or what size says', async () => {
  const { d } = dispatcher({ maxBytes: 6 })
  d.submit('éé') // 4 bytes
  await assert.rejects(d.submit('abc'), RetentionFullError)
  d.submit('ab')
  assert.equal(d.stats().bytes, 6)
  const sized = dispatcher({ maxBytes: 3, size: () => 1 }).d
  for (const m of [{}, [], 'x']) sized.submit(m)
  await assert.rejects(sized.submit('y'), RetentionFullError)
})

test('a message that fails maxAttempts times rejects with a DeadLetterError and is a dead event', async () => {
  const { p, d } = dispatcher({ maxAttempts: 2, consecutiveFailures: 10 })
  const dead = []
  d.on('dead', (e) => dead.push(e))
  const promise = d.submit('m', { key: 'm-1' })
  p.calls.shift().reject(new Error('500'))
  await tick()
  p.calls.shift().reject(new Error('500'))
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof DeadLetterError)
    assert.equal(err.reason, 'attempts')
    assert.equal(err.attempts, 2)
    assert.equal(err.payload, 'm')
    return true
  })
  assert.deepEqual(dead, [{ seq: 0, message: 'm', reason: 'attempts', attempts: 2, key: 'm-1' }])
  assert.equal(d.stats().dead, 1)
})

test('an error isFailure says is not the partner\'s health dead-letters the message at once', async () => {
  const { p, d } = dispatcher({ isFailure: (err) => err.status >= 500 })
  const promise = d.submit('bad payload')
  p.calls.shift().reject(Object.assign(new Error('422'), { status: 422 }))
  await assert.rejects(promise, (err) => err.reason === 'refused' && err.attempts === 1)
  assert.equal(d.getState(), 'CLOSED')
})

test('a dead letter nobody awaits does not crash the process', async () => {
  const { p, d } = dispatcher({ maxAttempts: 1 })
  let unhandled = 0
  const onUnhandled = () => {
    unhandled += 1
  }
  process.on('unhandledRejection', onUnhandled)
  d.submit('ignored')
  p.calls.shift().reject(new Error('500'))
  await tick()
  await tick()
  process.off('unhandledRejection', onUnhandled)
  assert.equal(unhandled, 0)
  assert.equal(d.stats().dead, 1)
})

test('overflow dropOldest rejects the dropped message with reason dropped', async () => {
  const { d } = dispatcher({ maxMessages: 2, overflow: 'dropOldest' })
  d.submit('a') // in flight
  const b = d.submit('b')
  d.submit('c')
  await assert.rejects(b, (err) => err instanceof DeadLetterError && err.reason === 'dropped' && err.payload === 'b')
  assert.equal(d.stats().dropped, 1)
})

test('a send that throws, returns garbage or a hostile thenable is reported once, and the next goes', async () => {
  const behaviours = [
    () => {
      throw new Error('sync throw')
    },
    () => 42,
    () => ({
      // biome-ignore lint/suspicious/noThenProperty: a hostile thenable is the point
      then() {
        throw new Error('then throws')
      },
    }),
    () => undefined,
  ]
  let i = 0
  const d = new Dispatcher({ name: 'h', consecutiveFailures: 100, failureThreshold: null, concurrencyLimit: 1, send: () => (behaviours[i++] ?? (() => {}))() })
  const results = await Promise.allSettled(behaviours.map((_, k) => d.submit(k)))
  // A throw (sync or from a thenable) is a failure and the message is sent
  // again: 0 throws then gets 42, 1 gets the thenable then undefined, 2 and
  // 3 find the behaviours used up (undefined: a success).
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 4)
  const s = d.stats()
  assert.equal(s.inFlight, 0)
  assert.equal(s.delivered, 4)
  assert.equal(s.failed, 2)
})

test('timeoutMs aborts a send that hangs; its retry starts only once it has ended, and it ends as it settles', async () => {
  const { p, d } = dispatcher({ timeoutMs: 20, consecutiveFailures: 10 })
  d.submit('slow')
  d.submit('next')
  const first = p.calls[0]
  await new Promise((resolve) => first.signal.addEventListener('abort', resolve))
  await tick()
  assert.equal(first.signal.reason.name, 'CircuitBreakerTimeoutError')
  // Aborted, not yet settled: it still holds the only slot, so nothing else is sent.
  assert.deepEqual([p.calls.length, d.stats().inFlight, d.stats().failed], [1, 1, 0])
  first.reject(first.signal.reason)
  await tick()
  assert.equal(d.stats().failed, 1)
  assert.deepEqual(p.calls.map((c) => c.message), ['slow', 'slow'], 'sent again, after the first ended')
  // An answer that comes after the abort is still the answer: delivered, not sent a third time.
  const second = p.calls[1]
  await new Promise((resolve) => second.signal.addEventListener('abort', resolve))
  second.resolve()
  await tick()
  assert.equal(d.stats().delivered, 1)
  p.calls[2].resolve()
  await d.drained()
  assert.deepEqual([d.stats().delivered, d.stats().sent], [2, 3])
})

test('a send that ignores its abort signal is reported as failed after as long again, with a warning', async () => {
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    const { p, d } = dispatcher({ timeoutMs: 20, consecutiveFailures: 10, maxAttempts: 1 })
    const dead = d.submit('deaf')
    await assert.rejects(dead, (err) => err instanceof DeadLetterError && err.reason === 'attempts')
    assert.equal(p.calls.length, 1)
    await tick()
    assert.ok(warnings.some((w) => /ignored its abort signal for 20 ms/.test(w.message)), warnings.map(String).join('; '))
  } finally {
    process.off('warning', onWarning)
  }
})

test('timeoutMs: 10 s unless given; null for none', () => {
  const plain = new Dispatcher({ name: 't', concurrencyLimit: 1, send: () => {} })
  assert.equal(plain._timeoutMs, 10_000, "the core's default (seed 001)")
  const none = new Dispatcher({ name: 't', concurrencyLimit: 1, send: () => {}, timeoutMs: null })
  assert.equal(none._timeoutMs, undefined)
  assert.throws(() => new Dispatcher({ name: 't', concurrencyLimit: 1, send: () => {}, timeoutMs: 0 }), (e) => e instanceof RangeError && e.option === 'timeoutMs')
  assert.throws(() => new Dispatcher({ name: 't', concurrencyLimit: 1, send: () => {}, timeoutMs: '5' }), (e) => e instanceof TypeError && e.option === 'timeoutMs')
})

test('a send that fulfils with an Error object failed as if it threw it; false is a delivery (writable.write)', async () => {
  const written = new Dispatcher({ name: 'w', concurrencyLimit: 1, timeoutMs: null, send: async () => false })
  await written.submit('buffered')
  assert.equal(written.stats().delivered, 1)
  const results = [new Error('forgotten throw'), new Error('again'), Object.assign(new Error('bad request'), { status: 400 }), undefined]
  let i = 0
  const d = new Dispatcher({
    name: 'f',
    concurrencyLimit: 1,
    consecutiveFailures: 10,
    failureThreshold: null,
    timeoutMs: null,
    isFailure: (err) => err.status !== 400,
    send: async () => results[i++],
  })
  const settled = d.submit('m').then(
    () => 'delivered',
    (err) => err.reason,
  )
  assert.equal(await settled, 'refused', "Errors are failures; the 400 is not the partner's health")
  assert.deepEqual([d.stats().failed, d.stats().dead, d.stats().sent], [2, 1, 3])
})

test('a throwing listener or a send that submits again changes nothing else', async () => {
  const { p, d } = dispatcher({ concurrencyLimit: 2 })
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  d.on('delivered', () => {
    throw new Error('listener')
  })
  const inner = []
  const outer = new Dispatcher({
    name: 're',
    concurrencyLimit: 1,
    send: (m) => {
      if (m === 'first') inner.push(outer.submit('second'))
    },
  })
  await outer.submit('first')
  await Promise.all(inner)
  assert.equal(outer.stats().delivered, 2)
  d.submit('x')
  p.calls.shift().resolve()
  await d.drained()
  await tick()
  process.off('warning', onWarning)
  assert.equal(d.stats().delivered, 1)
  assert.ok(warnings.some((w) => w.code === 'HALFOPEN_CALLBACK_ERROR'))
})

test('forceOpen holds every message; release lets them go', async () => {
  const { p, d } = dispatcher()
  d.forceOpen()
  d.submit('a')
  d.submit('b')
  assert.equal(p.calls.length, 0)
  d.release()
  p.calls.shift().resolve()
  await tick()
  p.calls.shift().resolve()
  await d.drained()
  assert.equal(d.stats().delivered, 2)
})

test('close() waits for the sends in flight, then refuses submissions', async () => {
  const { p, d } = dispatcher()
  d.submit('a')
  d.submit('b')
  let closed = false
  const closing = d.close().then(() => {
    closed = true
  })
  await tick()
  assert.equal(closed, false)
  await assert.rejects(d.submit('c'), /closed/)
  p.calls.shift().resolve()
  await closing
  assert.equal(p.calls.length, 0, 'nothing more is sent once closing')
  assert.equal(d.stats().retained, 1)
})

test('bad options are TypeErrors or RangeErrors naming the option', () => {
  const send = () => {}
  const bad = [
    [{ name: 'x', concurrencyLimit: 1 }, 'send'],
    [{ name: 'x', send, concurrencyLimit: 1, timeoutMs: Number.NaN }, 'timeoutMs'],
    [{ name: 'x', send, concurrencyLimit: 1, maxMessages: -1 }, 'maxMessages'],
    [{ name: 'x', send, concurrencyLimit: 1, maxMessages: '5' }, 'maxMessages'],
    [{ name: 'x', send, concurrencyLimit: 1, maxBytes: Number.POSITIVE_INFINITY }, 'maxBytes'],
    [{ name: 'x', send, concurrencyLimit: 1, maxAgeMs: 0 }, 'maxAgeMs'],
    [{ name: 'x', send, concurrencyLimit: 1, maxAttempts: 1.5 }, 'maxAttempts'],
    [{ name: 'x', send, concurrencyLimit: 1, overflow: 'dropNewest' }, 'overflow'],
    [{ name: 'x', send, concurrencyLimit: 1, probe: 'random' }, 'probe'],
    [{ name: 'x', send, releaseRate: { perSecond: Number.NaN, burst: 1 } }, 'releaseRate'],
    [{ name: 'x', send, releaseRate: 5 }, 'releaseRate'],
    [{ name: 'x', send, releaseRate: { perSecond: '5', burst: 1 } }, 'releaseRate'],
    [{ name: 'x', send }, 'releaseRate'],
    [{ name: 'x', send, concurrencyLimit: 1, store: {} }, 'store'],
    [{ name: 'x', send, concurrencyLimit: 1, size: 3 }, 'size'],
    [{ name: 'x', send, concurrencyLimit: 1, bogus: 1 }, 'bogus'],
    [{ name: '\ud800', send, concurrencyLimit: 1 }, 'name'],
  ]
  for (const [options, option] of bad) {
    assert.throws(
      () => new Dispatcher(options),
      (err) => {
        assert.ok(err instanceof TypeError || err instanceof RangeError, `${option}: ${err}`)
        assert.equal(err.option, option, `${option}: ${err.message}`)
        return true
      },
    )
  }
  const { d } = dispatcher({ size: () => -1 })
  assert.throws(() => d.submit('m'), (err) => err instanceof TypeError && err.option === 'size')
  assert.equal(d.stats().submitted, 0, 'a message with a bad size is not taken')
})

/** A store in memory, as a Redis one keeps it (see redis-store.test.js for the real one). */
function memoryStore() {
  const data = { state: null, messages: new Map() }
  return {
    data,
    add: (seq, m) => void data.messages.set(seq, m),
    remove: (seq) => void data.messages.delete(seq),
    clear: () => data.messages.clear(),
    save: (s) => {
      data.state = s === null ? null : JSON.stringify(s)
    },
    load: () => ({ snapshot: data.state && JSON.parse(data.state), messages: [...data.messages] }),
  }
}

test('a graceful restart through a store loses nothing and sends nothing twice, the breaker still open', async () => {
  const store = memoryStore()
  const clock = { now: 0 }
  const sent = []
  let up = false
  const options = {
    name: 'p',
    preset: 'partnerWebhook',
    concurrencyLimit: 2,
    clock: () => clock.now,
    store,
    send: async (m) => {
      sent.push(m)
      if (!up) throw new Error('down')
    },
  }
  const first = await Dispatcher.open(options)
  for (let i = 0; i < 20; i++) first.submit(i)
  await first.persisted()
  while (first.stats().inFlight > 0) await tick()
  assert.equal(first.getState(), 'OPEN')
  await first.close()
  assert.equal(store.data.messages.size, 20)
  const before = sent.length
  // The new process: the state comes back (still open: no send before the open time ends).
  const second = await Dispatcher.open(options)
  assert.equal(second.getState(), 'OPEN')
  assert.equal(sent.length, before)
  up = true
  clock.now += 10_000
  second.poll()
  await second.drained()
  await second.persisted()
  const delivered = sent.slice(before)
  assert.deepEqual(delivered, [...Array(20).keys()], 'each once, in order')
  assert.equal(store.data.messages.size, 0)
})

test('after a crash (no state saved) the stored messages are sent again, in order', async () => {
  const store = memoryStore()
  const sent = []
  const options = { name: 'p', concurrencyLimit: 1, store, send: (m) => sent.push(m) && new Promise(() => {}), timeoutMs: null }
  const first = await Dispatcher.open(options)
  for (const m of ['a', 'b', 'c']) first.submit(m)
  await first.persisted()
  assert.deepEqual(sent, ['a'])
  // Crash: `first` is abandoned with 'a' in flight.
  const second = await Dispatcher.open({ ...options, send: (m) => void sent.push(m) })
  await second.drained()
  assert.deepEqual(sent, ['a', 'a', 'b', 'c'], 'what was in flight is sent again (at least once), then the rest in order')
  await second.persisted()
  assert.equal(store.data.messages.size, 0)
})

// Regressions from the hostile review (issue 13).

test('open() after a crash takes every stored message back or changes nothing (a bound, garbage from load)', async () => {
  const store = memoryStore()
  for (const [seq, m] of [[3, 'a'], [4, 'b'], [5, 'c'], [6, 'd']]) store.data.messages.set(seq, m)
  const sent = []
  const options = { name: 'p', concurrencyLimit: 1, store, send: (m) => void sent.push(m) }
  await assert.rejects(Dispatcher.open({ ...options, maxMessages: 2 }), RetentionFullError)
  assert.deepEqual([...store.data.messages.keys()], [3, 4, 5, 6], 'the store is untouched')
  assert.deepEqual(sent, [], 'nothing sent')
  const garbage = [null, { messages: 'abc' }, { messages: [[0, 'a'], 5] }, { messages: [[0, 'a'], [0, 'b']] }, { messages: { length: 2 } }]
  for (const value of garbage) {
    const bad = { ...store, load: () => value }
    await assert.rejects(Dispatcher.open({ ...options, store: bad }), (err) => err instanceof TypeError && err.option === 'store')
  }
  assert.equal(store.data.messages.size, 4)
  assert.deepEqual(sent, [])
})

test('after a crash the new copies are stored before the old ones are forgotten', async () => {
  const store = memoryStore()
  const ops = []
  const logged = { ...store, add: (seq, m) => ops.push(`add ${seq}`) && store.add(seq, m), remove: (seq) => ops.push(`remove ${seq}`) && store.remove(seq) }
  for (const [seq, m] of [[7, 'a'], [8, 'b']]) store.data.messages.set(seq, m)
  const d = await Dispatcher.open({ name: 'p', concurrencyLimit: 1, store: logged, send: () => new Promise(() => {}), timeoutMs: null })
  await d.persisted()
  assert.deepEqual(ops, ['add 0', 'add 1', 'remove 7', 'remove 8'])
  assert.deepEqual([...store.data.messages], [[0, 'a'], [1, 'b']])
})

test('a send whose result throws when read (a hostile constructor getter) is reported once, and the batch goes on', async () => {
  const hostile = Object.defineProperty(Promise.resolve(), 'constructor', {
    get() {
      throw new Error('hostile constructor')
    },
  })
  let calls = 0
  const d = new Dispatcher({
    name: 'h',
    concurrencyLimit: 3,
    consecutiveFailures: 100,
    failureThreshold: null,
    maxAttempts: 1,
    send: () => (++calls === 1 ? hostile : undefined),
  })
  const a = d.submit('A')
  const rest = [d.submit('B'), d.submit('C')]
  await assert.rejects(a, (err) => err instanceof DeadLetterError && err.attempts === 1)
  await Promise.all(rest)
  assert.equal(d.stats().inFlight, 0)
  assert.equal(calls, 3)
})

test("a dropped message's listener that submits again: every promise settles and the store matches what is held", async () => {
  const store = memoryStore()
  const d = await Dispatcher.open({ name: 'r', concurrencyLimit: 1, maxMessages: 2, overflow: 'dropOldest', store, send: () => new Promise(() => {}), timeoutMs: null })
  const settled = []
  d.on('dropped', (e) => {
    if (e.message === 'B') d.submit('D').catch(() => settled.push('D dropped'))
  })
  d.submit('A')
  d.submit('B').catch(() => settled.push('B dropped'))
  d.submit('C').catch(() => settled.push('C dropped'))
  await d.persisted()
  await tick()
  assert.deepEqual(settled.sort(), ['B dropped', 'C dropped'])
  const held = d.queue.held().map(([, m]) => m)
  assert.deepEqual(held, ['A', 'D'])
  assert.deepEqual([...store.data.messages.values()].sort(), ['A', 'D'])
})

test('drained() waits for the retained messages even while closing', async () => {
  const { p, d } = dispatcher()
  d.submit('a')
  d.submit('b')
  let drained = false
  d.drained().then(() => {
    drained = true
  })
  const closing = d.close()
  p.calls.shift().resolve()
  await closing
  await tick()
  assert.equal(d.stats().retained, 1)
  assert.equal(drained, false, 'b is still held')
})

test('RetentionQueue.fromJSON refuses messages it would lose or mistake', () => {
  const { RetentionQueue, SnapshotError } = require(process.env.HALFOPEN_PACKAGE || '..')
  const q = new RetentionQueue({ name: 'q', concurrencyLimit: 1 })
  q.submit('a')
  q.submit('b')
  const json = q.toJSON()
  const options = { name: 'q', concurrencyLimit: 1 }
  assert.throws(() => RetentionQueue.fromJSON(options, json, [[0]]), (err) => err.option === 'messages')
  assert.throws(() => RetentionQueue.fromJSON(options, json, [[0, 'a'], [0, 'x'], [1, 'b']]), (err) => err.option === 'messages')
  assert.throws(() => RetentionQueue.fromJSON(options, json, [[0, 'a'], [1, 'b'], [7, 'z']]), (err) => err instanceof SnapshotError && err.kind === 'corrupt')
  assert.throws(() => RetentionQueue.fromJSON(options, json, [[0, 'a']]), (err) => err instanceof SnapshotError && err.kind === 'corrupt')
  assert.deepEqual(RetentionQueue.fromJSON(options, json, [[0, 'a'], [1, 'b']]).held(), [[0, 'a'], [1, 'b']])
})

test('a restored queue keeps its latency histogram (it was dropped)', () => {
  const { RetentionQueue } = require(process.env.HALFOPEN_PACKAGE || '..')
  const options = { name: 'q', concurrencyLimit: 1, latencyHistogram: true }
  const q = new RetentionQueue(options)
  q.report(q.submit('a').seq, 'success')
  assert.equal(q.metrics().latencyCount, 1)
  const restored = RetentionQueue.fromJSON(options, q.toJSON(), q.held())
  restored.report(restored.submit('b').seq, 'success')
  assert.equal(restored.metrics().latencyCount, 1, 'a fresh histogram, still measuring')
})

test('a send that rejects after its timeout failed, whatever isFailure says of the abort', async () => {
  // isFailure says only 5xx are the partner's: the abort's error is not one, but a timeout is the partner's failure.
  const { p, d } = dispatcher({ timeoutMs: 20, consecutiveFailures: 10, maxAttempts: 3, isFailure: (err) => err.status >= 500 })
  const delivered = d.submit('slow')
  const first = p.calls[0]
  await new Promise((resolve) => first.signal.addEventListener('abort', resolve))
  first.reject(first.signal.reason) // an obedient send
  await tick()
  assert.deepEqual([d.stats().failed, d.stats().dead], [1, 0], 'a failure, retried: not a dead letter')
  p.calls[1].resolve()
  await delivered
})

test("a restore on a shared clock announces the messages that aged out meanwhile to the listeners open()'s caller attaches", async () => {
  const store = memoryStore()
  let wall = 1_000_000
  const options = {
    name: 'aged',
    concurrencyLimit: 1,
    consecutiveFailures: 1,
    failureThreshold: null,
    openTimeoutMs: 600_000,
    maxAgeMs: 60_000,
    timeoutMs: null,
    clock: () => wall,
    sharedClock: true,
    store,
    send: async () => {
      throw new Error('down')
    },
  }
  const first = await Dispatcher.open(options)
  // Their promises stay pending with the closed dispatcher: the messages are the store's now.
  for (let i = 0; i < 4; i++) first.submit(i)
  await tick()
  await first.close()
  wall += 75_000 // down longer than maxAgeMs
  const second = await Dispatcher.open(options)
  const dead = []
  second.on('dead', (e) => dead.push([e.message, e.reason]))
  await second.drained()
  assert.deepEqual(dead, [
    [0, 'age'],
    [1, 'age'],
    [2, 'age'],
    [3, 'age'],
  ])
  assert.equal(store.data.messages.size, 0)
})

// Issue 21 §4: a key a partner can deduplicate by, stable across retries and restarts.

/** A store that keeps each message's key beside it, as halfopen/redis-store does. */
function keyedStore() {
  const store = memoryStore()
  store.data.keys = new Map()
  return {
    ...store,
    add: (seq, m, key) => {
      store.data.messages.set(seq, m)
      if (key !== undefined) store.data.keys.set(seq, key)
    },
    remove: (seq) => {
      store.data.messages.delete(seq)
      store.data.keys.delete(seq)
    },
    clear: () => {
      store.data.messages.clear()
      store.data.keys.clear()
    },
    load: () => ({
      snapshot: store.data.state && JSON.parse(store.data.state),
      messages: [...store.data.messages].map(([seq, m]) => (store.data.keys.has(seq) ? [seq, m, store.data.keys.get(seq)] : [seq, m])),
    }),
  }
}

test('every attempt of a message has the same key; default keys are unique per dispatcher; a bad key is a TypeError', async () => {
  const { p, d } = dispatcher()
  const keys = []
  const send = p.send
  const seen = new Dispatcher({ name: 'x', concurrencyLimit: 1, timeoutMs: null, send: (m, c) => keys.push([m, c.key]) && send(m, c) })
  const delivered = []
  seen.on('delivered', (e) => delivered.push(e.key))
  const a = seen.submit('a')
  const b = seen.submit('b', { key: 'order-7' })
  p.calls[0].reject(new Error('down'))
  await tick()
  assert.equal(keys.length, 2, 'the failed send was sent again')
  assert.equal(keys[1][0], 'a')
  assert.equal(keys[1][1], keys[0][1], 'the retry has the first attempt\'s key')
  p.calls[1].resolve()
  await a
  p.calls[2].resolve()
  await b
  assert.deepEqual(keys[2], ['b', 'order-7'])
  assert.deepEqual(delivered, [keys[0][1], 'order-7'], "delivered events say the key")
  const other = new Dispatcher({ name: 'x', concurrencyLimit: 1, timeoutMs: null, send: (m, c) => keys.push([m, c.key]) })
  await other.submit('a')
  assert.notEqual(keys[3][1], keys[0][1], 'another dispatcher never gives the same default key')
  for (const bad of ['', 5, null, {}]) {
    assert.throws(() => d.submit('m', { key: bad }), (err) => err instanceof TypeError && err.option === 'key')
  }
  assert.equal(d.stats().submitted, 0, 'nothing was taken with a bad key')
})

test('after a crash each stored message keeps its key under its new number; new messages never take an old key', async () => {
  const store = keyedStore()
  const seen = []
  let deliver = true
  const send = (m, { key }) => {
    seen.push([m, key])
    return deliver ? undefined : new Promise(() => {})
  }
  const options = { name: 'p', concurrencyLimit: 1, store, send, timeoutMs: null }
  const first = await Dispatcher.open(options)
  await first.submit('x0')
  await first.submit('x1')
  deliver = false
  first.submit('a')
  first.submit('b', { key: 'mine' })
  await first.persisted()
  assert.deepEqual([...store.data.keys.values()].length, 2)
  // Crash: `first` is abandoned with 'a' in flight. The new process numbers from 0 again.
  deliver = true
  const second = await Dispatcher.open(options)
  await second.drained()
  const after = seen.slice(3)
  assert.deepEqual(after.map(([m]) => m), ['a', 'b'])
  assert.equal(after[0][1], seen[2][1], "'a' is sent again with its key")
  assert.equal(after[1][1], 'mine')
  await second.submit('y')
  const keys = seen.map(([, key]) => key)
  assert.equal(new Set(keys).size, 4 + 1, `x0, x1, a, mine and y: five keys (${keys})`)
  await second.persisted()
  assert.equal(store.data.messages.size, 0)
  assert.equal(store.data.keys.size, 0, 'a delivered message\'s key is forgotten with it')
})

test('a store that keeps no keys (one written before keys) still restarts: its messages get new keys', async () => {
  const store = memoryStore()
  store.data.messages.set(4, 'a')
  const seen = []
  const d = await Dispatcher.open({ name: 'p', concurrencyLimit: 1, store, timeoutMs: null, send: (m, { key }) => void seen.push([m, key]) })
  await d.drained()
  assert.equal(seen.length, 1)
  assert.equal(typeof seen[0][1], 'string')
  const bad = { ...store, load: () => ({ snapshot: null, messages: [[0, 'a', 7]] }) }
  await assert.rejects(Dispatcher.open({ name: 'p', concurrencyLimit: 1, store: bad, send: () => {} }), (err) => err instanceof TypeError && err.option === 'store')
})

// From the hostile review of issue 21.

test('a message stored without a key gets one at a graceful restart, stored, so that a crash after keeps it', async () => {
  const store = keyedStore()
  const options = { name: 'p', concurrencyLimit: 1, store, timeoutMs: null }
  const first = await Dispatcher.open({ ...options, send: () => {} })
  first.forceOpen()
  first.submit('a')
  await first.close()
  store.data.keys.clear() // as a version before keys left it
  const seen = []
  const second = await Dispatcher.open({ ...options, send: (m, { key }) => seen.push([m, key]) && new Promise(() => {}) })
  second.release()
  await second.persisted()
  assert.equal(seen.length, 1)
  assert.deepEqual([...store.data.keys.values()], [seen[0][1]], 'the new key is stored')
  // Crash with 'a' in flight: it comes back with that key, not another new one.
  const third = await Dispatcher.open({ ...options, send: (m, { key }) => void seen.push([m, key]) })
  await third.drained()
  assert.deepEqual(seen[1], ['a', seen[0][1]])
})

test('messages a crash restart drops for maxMessages are dropped events that open()\'s caller hears, with their keys', async () => {
  const store = keyedStore()
  for (const [seq, m, key] of [[0, 'a', 'KA'], [1, 'b', 'KB'], [2, 'c', 'KC'], [3, 'd', 'KD']]) store.add(seq, m, key)
  const sent = []
  const d = await Dispatcher.open({ name: 'p', concurrencyLimit: 1, maxMessages: 2, overflow: 'dropOldest', store, timeoutMs: null, send: (m) => sent.push(m) && new Promise(() => {}) })
  const dropped = []
  d.on('dropped', (e) => dropped.push([e.message, e.key]))
  // open() announces on a 0 ms timer set before this one: timers of one delay fire in order.
  await new Promise((resolve) => setTimeout(resolve, 0))
  assert.ok(dropped.length >= 1, 'a listener attached after open() hears what was dropped')
  assert.equal(dropped.length + 2, 4, `two kept, the rest dropped and told (${JSON.stringify(dropped)}, sent ${sent})`)
  for (const [message, key] of dropped) assert.equal(key, `K${message.toUpperCase()}`)
})

test('submit options must be an object', () => {
  const { d } = dispatcher()
  for (const bad of ['key', 5, null]) {
    assert.throws(() => d.submit('m', bad), (err) => err instanceof TypeError && err.option === 'options')
  }
  assert.equal(d.stats().submitted, 0)
})
