//! `_native._collect`: the metric families of many breakers, registries and
//! retention queues at once, for `halfopen.prometheus.Collector`, built from
//! the native readings (no text is written or parsed): each family's
//! samples are `prometheus_client` `Sample`s made here, so that a scrape of
//! 10,000 breakers costs what making its 150,000 samples costs.
//!
//! The families' names, types and help texts are the core's exposition's
//! own (read once from its headers, rendered with no breaker); each
//! sample's value is the one that exposition writes (the same reading, the
//! same rounding). One breaker name in two sources would make two series
//! of one name: a `ValueError`. A registry's own gauges (`circuit_registry_*`,
//! unlabelled) are summed over the registries collected.

use std::collections::HashSet;
use std::sync::OnceLock;

use halfopen::retention::{RetentionReading, exposition};
use halfopen::{Config, MetricsReading, Registry};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyModule, PyString, PyTuple, PyType};

use crate::breaker::{Gauges, NativeBreaker};
use crate::registry::NativeRegistry;
use crate::retention::NativeRetentionQueue;
use crate::time::secs;

/// What a family is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Breaker,
    Registry,
    Retention,
    /// A grouped breaker's group (`halfopen::group::render_prometheus`).
    Grouped,
}

/// A family as the exposition's headers give it.
struct Family {
    name: String,
    kind: String,
    help: String,
    group: Group,
}

/// Every family, in the exposition's order: a breaker's, a registry's, a
/// retention queue's, a grouped breaker's group.
fn families() -> &'static [Family] {
    static FAMILIES: OnceLock<Vec<Family>> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let mut out = Vec::new();
        let mut text = String::new();
        // Writing into a String cannot fail; an empty registry writes every
        // breaker family's headers, then its own families.
        let empty = Registry::<Gauges>::new(Config::default(), 1).expect("the default configuration is valid");
        let _ = empty.render_prometheus(&mut text, halfopen::Instant::ZERO);
        let breaker_families = {
            let mut only = String::new();
            let _ = halfopen::prometheus::render(&mut only, std::iter::empty);
            headers(&only).len()
        };
        for (i, (name, kind, help)) in headers(&text).into_iter().enumerate() {
            let group = if i < breaker_families { Group::Breaker } else { Group::Registry };
            out.push(Family { name, kind, help, group });
        }
        let mut retention = String::new();
        let _ = exposition::render(&mut retention, std::iter::empty);
        for (name, kind, help) in headers(&retention) {
            out.push(Family { name, kind, help, group: Group::Retention });
        }
        let mut grouped = String::new();
        let one = halfopen::group::GroupReading { degraded: false, phase: None };
        let _ = halfopen::group::render_prometheus(&mut grouped, || std::iter::once(("", one)));
        for (name, kind, help) in headers(&grouped) {
            out.push(Family { name, kind, help, group: Group::Grouped });
        }
        out
    })
}

/// `(name, type, help)` of each family whose `# HELP` and `# TYPE` lines
/// `text` holds, in order.
fn headers(text: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push((name.to_owned(), String::new(), help.to_owned()));
        } else if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, kind)) = rest.split_once(' ')
            && let Some(family) = out.last_mut().filter(|f| f.0 == name)
        {
            family.1 = kind.to_owned();
        }
    }
    out
}

/// A breaker family's value for a reading, as the exposition writes it.
fn breaker_value(family: &str, m: &MetricsReading) -> Option<f64> {
    let c = &m.counters;
    let count = |n: u64| Some(n as f64);
    match family {
        "circuit_state" => count(m.state.gauge().into()),
        "circuit_failures_total" => count(c.failures),
        "circuit_opens_total" => count(c.opens),
        "circuit_calls_admitted_total" => count(c.admitted),
        "circuit_calls_rejected_total" => count(c.rejections),
        "circuit_successes_total" => count(c.successes),
        "circuit_slow_calls_total" => count(c.slow),
        "circuit_ignored_total" => count(c.ignored),
        "circuit_cancelled_total" => count(c.cancelled),
        "circuit_stale_results_total" => count(c.stale),
        "circuit_opens_last_24h" => count(m.opens_last_24h.into()),
        "circuit_open_mean_seconds" => m.mean_time_open.map(secs),
        // The exposition's rounding: millionths of the ratio, half up.
        "circuit_upstream_error_ratio" => m.error_rate.map(|p| ((p * 10_000.0 + 0.5) as u64) as f64 / 1e6),
        _ => None,
    }
}

/// A group family's value for a reading, as the exposition writes it.
fn group_value(family: &str, g: &halfopen::group::GroupReading) -> Option<f64> {
    match family {
        "circuit_group_degraded" => Some(f64::from(u8::from(g.degraded))),
        "circuit_group_state" => g.phase.map(|p| f64::from(p.gauge())),
        _ => None,
    }
}

