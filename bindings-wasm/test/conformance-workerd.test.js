// The conformance suite inside workerd: every scenario of tests/conformance/
// against halfopen-wasm as a worker loads it (the `workerd` entry, the wasm
// module imported, not compiled at run time), run by the Node package's
// conformance runner.

import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { toEsm } from '../build.mjs'
import { workerdTest, writeWorker } from '../support/workerd.js'

const HERE = dirname(fileURLToPath(import.meta.url))
const SCENARIOS = join(HERE, '..', '..', 'tests', 'conformance')
const RUNNER = join(HERE, '..', '..', 'bindings-node', 'test', 'conformance-runner.js')

const MAIN = `
import assert from 'node:assert/strict'
import { CircuitBreaker, Registry, RetentionQueue } from './halfopen/workerd.js'
import { conformance } from './conformance-runner.js'
import scenarios from './scenarios.json'

export default {
  async test() {
    const { runDoc, steps } = conformance({ CircuitBreaker, Registry, RetentionQueue, assert })
    let cases = 0
    const failed = []
    for (const [file, doc] of Object.entries(scenarios)) {
      for (const { name, run } of runDoc(doc, file)) {
        cases += 1
        try {
          await run()
        } catch (err) {
          failed.push(name + ': ' + err.message)
        }
      }
    }
    console.log('conformance (workerd): ' + Object.keys(scenarios).length + ' files, ' + cases + ' scenarios, ' +
      steps() + ' steps run, ' + failed.length + ' failed')
    if (failed.length > 0) throw new Error(failed.join('\\n'))
  },
}
`

test('every conformance scenario passes inside workerd', async () => {
  const files = readdirSync(SCENARIOS).filter((f) => f.endsWith('.json') && f !== 'schema.json').sort()
  const scenarios = Object.fromEntries(files.map((f) => [f, JSON.parse(readFileSync(join(SCENARIOS, f), 'utf8'))]))
  const { config } = writeWorker({
    'main.js': MAIN,
    'conformance-runner.js': toEsm(readFileSync(RUNNER, 'utf8'), 'conformance-runner.js'),
    'scenarios.json': JSON.stringify(scenarios),
  })
  const { code, stdout, stderr } = await workerdTest(config)
  const output = stdout + stderr
  const counts = output.match(/conformance \(workerd\): (\d+) files, (\d+) scenarios, (\d+) steps run, (\d+) failed/)
  assert.ok(counts, output)
  console.log(counts[0])
  assert.equal(Number(counts[1]), files.length)
  const cases = Object.values(scenarios).reduce((n, doc) => n + doc.cases.length, 0)
  assert.equal(Number(counts[2]), cases, 'every scenario ran')
  assert.equal(Number(counts[4]), 0, output)
  assert.equal(code, 0, output)
})
