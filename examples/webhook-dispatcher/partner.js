'use strict'
// Local partner endpoints (seed 001): `POST /hooks/<partner>` with a JSON
// event. A partner can be taken down (it answers 503) and brought back.
// Like a real webhook endpoint it deduplicates by the `Idempotency-Key`
// header (the event's key in the outbox: the same on every attempt and in
// every process): an event sent again after an ambiguous outcome (a crash,
// a removal Redis did not confirm) is answered 204 and counted in
// `duplicates`, never processed twice. Each partner records what it
// processed, in arrival order (`received`: the event, its key, the sender
// process and the lease epoch it came under), every repeat (`duplicates`),
// and both in the order they came (`arrivals`).
// `answers` (key -> statuses) makes a partner answer an event with those
// statuses first, one a call (a 429, then a 400, ...).

const http = require('node:http')

function startPartners(names) {
  const partners = Object.fromEntries(
    names.map((name) => [
      name,
      {
        up: true,
        received: [],
        arrivals: [],
        keys: new Map(),
        duplicates: [],
        callsWhileDown: 0,
        callsWhileDownBy: {}, // sender -> calls
        answers: new Map(),
        waiters: [],
      },
    ]),
  )
  const server = http.createServer((req, res) => {
    const match = /^\/hooks\/([^/]+)$/.exec(req.url)
    const partner = match && partners[match[1]]
    if (req.method !== 'POST' || !partner) {
      res.writeHead(404).end()
      return
    }
    let body = ''
    req.on('data', (chunk) => (body += chunk))
    req.on('end', () => {
      if (!partner.up) {
        partner.callsWhileDown += 1
        const by = req.headers['x-sender']
        partner.callsWhileDownBy[by] = (partner.callsWhileDownBy[by] ?? 0) + 1
        res.writeHead(503).end('down')
        return
      }
      const key = req.headers['idempotency-key']
      const status = partner.answers.get(key)?.shift()
      if (status !== undefined) {
        res.writeHead(status, status === 429 ? { 'retry-after': '1' } : {}).end()
        return
      }
      const arrival = {
        event: JSON.parse(body),
        key,
        sender: req.headers['x-sender'],
        epoch: Number(req.headers['halfopen-epoch']),
      }
      partner.arrivals.push(arrival)
      if (partner.keys.has(key)) partner.duplicates.push(arrival)
      else {
        partner.keys.set(key, arrival)
        partner.received.push(arrival)
      }
      res.writeHead(204).end()
      for (const wake of partner.waiters.splice(0)) wake()
    })
  })
  server.keepAliveTimeout = 60_000
  /** Resolves once `check()` holds, checked at each event the partner processes. */
  const until = async (name, check) => {
    while (!check()) await new Promise((resolve) => partners[name].waiters.push(resolve))
  }
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const base = `http://127.0.0.1:${server.address().port}/hooks/`
      resolve({
        partners,
        base,
        until,
        url: (name) => base + name,
        close: () => {
          server.closeAllConnections()
          return new Promise((done) => server.close(done))
        },
      })
    })
  })
}

module.exports = { startPartners }
