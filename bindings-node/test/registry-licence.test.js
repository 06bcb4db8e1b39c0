'use strict'
// A Registry's names under their licences (lib/registry.js): calls admitted
// without crossing into the addon must still keep their name from eviction,
// count exactly once, and survive what replaces or evicts breakers (a new
// name at capacity, `configure`, `restore`). The name's own behaviour, call
// by call, is test/differential.test.js's ("keyed sequences"); this covers
// what those sequences never meet: a registry that evicts.
//
// Time is `t`, the registry's clock; calls are promises settled by hand.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Registry, RegistryFullError } = require(process.env.HALFOPEN_PACKAGE || '..')

let t = 0
const clock = () => t
const turn = () => new Promise((resolve) => setImmediate(resolve))

/** Starts a call of `key` that settles when its `resolve` or `reject` is called. */
function pending(key) {
  const call = {}
  call.promise = key.execute(
    () =>
      new Promise((resolve, reject) => {
        call.resolve = resolve
        call.reject = reject
      }),
  )
  call.promise.catch(() => {})
  return call
}

test('at capacity, a new name evicts one: the other names keep their licences, the evicted one asks again', async () => {
  t = 1000
  const r = new Registry({ clock, capacity: 3 })
  // The names whose calls crossed into the addon (a licence's calls do not).
  const crossed = []
  const acquire = r._native.acquire.bind(r._native)
  r._native.acquire = (name, now) => {
    crossed.push(name)
    return acquire(name, now)
  }
  const hot = r.get('hot')
  for (const name of ['hot', 'x', 'y']) await r.get(name).execute(() => 'made')
  await hot.execute(() => 'licensed')
  crossed.length = 0
  // Ten new names, each evicting the least recently used idle one (never
  // "hot", used between them): "hot" never crosses again.
  for (let i = 0; i < 10; i++) {
    t += 1
    await r.get(`new-${i}`).execute(() => 'new')
    await hot.execute(() => 'still licensed')
  }
  assert.equal(r.evictions, 10)
  assert.deepEqual(
    crossed,
    Array.from({ length: 10 }, (_, i) => `new-${i}`),
  )
  const m = hot.metrics()
  assert.equal(m.admitted, 12)
  assert.equal(m.successes, 12)
  // An evicted name starts again, crossing for its new breaker.
  crossed.length = 0
  assert.equal(await r.get('x').execute(() => 'back'), 'back')
  assert.deepEqual(crossed, ['x'])
  assert.equal(r.get('x').metrics().admitted, 1)
})

// A name whose holder was dropped (a call's options, a clock or a listener
// ran between its holder's lookup and its call) brings its breaker back
// through that holder, which may evict another name's: its holder must go
// too (a hostile review's cases).
test('a name brought back by a dropped holder\'s call: the name it evicted asks again', async () => {
  for (const via of ['options', 'clock']) {
    let hook
    const r = new Registry({
      capacity: 2,
      clock: () => {
        const h = hook
        hook = undefined
        h?.()
        return 1000
      },
    })
    await r.get('A').execute(() => 'a')
    await r.get('B').execute(() => 'b')
    await r.get('B').execute(() => 'b, licensed')
    // While A's call is asked for, C takes A's place; A's call then brings
    // A back, evicting B (the least recently used idle one).
    const c = r.get('C')
    const evictA = () => c.record(c.tryAcquire(), 'success')
    if (via === 'options') {
      const options = {
        get fallback() {
          evictA()
          return undefined
        },
      }
      assert.equal(await r.get('A').execute(() => 'a again', options), 'a again')
    } else {
      hook = evictA
      const a = r.get('A')
      a.record(a.tryAcquire(), 'success')
    }
    assert.ok(!r.has('B'), via)
    for (let i = 0; i < 5; i++) await r.get('B').execute(() => 'b')
    assert.ok(r.has('B'), via)
    assert.equal(r.get('B').metrics().admitted, 5, via)
  }
})

