'use strict'
// What a partner's answer means: a 429, a 408 or a 5xx is the partner being
// unwell (the event stays in the log and is sent again: delivered in the
// end), any other 4xx is the partner refusing this event (a dead letter at
// once: told, and written to the partner's dead-letter stream with its
// reason, never lost silently).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startPartners } = require('../partner.js')
const { startRedis } = require('../redis.js')
const { openOutboxes } = require('../sender.js')

test('429, 408 and 503 are retried and delivered; a 400 or 422 is a dead letter, told and kept with its reason', {
  timeout: 60_000,
}, async () => {
  const [redisServer, web] = await Promise.all([startRedis(), startPartners(['a'])])
  const redis = new Redis({ host: '127.0.0.1', port: redisServer.port })
  let outbox = null
  try {
    const a = web.partners.a
    a.answers.set('e2', [429, 429])
    a.answers.set('e4', [408])
    a.answers.set('e5', [503])
    a.answers.set('e7', [400])
    a.answers.set('e8', [429, 422])
    ;({ a: outbox } = await openOutboxes({
      redis,
      urls: { a: web.url('a') },
      scale: 0.01,
    }))
    const dead = []
    outbox.on('dead', ({ key, reason }) => dead.push([key, reason]))
    for (let id = 0; id < 10; id++) await outbox.submit({ from: 'test', n: id }, { key: `e${id}` })
    await web.until('a', () => a.received.length === 8)
    assert.deepEqual(
      a.received.map((r) => r.event.n),
      [0, 1, 2, 3, 4, 5, 6, 9],
      'every event the partner did not refuse, once, in order',
    )
    assert.deepEqual(dead, [
      ['e7', 'refused'],
      ['e8', 'refused'],
    ])
    await outbox.close()
    const letters = await redis.xrange('halfopen:outbox:v1:{a}:dead', '-', '+')
    assert.deepEqual(
      letters.map(([, fields]) => [fields[fields.indexOf('k') + 1], fields[fields.indexOf('r') + 1]]),
      [
        ['e7', 'refused'],
        ['e8', 'refused'],
      ],
    )
    assert.equal(await redis.xlen('halfopen:outbox:v1:{a}:log'), 0)
  } finally {
    if (outbox !== null) {
      await outbox.close()
      outbox.agent.destroy()
    }
    await redis.quit()
    await redisServer.stop()
    await web.close()
  }
})
