//! `NativeBreaker`: one core breaker behind a mutex, for any number of
//! threads. The mutex is held only while the core decides (never while the
//! protected call runs, never while Python code runs: the clock is read,
//! listeners are called and errors are built outside it). The Python class
//! `halfopen.CircuitBreaker` subclasses it, adding asyncio and the
//! decorator and context-manager forms.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use halfopen::{
    Breaker, Config, Instant, Metrics, Mode, Outcome, Permit as CorePermit, Rejection, Snapshot, State, Transition,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyTuple, PyType};

use crate::options::{self, option_error, type_name};
use crate::time::{micros, monotonic, secs, secs_at};

type Core = Breaker<Config, Metrics>;

/// Leave to make one call, from `try_acquire`; report it once with `record`.
#[pyclass(frozen, module = "halfopen._native")]
pub struct Permit {
    generation: u32,
    issued_at: u64,
    /// The breaker that issued it (its address: a permit is reported to it only).
    owner: usize,
    reported: AtomicBool,
}

/// A change of state, as listeners receive it.
#[pyclass(frozen, get_all, module = "halfopen._native")]
pub struct StateChange {
    /// `"CLOSED"`, `"OPEN"` or `"HALF_OPEN"`.
    pub from_state: &'static str,
    pub to_state: &'static str,
    /// Why, in the core's words (`"failure_threshold"`, `"open_timeout"`, ...).
    pub reason: &'static str,
    /// When it took effect, in seconds on the breaker's clock.
    pub at: f64,
}

/// What never counts as the upstream's failure.
enum Exclude {
    Nothing,
    /// A tuple of exception classes.
    Types(Py<PyTuple>),
    /// A callable: the exception → true if it must not count.
    Predicate(Py<PyAny>),
}

#[pyclass(frozen, subclass, module = "halfopen._native")]
pub struct NativeBreaker {
    /// The breaker's name (its Prometheus label).
    #[pyo3(get)]
    name: String,
    core: Mutex<Core>,
    clock: Option<Py<PyAny>>,
    /// The latest good clock reading (µs), for a report whose reading fails.
    last_reading: AtomicU64,
    exclude: Exclude,
    listeners: Mutex<Vec<Py<PyAny>>>,
}

/// The seed's name of a state.
pub(crate) fn state_name(s: State) -> &'static str {
    match s {
        State::Closed => "CLOSED",
        State::Open => "OPEN",
        State::HalfOpen => "HALF_OPEN",
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Normal => "NORMAL",
        Mode::ForcedOpen { .. } => "FORCED_OPEN",
        Mode::Disabled => "DISABLED",
    }
}

fn outcome_of(py: Python<'_>, name: &str) -> PyResult<Outcome> {
    match name {
        "success" => Ok(Outcome::Success),
        "failure" => Ok(Outcome::Failure),
        "ignored" => Ok(Outcome::Ignored),
        "cancelled" => Ok(Outcome::Cancelled),
        _ => Err(option_error(py, false, "outcome", "must be \"success\", \"failure\", \"ignored\" or \"cancelled\"")),
    }
}

/// The package's module of exception classes and helpers (Python code).
fn support(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static MODULE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let m = MODULE.get_or_try_init(py, || py.import("halfopen._support").map(|m| m.into_any().unbind()))?;
    Ok(m.bind(py))
}

/// Exceptions that end a call without saying anything of the upstream.
fn cancellations(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static TYPES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let types = TYPES.get_or_try_init(py, || support(py)?.getattr("CANCELLATIONS").map(Bound::unbind))?;
    Ok(types.bind(py))
}

impl NativeBreaker {
    fn lock(&self) -> MutexGuard<'_, Core> {
        // The core never panics while the lock is held; if it ever did, its
        // state is still a valid breaker's.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock's reading; a custom clock's bad value is a `TypeError`/`ValueError`.
    fn now(&self, py: Python<'_>) -> PyResult<Instant> {
        let Some(clock) = &self.clock else { return Ok(monotonic()) };
        let us = reading(py, &clock.bind(py).call0()?)?;
        self.last_reading.fetch_max(us, Ordering::Relaxed);
        Ok(Instant::from_micros(us))
    }