test('evictions counted past 2^53 (a restored count): an evicted name still asks again', async () => {
  const r = new Registry({ clock, capacity: 1 })
  await r.get('A').execute(() => 1)
  r.restore(JSON.stringify(r.toJSON()).replace(/"evictions":\d+/, '"evictions":9007199254740990'))
  await r.get('B').execute(() => 1)
  await r.get('C').execute(() => 1)
  await r.get('C').execute(() => 1)
  // Evicts C: 2^53 + 1, read as 2^53.
  await r.get('D').execute(() => 1)
  for (let i = 0; i < 5; i++) await r.get('C').execute(() => 1)
  assert.ok(r.has('C'))
  assert.equal(r.get('C').metrics().admitted, 5)
})

test('a name with licensed calls in flight is never evicted, and an idle one is', async () => {
  t = 1000
  const r = new Registry({ clock, capacity: 2 })
  const a = r.get('a')
  const b = r.get('b')
  // Made in this order: in the core's view "a" is used least recently, and
  // its later calls, under its licence, do not cross.
  await a.execute(() => 'made')
  await b.execute(() => 'made')
  t += 1
  const calls = [pending(a), pending(a), pending(a)]
  await b.execute(() => 'idle again')
  // A new name at capacity: "a" has three calls out, "b" none.
  assert.equal(await r.get('c').execute(() => 'c'), 'c')
  assert.equal(r.evictions, 1)
  assert.ok(r.has('a'), 'the name with calls in flight is kept')
  assert.ok(!r.has('b'), 'the idle one is evicted')
  for (const call of calls) call.resolve('done')
  await Promise.all(calls.map((c) => c.promise))
  await turn()
  const m = a.metrics()
  assert.equal(m.admitted, 4)
  assert.equal(m.successes, 4)
  assert.equal(m.inFlight, 0)
  // The evicted name starts again: a new breaker, whatever its handle.
  assert.equal(await b.execute(() => 'back'), 'back')
  assert.equal(b.metrics().admitted, 1)
  assert.equal(r.evictions, 2)
})

test('a registry full of names with licensed calls out refuses a new name, and counts those calls once', async () => {
  t = 5000
  const r = new Registry({ clock, capacity: 1 })
  const a = r.get('a')
  await a.execute(() => 'made')
  const call = pending(a)
  await assert.rejects(r.get('b').execute(() => 'never'), RegistryFullError)
  const refused = r.get('b').tryAcquire()
  assert.equal(refused.admitted, false)
  assert.equal(refused.reason, 'registry_full')
  call.resolve('done')
  await call.promise
  assert.deepEqual([a.metrics().admitted, a.metrics().successes, a.metrics().inFlight], [2, 2, 0])
  assert.equal(await r.get('b').execute(() => 'b'), 'b')
  assert.ok(!r.has('a'))
})

test("a name's calls out under a licence outlive a configure and a restore of the registry", async () => {
  t = 9000
  const r = new Registry({ clock, capacity: 1 })
  const a = r.get('a')
  await a.execute(() => 'made')
  const old = pending(a)
  r.configure('a', { failureThreshold: 1 })
  // The new breaker counts nothing of the old one's call, which still holds the name.
  assert.equal(a.metrics().admitted, 0)
  await assert.rejects(r.get('b').execute(() => 'never'), RegistryFullError)
  const kept = pending(a)
  r.restore(r.toJSON())
  await assert.rejects(r.get('b').execute(() => 'never'), RegistryFullError, 'restored: its calls out still hold it')
  old.reject(new Error('late'))
  kept.resolve('late too')
  await Promise.allSettled([old.promise, kept.promise])
  await turn()
  // The restored breaker: no report reached it, and it is idle again.
  assert.equal(a.getState(), 'CLOSED')
  assert.equal(await r.get('b').execute(() => 'b'), 'b')
})

test("a name's licensed calls and its permits (tryAcquire/record) count in their order", async () => {
  t = 20000
  const r = new Registry({ clock, failureThreshold: 2 })
  const a = r.get('a')
  await a.execute(() => 1)
  await a.execute(() => 2)
  const permit = a.tryAcquire()
  assert.equal(permit.admitted, true)
  a.record(permit, 'failure')
  await assert.rejects(a.execute(() => Promise.reject(new Error('503'))))
  assert.equal(a.getState(), 'OPEN')
  const m = a.metrics()
  assert.deepEqual([m.admitted, m.successes, m.failures, m.inFlight], [4, 2, 2, 0])
  // Open: refused under the licence to reject, each counted.
  await assert.rejects(a.execute(() => 'no'), { reason: 'open' })
  await assert.rejects(a.execute(() => 'no'), { reason: 'open' })
  assert.equal(a.metrics().rejections, 2)
  assert.throws(() => a.record(permit, 'success'), TypeError)
})

