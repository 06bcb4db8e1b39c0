'use strict'
// Serves halfopen's metrics as OpenTelemetry observable instruments
// (@opentelemetry/api 1, an optional peer dependency), read from the sources
// at each collection with one batch callback. The instruments (names, kinds,
// units, descriptions, attributes) are the core's table
// (core/src/opentelemetry.rs); the values are read from each source's
// Prometheus text, which the core writes, so that both expositions always
// show the same figures. Decisions, written down in the README:
// - a registry's own series (breakers held, evictions) have no attributes;
//   several registries are summed, as the Python collector does;
// - a source that fails to give its figures does not stop the others: what
//   they gave is recorded, and the failure is thrown by a second batch
//   callback, which runs right after the first and observes nothing (the SDK
//   reports it with the collection's errors; a throw from the first would
//   discard what it observed);
// - a breaker name must be unique across the sources (OpenTelemetry keeps
//   one value per instrument and attribute set).

const api = require('@opentelemetry/api')
const { opentelemetryInstruments } = require('./native.js')
const { version } = require('./package.json')

/** The core's instruments: `{ name, kind, unit, description, sample, label, attribute }`. */
const INSTRUMENTS = JSON.parse(opentelemetryInstruments())
const NAME_ATTRIBUTE = 'circuit.name'
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

/** Whether `source` gives a Prometheus text (a CircuitBreaker, a Registry, a Dispatcher, a RetentionQueue). */
function checkSource(source) {
  if (source === null || typeof source !== 'object' || typeof source.prometheus !== 'function') {
    throw new TypeError(
      `source must be a CircuitBreaker, a Registry, a Dispatcher or a RetentionQueue, got ${source === null ? 'null' : typeof source}`,
    )
  }
  return source
}

/**
 * Observes `sources` (one, or an array) with OpenTelemetry instruments made
 * on `meter` (default: `metrics.getMeter('halfopen', version)` of the
 * global meter provider). Returns a handle: `add(source)`,
 * `remove(source)`, `close()` (stops observing; the instruments stay
 * registered, with no value), and `instruments` (by name).
 */
function observeBreakerMetrics(sources, { meter = api.metrics.getMeter('halfopen', version) } = {}) {
  const observed = new Set((Array.isArray(sources) ? sources : [sources]).map(checkSource))
  const instruments = {}
  const byKey = new Map()
  for (const row of INSTRUMENTS) {
    instruments[row.name] = meter[CREATE[row.kind]](row.name, { description: row.description, unit: row.unit })
    byKey.set(`${row.sample}\0${row.label ?? ''}`, [instruments[row.name], row.attribute])
  }
  const observables = Object.values(instruments)
  let failures = []
  const callback = (result) => {
    const unlabelled = new Map()
    failures = []
    for (const source of observed) {
      let text
      try {
        text = source.prometheus()
      } catch (err) {
        failures.push(err)
        continue
      }
      for (const [sample, name, label, value, number] of samplesOf(text)) {
        const found = byKey.get(`${sample}\0${label ?? ''}`)
        if (found === undefined) continue
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
  meter.addBatchObservableCallback(report, observables)
  let closed = false
  return {
    instruments,
    add(source) {
      observed.add(checkSource(source))
    },
    remove(source) {
      observed.delete(source)
    },
    close() {
      if (closed) return
      closed = true
      meter.removeBatchObservableCallback(callback, observables)
      meter.removeBatchObservableCallback(report, observables)
    },
  }
}

module.exports = { INSTRUMENTS, observeBreakerMetrics }
