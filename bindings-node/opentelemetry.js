'use strict'
// Serves halfopen's metrics as OpenTelemetry observable instruments
// (@opentelemetry/api 1, an optional peer dependency), read from the sources
// at each collection by a batch callback. The instruments (names, kinds,
// units, descriptions, attributes) are the core's table
// (core/src/opentelemetry.rs); the values are read from each source's
// Prometheus text, which the core writes, so that both expositions always
// show the same figures. Decisions, written down in the README:
// - a registry's own series (breakers held, evictions) have no attributes;
//   several registries are summed, as the Python collector does;
// - one handle per meter (a second call adds to it): one set of instruments;
// - a source that fails to give its figures does not stop the others: what
//   they gave is recorded, and the failure is thrown by a second batch
//   callback, which runs right after the first and observes nothing (the SDK
//   reports it with the collection's errors; a throw from the first would
//   discard what it observed);
// - a breaker name in two sources (OpenTelemetry keeps one value per
//   instrument and attribute set) is the first source's, and reported so.

const api = require('@opentelemetry/api')
const { CircuitBreaker } = require('./lib/breaker.js')
const { Dispatcher } = require('./lib/dispatcher.js')
const { Registry } = require('./lib/registry.js')
const { RetentionQueue } = require('./lib/retention.js')
const { opentelemetryInstruments } = require('./native.js')
const { version } = require('./package.json')

/** The core's instruments: `{ name, kind, unit, description, sample, label, attribute }`. */
const INSTRUMENTS = JSON.parse(opentelemetryInstruments())
const NAME_ATTRIBUTE = 'circuit.name'
/** The sample every breaker has: the names of a source are its samples' of it. */
const STATE_SAMPLE = INSTRUMENTS[0].sample
const CREATE = {
  gauge: 'createObservableGauge',
  counter: 'createObservableCounter',
  updowncounter: 'createObservableUpDownCounter',
}

/** The label value that starts at `line[i]` (just after its opening quote), unescaped, and where its closing quote is. */
function labelValue(line, i) {
  let value = ''
  while (i < line.length && line[i] !== '"') {
    if (line[i] === '\\') {
      value += line[i + 1] === 'n' ? '\n' : line[i + 1]
      i += 2
    } else {
      value += line[i++]
    }
  }
  return [value, i]
}

/**
 * Each sample of a Prometheus text as the core writes it:
 * `[sample, name, label, labelValue, value]` (`name` undefined for an
 * unlabelled sample, `label` for a sample labelled by `name` alone).
 */
function* samplesOf(text) {
  for (const line of text.split('\n')) {
    if (line === '' || line[0] === '#') continue
    const brace = line.indexOf('{')
    if (brace === -1) {
      const space = line.indexOf(' ')
      yield [line.slice(0, space), undefined, undefined, undefined, Number(line.slice(space + 1))]
      continue
    }
    // `{name="` is 7 characters.
    let [name, i] = labelValue(line, brace + 7)
    let label
    let value
    if (line[i + 1] === ',') {
      const eq = line.indexOf('=', i + 2)
      label = line.slice(i + 2, eq)
      ;[value, i] = labelValue(line, eq + 2)
    }
    // `"} ` is 3 characters.
    yield [line.slice(0, brace), name, label, value, Number(line.slice(i + 3))]
  }
}

const SOURCES = [CircuitBreaker, Registry, Dispatcher, RetentionQueue]

/** `source`, if it is one of the package's CircuitBreaker, Registry, Dispatcher or RetentionQueue. */
function checkSource(source) {
  if (SOURCES.some((kind) => source instanceof kind)) return source
  const hint = source?._registry instanceof Registry ? " (a registry's breaker: observe the registry)" : ''
  const got = source === null ? 'null' : typeof source === 'object' ? (source.constructor?.name ?? 'object') : typeof source
  throw new TypeError(`source must be a CircuitBreaker, a Registry, a Dispatcher or a RetentionQueue, got ${got}${hint}`)
}

