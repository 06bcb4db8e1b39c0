'use strict'
// Seed 001's sender, one process of a fleet: an halfopen `Outbox` per
// partner. Any process submits (the event is in Redis when `submit`
// fulfils); the one holding a partner's lease delivers that partner's log,
// in order, through seed 001's breaker (a call slower than 10 s is a
// failure, 5 consecutive failures open it for 10 s, then one probe) and one
// send in flight. `scale` shrinks the seed's times (0.05: 10 s -> 500 ms).
//
// As a program it is run (forked, with an IPC channel) by run.js:
//   node sender.js <name> <redis-port> <partner-url-base> <partners>
// Told `{ submit: { partner, from, count } }`, it submits events
// `{ from: name, n }` (key `name:n`) for n in [from, from + count), in
// batches of 1,000, and answers `{ submitted: { partner, count, refused,
// ambiguous, ambiguousKeys } }`: a batch Redis refused or did not answer
// is submitted again, with the same keys, until it is stored (`ambiguous`:
// those that may have been stored twice; the partner deduplicates them).
// It says `{ acquired }` (with `breaker`: whether it resumed the breaker
// state the last holder left), `{ lost }` (with the deliveries whose removal
// Redis had not confirmed: they will be sent again), `{ opened }` (with the
// sends it made to that partner since its grant),
// `{ timedOut }` (a send given up at its timeout) and `{ refusedFirst }`
// (its first submit refused since `{ arm: true }`, which it answers
// `{ armed: true }`) as they happen. Told
// `{ close: true }` it closes (the next holder takes over at once) and
// answers `{ closed: { unremoved, lapsed } }`.

const http = require('node:http')
const Redis = require('ioredis')
const { Outbox, StoreUnavailableError } = require('halfopen')

const SEED_MS = 10_000

/** POSTs `event` as JSON to `url`; rejects on a status other than 2xx, or when `signal` aborts. */
function post(agent, url, event, headers, signal) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        signal,
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        res.resume()
        res.on('end', () =>
          res.statusCode < 300
            ? resolve()
            : reject(
                Object.assign(new Error(`HTTP ${res.statusCode}`), {
                  status: res.statusCode,
                }),
              ),
        )
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(event))
  })
}

/**
 * Whether a failed POST says the partner is unwell (a timeout, a network
 * error, a 5xx, or a 408/425/429: try again later) rather than that it
 * refuses this event (any other 4xx: sending it again cannot help, so it is
 * a dead letter at once, written to the partner's dead-letter stream).
 */
function partnerUnwell(err) {
  const s = err.status
  return !(s >= 400 && s < 500) || s === 408 || s === 425 || s === 429
}

/**
 * An Outbox for each partner (`urls`: name -> endpoint) on `redis`. Each
 * send carries the event's key as its `Idempotency-Key` (the same on every
 * attempt, in every process: the partner deduplicates by it) and the
 * lease's epoch. `watch(partner, outbox)` is called as each opens (its
 * listeners then hear its first grant); `onTimeout(partner, key)` when a
 * send is given up at its timeout (it may have reached the partner: an
 * ambiguous outcome, sent again).
 */
async function openOutboxes({ redis, urls, name = `pid-${process.pid}`, scale = 1, pageSize, watch = () => {}, onTimeout = () => {} }) {
  const seed = Math.round(SEED_MS * scale)
  const outboxes = {}
  for (const [partner, url] of Object.entries(urls)) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    outboxes[partner] = await Outbox.open({
      redis,
      partner,
      preset: 'partnerWebhook',
      slowCallMs: seed,
      openTimeoutMs: seed,
      maxOpenTimeoutMs: seed,
      concurrencyLimit: 1,
      timeoutMs: seed,
      pageSize,
      isFailure: partnerUnwell,
      send: (event, { signal, key, epoch }) => {
        outboxes[partner].calls += 1
        // A send the dispatcher gave up on (its timeout) may have reached the partner: told.
        signal.addEventListener('abort', () => onTimeout(partner, key), {
          once: true,
        })
        return post(
          agent,
          url,
          event,
          {
            'idempotency-key': key,
            'halfopen-epoch': String(epoch),
            'x-sender': name,
          },
          signal,
        )
      },
    })
    outboxes[partner].agent = agent
    outboxes[partner].calls = 0 // sends made since the grant
    // Before this turn ends: a listener added now hears the first grant.
    watch(partner, outboxes[partner])
  }
  return outboxes
}

