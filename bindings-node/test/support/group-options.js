'use strict'
// The options of every group member the tests make (group.test.js in this
// process, group-member.js in child processes; test_group.py's Python
// members use the same values): one breaker's, and its group's.

module.exports = {
  breaker: { name: 'wa', failureThreshold: 5, windowMs: 60_000, openTimeoutMs: 400, halfOpenMaxAttempts: 2, probeTimeoutMs: 1_000 },
  group: { flushIntervalMs: 50, storeTimeoutMs: 40, quorum: 2 },
}
