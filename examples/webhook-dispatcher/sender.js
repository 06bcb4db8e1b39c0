'use strict'
// Seed 001's sender: one halfopen Dispatcher per partner, with the seed's
// breaker (a call slower than 10 s is a failure, 5 consecutive failures open
// it for 10 s, then one probe) and one send in flight per partner (so each
// partner gets its events in order). Events a partner cannot take now are
// retained, in Redis (halfopen/redis-store), and sent in order when it is
// back; nothing is lost, even across a restart. `scale` shrinks the seed's
// times for a test (0.05: 10 s becomes 500 ms).
//
// As a program (`node sender.js <redis-port> <partner-url-base> <partners>
// <first-id> <count>`) it submits `count` events to each partner, runs until
// SIGTERM, then closes its dispatchers (saving their state) and exits; it
// prints a JSON line when the events are stored and when it is drained.

const http = require('node:http')
const Redis = require('ioredis')
const { DeadLetterError, Dispatcher } = require('halfopen')
const { RedisStore } = require('halfopen/redis-store')

const SEED_MS = 10_000

/** POSTs `event` as JSON to `url` with `key` as its Idempotency-Key; rejects on a status other than 2xx, or when `signal` aborts. */
function post(agent, url, event, signal, key) {
  const headers = { 'content-type': 'application/json', 'idempotency-key': key }
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, signal, headers }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode < 300 ? resolve() : reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode }))))
    })
    req.on('error', reject)
    req.end(JSON.stringify(event))
  })
}

/**
 * Whether a failed POST says the partner is unwell (a timeout, a network
 * error, a 5xx, or a 408/425/429: try again later) rather than that it
 * refuses this event (any other 4xx: sending it again cannot help, so it is
 * a dead letter at once).
 */
function partnerUnwell(err) {
  const s = err.status
  return !(s >= 400 && s < 500) || s === 408 || s === 425 || s === 429
}

/** A dead letter, told: one JSON line on stderr (`onDead` replaces it). */
function logDead({ message, reason, attempts }) {
  process.stderr.write(`${JSON.stringify({ dead: message, reason, attempts })}\n`)
}

/**
 * A Dispatcher for each partner (`urls`: name -> endpoint), its messages
 * kept in Redis. Its clock is the wall clock (`sharedClock`): a restart
 * counts the time it took (an open period that ended meanwhile has ended).
 */
async function startSender({ redis, urls, scale = 1, maxMessages = 100_000, onDead = logDead }) {
  const seed = Math.round(SEED_MS * scale)
  const dispatchers = {}
  for (const [name, url] of Object.entries(urls)) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    dispatchers[name] = await Dispatcher.open({
      name,
      preset: 'partnerWebhook',
      slowCallMs: seed,
      openTimeoutMs: seed,
      maxOpenTimeoutMs: seed,
      concurrencyLimit: 1,
      timeoutMs: seed,
      maxMessages,
      clock: Date.now,
      sharedClock: true,
      isFailure: partnerUnwell,
      store: new RedisStore(redis, { key: `webhooks:${name}` }),
      // The key is the same on every attempt and across restarts: the
      // partner deduplicates by it (delivery is at least once).
      send: (event, { signal, key }) => post(agent, url, event, signal, key),
    })
    dispatchers[name].on('dead', onDead)
    dispatchers[name].agent = agent
  }
  return dispatchers
}

async function main() {
  const [port, base, names, first, count] = process.argv.slice(2)
  const redis = new Redis({ host: '127.0.0.1', port: Number(port) })
  const urls = Object.fromEntries(names.split(',').map((n) => [n, base + n]))
  const dispatchers = await startSender({ redis, urls, scale: 0.05 })
  for (const d of Object.values(dispatchers)) {
    // A dead letter is told by its event (logDead); anything else that ends a submission (a bound reached) here.
    for (let id = Number(first); id < Number(first) + Number(count); id++) {
      d.submit({ id }).catch((err) => err instanceof DeadLetterError || process.stderr.write(`${JSON.stringify({ refused: id, error: err.name })}\n`))
    }
  }
  await Promise.all(Object.values(dispatchers).map((d) => d.persisted()))
  console.log(JSON.stringify({ stored: true }))
  Promise.all(Object.values(dispatchers).map((d) => d.drained())).then(() => console.log(JSON.stringify({ drained: true })))
  process.on('SIGTERM', async () => {
    await Promise.all(Object.values(dispatchers).map((d) => d.close()))
    for (const d of Object.values(dispatchers)) d.agent.destroy()
    await redis.quit()
    console.log(JSON.stringify({ closed: true }))
    process.exit(0)
  })
}

if (require.main === module) main()

module.exports = { partnerUnwell, startSender }
