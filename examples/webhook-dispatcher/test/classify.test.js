'use strict'
// What a partner's answer means: a 429, a 408 or a 5xx is the partner being
// unwell (the event is kept and sent again: delivered in the end), any other
// 4xx is the partner refusing this event (a dead letter at once, and told:
// never lost silently).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startPartners } = require('../partner.js')
const { startRedis } = require('../redis.js')
const { startSender } = require('../sender.js')

test('429, 408 and 503 are retried and delivered; a 400 or 422 is a dead letter, reported', async () => {
  const [redisServer, partners] = await Promise.all([startRedis(), startPartners(['a'])])
  const redis = new Redis({ host: '127.0.0.1', port: redisServer.port })
  const dead = []
  try {
    const a = partners.partners.a
    a.answers.set(2, [429, 429])
    a.answers.set(4, [408])
    a.answers.set(5, [503])
    a.answers.set(7, [400])
    a.answers.set(8, [429, 422])
    const { a: d } = await startSender({ redis, urls: { a: partners.url('a') }, scale: 0.01, onDead: (e) => dead.push(e) })
    const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, id) => d.submit({ id })))
    await d.drained()
    assert.deepEqual(a.received, [0, 1, 2, 3, 4, 5, 6, 9], 'every event the partner did not refuse, once, in order')
    assert.deepEqual(
      dead.map((e) => [e.message.id, e.reason]),
      [
        [7, 'refused'],
        [8, 'refused'],
      ],
    )
    assert.deepEqual(
      settled.map((s) => s.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled'],
    )
    assert.equal(d.stats().dead, 2)
    await d.close()
    for (const x of [d]) x.agent.destroy()
  } finally {
    await redis.quit()
    redisServer.stop()
    await partners.close()
  }
})
