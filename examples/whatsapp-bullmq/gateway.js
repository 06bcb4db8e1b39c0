'use strict'
// A local stand-in for a WhatsApp gateway instance (seed 000): it accepts
// messages up to a rate, answers 429 beyond it, and after sustained abuse
// (too many 429s in a second) suspends the instance for a while, answering
// 503 to everything. A message it takes is answered after `latencyMs` (seed
// 000's gateway takes 2 s; scaled down here), so that how many requests it
// gets per second depends on how many are in flight. It records every
// message it delivers, so a run can check that each one arrived exactly once.

const http = require('node:http')

function startGateway({ ratePerSecond = 300, abuseLimit = 150, suspendMs = 3000, latencyMs = 0 } = {}) {
  const delivered = new Map() // message id -> times delivered
  const instances = new Map() // instance id -> { tokens, refilledAt, rejects: [times], suspendedUntil }
  const stats = { accepted: 0, throttled: 0, suspended: 0, suspensions: 0 }

  function instance(id, now) {
    let s = instances.get(id)
    if (!s) instances.set(id, (s = { tokens: ratePerSecond, refilledAt: now, rejects: [], suspendedUntil: 0 }))
    s.tokens = Math.min(ratePerSecond, s.tokens + ((now - s.refilledAt) * ratePerSecond) / 1000)
    s.refilledAt = now
    return s
  }

  const server = http.createServer((req, res) => {
    const match = /^\/v1\/instances\/([^/]+)\/messages$/.exec(req.url)
    if (req.method !== 'POST' || !match) {
      res.writeHead(404).end()
      return
    }
    let body = ''
    req.on('data', (chunk) => (body += chunk))
    req.on('end', () => {
      const now = Date.now()
      const s = instance(match[1], now)
      if (now < s.suspendedUntil) {
        stats.suspended += 1
        res.writeHead(503).end('instance suspended')
        return
      }
      if (s.tokens < 1) {
        stats.throttled += 1
        s.rejects = s.rejects.filter((t) => now - t < 1000)
        s.rejects.push(now)
        if (s.rejects.length > abuseLimit) {
          s.suspendedUntil = now + suspendMs
          stats.suspensions += 1
          s.rejects = []
        }
        res.writeHead(429).end('rate limited')
        return
      }
      s.tokens -= 1
      const { id } = JSON.parse(body)
      delivered.set(id, (delivered.get(id) || 0) + 1)
      stats.accepted += 1
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"sent"}')
      if (latencyMs > 0) setTimeout(answer, latencyMs)
      else answer()
    })
  })

  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${server.address().port}/v1`, delivered, stats, close: () => server.close() }),
    ),
  )
}

module.exports = { startGateway }
