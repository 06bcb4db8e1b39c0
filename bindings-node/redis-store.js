'use strict'
// `halfopen/redis-store`: a Dispatcher's store on Redis, so that a restart
// loses no message. Give it an ioredis client (BullMQ's, or your own):
//
//   const { RedisStore } = require('halfopen/redis-store')
//   const store = new RedisStore(redis, { key: 'webhooks:partner-a' })
//   const dispatcher = await Dispatcher.open({ ...options, store })
//   ...
//   await dispatcher.close() // on SIGTERM: saves the state
//
// Layout: the messages in a hash `<key>:messages` (field: sequence number,
// value: the encoded message), their keys (what `send` deduplicates by) in
// `<key>:keys` (same fields), the dispatcher's state saved by `close()` in
// `<key>:state`. `load()` only reads; once `Dispatcher.open` has taken the
// state back it forgets it (`save(null)`), so a later crash cannot bring
// back a stale one.
//
// The operations of one event-loop turn go in one MULTI (in call order, on
// one connection: Redis applies them in that order), so submitting 10,000
// messages costs a handful of round trips, not 10,000.

const { SnapshotError } = require('./lib/errors.js')

/** A Dispatcher store on Redis (see above). */
class RedisStore {
  /**
   * `redis`: an ioredis client. `key`: the prefix of this dispatcher's keys.
   * `encode`/`decode`: a message to a string and back (JSON by default).
   */
  constructor(redis, { key = 'halfopen:dispatcher', encode = JSON.stringify, decode = JSON.parse } = {}) {
    if (redis === null || typeof redis !== 'object' || typeof redis.multi !== 'function') {
      throw new TypeError('RedisStore needs an ioredis client')
    }
    if (typeof key !== 'string' || key === '') throw new TypeError('key must be a non-empty string')
    if (typeof encode !== 'function' || typeof decode !== 'function') throw new TypeError('encode and decode must be functions')
    this.redis = redis
    this.key = key
    this._messages = `${key}:messages`
    this._keys = `${key}:keys`
    this._state = `${key}:state`
    this._encode = encode
    this._decode = decode
    this._batch = null
  }

  /** Keeps `message` under `seq`, with its `key` (if given). */
  add(seq, message, key) {
    const text = this._encode(message)
    if (typeof text !== 'string') throw new TypeError(`encode must return a string, got ${typeof text}`)
    const field = String(seq)
    if (key === undefined) return this._queue(['hset', this._messages, field, text])
    this._queue(['hset', this._messages, field, text])
    return this._queue(['hset', this._keys, field, key])
  }

  /** Forgets the message `seq` (delivered or given up). */
  remove(seq) {
    this._queue(['hdel', this._messages, String(seq)])
    return this._queue(['hdel', this._keys, String(seq)])
  }

  /** Forgets every message (before they are stored again under new numbers). */
  clear() {
    return this._queue(['del', this._messages, this._keys])
  }

  /** Saves the dispatcher's state (from `close()`); `null` forgets it (once taken back). */
  save(snapshot) {
    return this._queue(snapshot === null ? ['del', this._state] : ['set', this._state, JSON.stringify(snapshot)])
  }

  /**
   * The saved state, or null, and the messages `[seq, message, key]` in
   * order (`key` undefined for a message stored without one).
   * Reads only. A state or message that cannot be decoded is a
   * SnapshotError naming it (nothing is deleted: fix or remove it by hand).
   */
  async load() {
    await this._flushed()
    const results = await this.redis.multi().get(this._state).hgetall(this._messages).hgetall(this._keys).exec()
    for (const [err] of results) if (err) throw err
    const [[, state], [, hash], [, keys]] = results
    const messages = []
    for (const [field, text] of Object.entries(hash || {})) {
      const seq = Number(field)
      if (!Number.isSafeInteger(seq) || seq < 0 || String(seq) !== field) {
        throw new SnapshotError('corrupt', `${this._messages} holds the field ${JSON.stringify(field)}, not a sequence number`)
      }
      let message
      try {
        message = this._decode(text)
      } catch (err) {
        throw new SnapshotError('corrupt', `message ${seq} in ${this._messages} cannot be decoded: ${err.message}`)
      }
      // Own fields only: a field named like an Object.prototype member is not a key.
      const key = keys !== null && keys !== undefined && Object.hasOwn(keys, field) ? keys[field] : undefined
      if (key === '') throw new SnapshotError('corrupt', `${this._keys} holds an empty key for message ${seq}`)
      messages.push(key === undefined ? [seq, message] : [seq, message, key])
    }
    messages.sort((a, b) => a[0] - b[0])
    let snapshot = null
    if (state !== null) {
      try {
        snapshot = JSON.parse(state)
      } catch (err) {
        throw new SnapshotError('malformed', `${this._state} is not JSON: ${err.message}`)
      }
    }
    return { snapshot, messages }
  }

  /** Queues `command` into this turn's MULTI; resolves when Redis has applied it. */
  _queue(command) {
    if (this._batch === null) {
      const batch = { commands: [], done: null }
      batch.done = new Promise((resolve) => setImmediate(resolve)).then(() => {
        this._batch = null
        return this.redis
          .multi(batch.commands)
          .exec()
          .then((results) => {
            const failed = results.find(([err]) => err)
            if (failed) throw failed[0]
          })
      })
      this._batch = batch
    }
    this._batch.commands.push(command)
    return this._batch.done
  }

  /** Resolves when the operations queued so far are applied. */
  _flushed() {
    return this._batch === null ? Promise.resolve() : this._batch.done.catch(() => {})
  }
}

module.exports = { RedisStore }
