//! `NativeRetentionQueue`: the core's retaining dispatcher (seed 001) over
//! Python objects, behind a mutex (held only while the core decides: the
//! clock is read, and messages are handed back, outside it). The Python
//! classes `halfopen.RetentionQueue` (sans-IO) and `halfopen.Dispatcher`
//! (asyncio, with a `send` coroutine) build on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use halfopen::retention::{
    DeadReason, Event, Overflow, Probe, Rate, Reported, RetentionConfig, RetentionQueue, RetentionReading,
    RetentionSnapshot, Submitted, exposition,
};
use halfopen::{Breaker, Config, LatencyHistogram, Metrics, Problem};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::breaker::{Gauges, force_open_for, histogram, metrics_dict, seconds_for};
use crate::classify::outcome_of;
use crate::errors::{
    U32_RANGE, int_problem, option_error, out_of_memory, retention_error, snapshot_error, type_name, value_error,
};
use crate::events::StateChange;
use crate::host::{Host, snapshot_text};
use crate::names::state_name;
use crate::options;
use crate::time::{micros, secs_at};

type Core = RetentionQueue<Py<PyAny>, Arc<Config>, Gauges>;

/// A whole number for `option`, at most `max` (`range` says so in words).
fn whole(py: Python<'_>, option: &str, v: Option<&Bound<'_, PyAny>>, max: u64, range: &str) -> PyResult<Option<u64>> {
    let Some(v) = v.filter(|v| !v.is_none()) else { return Ok(None) };
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(option_error(py, true, option, &format!("must be an int, got {}", type_name(v))));
    }
    match v.extract::<u64>() {
        Ok(n) if n <= max => Ok(Some(n)),
        Ok(_) => Err(value_error(py, option, Problem::TooLarge, range)),
        Err(_) => Err(value_error(py, option, int_problem(v), range)),
    }
}

/// The retention options (keyword arguments), checked.
struct RetentionArgs<'a, 'py> {
    max_messages: Option<&'a Bound<'py, PyAny>>,
    max_bytes: Option<&'a Bound<'py, PyAny>>,
    overflow: Option<&'a Bound<'py, PyAny>>,
    probe: Option<&'a Bound<'py, PyAny>>,
    max_attempts: Option<&'a Bound<'py, PyAny>>,
    max_age: Option<&'a Bound<'py, PyAny>>,
    release_rate: Option<&'a Bound<'py, PyAny>>,
}

impl RetentionArgs<'_, '_> {
    fn config(&self, py: Python<'_>) -> PyResult<RetentionConfig> {
        let u32_max = u64::from(u32::MAX);
        let mut c = RetentionConfig {
            max_messages: whole(py, "max_messages", self.max_messages, u32_max, U32_RANGE)?.map(|n| n as u32),
            max_bytes: whole(
                py,
                "max_bytes",
                self.max_bytes,
                halfopen::MAX_SAVED_COUNTER,
                "must be a whole number from 1 to 2**53 - 1",
            )?,
            max_attempts: whole(py, "max_attempts", self.max_attempts, u32_max, U32_RANGE)?.map(|n| n as u32),
            ..RetentionConfig::default()
        };
        if let Some(age) = self.max_age.filter(|v| !v.is_none()) {
            let number =
                !age.is_instance_of::<PyBool>() && (age.is_instance_of::<PyInt>() || age.is_instance_of::<PyFloat>());
            if !number {
                return Err(option_error(py, true, "max_age", &format!("must be a number, got {}", type_name(age))));
            }
            let age = crate::time::float_of(age);
            let us = micros(age).ok_or_else(|| {
                let (problem, words) = crate::time::seconds_problem(age);
                value_error(py, "max_age", problem, words)
            })?;
            c.max_age = Some(halfopen::Duration::from_micros(us));
        }
        let choice = |option: &str, v: Option<&Bound<'_, PyAny>>, names: [&str; 2]| -> PyResult<bool> {
            let Some(v) = v.filter(|v| !v.is_none()) else { return Ok(false) };
            let problem = format!("must be {:?} or {:?}", names[0], names[1]);
            match v.cast::<PyString>().ok().and_then(|s| s.to_str().ok().map(str::to_owned)) {
                Some(s) if s == names[0] => Ok(false),
                Some(s) if s == names[1] => Ok(true),
                Some(_) => Err(value_error(py, option, Problem::OutOfRange, &problem)),
                None => Err(option_error(py, true, option, &format!("{problem}, got {}", type_name(v)))),
            }
        };
        if choice("overflow", self.overflow, ["reject", "drop_oldest"])? {
            c.overflow = Overflow::DropOldest;
        }
        if choice("probe", self.probe, ["oldest", "new_message"])? {
            c.probe = Probe::NewMessage;
        }
        if let Some(rate) = self.release_rate.filter(|v| !v.is_none()) {
            let pair = rate.cast::<PyTuple>().ok().filter(|t| t.len() == 2);
            let Some(pair) = pair else {
                let problem = format!("must be a tuple (per_second, burst), got {}", type_name(rate));
                return Err(option_error(py, true, "release_rate", &problem));
            };
            let part = |i: usize| -> PyResult<u32> {
                let v = pair.get_item(i)?;
                Ok(whole(py, "release_rate", Some(&v), u32_max, U32_RANGE)?.unwrap_or(0) as u32)
            };
            c.release_rate = Some(Rate { per_second: part(0)?, burst: part(1)? });
        }
        Ok(c)
    }
}

