'use strict'
// A redis-server on loopback for the group tests: a free port, and a server
// started on it once it says it is ready. (Run as a test file, it does
// nothing.)

const { spawn } = require('node:child_process')
const net = require('node:net')

/** A port free now on 127.0.0.1. */
async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** redis-server on `port` (no persistence; `args` more), once it accepts connections. */
async function startRedis(port, args = [], options = {}) {
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], options)
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  return server
}

module.exports = { freePort, startRedis }
