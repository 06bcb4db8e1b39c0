'use strict'
// A throwaway redis-server on a free local port, run as an outbox's Redis
// must be: with AOF (`appendonly yes`, `appendfsync everysec`), in a folder
// of its own. `kill()` is a crash (SIGKILL); `restart()` starts it again on
// the same port from its AOF. For the story (run.js) and the tests.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** redis-server on `port` with its AOF in `dir`, once it accepts connections. */
async function spawnRedis(port, dir) {
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir])
  const exited = new Promise((resolve) => server.once('exit', resolve))
  await new Promise((resolve, reject) => {
    server.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve())
    exited.then(() => reject(new Error('redis-server exited before it was ready')))
  })
  return { server, exited }
}

/** A redis-server with AOF: its `port`, `kill()` (SIGKILL, resolves once it is gone), `restart()`, `stop()`, `stopNow()`. */
async function startRedis() {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-example-'))
  let current = await spawnRedis(port, dir)
  return {
    port,
    kill: async () => {
      current.server.kill('SIGKILL')
      await current.exited
    },
    restart: async () => {
      current = await spawnRedis(port, dir)
    },
    stop: async () => {
      current.server.kill()
      await current.exited
      fs.rmSync(dir, { recursive: true, force: true })
    },
    /** At once (a process on its way out): SIGKILL, and its folder removed. */
    stopNow: () => {
      current.server.kill('SIGKILL')
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

module.exports = { startRedis }
