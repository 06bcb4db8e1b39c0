'use strict'
// `Registry`: one breaker per name (seed 000's `breakerFor`), bounded, and
// its keyed breakers. A name's calls take the licence's fast path through
// its licence holder (lib/licence.js), one per name JavaScript has seen the
// breaker of, kept in `_keys` (the registry is the holders' owner);
// `KeyedBreaker`s (made by `get(name)`) are handles to it. The core evicts
// an idle breaker only inside a native call that can make one (a name's
// first call, `configure`, a manual operation, a restore, a group
// exchange), and counts as idle a breaker with no call in flight that it
// knows of. So:
// - before any of these calls, everything done under every name's licence
//   is handed over (`_handOverAll`): the core knows every call in flight,
//   and never evicts a breaker with one;
// - after it, the holder of a breaker evicted is dropped (`_dropEvicted`:
//   the core tells the name evicted last; if a call evicted more than one,
//   or a restore replaced them all, every holder is dropped), and a name's
//   next call starts a new one; after any such call but a name's first, the
//   licences are asked again, each at its name's next call (`_revokeAll`).
//   A dropped holder holds no licence again; the calls it admitted report
//   their outcomes one by one (its calls with a timeout go on to its
//   successor, which times out those whose timer was lost).
// In a registry at its capacity that evicts for every new name, the other
// names keep their licences: only the evicted name asks again. (Which idle
// breaker is the least recently used is the core's view: a name's calls
// under its licence count as used when handed over, not one by one.)

const { NativeRegistry } = require('../native.js')
const { issuePermit, metricsOf, STATES, takePermit } = require('./breaker.js')
const { DROPPED, Holder, NEW, OWN } = require('./licence.js')
const { execute } = require('./call.js')
const { GroupLink, linkOf } = require('./group.js')
const { read } = require('./clock.js')
const { CircuitBreakerOpenError, fromNative, output, RegistryFullError, snapshotText } = require('./errors.js')
const { drain, enqueueTransitions, listenable, publish } = require('./events.js')
const { checkAtLeastMs, checkForceOpenMs, checkName, translate } = require('./options.js')
const { REGISTRY_FULL, registryRefusalOf, TRANSITION_PENDING, UNKNOWN } = require('./wire.js')

/**
 * One breaker per name, made on first use, at most `capacity` (default
 * 10,000): beyond it the least recently used *idle* breaker is evicted (never
 * an open, half-open, forced, failing or busy one); if none is idle the call
 * is rejected with `RegistryFullError`. Events are emitted here, with the
 * breaker's `name` in each.
 */
class Registry {
  constructor(options = {}) {
    const t = translate(options, 'registry')
    this._isFailure = t.isFailure
    this._fallback = t.fallback
    this._clock = t.clock
    this._monotonic = t.monotonic
    this._sharedClock = t.sharedClock
    this._timeoutMs = t.timeoutMs
    this._last = 0
    this._queue = null
    this._heard = false // whether 'success' has listeners (lib/events.js's `listenable`)
    this._heardCount = this._eventsCount // and its count of events then (the platform's prototype's)
    this._keys = new Map() // name -> its licence holder, while the core holds its breaker
    this._evictionsSeen = 0 // the core's evictions when `_keys` was last checked
    this._timedLeft = new Map() // name -> the calls with a timeout its dropped holders left
    // What a name's holder takes of the options (lib/licence.js).
    this._callOptions = { isFailure: t.isFailure, fallback: t.fallback, clock: t.clock, monotonic: t.monotonic, timeoutMs: t.timeoutMs }
    try {
      this._native = new NativeRegistry(t.native, t.capacity)
    } catch (err) {
      throw fromNative(err, { options })
    }
    this._maxNameBytes = this._native.maxNameBytes()
    // Each name's breaker a group of its own, all exchanged in one script call.
    if (t.given.group !== undefined) new GroupLink(this, t.given.group, true)
  }

  /**
   * With the `group` option: `{ member, degraded, names, answered }` (the
   * member id of this process, whether some names decide alone because
   * the store failed them, how many names are in the group: a name joins at the
   * next regular exchange after its breaker is made, and how many of them
   * Redis answered); else (also after `leaveGroup()`) null.
   */
  groupStatus() {
    return linkOf(this)?.status() ?? null
  }

  /** Stops exchanging with the group (every name goes on alone). */
  leaveGroup() {
    linkOf(this)?.close()
  }

  /** The breaker for `name` (made on its first call). */
  get(name) {
    checkName(name, 'name', this._maxNameBytes)
    return new KeyedBreaker(this, name)
  }