/// The breaker and retention configurations a queue was built from, to
/// restore with.
struct Built {
    config: Arc<Config>,
    retention: RetentionConfig,
    latency: bool,
}

#[pyclass(frozen, subclass, module = "halfopen._native")]
pub struct NativeRetentionQueue {
    /// The queue's name (its Prometheus label).
    #[pyo3(get)]
    name: Py<PyString>,
    core: Mutex<Core>,
    built: Built,
    host: Host,
}

impl NativeRetentionQueue {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The name, the breaker's metrics and the retention's reading now (for
    /// `_native._collect`).
    pub(crate) fn readings(&self, py: Python<'_>) -> PyResult<(String, halfopen::MetricsReading, RetentionReading)> {
        let now = self.host.now(py)?;
        let (m, r) = {
            let core = self.lock();
            (core.breaker().metrics(now), core.reading())
        };
        Ok((self.text(py), m, r))
    }

    fn text(&self, py: Python<'_>) -> String {
        self.name.bind(py).to_cow().map(|n| n.into_owned()).unwrap_or_default()
    }

    /// Replaces the core with one restored from `snapshot`, the messages
    /// taken from `messages` (a dict: sequence number -> message).
    fn load(
        &self,
        py: Python<'_>,
        snapshot: Result<RetentionSnapshot, halfopen::SnapshotError>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let messages = messages.cast::<PyDict>().map_err(|_| {
            let problem = format!("must be a dict of sequence numbers to messages, got {}", type_name(messages));
            option_error(py, true, "messages", &problem)
        })?;
        // A queue that has held messages would lose them, and its earlier
        // sequence numbers would name the restored ones.
        if self.lock().counters().submitted > 0 {
            return Err(option_error(
                py,
                false,
                "snapshot",
                "can be restored only into a queue that has taken no message (make a new one)",
            ));
        }
        let now = self.host.now(py)?;
        let mut held: HashMap<u64, Py<PyAny>> = HashMap::with_capacity(messages.len());
        for (seq, message) in messages.iter() {
            let seq = seq
                .extract::<u64>()
                .map_err(|_| option_error(py, true, "messages", "must map int sequence numbers to messages"))?;
            held.insert(seq, message.unbind());
        }
        let b = &self.built;
        let restored = snapshot.and_then(|s| {
            Core::restore(Arc::clone(&b.config), b.retention, &s, now, self.host.elapsed(), |seq| held.remove(&seq))
        });
        let mut restored = restored.map_err(|e| snapshot_error(py, e))?;
        if !held.is_empty() {
            let why = "the snapshot does not hold every message given with it (they would be lost)";
            return Err(snapshot_error(py, halfopen::SnapshotError::Corrupt(why)));
        }
        // The histogram is not in snapshots: it starts afresh.
        restored.breaker_mut().meter_mut().1 = b.latency.then(Box::default);
        // The old core (and its messages) is dropped after the lock is released.
        let old = std::mem::replace(&mut *self.lock(), restored);
        drop(old);
        Ok(())
    }
}

/// An event as a tuple: `(kind, seq, message, reason, attempts, change)`.
fn event_tuple<'py>(py: Python<'py>, name: &str, event: Event<Py<PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
    let none = || py.None();
    match event {
        Event::Transition(t) => {
            let change = Py::new(py, StateChange::new(py, name.to_owned(), t))?;
            PyTuple::new(
                py,
                [
                    PyString::new(py, "transition").into_any().unbind(),
                    none(),
                    none(),
                    none(),
                    none(),
                    change.into_any(),
                ],
            )
        }
        Event::Dead { seq, message, reason, attempts } => {
            let reason = match reason {
                DeadReason::Attempts => "attempts",
                DeadReason::Age => "age",
                DeadReason::Refused => "refused",
            };
            let seq = seq.into_pyobject(py)?.into_any().unbind();
            let reason = PyString::new(py, reason).into_any().unbind();
            let attempts = attempts.into_pyobject(py)?.into_any().unbind();
            PyTuple::new(py, [PyString::new(py, "dead").into_any().unbind(), seq, message, reason, attempts, none()])
        }
        Event::Dropped { seq, message } => {
            let seq = seq.into_pyobject(py)?.into_any().unbind();
            PyTuple::new(py, [PyString::new(py, "dropped").into_any().unbind(), seq, message, none(), none(), none()])
        }
    }
}