/// A retention family's value for a reading.
fn retention_value(family: &str, r: &RetentionReading) -> Option<f64> {
    let c = &r.counters;
    let n = match family {
        "circuit_retained_messages" => r.retained,
        "circuit_retained_bytes" => r.bytes,
        "circuit_retention_in_flight" => r.in_flight,
        "circuit_messages_submitted_total" => c.submitted,
        "circuit_messages_delivered_total" => c.delivered,
        "circuit_messages_refused_total" => c.refused,
        "circuit_messages_dropped_total" => c.dropped,
        "circuit_dead_letters_total" => c.dead,
        _ => return None,
    };
    Some(n as f64)
}

/// Makes `prometheus_client` samples: `Sample(name, labels, value, None, ...)`
/// built as its `tuple.__new__` builds it (the class's own `__new__` is
/// Python). Whole values below 1,024 (most counts) share their floats.
struct Samples<'py> {
    py: Python<'py>,
    class: Bound<'py, PyAny>,
    tuple_new: Bound<'py, PyAny>,
    /// `None` for each field after `value` (timestamp, exemplar, ...).
    rest: usize,
    small: Vec<Bound<'py, PyFloat>>,
}

impl<'py> Samples<'py> {
    fn new(sample: &Bound<'py, PyType>) -> PyResult<Self> {
        let py = sample.py();
        Ok(Samples {
            py,
            class: sample.clone().into_any(),
            tuple_new: py.get_type::<PyTuple>().getattr("__new__")?,
            rest: sample.getattr("_fields")?.len()?.saturating_sub(3),
            small: (0..1024).map(|n| PyFloat::new(py, f64::from(n))).collect(),
        })
    }

    fn make(
        &self,
        name: &Bound<'py, PyString>,
        labels: &Bound<'py, PyDict>,
        value: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let small = (value.fract() == 0.0 && (0.0..1024.0).contains(&value)).then(|| &self.small[value as usize]);
        let value = small.map_or_else(|| PyFloat::new(py, value), Clone::clone);
        let mut fields = Vec::with_capacity(3 + self.rest);
        fields.extend([name.clone().into_any(), labels.clone().into_any(), value.into_any()]);
        fields.resize_with(3 + self.rest, || py.None().into_bound(py));
        self.tuple_new.call1((&self.class, PyTuple::new(py, fields)?))
    }

    /// `{"name": breaker}` (and `extra`, if given).
    fn labels(&self, breaker: &Bound<'py, PyString>, extra: Option<(&str, &str)>) -> PyResult<Bound<'py, PyDict>> {
        let labels = PyDict::new(self.py);
        labels.set_item(pyo3::intern!(self.py, "name"), breaker)?;
        if let Some((k, v)) = extra {
            labels.set_item(k, v)?;
        }
        Ok(labels)
    }
}

/// Python's cycle collector paused while it lives (if it was running).
struct GcPaused<'py>(Option<Bound<'py, PyModule>>);

impl<'py> GcPaused<'py> {
    fn new(py: Python<'py>) -> PyResult<Self> {
        let gc = py.import("gc")?;
        if !gc.call_method0("isenabled")?.is_truthy()? {
            return Ok(GcPaused(None));
        }
        gc.call_method0("disable")?;
        Ok(GcPaused(Some(gc)))
    }
}

impl Drop for GcPaused<'_> {
    fn drop(&mut self) {
        if let Some(gc) = &self.0 {
            let _ = gc.call_method0("enable");
        }
    }
}

/// Each breaker's name and metrics.
pub(crate) type Named = Vec<(String, MetricsReading)>;

/// What the sources read now.
#[derive(Default)]
struct Readings {
    breakers: Named,
    /// Breakers held and evictions, summed over the registries (`None`: no registry).
    registries: Option<(u64, u64)>,
    queues: Vec<(String, RetentionReading)>,
    /// Each grouped breaker's group.
    groups: Vec<(String, halfopen::group::GroupReading)>,
}

impl Readings {
    fn read(&mut self, source: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = source.py();
        if let Ok(b) = source.cast::<NativeBreaker>() {
            let (name, reading) = b.get().reading(py)?;
            if let Some(g) = b.get().group_reading() {
                self.groups.push((name.clone(), g));
            }
            self.breakers.push((name, reading));
        } else if let Ok(r) = source.cast::<NativeRegistry>() {
            self.groups.extend(r.get().group_readings());
            let (breakers, held, evictions) = r.get().readings(py)?;
            self.breakers.extend(breakers);
            let (h, e) = self.registries.unwrap_or_default();
            self.registries = Some((h + held, e + evictions));
        } else if let Ok(q) = source.cast::<NativeRetentionQueue>() {
            let (name, breaker, retention) = q.get().readings(py)?;
            self.breakers.push((name.clone(), breaker));
            self.queues.push((name, retention));
        } else {
            return Err(crate::errors::not_a_source(source));
        }
        Ok(())
    }
}

/// A family collected: `(name, type, help, [Sample])`.
type Collected<'py> = (String, String, String, Bound<'py, PyList>);

