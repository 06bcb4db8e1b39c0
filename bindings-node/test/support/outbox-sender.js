'use strict'
// One sender process of an outbox, driven by outbox-fleet.test.js over IPC.
// Arguments: the Redis port, the partner's URL (http:// or tcp://), the
// partner's name, how many events to submit. It submits them ({ from: pid, n }, key pid-n), says
// `{ what: 'submitted', retried }` (submits it made again), and delivers whenever it holds the
// lease, saying `acquired` and `lost`, and `timedOut` (with its key) for a send given up at
// its timeout; `{ what: 'close' }` closes it.

// Driven over IPC (forked by a Node test), or over stdio with a fifth
// argument `stdio` (run by a Python test): messages as JSON lines on
// stdout, commands as JSON lines on stdin. Run as a test file, it does
// nothing.
const ipc = typeof process.send === 'function'
const stdio = process.argv[6] === 'stdio'
if (!ipc && !stdio) process.exit(0)
const say = ipc ? (m) => process.send(m) : (m) => process.stdout.write(`${JSON.stringify(m)}\n`)
function onCommand(handle) {
  if (ipc) return process.on('message', handle)
  let buffered = ''
  process.stdin.on('data', (d) => {
    buffered += d
    for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
      handle(JSON.parse(buffered.slice(0, i)))
      buffered = buffered.slice(i + 1)
    }
  })
}

const net = require('node:net')
const Redis = require('ioredis')
const { Outbox } = require('../..')

const [port, url, partner, count] = process.argv.slice(2)
const redis = new Redis({ host: '127.0.0.1', port: Number(port), enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
redis.on('error', () => {})

/** The partner over HTTP: a POST, answered 200. */
async function httpSend(event, { signal, key, epoch }) {
  signal?.addEventListener('abort', () => say({ what: 'timedOut', key }))
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(event), headers: { 'x-key': key, 'x-epoch': String(epoch), 'x-pid': String(process.pid) }, signal })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`partner answered ${res.status}`)
}

/**
 * The partner over one TCP connection (a `tcp://` URL; ten times cheaper
 * than HTTP, for the 100,000-event test): a JSON line each, answered by
 * `ok` or why not, in order. An aborted send keeps its place in line.
 */
function tcpSender() {
  const { hostname, port: partnerPort } = new URL(url)
  let socket = null
  const waiting = []
  const connect = () => {
    socket = net.connect(Number(partnerPort), hostname)
    socket.setNoDelay(true)
    let buffered = ''
    socket.on('data', (d) => {
      buffered += d
      for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
        const answer = buffered.slice(0, i)
        buffered = buffered.slice(i + 1)
        const w = waiting.shift()
        if (answer === 'ok') w.resolve()
        else w.reject(new Error(`partner answered ${answer}`))
      }
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      socket = null
      for (const w of waiting.splice(0)) w.reject(new Error('the partner closed the connection'))
    })
  }
  return (event, { signal, key, epoch }) =>
    new Promise((resolve, reject) => {
      if (socket === null) connect()
      waiting.push({ resolve, reject })
      signal?.addEventListener('abort', () => {
        say({ what: 'timedOut', key })
        reject(signal.reason)
      })
      socket.write(`${JSON.stringify({ key, epoch, pid: process.pid, event })}\n`)
    })
}

async function main() {
  await new Promise((resolve) => redis.once('ready', resolve))
  const outbox = await Outbox.open({
    redis,
    partner,
    send: url.startsWith('tcp:') ? tcpSender() : httpSend,
    concurrencyLimit: 1,
    failureThreshold: 5,
    openTimeoutMs: 200,
    maxOpenTimeoutMs: 200,
    timeoutMs: 300,
    storeTimeoutMs: 500,
    pollIntervalMs: 50,
    pageSize: 200,
  })
  outbox.on('acquired', ({ epoch }) => say({ what: 'acquired', epoch }))
  outbox.on('lost', ({ reason }) => say({ what: 'lost', reason }))
  onCommand(async (m) => {
    if (m.what === 'close') {
      const closed = await outbox.close()
      say({ what: 'closed', ...closed })
    }
  })
  // In batches of 500 (one pipeline each); a batch Redis did not store (or
  // did not say) is submitted again with the same keys, as a sender
  // would: the partner deduplicates by key.
  let retried = 0
  for (let from = 0; from < Number(count); from += 500) {
    let batch = Array.from({ length: Math.min(500, Number(count) - from) }, (_, i) => from + i)
    while (batch.length > 0) {
      const results = await Promise.all(batch.map((n) => outbox.submit({ from: process.pid, n }, { key: `${process.pid}-${n}` }).then(() => null, () => n)))
      batch = results.filter((n) => n !== null)
      retried += batch.length
    }
  }
  say({ what: 'submitted', retried })
}
process.on('disconnect', () => process.exit(0))
if (stdio) process.stdin.on('end', () => process.exit(0))
main()
