'use strict'
// A redis-server on loopback for the group tests: a free port, and a server
// started on it once it says it is ready. (Run as a test file, it does
// nothing.)

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

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

/**
 * A redis-server with AOF (as an outbox's Redis runs) in a folder of its
 * own, for one test file: `{ port, dir, server }`, started before its tests
 * and stopped (the folder removed) after them. `server` may be replaced (a
 * restart on the same port and folder).
 */
function aofRedisForTests(prefix) {
  const { before, after } = require('node:test')
  const redis = { port: 0, dir: fs.mkdtempSync(path.join(os.tmpdir(), prefix)), server: null }
  before(async () => {
    redis.port = await freePort()
    redis.server = await startRedis(redis.port, ['--appendonly', 'yes', '--dir', redis.dir])
  })
  after(() => {
    redis.server.kill()
    fs.rmSync(redis.dir, { recursive: true, force: true })
  })
  return redis
}

module.exports = { aofRedisForTests, freePort, startRedis }
