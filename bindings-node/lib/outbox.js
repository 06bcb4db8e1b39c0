'use strict'
// `Outbox`: retention across processes (issue 24). One durable, ordered
// log per partner on Redis (a Stream), which any process appends to, and
// one deliverer at a time, which reads it in pages and releases it through
// a `Dispatcher` (breaker, limit, pacing). The core's deliverer
// (src/outbox.rs, core/src/outbox/) decides everything: when to ask for
// the lease, whether a send may start, when to read a page, when to retry
// a removal. This file does the I/O, through the user's ioredis client:
// `XADD` (a turn's submits in one pipeline), the lease script, `XRANGE`,
// `XDEL`, and a dead letter's `XADD` + `XDEL` in one transaction.
//
// The breaker goes with the lease: every lease call of the holder carries
// its dispatcher's breaker state (core/src/outbox/carried.rs), and the next
// holder resumes from the last one left, aged by Redis's clock, if its
// breaker is configured the same; else it starts closed, with a warning.
//
// What is guaranteed (README, "Retention across processes"):
// - `submit` fulfils only once the event is stored in Redis; a store that
//   fails or is late rejects it with a StoreUnavailableError (`ambiguous`:
//   no answer came, it may be stored). Nothing is accepted that is not stored.
// - At least once, with the event's key (the caller's, or its id in the
//   log) the same on every attempt, in every process: exactly once with a
//   partner that deduplicates by it.
// - One process sends a partner's events at a time; the sends of one that
//   lost the lease are over before another starts. With `concurrencyLimit`
//   1, events are delivered in the log's order.

const { NativeOutbox, outboxDeadScript, outboxFields, outboxKeys, outboxLeaseScript } = require('../native.js')
const { readToReport } = require('./clock.js')
const { Dispatcher } = require('./dispatcher.js')
const { DeadLetterError, StoreUnavailableError, fromNative, typeError, warnCallback } = require('./errors.js')
const { publish } = require('./events.js')
const { checkName } = require('./options.js')
const { EventEmitter, emitWarning, performance, randomHex64 } = require('./platform.js')

/** The ioredis commands each client gets, defined once per client. */
const LEASE = 'halfopenOutboxLease'
const DEAD = 'halfopenOutboxDead'
const DEFINED = new WeakSet()

// (The reason and id fields of a dead letter are the dead-letter script's to write.)
const [FIELD_KEY, FIELD_PAYLOAD] = typeof outboxFields === 'function' ? outboxFields() : []

/** The outbox's own options (the rest are the dispatcher's). */
const OWN = { redis: true, partner: true, serializer: true, leaseMs: true, pageSize: true, pollIntervalMs: true, storeTimeoutMs: true }
/** Dispatcher options an outbox refuses: its log is the store, its pages the bound. */
const REFUSED = {
  store: 'absent: an Outbox keeps its events in Redis',
  size: 'absent: an Outbox sizes an event by its payload',
  maxBytes: 'absent: an Outbox holds at most two pages (and maxMessages) in memory',
  overflow: 'absent: an Outbox never drops an event it accepted',
  group: "absent: an Outbox's breaker is the fleet's already (one process sends at a time; its state goes with the lease)",
}

/** Why JSON would not write `holder[key]` as itself, or null. */
function notJson(holder, key) {
  const original = holder[key]
  if (original === undefined) return 'undefined'
  if (typeof original === 'function' || typeof original === 'symbol') return `a ${typeof original}`
  if (typeof original === 'number' && !Number.isFinite(original)) return String(original)
  if (original !== null && typeof original === 'object') {
    const proto = Object.getPrototypeOf(original)
    if (!Array.isArray(original) && proto !== Object.prototype && proto !== null) return `a ${original.constructor?.name ?? 'class instance'}`
  }
  return null
}

/**
 * An event's JSON text, which reads back as the same event: a value JSON
 * would change or drop (undefined, a function, a Symbol, NaN, a Map, a
 * Date, any class instance, a cycle, a BigInt), at any depth, is a TypeError.
 */
