'use strict'
// Seed 000's TypeScript CircuitBreaker, ported to plain JavaScript line by
// line (types removed, nothing else changed), for side-by-side benchmarks and
// the drop-in proof.

class CircuitBreaker {
  constructor(opts) {
    this.opts = opts
    this.state = 'CLOSED'
    this.failures = [] // timestamps of recent failures
    this.openedAt = 0
    this.halfOpenAttempts = 0
    this.halfOpenSuccesses = 0
    this.currentTimeoutMs = opts.openTimeoutMs
  }

  async execute(fn) {
    this.transitionIfNeeded()

    if (this.state === 'OPEN') {
      throw new Error(`CircuitBreaker[${this.opts.name}] is OPEN`)
    }

    if (this.state === 'HALF_OPEN') {
      if (this.halfOpenAttempts >= this.opts.halfOpenMaxAttempts) {
        throw new Error(`CircuitBreaker[${this.opts.name}] HALF_OPEN limit reached`)
      }
      this.halfOpenAttempts++
    }

    try {
      const result = await fn()
      this.onSuccess()
      return result
    } catch (err) {
      this.onFailure()
      throw err
    }
  }

  transitionIfNeeded() {
    const now = Date.now()
    if (this.state === 'OPEN' && now - this.openedAt >= this.currentTimeoutMs) {
      this.state = 'HALF_OPEN'
      this.halfOpenAttempts = 0
      this.halfOpenSuccesses = 0
    }
    // Drop failures outside the window
    this.failures = this.failures.filter((t) => now - t < this.opts.windowMs)
  }

  onSuccess() {
    if (this.state === 'HALF_OPEN') {
      this.halfOpenSuccesses++
      if (this.halfOpenSuccesses >= this.opts.halfOpenMaxAttempts) {
        this.state = 'CLOSED'
        this.failures = []
        this.currentTimeoutMs = this.opts.openTimeoutMs // reset backoff
      }
    }
  }

  onFailure() {
    if (this.state === 'HALF_OPEN') {
      this.state = 'OPEN'
      this.openedAt = Date.now()
      this.currentTimeoutMs = Math.min(this.currentTimeoutMs * 2, 5 * 60_000) // doubles up to 5 min
      return
    }
    this.failures.push(Date.now())
    if (this.failures.length >= this.opts.failureThreshold) {
      this.state = 'OPEN'
      this.openedAt = Date.now()
    }
  }

  getState() {
    return this.state
  }
}

module.exports = { CircuitBreaker }