  /**
   * Gives `name` its own core options: the Registry's, changed by
   * `options` (for at most `capacity` names; the core's rule: an option
   * given replaces the Registry's, a window or a limit whole, `null` unsets
   * it, a `preset` starts from that preset). A breaker `name` has is
   * replaced by a closed one; if it was not closed, 'close' and
   * 'stateChange' are emitted with reason 'reconfigured'.
   */
  configure(name, options) {
    checkName(name, 'name', this._maxNameBytes)
    const t = translate(options, 'configure')
    const now = read(this)
    this._handOverAll(now)
    let changed
    try {
      changed = this._native.configure(name, t.native, now)
    } catch (err) {
      throw fromNative(err, { options, name })
    } finally {
      this._revokeAll()
    }
    if (changed) this._publishTransitions()
  }

  /** The names of every breaker held. */
  names() {
    return output(() => this._native.names())
  }

  /** Whether `name` has a breaker now. */
  has(name) {
    checkName(name, 'name', this._maxNameBytes)
    return this._native.has(name)
  }

  /** Breakers held. */
  get size() {
    return this._native.size
  }

  /** Idle breakers evicted so far. */
  get evictions() {
    return this._native.evictions
  }

  /** The Prometheus text exposition of every breaker. */
  prometheus() {
    const now = read(this)
    this._handOverAll(now)
    return output(() => this._native.prometheus(now))
  }

  /** Every breaker's state (the core's versioned snapshot), as a plain object. */
  toJSON() {
    const now = read(this)
    this._handOverAll(now)
    return JSON.parse(output(() => this._native.snapshotJson(now)))
  }

  /**
   * Replaces every breaker with those of `snapshot` (from `toJSON`, or its
   * JSON text). Calls in flight stay in flight (the name is not evicted);
   * their late reports reach no breaker.
   */
  restore(snapshot) {
    const text = snapshotText(snapshot)
    const now = read(this)
    this._handOverAll(now)
    let changed
    try {
      changed = this._native.restoreJson(text, now, this._sharedClock)
    } catch (err) {
      throw fromNative(err)
    } finally {
      // Every breaker may be another now.
      this._revokeAll(true)
    }
    // Each breaker whose state the snapshot changed: reason 'restored'.
    if (changed) this._publishTransitions()
  }

  /**
   * Hands everything done under every name's licence to the core (before
   * a native call that may evict a breaker, or that reads them all).
   */
  _handOverAll(now) {
    // (Until nothing is held: a listener of the transitions published here
    // may admit calls under another name's licence.)
    for (;;) {
      let pending = false
      for (const holder of this._keys.values()) {
        if (holder._flush(now)) {
          pending = true
          holder._revoke()
        }
      }
      if (!pending) return
      this._publishTransitions()
    }
  }

  /**
   * After a native call that may have changed any name's breaker: each
   * licence is asked again at its name's next call, and the holders of
   * breakers evicted (`replaced`: of every breaker) are dropped.
   */
  _revokeAll(replaced = false) {
    for (const holder of this._keys.values()) holder._revoke()
    this._dropEvicted(replaced)
  }

  /**
   * Drops the holders of the breakers the core evicted since it was last
   * asked: the name's it evicted last if it evicted one, every holder if it
   * evicted more (or `all`).
   */
  _dropEvicted(all = false) {
    const evictions = this._native.evictions
    const evicted = evictions - this._evictionsSeen
    this._evictionsSeen = evictions
    // (From 2^53 on, the count read no longer tells one eviction from
    // none, a restore's doing: every holder goes, every time.)
    const counted = evictions < 2 ** 53
    if (!all && counted && evicted === 0) return
    if (!all && counted && evicted === 1) {
      const holder = this._keys.get(this._native.lastEvicted)
      if (holder !== undefined) {
        this._drop(holder)
        this._keys.delete(holder.name)
      }
    } else {
      for (const holder of this._keys.values()) this._drop(holder)
      this._keys.clear()
    }
    for (const [name, calls] of this._timedLeft) if (calls.size === 0) this._timedLeft.delete(name)
  }

  /** `holder` is its name's no more: no licence, its calls with a timeout left to its successor. */
  _drop(holder) {
    holder._revoke()
    holder._status = DROPPED
    if (holder._timed !== undefined) this._timedLeft.set(holder.name, holder._timed)
    // (Time never goes back: a name's next holder starts from its readings.)
    if (holder._last > this._last) this._last = holder._last
  }

  /** The licence holder of `name`: its own, or a new one (kept once its breaker is made). */
  _key(name) {
    const own = this._keys.get(name)
    if (own !== undefined) return own
    const holder = new Holder(this, this, name, new KeyNative(this._native, name), this._callOptions, NEW)
    holder._last = this._last
    const left = this._timedLeft.get(name)
    if (left !== undefined && left.size > 0) holder._timed = left
    return holder
  }

