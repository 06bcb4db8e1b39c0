'use strict'
// Errors cross as codes: a RangeError names the option (`option`) and says
// what is wrong as the core's code (`problem`, `Problem::code`), whether the
// core refused the value or the package's own translation did.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { CircuitBreaker, Registry, RetentionQueue } = require(process.env.HALFOPEN_PACKAGE || '..')

function refused(make, option, problem) {
  assert.throws(make, (err) => {
    assert.ok(err instanceof RangeError, `${err.name}: ${err.message}`)
    assert.equal(err.option, option, err.message)
    assert.equal(err.problem, problem, err.message)
    return true
  })
}

test('an option the core refuses: the option and the core\'s code', () => {
  refused(() => new CircuitBreaker({ name: 'a', failureThreshold: 0 }), 'failureThreshold', 'zero')
  refused(() => new CircuitBreaker({ name: 'a', windowCalls: 4 }), 'failureThreshold', 'exceeds_window')
  refused(() => new CircuitBreaker({ name: 'a', backoffFactor: Number.NaN }), 'backoffFactor', 'not_finite')
  refused(() => new CircuitBreaker({ name: 'a', halfOpenMaxAttempts: 2, halfOpenSuccesses: 3 }), 'halfOpenSuccesses', 'exceeds_half_open_max_attempts')
  refused(() => new CircuitBreaker({ name: 'a', adaptiveLimitMin: 5, adaptiveLimitMax: 2 }), 'adaptiveLimitMin', 'exceeds_max')
  refused(() => new RetentionQueue({ name: 'q', concurrencyLimit: 2, maxMessages: 0 }), 'maxMessages', 'zero')
})

test('a value the translation refuses before the core sees it: a code too', () => {
  refused(() => new CircuitBreaker({ name: 'a', failureThreshold: 2.5 }), 'failureThreshold', 'out_of_range')
  refused(() => new CircuitBreaker({ name: 'a', openTimeoutMs: -1 }), 'openTimeoutMs', 'out_of_range')
  refused(() => new CircuitBreaker({ name: 'a', openTimeoutMs: Number.POSITIVE_INFINITY }), 'openTimeoutMs', 'not_finite')
  refused(() => new CircuitBreaker({ name: 'a', timeoutMs: -1 }), 'timeoutMs', 'out_of_range')
  refused(() => new CircuitBreaker({ name: 'x'.repeat(1025) }), 'name', 'too_large')
  refused(() => new CircuitBreaker({ name: 'a' }).forceOpenAtLeast(-1), 'ms', 'out_of_range')
  refused(() => new Registry({ failureThreshold: 0 }), 'failureThreshold', 'zero')
})

// The same wrong values give the same codes in every binding (tests/option_problems.json; Python reads it too).
const fs = require('node:fs')
const path = require('node:path')
const PROBLEMS = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'option_problems.json'), 'utf8'))
const SPECIAL = { NaN: Number.NaN, Infinity: Number.POSITIVE_INFINITY }
const DURATIONS = new Set(['open_timeout', 'probe_timeout', 'max_age'])

for (const c of PROBLEMS.cases) {
  const camel = c.option.replace(/_(.)/g, (_, l) => l.toUpperCase()) + (DURATIONS.has(c.option) ? 'Ms' : '')
  const value = typeof c.value === 'string' ? SPECIAL[c.value] : c.value
  test(`${c.where} ${c.option} = ${c.value}: ${c.problem}`, () => {
    const make = {
      breaker: () => new CircuitBreaker({ name: 'a', [camel]: value }),
      retention: () => new RetentionQueue({ name: 'q', concurrencyLimit: 1, [camel]: value }),
      registry: () => new Registry({ [camel]: value }),
    }[c.where]
    refused(make, camel, c.problem)
  })
}