/// Every family of `sources` (breakers, registries, retention queues) as
/// `[(name, type, help, [Sample])]`, `sample` being `prometheus_client`'s
/// `Sample` class.
#[pyfunction]
pub(crate) fn _collect<'py>(
    py: Python<'py>,
    sources: Vec<Bound<'py, PyAny>>,
    sample: &Bound<'py, PyType>,
) -> PyResult<Vec<Collected<'py>>> {
    let mut readings = Readings::default();
    for source in &sources {
        readings.read(source)?;
    }
    let mut seen = HashSet::with_capacity(readings.breakers.len());
    if let Some((name, _)) = readings.breakers.iter().find(|(name, _)| !seen.insert(name.as_str())) {
        return Err(crate::errors::same_name(name));
    }
    let samples = Samples::new(sample)?;
    // 150,000 new tuples would set Python's cycle collector off hundreds of
    // times, traversing the whole heap (most of a scrape's time); they hold
    // no cycle, and no other thread runs while this loop holds the GIL (it
    // calls no Python code). Resumed when this returns.
    let _paused = GcPaused::new(py)?;
    // Each name as one Python str, and its `{"name": name}` as one dict,
    // shared by its samples (prometheus_client never changes labels).
    let labelled = |names: Vec<&str>| -> PyResult<Vec<(Bound<'py, PyString>, Bound<'py, PyDict>)>> {
        names
            .into_iter()
            .map(|n| {
                let name = PyString::new(py, n);
                let labels = samples.labels(&name, None)?;
                Ok((name, labels))
            })
            .collect()
    };
    let names = labelled(readings.breakers.iter().map(|(n, _)| n.as_str()).collect())?;
    let queue_names = labelled(readings.queues.iter().map(|(n, _)| n.as_str()).collect())?;
    let group_names = labelled(readings.groups.iter().map(|(n, _)| n.as_str()).collect())?;
    let mut out = Vec::new();
    for family in families() {
        let list = PyList::empty(py);
        let series = PyString::new(py, &family.name);
        match family.group {
            Group::Breaker => breaker_samples(&samples, family, &series, &names, &readings.breakers, &list)?,
            Group::Registry => {
                let Some((held, evictions)) = readings.registries else { continue };
                let value = match family.name.as_str() {
                    "circuit_registry_breakers" => Some(held),
                    "circuit_registry_evictions_total" => Some(evictions),
                    _ => None,
                };
                if let Some(v) = value {
                    list.append(samples.make(&series, &PyDict::new(py), v as f64)?)?;
                }
            }
            Group::Grouped => {
                if readings.groups.is_empty() {
                    continue;
                }
                for ((_, labels), (_, g)) in group_names.iter().zip(&readings.groups) {
                    if let Some(v) = group_value(&family.name, g) {
                        list.append(samples.make(&series, labels, v)?)?;
                    }
                }
            }
            Group::Retention => {
                if readings.queues.is_empty() {
                    continue;
                }
                for ((_, labels), (_, r)) in queue_names.iter().zip(&readings.queues) {
                    if let Some(v) = retention_value(&family.name, r) {
                        list.append(samples.make(&series, labels, v)?)?;
                    }
                }
            }
        }
        out.push((family.name.clone(), family.kind.clone(), family.help.clone(), list));
    }
    Ok(out)
}

/// The samples of a breaker family (the state times and the latency
/// summary have labels or series of their own).
fn breaker_samples<'py>(
    samples: &Samples<'py>,
    family: &Family,
    series: &Bound<'py, PyString>,
    names: &[(Bound<'py, PyString>, Bound<'py, PyDict>)],
    readings: &[(String, MetricsReading)],
    list: &Bound<'py, PyList>,
) -> PyResult<()> {
    let py = samples.py;
    let (sum, count) =
        (pyo3::intern!(py, "circuit_latency_seconds_sum"), pyo3::intern!(py, "circuit_latency_seconds_count"));
    for ((name, labels), (_, m)) in names.iter().zip(readings) {
        match family.name.as_str() {
            "circuit_state_seconds_total" => {
                for (state, time) in [("closed", m.time_closed), ("half_open", m.time_half_open), ("open", m.time_open)]
                {
                    list.append(samples.make(series, &samples.labels(name, Some(("state", state)))?, secs(time))?)?;
                }
            }
            "circuit_latency_seconds" => {
                let Some(l) = m.latency else { continue };
                for (q, d) in [("0.5", l.p50), ("0.95", l.p95), ("0.99", l.p99), ("1", l.max)] {
                    list.append(samples.make(series, &samples.labels(name, Some(("quantile", q)))?, secs(d))?)?;
                }
                list.append(samples.make(sum, labels, secs(l.sum))?)?;
                list.append(samples.make(count, labels, l.count as f64)?)?;
            }
            other => {
                if let Some(v) = breaker_value(other, m) {
                    list.append(samples.make(series, labels, v)?)?;
                }
            }
        }
    }
    Ok(())
}

/// Every OpenTelemetry instrument as the core's JSON
/// (`halfopen::opentelemetry::write_json`), for `halfopen.opentelemetry`.
#[pyfunction]
pub(crate) fn _opentelemetry_instruments() -> String {
    let mut json = String::new();
    // Writing into a String cannot fail.
    let _ = halfopen::opentelemetry::write_json(&mut json);
    json
}
