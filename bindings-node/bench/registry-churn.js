'use strict'
// A Registry at its capacity whose names come and go: 1,000 names held,
// 100 of them called in turn, and a new name every N calls (each evicting
// an idle one). ns per call of the hundred, median of 5 runs, for N = 100
// and 1,000. Run: `cd bindings-node && node bench/registry-churn.js`
// (HALFOPEN_PKG=<dir> measures another build of the package).

const path = require('node:path')
const { Registry } = require(process.env.HALFOPEN_PKG || path.join(__dirname, '..'))

const CAPACITY = 1_000
const HOT = 100
const CALLS = 200_000
const RUNS = 5

/** ns per call of the hot names, with a new name every `every` calls, and the evictions made. */
async function run(every) {
  const registry = new Registry({ capacity: CAPACITY })
  const fn = () => Promise.resolve(1)
  for (let i = 0; i < CAPACITY; i++) await registry.get(i < HOT ? `hot-${i}` : `cold-${i}`).execute(fn)
  const hot = Array.from({ length: HOT }, (_, i) => registry.get(`hot-${i}`))
  let fresh = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < CALLS; i++) {
    if (i % every === 0) await registry.get(`new-${fresh++}`).execute(fn)
    await hot[i % HOT].execute(fn)
  }
  return { ns: Number(process.hrtime.bigint() - start) / CALLS, evictions: registry.evictions }
}

async function main() {
  console.log(`\n### A Registry at its capacity (${CAPACITY} names, ${HOT} called in turn): ns per call, median of ${RUNS} runs\n`)
  console.log('| a new name every | ns/call | evictions |')
  console.log('|---:|---:|---:|')
  for (const every of [100, 1_000]) {
    const runs = []
    for (let k = 0; k < RUNS; k++) runs.push(await run(every))
    runs.sort((a, b) => a.ns - b.ns)
    const { ns, evictions } = runs[RUNS >> 1]
    console.log(`| ${every} calls | ${ns.toFixed(0)} | ${evictions} |`)
  }
}

main()
