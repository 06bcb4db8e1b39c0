'use strict'
// Local partner endpoints (seed 001): `POST /hooks/<partner>` with a JSON
// event `{ id }`. A partner can be taken down (it answers 503) and brought
// back. Each records the ids it accepted, in arrival order, and how many
// calls it got while down, so a run can check that every event arrived
// exactly once and in order, and what a sick partner had to take. Like a
// real webhook endpoint it deduplicates by the `Idempotency-Key` header (the
// Dispatcher's key, the same on every attempt and across restarts): an
// event sent again after an ambiguous outcome (a timeout, a crash) is
// answered 204 and counted in `duplicates`, not processed twice; `arrivals`
// keeps every id accepted, repeats included.
// `answers` (event id -> statuses) makes a partner answer an event with
// those statuses first, one a call (a 429, then a 400, ...).

const http = require('node:http')

function startPartners(names) {
  const partners = Object.fromEntries(names.map((name) => [name, { up: true, received: [], arrivals: [], keys: new Set(), duplicates: 0, callsWhileDown: 0, answers: new Map() }]))
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
        res.writeHead(503).end('down')
        return
      }
      const { id } = JSON.parse(body)
      const status = partner.answers.get(id)?.shift()
      if (status !== undefined) {
        res.writeHead(status, status === 429 ? { 'retry-after': '1' } : {}).end()
        return
      }
      partner.arrivals.push(id)
      const key = req.headers['idempotency-key']
      if (key !== undefined && partner.keys.has(key)) {
        partner.duplicates += 1
        res.writeHead(204).end()
        return
      }
      if (key !== undefined) partner.keys.add(key)
      partner.received.push(id)
      res.writeHead(204).end()
    })
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const base = `http://127.0.0.1:${server.address().port}/hooks/`
      resolve({
        partners,
        url: (name) => base + name,
        close: () => new Promise((done) => server.close(done)),
      })
    })
  })
}

module.exports = { startPartners }