    /// A reading for a report: a call already made is reported even if the
    /// clock fails now (at the latest good reading; the failure is logged).
    fn now_for_report(&self, py: Python<'_>) -> Instant {
        self.now(py).unwrap_or_else(|e| {
            log(py, "the clock failed; reporting at its latest reading", e);
            Instant::from_micros(self.last_reading.load(Ordering::Relaxed))
        })
    }

    /// Calls every listener with each transition, in order (no lock held).
    fn emit(&self, py: Python<'_>, transitions: Vec<Transition>) {
        if transitions.is_empty() {
            return;
        }
        let listeners: Vec<Py<PyAny>> = self.listeners.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|l| l.clone_ref(py)).collect();
        for t in transitions {
            let change = StateChange {
                from_state: state_name(t.from),
                to_state: state_name(t.to),
                reason: t.reason.name(),
                at: secs_at(t.at),
            };
            let Ok(change) = Py::new(py, change) else { continue };
            for listener in &listeners {
                if let Err(e) = listener.bind(py).call1((change.clone_ref(py),)) {
                    log(py, "a state-change listener raised", e);
                }
            }
        }
    }

    /// The exception for `rejection` (the state and reason as the core says).
    fn refusal(&self, py: Python<'_>, rejection: Rejection) -> PyErr {
        let reason = rejection.wait.reason();
        let retry = rejection.retry_after().map(secs);
        let build = || -> PyResult<PyErr> {
            let make = support(py)?.getattr("refusal")?;
            let err = make.call1((&self.name, state_name(rejection.state), retry, reason))?;
            Ok(PyErr::from_value(err))
        };
        build().unwrap_or_else(|e| e)
    }

    /// Admits a call or raises the refusal (emitting what it observed).
    fn acquire(&self, py: Python<'_>) -> PyResult<CorePermit> {
        let now = self.now(py)?;
        let admission = self.lock().try_acquire(now);
        self.emit(py, admission.transition.into_iter().collect());
        admission.decision.map_err(|r| self.refusal(py, r))
    }

    /// Reports `outcome` of a permit's call, then emits what it caused.
    fn settle(&self, py: Python<'_>, permit: CorePermit, outcome: Outcome) {
        let now = self.now_for_report(py);
        let t = self.lock().record(permit, outcome, now);
        self.emit(py, t.into_iter().collect());
    }

    /// What an exception from the call says: cancellations (`asyncio`'s, an
    /// interrupt, an exit) and excluded errors count nothing; anything else
    /// is a failure (so is an exception an `exclude` predicate raises).
    fn classify(&self, py: Python<'_>, err: &PyErr) -> Outcome {
        let value = err.value(py);
        if cancellations(py).is_ok_and(|c| value.is_instance(c).unwrap_or(false)) {
            return Outcome::Cancelled;
        }
        let excluded = match &self.exclude {
            Exclude::Nothing => Ok(false),
            Exclude::Types(types) => value.is_instance(types.bind(py).as_any()),
            Exclude::Predicate(p) => p.bind(py).call1((value,)).and_then(|r| r.is_truthy()),
        };
        match excluded {
            Ok(true) => Outcome::Ignored,
            Ok(false) => Outcome::Failure,
            Err(e) => {
                log(py, "the exclude predicate raised; the call counts as a failure", e);
                Outcome::Failure
            }
        }
    }

    /// A manual operation at the clock's reading, then its transitions emitted.
    fn manual(&self, py: Python<'_>, op: impl FnOnce(&mut Core, Instant) -> halfopen::Transitions) -> PyResult<()> {
        let now = self.now(py)?;
        let t = op(&mut self.lock(), now);
        self.emit(py, t.into_iter().collect());
        Ok(())
    }

    fn take(&self, py: Python<'_>, permit: &Bound<'_, Permit>) -> PyResult<CorePermit> {
        let p = permit.get();
        if p.owner != self as *const Self as usize {
            return Err(PyErr::new::<PyTypeError, _>("permit was issued by another breaker"));
        }
        if p.reported.swap(true, Ordering::AcqRel) {
            return Err(option_error(py, false, "permit", "was already reported"));
        }
        Ok(CorePermit::from_parts(p.generation, Instant::from_micros(p.issued_at)))
    }

    fn restore(&self, snapshot: Result<Snapshot, halfopen::SnapshotError>, py: Python<'_>) -> PyResult<()> {
        let now = self.now(py)?;
        let mut core = self.lock();
        let restored = snapshot.and_then(|s| Core::restore(*core.config(), &s, now)).map_err(|e| snapshot_error(py, e))?;
        *core = restored;
        Ok(())
    }
}

