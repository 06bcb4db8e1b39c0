'use strict'
// One sender process with a grouped Registry, driven by
// registry-group.test.js over IPC. Arguments: the Redis port, the group's
// name, how many names, how many calls, the flush interval (ms). It makes the calls (successes,
// spread over the names), then says `{ what: 'done', names }` once every
// name is in the group (the registry's own answer), and exchanges on until
// its parent disconnects.

const ipc = typeof process.send === 'function'
if (!ipc) process.exit(0)

const Redis = require('ioredis')
const { Registry } = require('../..')

const [port, group, names, calls, flushMs] = process.argv.slice(2)
const redis = new Redis({ host: '127.0.0.1', port: Number(port), enableOfflineQueue: false, maxRetriesPerRequest: 0 })
redis.on('error', () => {})
const registry = new Registry({ group: { redis, name: group, flushIntervalMs: Number(flushMs) } })

async function main() {
  for (let i = 0; i < Number(calls); i++) await registry.get(`n${i % Number(names)}`).execute(() => 1)
  // Every name in the group, and answered: its phase known.
  const answered = () => registry.groupStatus().names === Number(names) && registry.groupStatus().answered === Number(names)
  while (!answered()) await new Promise((resolve) => setTimeout(resolve, 20))
  process.send({ what: 'done', names: registry.groupStatus().names, degraded: registry.groupStatus().degraded })
}
process.on('disconnect', () => process.exit(0))
main()