/** The handle observing on each meter (one set of instruments per meter). */
const HANDLES = new WeakMap()

/**
 * Observes `sources` (one, or an array) with OpenTelemetry instruments made
 * on `meter` (default: `metrics.getMeter('halfopen', version)` of the
 * global meter provider). One handle per meter: a second call on the same
 * meter adds its sources to the handle the first made, and returns it.
 * The handle: `add(source)`, `remove(source)`, `close()` (stops observing;
 * then `add` is an Error, and a new call makes a new handle), and
 * `instruments` (by name).
 */
function observeBreakerMetrics(sources, { meter = api.metrics.getMeter('halfopen', version) } = {}) {
  const list = (Array.isArray(sources) ? sources : [sources]).map(checkSource)
  const existing = HANDLES.get(meter)
  if (existing !== undefined) {
    for (const source of list) existing.add(source)
    return existing
  }
  const observed = new Set(list)
  const instruments = {}
  const byKey = new Map()
  for (const row of INSTRUMENTS) {
    instruments[row.name] = meter[CREATE[row.kind]](row.name, { description: row.description, unit: row.unit })
    byKey.set(`${row.sample}\0${row.label ?? ''}`, [instruments[row.name], row.attribute])
  }
  const observables = Object.values(instruments)
  const state = instruments[INSTRUMENTS[0].name]
  let failures = []
  const callback = (result) => {
    const unlabelled = new Map()
    // The names the earlier sources gave (a name in two sources is kept
    // from the first, and reported).
    const owners = new Set()
    failures = []
    // A copy: a source added during the collection waits for the next.
    for (const source of [...observed]) {
      let text
      try {
        text = source.prometheus()
        if (typeof text !== 'string') throw new TypeError(`prometheus() gave ${typeof text}, not a string`)
      } catch (err) {
        failures.push(err)
        continue
      }
      const samples = [...samplesOf(text)]
      const taken = new Set()
      for (const [sample, name] of samples) {
        if (sample !== STATE_SAMPLE || name === undefined) continue
        if (owners.has(name)) taken.add(name)
        else owners.add(name)
      }
      if (taken.size > 0) {
        const names = [...taken].map((n) => JSON.stringify(n)).join(', ')
        failures.push(new Error(`halfopen: breaker names in two sources (their series are the first's): ${names}`))
      }
      for (const [sample, name, label, value, number] of samples) {
        const found = byKey.get(`${sample}\0${label ?? ''}`)
        if (found === undefined || taken.has(name)) continue
        const [instrument, attribute] = found
        if (name === undefined) {
          unlabelled.set(instrument, (unlabelled.get(instrument) ?? 0) + number)
        } else {
          const attributes = label === undefined ? { [NAME_ATTRIBUTE]: name } : { [NAME_ATTRIBUTE]: name, [attribute]: value }
          result.observe(instrument, number, attributes)
        }
      }
    }
    for (const [instrument, number] of unlabelled) result.observe(instrument, number)
  }
  const report = () => {
    const failed = failures
    failures = []
    if (failed.length === 1) throw failed[0]
    if (failed.length > 1) throw new AggregateError(failed, 'halfopen: sources failed to give their metrics')
  }
  meter.addBatchObservableCallback(callback, observables)
  meter.addBatchObservableCallback(report, [state])
  let closed = false
  const handle = {
    instruments,
    add(source) {
      checkSource(source)
      if (closed) throw new Error('halfopen: this handle is closed; observeBreakerMetrics() again')
      observed.add(source)
    },
    remove(source) {
      observed.delete(source)
    },
    close() {
      if (closed) return
      closed = true
      observed.clear()
      HANDLES.delete(meter)
      meter.removeBatchObservableCallback(callback, observables)
      meter.removeBatchObservableCallback(report, [state])
    },
  }
  HANDLES.set(meter, handle)
  return handle
}

module.exports = { INSTRUMENTS, observeBreakerMetrics }