/// A clock's reading in µs: seconds as an `int` (exact), a `float`
/// (rounded to the µs), or another real number such as a `Fraction` or a
/// `Decimal` (exact, converted by Python); never a `bool`.
fn reading(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let out_of_range = || option_error(py, false, "clock", "must return a finite, non-negative number of seconds");
    if v.is_instance_of::<PyBool>() {
        return Err(option_error(py, true, "clock", "must return a number of seconds, got bool"));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<u64>().ok().and_then(|s| s.checked_mul(1_000_000)).ok_or_else(out_of_range);
    }
    if v.is_instance_of::<PyFloat>() {
        return v.extract::<f64>().ok().and_then(micros).ok_or_else(out_of_range);
    }
    let exact = support(py)?.getattr("exact_micros")?.call1((v,))?;
    if exact.is_none() {
        return Err(option_error(py, true, "clock", &format!("must return a number of seconds, got {}", type_name(v))));
    }
    exact.extract::<u64>().map_err(|_| out_of_range())
}

/// `halfopen.SnapshotError` with its `kind`.
fn snapshot_error(py: Python<'_>, e: halfopen::SnapshotError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = support(py)?.getattr("SnapshotError")?;
        Ok(PyErr::from_value(class.call1((e.to_string(), e.kind()))?))
    };
    build().unwrap_or_else(|err| err)
}

/// Logs `err` on the `halfopen` logger (a callback's failure never breaks a call).
fn log(py: Python<'_>, what: &str, err: PyErr) {
    let _ = support(py).and_then(|m| m.getattr("log_error")).and_then(|f| f.call1((what, err.value(py))));
}

#[pymethods]
impl NativeBreaker {
    #[new]
    #[pyo3(signature = (name, /, *, exclude = None, clock = None, **options))]
    fn new(
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        exclude: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let name: String = name
            .extract()
            .map_err(|_| option_error(py, true, "name", &format!("must be a str, got {}", type_name(name))))?;
        if name.is_empty() {
            return Err(option_error(py, false, "name", "must not be empty"));
        }
        let empty = PyDict::new(py);
        let config = options::config(py, options.unwrap_or(&empty))?;
        let exclude = match exclude {
            None => Exclude::Nothing,
            Some(e) if e.is_instance_of::<PyType>() => Exclude::Types(PyTuple::new(py, [e])?.unbind()),
            Some(e) if e.is_instance_of::<PyTuple>() => {
                let all_types = e.try_iter()?.all(|t| t.is_ok_and(|t| t.is_instance_of::<PyType>()));
                if !all_types {
                    return Err(option_error(py, true, "exclude", "must be exception classes or a predicate"));
                }
                Exclude::Types(e.cast::<PyTuple>()?.clone().unbind())
            }
            Some(e) if e.is_callable() => Exclude::Predicate(e.clone().unbind()),
            Some(e) => {
                let problem = format!("must be exception classes or a predicate, got {}", type_name(e));
                return Err(option_error(py, true, "exclude", &problem));
            }
        };
        if let Some(c) = clock
            && !c.is_callable()
        {
            return Err(option_error(py, true, "clock", &format!("must be a callable, got {}", type_name(c))));
        }
        let core = Breaker::with_meter(config, Metrics::default()).map_err(|e| options::config_error(py, e, &empty))?;
        Ok(NativeBreaker {
            name,
            core: Mutex::new(core),
            clock: clock.map(|c| c.clone().unbind()),
            last_reading: AtomicU64::new(0),
            exclude,
            listeners: Mutex::new(Vec::new()),
        })
    }

