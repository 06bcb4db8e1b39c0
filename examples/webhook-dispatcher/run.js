'use strict'
// Seed 001's story for real: a redis-server, two local partner endpoints,
// and the sender (sender.js). Partner A goes down; 100,000 events (half for
// each partner) are submitted meanwhile; B stays healthy and gets its half
// while A is still down; then A comes back and gets its backlog, in order.
// Prints a summary (`--json`: one JSON line, for the test). Times are seed
// 001's scaled by 0.05 (10 s -> 500 ms).
//
//   node run.js [--events 100000] [--json]

const Redis = require('ioredis')
const { startPartners } = require('./partner.js')
const { startRedis } = require('./redis.js')
const { startSender } = require('./sender.js')

const MAX_MESSAGES = 60_000

function arg(name, fallback) {
  const i = process.argv.indexOf(name)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}

/** Ids in arrival order -> delivered (distinct), twice or more, out of order. */
function check(received, expected) {
  const seen = new Set()
  let twice = 0
  let outOfOrder = 0
  let last = -1
  for (const id of received) {
    if (seen.has(id)) twice += 1
    seen.add(id)
    if (id < last) outOfOrder += 1
    last = id
  }
  const missing = expected.filter((id) => !seen.has(id)).length
  return { delivered: seen.size, twice, outOfOrder, missing }
}

async function main() {
  const events = arg('--events', 100_000)
  const half = events / 2
  const redis = await startRedis()
  const client = new Redis({ host: '127.0.0.1', port: redis.port })
  const web = await startPartners(['a', 'b'])
  const sender = await startSender({ redis: client, urls: { a: web.url('a'), b: web.url('b') }, scale: 0.05, maxMessages: MAX_MESSAGES })
  const { a, b } = sender
  const opens = { a: 0, b: 0 }
  for (const [name, d] of Object.entries(sender)) d.on('open', () => (opens[name] += 1))
  let maxHeld = 0

  // A goes down; the events come, A's and B's interleaved, a thousand per turn.
  web.partners.a.up = false
  const started = performance.now()
  const promises = []
  for (let id = 0; id < half; id++) {
    promises.push(a.submit({ id }))
    promises.push(b.submit({ id }))
    if (id % 1000 === 999) {
      maxHeld = Math.max(maxHeld, a.stats().retained + a.stats().inFlight)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  maxHeld = Math.max(maxHeld, a.stats().retained + a.stats().inFlight)
  await b.drained()
  const bDone = performance.now() - started
  const aStillDown = !web.partners.a.up
  const bDeliveredWhileADown = web.partners.b.received.length
  // A comes back: its backlog drains, in order, one send at a time.
  web.partners.a.up = true
  const back = performance.now()
  await Promise.all(promises)
  const drainMs = performance.now() - back
  await Promise.all([a.persisted(), b.persisted()])
  const stored = await client.hlen('webhooks:a:messages')
  const result = {
    events,
    maxMessages: MAX_MESSAGES,
    a: {
      ...check(web.partners.a.received, [...Array(half).keys()]),
      duplicates: web.partners.a.duplicates,
      callsWhileDown: web.partners.a.callsWhileDown,
      opens: opens.a,
      maxHeld,
      stats: a.stats(),
    },
    b: {
      ...check(web.partners.b.received, [...Array(half).keys()]),
      duplicates: web.partners.b.duplicates,
      opens: opens.b,
      deliveredWhileADown: aStillDown ? bDeliveredWhileADown : 0,
      doneMs: Math.round(bDone),
    },
    drainMs: Math.round(drainMs),
    storedAfter: stored,
  }
  for (const d of [a, b]) {
    await d.close()
    d.agent.destroy()
  }
  await client.quit()
  await web.close()
  redis.stop()
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(result))
    return
  }
  console.log(`seed 001 with halfopen: ${events} events, partner A down until B had all of its ${half}`)
  console.log(`  A: delivered ${result.a.delivered}/${half}, twice ${result.a.twice} (sent again and deduplicated by key: ${result.a.duplicates}), out of order ${result.a.outOfOrder}; ` +
    `${result.a.callsWhileDown} calls while down (${result.a.opens} opens); at most ${maxHeld} held (bound ${MAX_MESSAGES}); backlog drained in ${result.drainMs} ms`)
  console.log(`  B: delivered ${result.b.delivered}/${half} while A was down, twice ${result.b.twice} (deduplicated by key: ${result.b.duplicates}), out of order ${result.b.outOfOrder}, opens ${result.b.opens}, all in ${result.b.doneMs} ms`)
  console.log(`  messages left in Redis: ${stored}`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