#[pymethods]
impl NativeRetentionQueue {
    #[new]
    #[pyo3(signature = (
        name, /, *, clock = None, shared_clock = None, latency_histogram = None, max_messages = None, max_bytes = None,
        overflow = None, probe = None, max_attempts = None, max_age = None, release_rate = None, **options
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyAny>>,
        shared_clock: Option<&Bound<'_, PyAny>>,
        latency_histogram: Option<&Bound<'_, PyAny>>,
        max_messages: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
        overflow: Option<&Bound<'_, PyAny>>,
        probe: Option<&Bound<'_, PyAny>>,
        max_attempts: Option<&Bound<'_, PyAny>>,
        max_age: Option<&Bound<'_, PyAny>>,
        release_rate: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let latency = histogram(py, latency_histogram)?;
        let text = options::name_of(py, name)?;
        let name = PyString::new(py, &text).unbind();
        let empty = PyDict::new(py);
        let config = options::config(py, options.unwrap_or(&empty))?;
        let retention = RetentionArgs { max_messages, max_bytes, overflow, probe, max_attempts, max_age, release_rate }
            .config(py)?;
        let host = Host::new(py, None, clock, shared_clock, None)?;
        let config = halfopen::shared_config(config);
        let meter = (Metrics::default(), latency.then(Box::<LatencyHistogram>::default));
        let breaker =
            Breaker::with_meter(Arc::clone(&config), meter).map_err(|e| options::config_error(py, e, &empty))?;
        let core = RetentionQueue::new(breaker, retention).map_err(|e| retention_error(py, e))?;
        Ok(NativeRetentionQueue { name, core: Mutex::new(core), built: Built { config, retention, latency }, host })
    }

    /// Submits `message` of `size` bytes: `("send", seq)` (send it now,
    /// then `report`), `("retained", seq)` or `("refused", None)` (a bound
    /// is reached: not held).
    fn _submit<'py>(&self, py: Python<'py>, message: Py<PyAny>, size: u64) -> PyResult<(&'static str, Option<u64>)> {
        let now = self.host.now(py)?;
        let result = self.lock().submit(message, size, now);
        Ok(match result {
            Ok(Submitted::Send(seq)) => ("send", Some(seq)),
            Ok(Submitted::Retained(seq)) => ("retained", Some(seq)),
            // The message is dropped here, with the lock released.
            Err(_) => ("refused", None),
        })
    }

    /// Every retained message that may be sent now, oldest first: `[(seq, message)]`.
    fn next(&self, py: Python<'_>) -> PyResult<Vec<(u64, Py<PyAny>)>> {
        let now = self.host.now(py)?;
        let mut core = self.lock();
        let mut out = Vec::new();
        while let Some(seq) = core.next(now) {
            let message = core.message(seq).map_or_else(|| py.None(), |m| m.clone_ref(py));
            out.push((seq, message));
        }
        Ok(out)
    }

    /// Reports the send of `seq` (`"success"`, `"failure"`, `"ignored"`,
    /// `"cancelled"`): `"delivered"`, `"retained"`, `"dead"` or `"unknown"`
    /// (not in flight).
    fn report(&self, py: Python<'_>, seq: &Bound<'_, PyAny>, outcome: &str) -> PyResult<&'static str> {
        let outcome = outcome_of(py, outcome)?;
        if seq.is_instance_of::<PyBool>() || !seq.is_instance_of::<PyInt>() {
            return Err(option_error(py, true, "seq", &format!("must be an int, got {}", type_name(seq))));
        }
        let Ok(seq) = seq.extract::<u64>() else { return Ok("unknown") };
        let (now, read) = self.host.now_for_report(py);
        let reported = self.lock().report(seq, outcome, now);
        // Reported whatever the clock did; an interrupt from it is raised after.
        read?;
        Ok(match reported {
            Some(Reported::Delivered(_message)) => "delivered",
            Some(Reported::Retained) => "retained",
            Some(Reported::Dead) => "dead",
            None => "unknown",
        })
    }

    /// The clock's reading now, in seconds (what `poll_timeout` is on).
    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(secs_at(self.host.now(py)?))
    }

    /// Applies what is due now: an open time that ended, messages aged out.
    fn handle_timeout(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.host.now(py)?;
        self.lock().handle_timeout(now);
        Ok(())
    }

    /// When `next()` may hand out something it cannot now, or a message ages
    /// out (seconds on the clock); `None`: not by time.
    fn poll_timeout(&self) -> Option<f64> {
        self.lock().poll_timeout().map(secs_at)
    }

    /// The events since the last call, oldest first, as tuples
    /// `(kind, seq, message, reason, attempts, change)`.
    fn take_events<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let events: Vec<Event<Py<PyAny>>> = {
            let mut core = self.lock();
            std::iter::from_fn(|| core.poll_event()).collect()
        };
        let name = self.text(py);
        events.into_iter().map(|e| event_tuple(py, &name, e)).collect()
    }

    /// The message in flight as `seq`, or `None` (also for what is not a sequence number).
    fn message(&self, py: Python<'_>, seq: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
        let seq = seq.extract::<u64>().ok().filter(|_| !seq.is_instance_of::<PyBool>())?;
        self.lock().message(seq).map(|m| m.clone_ref(py))
    }

    /// The sequence numbers held, retained (in order) then in flight.
    fn held_seqs(&self) -> Vec<u64> {
        self.lock().held().collect()
    }

    /// The sequence numbers retained (not in flight), in the order `next()`
    /// hands them out.
    fn retained_seqs(&self) -> Vec<u64> {
        let core = self.lock();
        core.held().take(core.retained()).collect()
    }

    /// `"CLOSED"`, `"OPEN"` or `"HALF_OPEN"`.
    #[getter]
    fn state_name(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.host.now(py)?;
        Ok(state_name(self.lock().breaker().state(now)))
    }

    /// What it holds and did.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.lock().reading();
        let c = r.counters;
        let d = PyDict::new(py);
        for (key, v) in [
            ("retained", r.retained),
            ("in_flight", r.in_flight),
            ("bytes", r.bytes),
            ("submitted", c.submitted),
            ("refused", c.refused),
            ("sent", c.sent),
            ("delivered", c.delivered),
            ("failed", c.failed),
            ("dead", c.dead),
            ("dropped", c.dropped),
        ] {
            d.set_item(key, v)?;
        }
        Ok(d)
    }

    /// The breaker's metrics (as `CircuitBreaker.metrics()`).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.host.now(py)?;
        let reading = {
            let core = self.lock();
            (core.breaker().metrics(now), core.breaker().counts(now))
        };
        metrics_dict(py, reading)
    }

    /// The Prometheus text of the breaker and of the retention.
    fn prometheus(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.host.now(py)?;
        let (m, r) = {
            let core = self.lock();
            (core.breaker().metrics(now), core.reading())
        };
        let name = self.text(py);
        halfopen::try_render(|out| {
            halfopen::prometheus::render(out, || std::iter::once((name.as_str(), m)))?;
            exposition::render(out, || std::iter::once((name.as_str(), r)))
        })
        .map_err(out_of_memory("the exposition"))
    }

    /// Holds the breaker open for `seconds`, or until `release()`.
    #[pyo3(signature = (seconds = None))]
    fn force_open(&self, py: Python<'_>, seconds: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let duration = force_open_for(py, seconds)?;
        let now = self.host.now(py)?;
        self.lock().force_open(now, duration);
        Ok(())
    }

    /// Holds the breaker open for at least `seconds` (the partner's
    /// `Retry-After`), never shortening an open period in force.
    fn force_open_at_least(&self, py: Python<'_>, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        let duration = seconds_for(py, seconds)?;
        let now = self.host.now(py)?;
        self.lock().force_open_at_least(now, duration);
        Ok(())
    }

    /// Ends `force_open()`.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.host.now(py)?;
        self.lock().release(now);
        Ok(())
    }

    /// The breaker state this queue leaves for an outbox's next holder
    /// (`outbox::carried::left`), as JSON.
    fn _left_state(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.host.now(py)?;
        let state = halfopen::outbox::carried::left(self.lock().breaker(), now);
        state.try_into_json().map_err(out_of_memory("the breaker state"))
    }

    /// Resumes the breaker from the state an outbox's last holder left
    /// `age_us` microseconds ago (`outbox::carried::resume`): a
    /// `SnapshotError` (its kind) if it cannot, and nothing changes.
    fn _resume_state(&self, py: Python<'_>, text: &str, age_us: u64) -> PyResult<()> {
        let now = self.host.now(py)?;
        let state = halfopen::Snapshot::from_json(text).map_err(|e| snapshot_error(py, e))?;
        let mut core = self.lock();
        halfopen::outbox::carried::resume(core.breaker_mut(), &state, now, halfopen::Duration::from_micros(age_us))
            .map_err(|e| snapshot_error(py, e))
    }

    /// The queue's state as JSON text (not the messages).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.host.now(py)?;
        self.lock().snapshot(now).try_into_json().map_err(out_of_memory("the snapshot"))
    }

    /// The queue's state as compact bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let now = self.host.now(py)?;
        let bytes = self.lock().snapshot(now).try_into_bytes().map_err(out_of_memory("the snapshot"))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Restores the state of `text` (from `to_json`) with the messages of
    /// `messages` (sequence number -> message), into this queue if it has
    /// taken no message yet.
    fn restore_json(&self, py: Python<'_>, text: &Bound<'_, PyAny>, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = snapshot_text(py, text)?;
        self.load(py, RetentionSnapshot::from_json(&text), messages)
    }

    /// Restores the state of `data` (from `to_bytes`) in place.
    fn restore_bytes(&self, py: Python<'_>, data: &[u8], messages: &Bound<'_, PyAny>) -> PyResult<()> {
        self.load(py, RetentionSnapshot::from_bytes(data), messages)
    }
}