  // Its names' holders' owner's part (lib/licence.js).

  /** A generation from the core's admission for `h`, a name's holder, or -1 (the rejection is kept there). */
  _acquire(h, now) {
    // A name without a breaker gets one here, which may evict another's.
    if (h._status !== OWN) this._handOverAll(now)
    h._flush(now)
    const code = this._native.acquire(h.name, now)
    if (code === REGISTRY_FULL) {
      h._refusalReason = 'registry_full'
      return -1
    }
    if (h._status !== OWN) {
      // Its name's breaker was made (or found), which may have evicted
      // another name's: that name's holder goes (a dropped holder's call
      // too: it can bring its name back).
      this._dropEvicted()
      if (h._status === NEW) this._join(h)
    }
    if (code < 0) {
      // One crossing: the code carries the whole refusal (src/wire.rs),
      // decoded into a scratch record (no allocation per refusal).
      registryRefusalOf(code, SCRATCH)
      h._refusalGauge = SCRATCH[0]
      // (Past 4.46 years, past what the code holds exactly: asked for.)
      h._refusalMs = Number.isNaN(SCRATCH[1]) ? this._native.retryAfter(h.name, now) : SCRATCH[1]
      h._refusalReason = SCRATCH[2]
      if (SCRATCH[3]) h._transitions(now)
      else if (h._kind === UNKNOWN || h._limited) h._relicense(now)
      return -1
    }
    if (code >= TRANSITION_PENDING) {
      h._transitions(now)
      return code - TRANSITION_PENDING
    }
    // A licence changes only with a transition (taken above), or with a
    // limit's room; ask for the first one here.
    if (h._kind === UNKNOWN || h._limited) h._relicense(now)
    return code
  }

  /** `h`'s breaker was just made (or found): it becomes its name's own holder. */
  _join(h) {
    // (Another holder of the name joined first, in a listener or a clock
    // called meanwhile: this one's call reports through it.)
    if (this._keys.has(h.name)) {
      h._status = DROPPED
      return
    }
    h._status = OWN
    this._keys.set(h.name, h)
  }

  /** `name`'s own holder, if it has one. */
  _ownHolder(name) {
    return this._keys.get(name)
  }

  _rejectionError(h) {
    const err =
      h._refusalReason === 'registry_full'
        ? new RegistryFullError(h.name)
        : new CircuitBreakerOpenError(h.name, STATES[h._refusalGauge], h._refusalMs, h._refusalReason)
    if (this.listenerCount('reject') > 0) publish(this, 'reject', err)
    return err
  }

  _refused(h) {
    const refusal =
      h._refusalReason === 'registry_full'
        ? { breakerName: h.name, state: 'CLOSED', retryAfterMs: Infinity, reason: 'registry_full' }
        : { breakerName: h.name, state: STATES[h._refusalGauge], retryAfterMs: h._refusalMs, reason: h._refusalReason }
    // (Read first: a listener may change the breaker.)
    if (this.listenerCount('reject') > 0) this._rejectionError(h)
    return refusal
  }

  /**
   * Applies `op(now)` (true if a transition waits) to the breaker of `h`'s
   * name, which it makes if there is none (and may evict another's for it).
   */
  _manual(h, op) {
    const now = read(h)
    const own = h._status === OWN
    let pending = false
    if (own) pending = h._flush(now)
    else this._handOverAll(now)
    let changed
    try {
      changed = op(now)
    } finally {
      if (own) h._relicense(now)
      else this._revokeAll()
    }
    if (pending || changed) this._publishTransitions()
  }

  _publishTransitions() {
    enqueueTransitions(this, this._native.takeTransitions())
    drain(this)
    // A transition may ask for an exchange with the group sooner.
    linkOf(this)?.poke()
  }
}

/** Where a key's refusal is decoded (one for every key: each read at once). */
const SCRATCH = [0, 0, '', false]

/** What a name's holder asks the registry's addon, as a breaker's holder asks its own (lib/licence.js). */
class KeyNative {
  constructor(native, name) {
    this._n = native
    this._name = name
  }
  licence(now) {
    return this._n.licence(this._name, now)
  }
  handOver(admitted, firstMs, generation, successes, atMs) {
    return this._n.handOver(this._name, admitted, firstMs, generation, successes, atMs)
  }
  countRejections(count, now) {
    this._n.countRejections(this._name, count, now)
  }
  record(generation, issuedAtMs, outcome, now) {
    return this._n.record(this._name, generation, issuedAtMs, outcome, now)
  }
  takeTransitions() {
    return this._n.takeTransitions()
  }
}