/**
 * Submits `events` ([key, event] pairs) to `outbox`, 1,000 a turn, each
 * batch again (same keys) until Redis stored all of it, pausing `pauseMs`
 * between tries. Calls `onRefused(err)` for each refusal. Resolves with
 * the count, the refusals, and the keys refused without an answer (which
 * Redis may have stored: then twice).
 */
async function submitAll(outbox, events, { pauseMs = 50, onRefused = () => {} } = {}) {
  let refused = 0
  const ambiguousKeys = []
  for (let i = 0; i < events.length; i += 1_000) {
    let batch = events.slice(i, i + 1_000)
    while (batch.length > 0) {
      const results = await Promise.all(
        batch.map(([key, event]) =>
          outbox.submit(event, { key }).then(
            () => null,
            (err) => {
              if (!(err instanceof StoreUnavailableError)) throw err
              refused += 1
              if (err.ambiguous) ambiguousKeys.push(key)
              onRefused(err)
              return [key, event]
            },
          ),
        ),
      )
      batch = results.filter((r) => r !== null)
      if (batch.length > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs))
    }
  }
  return {
    count: events.length,
    refused,
    ambiguous: ambiguousKeys.length,
    ambiguousKeys,
  }
}

async function main() {
  const [name, port, base, partners] = process.argv.slice(2)
  const redis = new Redis({
    host: '127.0.0.1',
    port: Number(port),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 50,
  })
  redis.on('error', () => {}) // each failed command says so (a StoreUnavailableError, a 'storeError' event)
  await new Promise((resolve) => redis.once('ready', resolve))
  const urls = Object.fromEntries(partners.split(',').map((p) => [p, base + p]))
  const watch = (partner, outbox) => {
    outbox.on('acquired', ({ epoch, breaker }) => {
      outbox.calls = 0
      process.send({ acquired: { partner, epoch, breaker } })
    })
    outbox.on('lost', ({ reason }) =>
      process.send({
        lost: { partner, reason, removing: outbox.stats().removing },
      }),
    )
    outbox.on('open', () => process.send({ opened: { partner, calls: outbox.calls } }))
  }
  const onTimeout = (partner, key) => process.send({ timedOut: { partner, key } })
  const outboxes = await openOutboxes({
    redis,
    urls,
    name,
    scale: 0.05,
    watch,
    onTimeout,
  })
  let refusedYet = true // armed by `{ arm: true }`
  process.on('message', async (m) => {
    if (m.arm) {
      refusedYet = false
      process.send({ armed: true })
    }
    if (m.submit) {
      const { partner, from, count } = m.submit
      const events = Array.from({ length: count }, (_, i) => [`${name}:${from + i}`, { from: name, n: from + i }])
      const onRefused = () => refusedYet || ((refusedYet = true), process.send({ refusedFirst: true }))
      const done = await submitAll(outboxes[partner], events, { onRefused })
      process.send({ submitted: { partner, ...done } })
    } else if (m.close) {
      let unremoved = 0
      let lapsed = false
      for (const outbox of Object.values(outboxes)) {
        const closed = await outbox.close()
        unremoved += closed.unremoved
        lapsed ||= closed.lapsed
        outbox.agent.destroy()
      }
      redis.disconnect()
      process.send({ closed: { unremoved, lapsed } }, () => process.exit(0))
    }
  })
  process.on('disconnect', () => process.exit(0))
  process.send({ ready: true })
}

if (require.main === module) main()

module.exports = { openOutboxes, partnerUnwell, submitAll }