    /// Calls `fn(*args, **kwargs)` if the breaker admits it, reports how it
    /// ended, and returns its result or raises its exception. A refused call
    /// raises `CircuitBreakerError` (`fn` is not called). An exception
    /// counts as a failure unless `exclude` says otherwise; a cancellation
    /// (`asyncio.CancelledError`, `KeyboardInterrupt`, `SystemExit`,
    /// `GeneratorExit`) counts nothing and frees the call's slot.
    #[pyo3(signature = (fn_, /, *args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        fn_: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let permit = self.acquire(py)?;
        match fn_.call(args, kwargs) {
            Ok(value) => {
                self.settle(py, permit, Outcome::Success);
                Ok(value.unbind())
            }
            Err(err) => {
                let outcome = self.classify(py, &err);
                self.settle(py, permit, outcome);
                Err(err)
            }
        }
    }

    /// Leave to make one call (report it once with `record` or
    /// `record_exception`), or raises `CircuitBreakerError`.
    fn try_acquire(slf: &Bound<'_, Self>) -> PyResult<Permit> {
        let this = slf.get();
        let p = this.acquire(slf.py())?;
        Ok(Permit {
            generation: p.generation(),
            issued_at: p.issued_at().as_micros(),
            owner: this as *const Self as usize,
            reported: AtomicBool::new(false),
        })
    }

    /// Reports how a permitted call ended: `"success"`, `"failure"`,
    /// `"ignored"` or `"cancelled"`. A permit is reported once.
    fn record(&self, py: Python<'_>, permit: &Bound<'_, Permit>, outcome: &str) -> PyResult<()> {
        let outcome = outcome_of(py, outcome)?;
        let p = self.take(py, permit)?;
        self.settle(py, p, outcome);
        Ok(())
    }

    /// Reports a permitted call that raised `exc`, counted as `call` counts it.
    fn record_exception(&self, py: Python<'_>, permit: &Bound<'_, Permit>, exc: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.take(py, permit)?;
        let outcome = self.classify(py, &PyErr::from_value(exc.clone()));
        self.settle(py, p, outcome);
        Ok(())
    }

    /// The state now, counting elapsed time: `"CLOSED"`, `"OPEN"` or `"HALF_OPEN"`.
    fn state_name(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.now(py)?;
        Ok(state_name(self.lock().state(now)))
    }

    /// `"NORMAL"`, `"FORCED_OPEN"` or `"DISABLED"`.
    fn mode(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.now(py)?;
        Ok(mode_name(self.lock().mode(now)))
    }

    /// Seconds until a call is worth trying: 0.0 now, `None` while held open.
    fn retry_after(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let now = self.now(py)?;
        Ok(self.lock().retry_after(now).map(secs))
    }

    /// Holds the breaker open for `seconds`, or until `release()` without it
    /// (seed 000's throttle webhook).
    #[pyo3(signature = (seconds = None))]
    fn force_open(&self, py: Python<'_>, seconds: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let d = match seconds {
            None => None,
            Some(s) => {
                let ok = !s.is_instance_of::<PyBool>() && (s.is_instance_of::<PyInt>() || s.is_instance_of::<PyFloat>());
                if !ok {
                    return Err(option_error(py, true, "seconds", &format!("must be a number, got {}", type_name(s))));
                }
                let us = s.extract::<f64>().ok().and_then(micros);
                Some(halfopen::Duration::from_micros(
                    us.ok_or_else(|| option_error(py, false, "seconds", "must be a finite, non-negative number"))?,
                ))
            }
        };
        self.manual(py, |b, now| b.force_open(now, d))
    }

    /// Closes now, forgetting the failures counted and the backoff reached.
    fn force_close(&self, py: Python<'_>) -> PyResult<()> {
        self.manual(py, |b, now| b.force_close(now))
    }

    /// Admits and counts every call, never trips, until `release()`.
    fn disable(&self, py: Python<'_>) -> PyResult<()> {
        self.manual(py, |b, now| b.disable(now))
    }

    /// Ends `force_open` (probes follow) or `disable`.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.manual(py, |b, now| b.release(now))
    }

    /// Back to a new breaker's state (metrics are kept).
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.manual(py, |b, now| b.reset(now))
    }

    /// Applies the timed changes due now (emitting their transitions).
    fn handle_timeout(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.now(py)?;
        let t = self.lock().handle_timeout(now);
        self.emit(py, t.into_iter().collect());
        Ok(())
    }

    /// When (seconds on the breaker's clock) it next changes by itself, or `None`.
    fn poll_timeout(&self) -> Option<f64> {
        self.lock().poll_timeout().map(secs_at)
    }

    /// Calls `callback(change)` after every change of state, with no lock
    /// held; an exception it raises is logged (logger `halfopen`).
    fn on_state_change(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        if !callback.is_callable() {
            return Err(option_error(py, true, "callback", &format!("must be a callable, got {}", type_name(callback))));
        }
        self.listeners.lock().unwrap_or_else(|e| e.into_inner()).push(callback.clone().unbind());
        Ok(())
    }

    /// Counters, times (seconds), error rate and the breaker's counts, as a dict.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.now(py)?;
        let (m, k) = {
            let core = self.lock();
            (core.metrics(now), core.counts(now))
        };
        let c = m.counters;
        let d = PyDict::new(py);
        d.set_item("state", state_name(m.state))?;
        for (key, v) in [
            ("admitted", c.admitted),
            ("successes", c.successes),
            ("failures", c.failures),
            ("slow", c.slow),
            ("rejections", c.rejections),
            ("ignored", c.ignored),
            ("cancelled", c.cancelled),
            ("stale", c.stale),
            ("opens", c.opens),
        ] {
            d.set_item(key, v)?;
        }
        d.set_item("opens_last_24h", m.opens_last_24h)?;
        d.set_item("time_closed", secs(m.time_closed))?;
        d.set_item("time_open", secs(m.time_open))?;
        d.set_item("time_half_open", secs(m.time_half_open))?;
        d.set_item("mean_time_open", m.mean_time_open.map(secs))?;
        d.set_item("error_rate", m.error_rate)?;
        d.set_item("consecutive_failures", k.consecutive_failures)?;
        d.set_item("window_calls", k.window.calls)?;
        d.set_item("window_failures", k.window.failures)?;
        d.set_item("window_slow", k.window.slow)?;
        d.set_item("probes_in_flight", k.probes_in_flight)?;
        d.set_item("probe_successes", k.probe_successes)?;
        d.set_item("in_flight", k.in_flight)?;
        d.set_item("concurrency_limit", k.concurrency_limit)?;
        Ok(d)
    }

    /// The Prometheus text exposition of this breaker.
    fn prometheus(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.now(py)?;
        let m = self.lock().metrics(now);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = halfopen::prometheus::render(&mut out, || std::iter::once((self.name.as_str(), m)));
        Ok(out)
    }

    /// The breaker's state as JSON text (the core's versioned snapshot).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.now(py)?;
        Ok(self.lock().snapshot(now).to_json())
    }

    /// The breaker's state as compact bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let now = self.now(py)?;
        let bytes = self.lock().snapshot(now).to_bytes();
        Ok(PyBytes::new(py, &bytes))
    }

    /// Replaces the state with a JSON snapshot's (`SnapshotError` if it cannot).
    fn restore_json(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        self.restore(Snapshot::from_json(text), py)
    }

    /// Replaces the state with a compact snapshot's (`SnapshotError` if it cannot).
    fn restore_bytes(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.restore(Snapshot::from_bytes(data), py)
    }
}

#[pymethods]
impl Permit {
    /// The state period it belongs to.
    #[getter]
    fn generation(&self) -> u32 {
        self.generation
    }

    /// When it was issued, in seconds on the breaker's clock.
    #[getter]
    fn issued_at(&self) -> f64 {
        self.issued_at as f64 / 1e6
    }
}