function encodeJson(event) {
  let text
  let cause
  let why = null
  try {
    text = JSON.stringify(event, function check(key, value) {
      if (why === null) why = notJson(this, key)
      return value
    })
  } catch (err) {
    cause = err
  }
  if (why !== null || typeof text !== 'string') {
    const err = new TypeError(`serializer: the event holds ${why ?? 'what JSON cannot write'}, which JSON would not give back; give a serializer { encode, decode }`)
    err.option = 'serializer'
    if (cause !== undefined) err.cause = cause
    throw err
  }
  return text
}

const JSON_SERIALIZER = { encode: encodeJson, decode: (text) => JSON.parse(text) }

/** `promise`, or a rejection after `ms` (the store is late). */
function timed(promise, ms) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`Redis did not answer within ${ms} ms`), { timedOut: true })), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/** A stream entry's fields (`[name, value, ...]`) as an object. */
function fieldsOf(list) {
  const out = Object.create(null)
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]] = list[i + 1]
  return out
}

/** The lease runs on this process's monotonic clock, as Redis's TTL does on its own. */
const now = () => performance.now()

/** `Outbox.open`'s mark: the outbox starts once its caller has it (its listeners miss nothing). */
const DEFERRED = Symbol('deferred')

/** A partner's outbox in one process: it submits to the log, and delivers while it holds the lease (see index.d.ts). */
class Outbox extends EventEmitter {
  constructor(options, deferred) {
    super()
    if (typeof NativeOutbox !== 'function') throw typeError('Outbox', 'the native addon (the WebAssembly backend has no Outbox)', undefined)
    if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options)
    const given = Object.assign(Object.create(null), options)
    const { redis, partner, serializer } = given
    if (redis === null || typeof redis !== 'object' || typeof redis.defineCommand !== 'function') {
      throw typeError('redis', 'an ioredis client (Redis or Cluster)', redis)
    }
    checkName(partner, 'partner')
    let keys
    try {
      keys = outboxKeys(partner)
    } catch (err) {
      throw fromNative(err)
    }
    if (serializer !== undefined && (serializer === null || typeof serializer.encode !== 'function' || typeof serializer.decode !== 'function')) {
      throw typeError('serializer', 'an object { encode(event) → string, decode(string) → event }', serializer)
    }
    if (typeof given.send !== 'function') throw typeError('send', 'a function', given.send)
    const dispatcherOptions = Object.create(null)
    for (const [key, value] of Object.entries(given)) {
      if (Object.hasOwn(REFUSED, key) && value !== undefined) throw typeError(key, REFUSED[key], value)
      if (!Object.hasOwn(OWN, key)) dispatcherOptions[key] = value
    }
    if (dispatcherOptions.name === undefined) dispatcherOptions.name = partner
    if (dispatcherOptions.timeoutMs === null) throw typeError('timeoutMs', 'a number: the lease must outlast every send', null)
    // Checks the dispatcher's options (a TypeError or RangeError naming one).
    this._dispatcherOptions = dispatcherOptions
    const first = this._newDispatcher()
    this._spare = first
    const native = {
      seed: randomHex64(),
      sendTimeoutMs: first._timeoutMs,
      maxMessages: dispatcherOptions.maxMessages,
      leaseMs: given.leaseMs,
      pageSize: given.pageSize,
      pollIntervalMs: given.pollIntervalMs,
      storeTimeoutMs: given.storeTimeoutMs,
    }
    for (const key of ['leaseMs', 'pageSize', 'pollIntervalMs', 'storeTimeoutMs']) {
      const value = native[key]
      if (value === undefined) continue
      if (typeof value !== 'number') throw typeError(key, 'a number', value)
      const whole = key === 'pageSize'
      if (!Number.isFinite(value) || value < 0 || (whole && (!Number.isInteger(value) || value > 2 ** 32 - 1))) {
        const problem = !Number.isFinite(value) ? 'not_finite' : whole && value > 2 ** 32 - 1 ? 'too_large' : 'out_of_range'
        throw Object.assign(new RangeError(`option ${key} must be a finite number from 0${whole ? ', whole' : ''}, got ${value}`), { option: key, problem })
      }
    }
    try {
      this._native = new NativeOutbox(native, now())
    } catch (err) {
      const e = fromNative(err)
      const names = { lease: 'leaseMs', page: 'pageSize', poll_interval: 'pollIntervalMs', store_timeout: 'storeTimeoutMs', send_timeout: 'timeoutMs' }
      const own = names[e.option]
      if (own !== undefined) {
        e.message = e.message.replace(`option ${e.option}`, `option ${own}`)
        e.option = own
      }
      throw e
    }
    if (!DEFINED.has(redis)) {
      redis.defineCommand(LEASE, { numberOfKeys: 3, lua: outboxLeaseScript() })
      redis.defineCommand(DEAD, { numberOfKeys: 2, lua: outboxDeadScript() })
      DEFINED.add(redis)
    }
    this.partner = partner
    this._redis = redis
    this._log = keys[0]
    this._dead = keys[1]
    this._leaseKeys = [keys[2], keys[3], keys[4]]
    this._token = randomHex64() + randomHex64()
    this._serializer = serializer ?? JSON_SERIALIZER
    this._timeoutMs = this._native.storeTimeoutMs()
    this._turnEvents = this._native.turnEvents()
    this._submits = [] // this turn's submits: { fields, key, resolve, reject }
    this._dispatcher = null // while it holds the lease
    this._epoch = null
    this._cursor = null // the last id read under this grant
    this._handing = false // a page is being handed to the dispatcher
    this._held = 0 // events handed to the dispatcher, not yet settled
    this._removing = new Set() // ids delivered or dead, removal not confirmed
    this._removals = [] // ids to remove
    this._deadLetters = [] // { id, fields, reason }
    this._removalTimer = null
    this._removalAt = 0
    this._flushing = null // the removals out
    this._leaseOut = null // the lease call out
    this._asked = false // a lease call was made (close gives the lease back)
    this._appending = new Set() // the submit pipelines out
    this._retired = new Set() // dispatchers of earlier grants, closing: their sends in flight end
    this._timer = null
    this._tickDue = false // a `_tickSoon` is set
    this._sent = 0 // sends started (see `_newDispatcher`)
    this._nextTurn = null // while set, sends wait for the next turn (see `_newDispatcher`)
    this._closed = false
    this._closing = null
    this._queue = null // events (lib/events.js)
    this._stats = { submitted: 0, delivered: 0, dead: 0, removed: 0, storeErrors: 0 }
    // Started after this turn: listeners added now hear the first grant.
    if (deferred !== DEFERRED) setImmediate(() => this._tick())
  }

  /**
   * Opens partner `options.partner`'s outbox in this process: it can submit
   * at once and delivers whenever it holds the lease. Warns once, with the
   * fix, when Redis would lose accepted events on a restart (no AOF).
   */
  static async open(options) {
    const outbox = new Outbox(options, DEFERRED)
    await outbox._checkPersistence()
    setImmediate(() => outbox._tick())
    return outbox
  }

  /** Whether Redis keeps what it accepted across a restart: warns once if not (a managed Redis that refuses CONFIG is not checked). */
  async _checkPersistence() {
    let reply
    try {
      reply = await timed(this._redis.config('GET', 'appendonly'), this._timeoutMs)
    } catch {
      return
    }
    const on = Array.isArray(reply) && reply[1] === 'yes'
    if (!on && !WARNED.has(this._redis)) {
      WARNED.add(this._redis)
      const warning = new Error(
        `halfopen: Outbox[${this.partner}]: Redis runs without AOF (appendonly no): a Redis restart loses the events accepted since its last RDB snapshot, and the lease (until the old holder's runs out, two processes may deliver; epochs start again). Run it with --appendonly yes (appendfsync everysec loses at most a second; always, nothing).`,
      )
      warning.name = 'HalfopenPersistenceWarning'
      warning.code = 'HALFOPEN_NOT_DURABLE'
      emitWarning(warning)
    }
  }

  /**
   * Appends `event` to the partner's log: the promise fulfils with
   * `{ id, key }` once Redis stored it, and rejects with a
   * StoreUnavailableError when it did not (or did not answer). Throws a
   * TypeError for an event the serializer cannot write or a bad key.
   */
  submit(event, options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) throw typeError('options', 'an object { key }', options)
    const key = options?.key
    if (key !== undefined && (typeof key !== 'string' || key === '')) throw typeError('key', 'a non-empty string', key)
    if (this._closed) return Promise.reject(new Error(`Outbox[${this.partner}] is closed`))
    let payload
    try {
      payload = this._serializer.encode(event)
    } catch (err) {
      if (err instanceof TypeError && err.option === 'serializer') throw err
      throw Object.assign(new TypeError(`serializer: encode threw: ${err?.message ?? err}`), { option: 'serializer', cause: err })
    }
    if (typeof payload !== 'string') throw typeError('serializer', 'an encode that returns a string', payload)
    const fields = key === undefined ? [FIELD_PAYLOAD, payload] : [FIELD_KEY, key, FIELD_PAYLOAD, payload]
    return new Promise((resolve, reject) => {
      this._submits.push({ fields, key, resolve, reject })
      if (this._submits.length === 1) setImmediate(() => this._track(this._appending, this._appendAll()))
    })
  }

  /** Keeps `promise` in `set` until it settles (what `close()` waits for). */
  _track(set, promise) {
    set.add(promise)
    promise.finally(() => set.delete(promise))
    return promise
  }

  /** This turn's submits, in one pipeline: each fulfils with its id or rejects with why. */
  async _appendAll() {
    const batch = this._submits
    if (batch.length === 0) return
    this._submits = []
    const pipeline = this._redis.pipeline()
    for (const s of batch) pipeline.xadd(this._log, '*', ...s.fields)
    let results
    try {
      results = await timed(pipeline.exec(), this._timeoutMs)
    } catch (err) {
      for (const s of batch) s.reject(new StoreUnavailableError(this.partner, err, true))
      return
    }
    let stored = 0
    batch.forEach((s, i) => {
      const [err, id] = Array.isArray(results?.[i]) ? results[i] : [new Error('no reply'), null]
      if (err === null && typeof id === 'string') {
        stored += 1
        s.resolve({ id, key: s.key ?? id })
      } else {
        // Redis answered with an error: it did not store it.
        s.reject(new StoreUnavailableError(this.partner, err, err?.name !== 'ReplyError'))
      }
    })
    this._stats.submitted += stored
    if (stored > 0) {
      this._native.appended()
      this._tick()
    }
  }

  /** Whether this process delivers now (it holds the lease). */
  isDeliverer() {
    return this._dispatcher !== null
  }

  /** Counters of this process: submitted (stored), delivered, dead, removed (from the log), storeErrors; and its role. */
  stats() {
    return { ...this._stats, deliverer: this.isDeliverer(), epoch: this._epoch, held: this._held, removing: this._removing.size }
  }

  /** The dispatcher's state, while this process delivers: 'CLOSED', 'OPEN', 'HALF_OPEN'; else null. */
  getState() {
    return this._dispatcher?.getState() ?? null
  }

  /** Does what is due, then sets the timer for what is next. */
  _tick() {
    if (this._closed) return
    const n = this._native
    n.handleTimeout(now())
    this._roles()
    if (this._leaseOut === null && n.leaseCall(now()) !== null) this._leaseOut = this._leaseCall()
    this._readIfDue()
    this._schedule()
  }

  /** One `_tick` at the next turn for every settlement of this one (a page's deliveries, say). */
  _tickSoon() {
    if (this._tickDue) return
    this._tickDue = true
    setImmediate(() => {
      this._tickDue = false
      this._tick()
    })
  }

  _schedule() {
    if (this._timer !== null) clearTimeout(this._timer)
    this._timer = null
    const at = this._native.nextTimeoutMs()
    if (at === null || this._closed) return
    this._timer = setTimeout(() => {
      this._timer = null
      this._tick()
    }, Math.min(Math.max(0, at - now()), 2 ** 31 - 1))
  }

  /** One lease call (to take or renew it), with the store timeout; its answer applies even while closing (a grant is then given back). */
  async _leaseCall() {
    // Settles after its caller has it in `_leaseOut` (a client that throws at once included).
    await undefined
    this._asked = true
    let reply
    let failed = false
    try {
      const args = this._native.leaseArgs(this._token, this._leftState(this._dispatcher), this._native.epoch(), false)
      reply = await timed(this._redis[LEASE](...this._leaseKeys, ...args), this._timeoutMs)
    } catch (err) {
      failed = true
      this._storeError('lease', err)
    }
    const n = this._native
    if (failed) n.leaseFailed(now())
    else {
      let fits = false
      try {
        if (!Array.isArray(reply)) throw new TypeError('not a list')
        const [holds, epoch, state, age] = reply
        fits = n.leaseAnswered(now(), [holds, epoch], typeof state === 'string' ? state : null, reply.length > 2 ? age : null)
      } catch {
        n.leaseFailed(now())
      }
      if (!fits) this._storeError('lease', new Error('the lease script answered something it cannot have'))
    }
    this._leaseOut = null
    this._tick()
  }

  /** Applies the deliverer's role changes: a grant starts a dispatcher from the log's start; a loss closes it. */
  _roles() {
    for (let e = this._native.pollEvent(); e !== null && e !== undefined; e = this._native.pollEvent()) {
      if (e.kind === 'lost') {
        const d = this._dispatcher
        this._dispatcher = null
        this._epoch = null
        this._held = 0
        // Its sends in flight end (the core starts none until they are
        // over); a delivery among them is still removed from the log.
        if (d !== null) this._track(this._retired, d.close().catch((err) => warnCallback(err, `the outbox '${this.partner}', closing its dispatcher`)))
        this._emit('lost', { reason: e.reason })
      } else {
        this._epoch = e.epoch
        this._cursor = null
        const d = this._spare ?? this._newDispatcher()
        this._dispatcher = d
        this._spare = null
        this._emit('acquired', { epoch: e.epoch, breaker: this._resume(d) })
      }
    }
  }

  /**
   * Resumes the breaker of new dispatcher `d` from the state the last
   * holder left: 'resumed', 'none' (none was left), or why not (a
   * SnapshotError's kind: 'config_mismatch' when the breaker's options
   * changed), said by a warning too; the breaker then starts closed.
   */
  _resume(d) {
    const left = this._native.takeLeft(now())
    if (left === null || left === undefined) return 'none'
    try {
      d.queue._native.resumeState(left.state, readToReport(d.queue), left.ageMs)
      return 'resumed'
    } catch (err) {
      const kind = fromNative(err).kind ?? 'malformed'
      const why = kind === 'config_mismatch' ? 'its breaker options differ from this one’s' : kind
      const warning = new Error(`halfopen: Outbox[${this.partner}]: the breaker state the last deliverer left is not resumed (${why}): this breaker starts closed`)
      warning.name = 'HalfopenStateWarning'
      warning.code = 'HALFOPEN_STATE_NOT_RESUMED'
      warning.kind = kind
      emitWarning(warning)
      return kind
    }
  }

  /** The breaker state dispatcher `d` leaves for the next holder ('' without one, or if it cannot be written). */
  _leftState(d) {
    if (d === null) return ''
    try {
      return d.queue._native.leftState(readToReport(d.queue))
    } catch {
      return ''
    }
  }

  /**
   * A dispatcher of the outbox's options, whose sends start only while the
   * core says they may. Its messages are `{ event, payload }`: their size is
   * the payload's (whatever the event is).
   */
  _newDispatcher() {
    const userSend = this._dispatcherOptions.send
    const d = new Dispatcher({
      ...this._dispatcherOptions,
      size: (entry) => Buffer.byteLength(entry.payload),
      send: async (entry, { signal, key }) => {
        // Sends that settle at once (a queue, a buffer) would run a whole
        // page in one turn: every `turnEvents`-th waits for the next, and
        // the sends after it behind it, in their order (so that the event
        // loop is never held for long, and sends start in the log's order).
        const epoch = this._epoch
        if (++this._sent % this._turnEvents === 0 && this._nextTurn === null) {
          this._nextTurn = new Promise((resolve) => setImmediate(resolve)).then(() => {
            this._nextTurn = null
          })
        }
        if (this._nextTurn !== null) await this._nextTurn
        return userSend(entry.event, { signal, key, epoch })
      },
    })
    d._mayStart = () => this._dispatcher === d && this._native.maySend(now())
    for (const name of ['open', 'close', 'halfOpen', 'stateChange']) d.on(name, (payload) => this._emit(name, payload))
    // A change of the holder's breaker goes to Redis with a renewal soon.
    d.on('stateChange', () => {
      if (this._dispatcher !== d || this._closed) return
      this._native.breakerChanged(now())
      this._schedule()
    })
    return d
  }

  /** Reads a page of the log if one is due. */
  _readIfDue() {
    const d = this._dispatcher
    if (d === null || this._handing) return
    const count = this._native.readDue(now(), this._held, this._removing.size)
    if (count === null || count === undefined) return
    this._read(d, this._epoch, count)
  }

  async _read(d, epoch, count) {
    let entries
    const from = this._cursor === null ? '-' : `(${this._cursor}`
    try {
      entries = await timed(this._redis.xrange(this._log, from, '+', 'COUNT', count), this._timeoutMs)
      if (!Array.isArray(entries)) throw new Error('XRANGE answered something else than entries')
    } catch (err) {
      this._storeError('read', err)
      if (!this._closed) this._native.readFailed(now(), epoch)
      return this._tick()
    }
    if (this._closed || this._dispatcher !== d || !this._native.readAnswered(now(), epoch, entries.length)) return this._tick()
    // No read while a page is handed on: the next starts after its last entry.
    this._handing = true
    try {
      await this._handOn(d, entries)
    } finally {
      this._handing = false
    }
    this._tick()
  }

  /**
   * Hands a page's entries to dispatcher `d`, `turnEvents` at a time, a
   * turn each (the event loop is never held for long); a grant that ended
   * meanwhile takes no more.
   */
  async _handOn(d, entries) {
    for (let i = 0; i < entries.length; i++) {
      if (i > 0 && i % this._turnEvents === 0) {
        await new Promise((resolve) => setImmediate(resolve))
        if (this._closed || this._dispatcher !== d) return
      }
      const [id, list] = entries[i]
      this._cursor = id
      if (this._removing.has(id)) continue
      const fields = fieldsOf(list)
      const key = fields[FIELD_KEY] ?? id
      let event
      try {
        event = this._serializer.decode(fields[FIELD_PAYLOAD])
      } catch (err) {
        this._deadLetter(id, fields, key, 'undecodable', err)
        continue
      }
      let delivery
      try {
        delivery = d.submit({ event, payload: fields[FIELD_PAYLOAD] }, { key })
      } catch (err) {
        this._deadLetter(id, fields, key, 'refused', err)
        continue
      }
      this._held += 1
      delivery.then(
        () => {
          if (this._dispatcher === d) this._held -= 1
          this._stats.delivered += 1
          this._remove(id)
          this._emit('delivered', { id, key })
          this._tickSoon()
        },
        (err) => {
          if (this._dispatcher === d) this._held -= 1
          // Given up, or not taken (a bound: 'full'): kept with why, never skipped silently.
          this._deadLetter(id, fields, key, err instanceof DeadLetterError ? err.reason : 'full', err)
          this._tickSoon()
        },
      )
    }
  }

  /** An event delivered: removed from the log (retried until Redis confirms it). */
  _remove(id) {
    this._removing.add(id)
    this._removals.push(id)
    this._flushRemovalsSoon()
  }

  /** An event given up: to the dead letters with its reason, out of the log, in one transaction. */
  _deadLetter(id, fields, key, reason, cause) {
    this._removing.add(id)
    this._stats.dead += 1
    this._deadLetters.push({ id, fields, reason })
    this._emit('dead', { id, key, reason, error: cause })
    this._flushRemovalsSoon()
  }

  /** Removals and dead letters at the next turn (or when their retry is due); closing, `close()` does the last ones. */
  _flushRemovalsSoon() {
    if (this._removalTimer !== null || this._flushing !== null || this._closed) return
    const delay = Math.max(0, this._removalAt - now())
    this._removalTimer = delay === 0 ? setImmediate(() => this._flushRemovals()) : setTimeout(() => this._flushRemovals(), delay)
  }

  /** Every removal and dead letter due; what fails is retried with the core's backoff. */
  _flushRemovals() {
    this._removalTimer = null
    const flush = this._removeNow()
    this._flushing = flush
    return flush.finally(() => {
      // One removal call out at a time: what came meanwhile goes next.
      if (this._flushing === flush) this._flushing = null
      if (!this._closed && (this._removals.length > 0 || this._deadLetters.length > 0)) this._flushRemovalsSoon()
    })
  }

  /**
   * One `XDEL` of the delivered events (a plain command: Redis at
   * `maxmemory` still takes it) and one dead-letter script call each (it
   * moves an event once, however often it is retried).
   */
  async _removeNow() {
    const ids = this._removals
    const dead = this._deadLetters
    if (ids.length === 0 && dead.length === 0) return
    this._removals = []
    this._deadLetters = []
    let results
    try {
      // (Inside: a client that throws at once fails the try, as any other failure.)
      const pipeline = this._redis.pipeline()
      if (ids.length > 0) pipeline.xdel(this._log, ...ids)
      for (const { id, fields, reason } of dead) pipeline[DEAD](this._log, this._dead, id, reason, ...Object.entries(fields).flat())
      results = await timed(pipeline.exec(), this._timeoutMs)
      if (!Array.isArray(results)) throw new Error('the pipeline was discarded')
    } catch (err) {
      results = [[err], ...dead.map(() => [err])]
      if (ids.length === 0) results.shift()
    }
    let i = 0
    let failed = null
    if (ids.length > 0) {
      const [err] = results[i++] ?? [new Error('no reply')]
      if (err) {
        failed = err
        this._removals = ids.concat(this._removals)
      } else this._removed(ids)
    }
    for (const letter of dead) {
      const [err] = results[i++] ?? [new Error('no reply')]
      if (err) {
        failed = err
        this._deadLetters.push(letter)
      } else this._removed([letter.id])
    }
    if (failed !== null) {
      this._storeError('remove', failed)
      // (Closing: null once the lease it held leaves no room for a retry.)
      this._removalAt = this._native.removalFailed(now())
    } else {
      this._native.removalDone()
      this._removalAt = 0
    }
  }

  /** Redis confirmed these ids are out of the log. */
  _removed(ids) {
    for (const id of ids) this._removing.delete(id)
    this._stats.removed += ids.length
    // Out of the log: room for the next page.
    this._tickSoon()
  }

  /** A store call failed: said as a 'storeError' event (and counted), never only a warning. */
  _storeError(operation, error) {
    this._stats.storeErrors += 1
    this._emit('storeError', { operation, error })
  }

  /** Emits `name` to each listener in turn; one that throws (or rejects) is a warning, never a stop. */
  _emit(name, payload) {
    publish(this, name, payload)
  }

  /**
   * Stops submitting and delivering: waits for this turn's submits to be
   * stored (or refused) and for the sends in flight, makes the pending
   * removals (four tries at most, with the core's backoff, while the
   * lease it held leaves room: `policy::closing_retry`), then gives the lease up (another process takes
   * over at once, without what this one delivered). Resolves to
   * `{ unremoved, lapsed }`: events delivered whose removal Redis did not
   * confirm (they stay in the log and will be sent again), and whether the
   * lease could have run out before it was given back (Redis did not
   * confirm its last renewal: the next holder may send again what this
   * one delivered last).
   */
  async close() {
    if (this._closing !== null) return this._closing
    this._closing = (async () => {
      await this._appendAll()
      await Promise.all(this._appending)
      this._closed = true
      if (this._timer !== null) clearTimeout(this._timer)
      this._timer = null
      // A lease call out: its answer applies first (a grant is given back below).
      while (this._leaseOut !== null) await this._leaseOut
      const d = this._dispatcher
      // (The core's: a grant the lease call just answered is not yet applied.)
      const epoch = this._native.epoch()
      const held = this._native.release(now())
      this._roles()
      // Held: renewed once more, so that it outlasts the sends still out
      // and their removals (a lease fits two send timeouts and two store
      // timeouts); if Redis does not confirm this grant, it may lapse
      // before it is given back, and close says so (`lapsed`).
      const kept = held && (await this._renewOnce(epoch, d))
      // Every send this process started, under any grant, is over before
      // another process may hold the lease.
      if (d !== null) await d.close()
      await Promise.all(this._retired)
      if (this._removalTimer !== null) {
        clearTimeout(this._removalTimer)
        clearImmediate(this._removalTimer)
        this._removalTimer = null
      }
      // The removals before the lease goes back: the next holder reads the
      // log without what this one delivered (a handover sends nothing
      // twice). The removals out first: what fails comes back to the lists.
      if (this._flushing !== null) await this._flushing
      await this._flushRemovals()
      // What fails is tried again as the core says (a few times, while the lease it held leaves room).
      while (this._removalAt !== null && (this._removals.length > 0 || this._deadLetters.length > 0)) {
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, this._removalAt - now())))
        await this._flushRemovals()
      }
      // Given back whenever it was asked for: a grant whose answer came too
      // late is Redis's all the same (the script deletes only this token's).
      // With the breaker's state now, for the next holder (if this one still holds it).
      if (this._asked) {
        try {
          await timed(this._redis[LEASE](...this._leaseKeys, ...this._native.leaseArgs(this._token, this._leftState(d), null, true)), this._timeoutMs)
        } catch (err) {
          // It lapses by itself after its TTL.
          this._storeError('lease', err)
        }
      }
      return { unremoved: this._removals.length + this._deadLetters.length, lapsed: held && !kept }
    })()
    return this._closing
  }

  /** One renewal of grant `epoch` (closing), with dispatcher `d`'s breaker state: whether Redis confirmed it. */
  async _renewOnce(epoch, d) {
    try {
      const args = this._native.leaseArgs(this._token, this._leftState(d), epoch, false)
      this._native.closeRenewal(now())
      const reply = await timed(this._redis[LEASE](...this._leaseKeys, ...args), this._timeoutMs)
      const kept = Array.isArray(reply) && Number(reply[0]) === 1 && Number(reply[1]) === epoch
      // (Refused: another process may hold it; a failed removal is not tried again.)
      this._native.closeRenewalAnswered(kept)
      return kept
    } catch (err) {
      this._storeError('lease', err)
      return false
    }
  }
}

const WARNED = new WeakSet()

module.exports = { Outbox }