test('a restore that drops a name makes it anew, never at the cost of a name with licensed calls out', async () => {
  t = 30000
  const r = new Registry({ clock, capacity: 2 })
  const a = r.get('a')
  const b = r.get('b')
  await a.execute(() => 'made')
  const onlyA = r.toJSON()
  await b.execute(() => 'made')
  r.restore(onlyA)
  assert.ok(!r.has('b'))
  // "c" has a call out that the core knows of (a permit): it is busy.
  const permit = r.get('c').tryAcquire()
  assert.equal(permit.admitted, true)
  // "a": one call out under its licence, which the core has not been told of.
  await a.execute(() => 'licensed')
  a.metrics() // (everything handed over: "a" is idle in the core's view)
  const out = pending(a)
  // "b" needs a breaker again: the registry is full of busy names, so it is refused.
  await assert.rejects(b.execute(() => 'never'), RegistryFullError)
  assert.ok(r.has('a'), 'the name with a call out under its licence is kept')
  out.resolve('done')
  await out.promise
  const m = a.metrics()
  // (The restored breaker's counters go on from the snapshot's: its first call.)
  assert.deepEqual([m.admitted, m.successes, m.inFlight], [3, 3, 0])
  r.get('c').record(permit, 'success')
})

// What a hostile review found: a name's holder dropped (another name's
// eviction) with a call out, whose report then bypassed the name's new
// holder; and a new holder that forgot the latest reading.

/** A registry of 2 where "a" has a call out and its holder is dropped (x evicted for y). */
async function droppedWithACallOut(options) {
  const r = new Registry({ clock, capacity: 2, ...options })
  const a = r.get('a')
  await a.execute(() => 'made')
  const old = pending(a)
  await r.get('x').execute(() => 1)
  await r.get('y').execute(() => 1)
  assert.equal(r.evictions, 1)
  return { r, a, old }
}

test("a dropped holder's call that trips the breaker ends its name's licence to admit", async () => {
  t = 40000
  const { r, a, old } = await droppedWithACallOut({ failureThreshold: 1 })
  const opened = []
  r.on('open', (e) => opened.push(e.name))
  await a.execute(() => 'the new holder takes a licence to admit')
  old.reject(new Error('503'))
  await old.promise.catch(() => {})
  assert.deepEqual(opened, ['a'])
  let ran = 0
  await assert.rejects(
    a.execute(() => {
      ran += 1
    }),
    { reason: 'open' },
  )
  assert.equal(ran, 0, 'an open breaker admits nothing')
})

test("a dropped holder's report comes after what the name's new holder holds", async () => {
  t = 50000
  const options = { consecutiveFailures: 2, failureThreshold: null }
  const { a, old } = await droppedWithACallOut(options)
  t += 1
  await assert.rejects(a.execute(() => Promise.reject(new Error('first'))))
  t += 1
  await a.execute(() => 'a success, held by the new holder')
  t += 1
  old.reject(new Error('second, not in a row'))
  await old.promise.catch(() => {})
  assert.equal(a.getState(), 'CLOSED')
  assert.deepEqual([a.metrics().successes, a.metrics().failures, a.metrics().consecutiveFailures], [2, 2, 1])
})

test('a name\'s new holder starts from the latest reading (a clock that steps back)', async () => {
  t = 60000
  const r = new Registry({ clock, capacity: 2, failureThreshold: 1, openTimeoutMs: 5000 })
  const a = r.get('a')
  await assert.rejects(a.execute(() => Promise.reject(new Error('503'))))
  await r.get('x').execute(() => 1)
  await r.get('y').execute(() => 1)
  t -= 1000
  for (let i = 0; i < 2; i++) await assert.rejects(a.execute(() => 'no'), { retryAfterMs: 5000 })
})
