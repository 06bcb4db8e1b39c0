'use strict'
// The one decoder of the native half's packed values. What each means is
// written in src/wire.rs; this file is its one mirror in JavaScript (the
// hot path reads constants, not a call), checked by test/wire.test.js
// against `wireCodes()` of the addon and of the wasm module; nothing else in
// lib/ knows a code.

/** Outcomes by code (src/wire.rs `OUTCOMES`). */
const OUTCOMES = ['success', 'failure', 'ignored', 'cancelled']
const SUCCESS = 0
const FAILURE = 1
const IGNORED = 2
const CANCELLED = 3
/** An outcome's name → its code. */
const OUTCOME_CODES = { success: SUCCESS, failure: FAILURE, ignored: IGNORED, cancelled: CANCELLED }

/** Licence kinds by code (`NativeLicence.kind`); `UNKNOWN` until first asked (never sent). */
const LICENCE_KINDS = ['ask', 'admit', 'reject']
const ADMIT = 1
const REJECT = 2
const UNKNOWN = -1

/** Why a call was refused (the core's reasons), by code: a licence's `refusal` under "reject". */
const REFUSAL_REASONS = ['open', 'probes_busy', 'limit_full', 'held']

/** Added to `acquire`'s generation when a transition waits. */
const TRANSITION_PENDING = 4294967296
/** A registry's `acquire` when it is full (no idle breaker to evict). */
const REGISTRY_FULL = -0.5
/** A registry name's rejection's retry time (µs) when held open until released. */
const HELD_US = 2 ** 47
/** ... when it is 2^47 µs or more, past what the code holds exactly: ask for it (`retryAfter`). */
const LONG_US = HELD_US + 1

/** What `report` did with the message, by code; `EVENTS_WAIT` is added when events wait. */
const REPORTED = ['delivered', 'retained', 'dead', 'unknown']
const EVENTS_WAIT = 4
/** Last in `next`'s list when events wait. */
const EVENTS_WAIT_IN_LIST = -1

/** The codes, as `wireCodes()` of the native half gives them (for the test). */
const CODES = {
  transitionPending: TRANSITION_PENDING,
  registryFull: REGISTRY_FULL,
  heldUs: HELD_US,
  longUs: LONG_US,
  outcomes: OUTCOMES,
  licenceKinds: LICENCE_KINDS,
  refusalReasons: REFUSAL_REASONS,
  reported: REPORTED,
  eventsWait: EVENTS_WAIT,
  eventsWaitInList: EVENTS_WAIT_IN_LIST,
}

/** A rejection's retry time from `acquire`'s code (`-1 - ms`), exact to the microsecond; held open: Infinity. */
function retryOf(code) {
  return code === -Infinity ? Infinity : Math.round((-1 - code) * 1000) / 1000
}

/**
 * A registry name's rejection from `acquire`'s code (`-1 - (32 × µs + 16 ×
 * pending + 4 × reason + gauge)`), written into `out` (no allocation on the
 * call path): `[gauge, retryAfterMs, reason, pending]`, the milliseconds as
 * `ms()` of src/time.rs makes them (held open: Infinity; 2^47 µs or more:
 * NaN, to be asked for with `retryAfter`). Returns `out`.
 */
function registryRefusalOf(code, out = [0, 0, '', false]) {
  const x = -1 - code
  const low = x % 32
  const us = (x - low) / 32
  out[0] = low % 4
  out[1] = us === HELD_US ? Infinity : us === LONG_US ? Number.NaN : us / 1000
  out[2] = REFUSAL_REASONS[(low >> 2) % 4]
  out[3] = low >= 16
  return out
}

/** `submit`'s code: `{ status: 'send' | 'retained' | 'refused', seq?, events }`. */
function submitted(code) {
  if (code < 0) return { status: 'refused', events: code === -2 }
  return { status: code % 4 >= 2 ? 'retained' : 'send', seq: Math.floor(code / 4), events: code % 2 === 1 }
}

/** `next`'s list: the sequence numbers (the list itself, events marker removed) and whether events wait. */
function nextOf(list) {
  const events = list.length > 0 && list[list.length - 1] === EVENTS_WAIT_IN_LIST
  if (events) list.pop()
  return { seqs: list, events }
}

/** `report`'s code: `{ result: 'delivered' | 'retained' | 'dead' | 'unknown', events }`. */
function reportedOf(code) {
  return { result: REPORTED[code % EVENTS_WAIT], events: code >= EVENTS_WAIT }
}

module.exports = {
  ADMIT,
  CANCELLED,
  CODES,
  FAILURE,
  IGNORED,
  OUTCOME_CODES,
  OUTCOMES,
  REFUSAL_REASONS,
  REGISTRY_FULL,
  REJECT,
  SUCCESS,
  TRANSITION_PENDING,
  UNKNOWN,
  nextOf,
  registryRefusalOf,
  reportedOf,
  retryOf,
  submitted,
}
