'use strict'
// Runs every scenario file of tests/conformance/ (format: its README) against
// the `CircuitBreaker` class, one test per case: `call` steps go through
// `execute` (so the batched fast path is exercised), `acquire`/`record`
// through `tryAcquire`/`record`, with an injected clock. Unknown keys, ops or
// files fail the run. The runner itself is conformance-runner.js.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { backend, CircuitBreaker, Registry, RetentionQueue } = require(process.env.HALFOPEN_PACKAGE || '..')
const { conformance } = require('./conformance-runner.js')

const DIR = path.join(__dirname, '..', '..', 'tests', 'conformance')
// (The group protocol's cases, in group/, are group-conformance.test.js's.)
const NOT_SCENARIOS = new Set(['README.md', 'schema.json', 'group'])
const { runDoc, steps } = conformance({ CircuitBreaker, Registry, RetentionQueue, assert })

const files = fs.readdirSync(DIR).filter((f) => !NOT_SCENARIOS.has(f)).sort()
let cases = 0
for (const file of files) {
  assert.ok(file.endsWith('.json'), `${file} is not a scenario file`)
  for (const { name, run } of runDoc(JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')), file)) {
    cases += 1
    test(name, run)
  }
}

test.after(() => {
  const runtime = process.env.HALFOPEN_PACKAGE ? 'node, wasm package' : backend === 'wasm' ? 'node, wasm fallback' : 'node'
  console.log(`conformance (${runtime}): ${files.length} files, ${cases} scenarios, ${steps()} steps run`)
})
