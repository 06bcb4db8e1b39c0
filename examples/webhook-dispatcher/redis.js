'use strict'
// A throwaway redis-server on a free local port (no persistence), for the
// story (run.js) and the restart test.

const { spawn } = require('node:child_process')
const net = require('node:net')

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** A redis-server ready to accept: its `port`, and `stop()`. */
async function startRedis() {
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  await new Promise((resolve) => server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  return { port, stop: () => server.kill() }
}

module.exports = { startRedis }