/** A registry's breaker for one name: the `CircuitBreaker` methods that make sense per key. */
class KeyedBreaker {
  constructor(registry, name) {
    this._registry = registry
    this.name = name
    this._holder = undefined // its name's own licence holder, once it has one
  }

  /** Its name's licence holder (kept while it is its name's own). */
  _key() {
    const holder = this._holder
    if (holder !== undefined && holder._status === OWN) return holder
    const found = this._registry._key(this.name)
    this._holder = found._status === OWN ? found : undefined
    return found
  }

  /** Runs `fn` if this name's breaker admits it (see `CircuitBreaker.execute`). */
  execute(fn, options) {
    return execute(this._key(), fn, options)
  }

  /** A permit, or `{ admitted: false, state, retryAfterMs, reason, error }` (never throws but for a broken clock). */
  tryAcquire() {
    const h = this._key()
    const now = read(h)
    const generation = h._acquire(now)
    if (generation < 0) {
      const error = h._rejectionError()
      const full = error instanceof RegistryFullError
      const refused = full ? 'CLOSED' : error.state
      return { admitted: false, state: refused, retryAfterMs: full ? Infinity : error.retryAfterMs, reason: full ? 'registry_full' : error.reason, error }
    }
    return issuePermit(this._registry, generation, now, this.name)
  }

  /** Reports how a permitted call ended (once per permit). */
  record(permit, outcome) {
    const { code, data } = takePermit(this._registry, permit, outcome, this.name)
    this._key()._settle(data, code)
  }

  getState() {
    const h = this._key()
    const now = read(h)
    if (h._status === OWN) {
      h._flush(now)
      h._relicense(now)
      return STATES[h._gauge]
    }
    const licence = this._registry._native.licence(this.name, now)
    return licence === null || licence === undefined ? 'CLOSED' : STATES[licence.gauge]
  }

  /** Milliseconds until a call is worth trying (Infinity: held open, or the registry is full of busy breakers). */
  retryAfterMs() {
    const h = this._key()
    const now = read(h)
    if (h._flush(now)) h._transitions(now)
    return this._registry._native.retryAfter(this.name, now)
  }

  isCallPermitted() {
    return this.retryAfterMs() === 0
  }

  /** "NORMAL", "FORCED_OPEN" or "DISABLED". */
  mode() {
    return this._registry._native.mode(this.name, read(this._key())).toUpperCase()
  }

  metrics() {
    const h = this._key()
    const now = read(h)
    if (h._flush(now)) h._transitions(now)
    const m = this._registry._native.metrics(this.name, now)
    return m ? metricsOf(m) : null
  }

  forceOpen(ms) {
    checkForceOpenMs(ms)
    this._manual('force_open', ms)
  }

  forceOpenAtLeast(ms) {
    checkAtLeastMs(ms)
    this._manual('force_open_at_least', ms)
  }

  forceClose() {
    this._manual('force_close')
  }

  disable() {
    this._manual('disable')
  }

  release() {
    this._manual('release')
  }

  reset() {
    this._manual('reset')
  }

  handleTimeout() {
    this._manual('handle_timeout')
  }

  /**
   * With the registry's `group` option: opens this name's breaker in every
   * process for `ms` (see `CircuitBreaker.groupForceOpen`).
   */
  groupForceOpen(ms) {
    checkAtLeastMs(ms, 'groupForceOpen')
    this._groupManual('groupForceOpen', (r, now) => r._native.groupForceOpen(this.name, now, ms))
  }

  /** With the registry's `group` option: closes this name's breaker in every process (see `CircuitBreaker.groupForceClose`). */
  groupForceClose() {
    this._groupManual('groupForceClose', (r, now) => r._native.groupForceClose(this.name, now, false))
  }

  /** With the registry's `group` option: resets this name's breaker in every process. */
  groupReset() {
    this._groupManual('groupReset', (r, now) => r._native.groupForceClose(this.name, now, true))
  }

  _groupManual(method, op) {
    const r = this._registry
    const link = linkOf(r)
    if (link === undefined) throw new TypeError(`${method} needs the registry's group option (and a registry still in its group)`)
    r._manual(this._key(), (now) => {
      try {
        return op(r, now)
      } catch (err) {
        throw fromNative(err, { name: this.name })
      }
    })
    link.poke()
  }

  _manual(name, ms) {
    const r = this._registry
    r._manual(this._key(), (now) => {
      try {
        return r._native.manual(this.name, name, now, ms)
      } catch (err) {
        throw fromNative(err, { name: this.name })
      }
    })
  }
}

listenable(Registry)

module.exports = { Registry, RegistryFullError }
