//! `NativeBreaker`: one core breaker behind a mutex, for any number of
//! threads. The mutex is held only while the core decides (never while the
//! protected call runs, never while Python code runs: the clock is read,
//! listeners are called and errors are built outside it). The Python class
//! `halfopen.CircuitBreaker` subclasses it, adding asyncio and the
//! decorator and context-manager forms.

use std::sync::{Arc, Mutex, MutexGuard};

use halfopen::{
    Breaker, Config, Counts, Instant, LatencyHistogram, Metrics, MetricsReading, Outcome, Permit as CorePermit,
    Rejection, Snapshot, Transition,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::blocks;
use crate::classify::{check_exception, fall_back, outcome_of, unfinished};
use crate::errors::{option_error, out_of_memory, refusal, snapshot_error, type_name, unfinished_error};
use crate::host::{Host, snapshot_text};
use crate::names::{mode_name, state_member, state_name};
use crate::options;
use crate::permit::Permit;
use crate::time::{micros, secs, secs_at};

/// Metrics, and a latency histogram when asked for (boxed: 4 KB otherwise inline).
pub(crate) type Gauges = (Metrics, Option<Box<LatencyHistogram>>);
/// A breaker over a configuration shared with every breaker of equal options.
pub(crate) type Core = Breaker<Arc<Config>, Gauges>;

#[pyclass(frozen, subclass, module = "halfopen._native")]
pub struct NativeBreaker {
    /// The name it was made with: `_UNCONFIGURED` for a subclass's breaker
    /// until `__init__` configures it (then its name is the host's).
    name: Py<PyString>,
    core: Mutex<Core>,
    pub(crate) host: Host,
}

impl NativeBreaker {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        // The core never panics while the lock is held; if it ever did, its
        // state is still a valid breaker's.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The breaker's name.
    fn name_ref(&self) -> &Py<PyString> {
        self.host.renamed().unwrap_or(&self.name)
    }

    /// The name as Rust text (for events and Prometheus labels).
    pub(crate) fn text(&self, py: Python<'_>) -> String {
        self.name_ref().bind(py).to_cow().map(|n| n.into_owned()).unwrap_or_default()
    }

    /// The name and the metrics now (for `_native._collect`).
    /// Its group's reading for the exposition, if it is in one.
    pub(crate) fn group_reading(&self) -> Option<halfopen::group::GroupReading> {
        self.host.group().as_ref().map(|member| member.exposed())
    }

    pub(crate) fn reading(&self, py: Python<'_>) -> PyResult<(String, halfopen::MetricsReading)> {
        let now = self.clock(py)?;
        let m = self.lock().metrics(now);
        Ok((self.text(py), m))
    }

    /// The clock's reading. In a fork's child, first (once) the `with`
    /// blocks that threads left behind by the fork entered are reported, as
    /// cancelled: they will never be left (see `fork.rs`).
    pub(crate) fn clock(&self, py: Python<'_>) -> PyResult<Instant> {
        let now = self.host.now(py)?;
        for (_frame, _, permit) in self.host.orphans() {
            self.change(py, |core| ((), core.record(permit, Outcome::Cancelled, now))).1?;
        }
        Ok(now)
    }

    /// Runs `op` on the core, noting the transitions it returns for the
    /// listeners under the lock, then delivers them with the lock released;
    /// what a listener raised that must propagate comes back beside the result.
    pub(crate) fn change<R, T: IntoIterator<Item = Transition>>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut Core) -> (R, T),
    ) -> (R, PyResult<()>) {
        let result = {
            let mut core = self.lock();
            let (result, transitions) = op(&mut core);
            self.host.note(|| self.text(py), transitions);
            result
        };
        (result, self.host.deliver(py))
    }

    /// Admits a call or says why not (delivering what it observed). If a
    /// listener raised what must propagate, a permit is reported (cancelled)
    /// and that is raised.
    fn admit(&self, py: Python<'_>) -> PyResult<Result<CorePermit, Rejection>> {
        let now = self.clock(py)?;
        let (decision, delivered) = self.change(py, |core| {
            let admission = core.try_acquire(now);
            (admission.decision, admission.transition)
        });
        if let Err(e) = delivered {
            if let Ok(permit) = decision {
                self.settle(py, permit, Outcome::Cancelled)?;
            }
            return Err(e);
        }
        Ok(decision)
    }

    /// Admits a call or raises the refusal.
    fn acquire(&self, py: Python<'_>) -> PyResult<CorePermit> {
        self.admit(py)?.map_err(|r| refusal(py, self.name_ref().bind(py).as_any(), r))
    }

    /// Reports `outcome` of a permit's call, then delivers what it caused.
    /// It is reported whatever happens; an interrupt, an exit or a signal
    /// handler's exception from the clock or a listener is raised after.
    fn settle(&self, py: Python<'_>, permit: CorePermit, outcome: Outcome) -> PyResult<()> {
        let (now, read) = self.host.now_for_report(py);
        let ((), delivered) = self.change(py, |core| ((), core.record(permit, outcome, now)));
        read.and(delivered)
    }

    /// Reports the call that raised `err` as `classify` counts it, and gives
    /// back the exception to raise: `err`, or what interrupted the
    /// bookkeeping.
    fn settle_error(&self, py: Python<'_>, permit: CorePermit, err: PyErr) -> PyErr {
        let (outcome, classified) = self.host.classify(py, &err);
        let settled = self.settle(py, permit, outcome);
        settled.and(classified).err().unwrap_or(err)
    }

    /// A manual operation at the clock's reading, then its transitions delivered.
    fn manual<T: IntoIterator<Item = Transition>>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut Core, Instant) -> T,
    ) -> PyResult<()> {
        let now = self.clock(py)?;
        self.change(py, |core| ((), op(core, now))).1
    }

    /// Admits a `with` block's call and notes the block (by the statement
    /// `depth` frames up), or raises.
    fn enter(&self, py: Python<'_>, depth: u32) -> PyResult<()> {
        let permit = self.acquire(py)?;
        blocks::enter(py, self.host.blocks(), None, permit, depth)
            .or_else(|(e, permit)| self.settle(py, permit, Outcome::Cancelled).and(Err(e)))
    }

    /// Reports the call of the block the statement `depth` frames up leaves,
    /// as ended by `exc` (`None`: a success). A block is left once whatever
    /// `exc` is: with something that is not an exception, its call is
    /// reported as cancelled, then that is a `TypeError`.
    fn leave(&self, py: Python<'_>, exc: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
        let permit = blocks::leave(py, self.host.blocks(), None, depth)?;
        let (outcome, classified) = self.host.exit_outcome(py, exc).unwrap_or_else(|e| (Outcome::Cancelled, Err(e)));
        self.settle(py, permit, outcome).and(classified)
    }

    fn restore(&self, snapshot: Result<Snapshot, halfopen::SnapshotError>, py: Python<'_>) -> PyResult<()> {
        let now = self.clock(py)?;
        // No Python code runs while the lock is held: the error is built after.
        let result = {
            let mut core = self.lock();
            let latency = core.meter().1.is_some();
            // In place: the permits this breaker issued before stay stale.
            snapshot.and_then(|s| core.load(&s, now, self.host.elapsed())).map(|()| {
                // The histogram is not in snapshots: it starts afresh.
                core.meter_mut().1 = latency.then(Box::default);
            })
        };
        result.map_err(|e| snapshot_error(py, e))
    }
}

/// The name a subclass's `__new__` gives a breaker its `__init__` configures
/// (`_native._UNCONFIGURED`: that object, not any equal string).
pub(crate) fn unconfigured(py: Python<'_>) -> &Bound<'_, PyString> {
    static NAME: PyOnceLock<Py<PyString>> = PyOnceLock::new();
    NAME.get_or_init(py, || PyString::new(py, "<unconfigured: CircuitBreaker.__init__ not called>").unbind()).bind(py)
}

/// Seconds of `seconds` for `force_open` (a number, finite, not negative).
pub(crate) fn force_open_for(
    py: Python<'_>,
    seconds: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<halfopen::Duration>> {
    seconds.map(|s| seconds_for(py, s)).transpose()
}

/// `seconds` for `force_open_at_least` (a number, finite, not negative).
pub(crate) fn seconds_for(py: Python<'_>, s: &Bound<'_, PyAny>) -> PyResult<halfopen::Duration> {
    let number = !s.is_instance_of::<PyBool>() && (s.is_instance_of::<PyInt>() || s.is_instance_of::<PyFloat>());
    if !number {
        return Err(option_error(py, true, "seconds", &format!("must be a number, got {}", type_name(s))));
    }
    let s = crate::time::float_of(s);
    let us = micros(s).ok_or_else(|| option_error(py, false, "seconds", crate::time::seconds_problem(s).1))?;
    Ok(halfopen::Duration::from_micros(us))
}

/// `latency_histogram`: absent, or a `bool`.
pub(crate) fn histogram(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    match v {
        None => Ok(false),
        Some(b) if b.is_instance_of::<PyBool>() => b.is_truthy(),
        Some(other) => {
            let problem = format!("must be a bool, got {}", type_name(other));
            Err(option_error(py, true, "latency_histogram", &problem))
        }
    }
}

/// A breaker's metrics and counts (read under its lock), as a dict (built
/// after: making Python objects can run Python code, the collector's).
pub(crate) fn metrics_dict(py: Python<'_>, (m, k): (MetricsReading, Counts)) -> PyResult<Bound<'_, PyDict>> {
    let c = m.counters;
    let d = PyDict::new(py);
    d.set_item("state", state_member(py, m.state))?;
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
    let latency = m.latency;
    d.set_item("latency_count", latency.map(|l| l.count))?;
    d.set_item("latency_p50", latency.map(|l| secs(l.p50)))?;
    d.set_item("latency_p95", latency.map(|l| secs(l.p95)))?;
    d.set_item("latency_p99", latency.map(|l| secs(l.p99)))?;
    d.set_item("latency_max", latency.map(|l| secs(l.max)))?;
    Ok(d)
}

#[pymethods]
impl NativeBreaker {
    #[new]
    #[pyo3(signature = (
        name, /, *, exclude = None, clock = None, shared_clock = None, fallback = None, latency_histogram = None,
        **options
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        exclude: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        shared_clock: Option<&Bound<'_, PyAny>>,
        fallback: Option<&Bound<'_, PyAny>>,
        latency_histogram: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let histogram = histogram(py, latency_histogram)?;
        let text = options::name_of(py, name)?;
        // The caller's str itself (a subclass's instance: the plain str it holds).
        let name = match name.cast_exact::<PyString>() {
            Ok(n) => n.clone().unbind(),
            Err(_) => PyString::new(py, &text).unbind(),
        };
        let empty = PyDict::new(py);
        let config = options::config(py, options.unwrap_or(&empty))?;
        let host = Host::new(py, exclude, clock, shared_clock, fallback)?;
        let meter = (Metrics::default(), histogram.then(Box::<LatencyHistogram>::default));
        let core = Breaker::with_meter(halfopen::shared_config(config), meter)
            .map_err(|e| options::config_error(py, e, &empty))?;
        Ok(NativeBreaker { name, core: Mutex::new(core), host })
    }

    /// Configures a breaker that a subclass with
    /// an `__init__` of its own made unconfigured (`__new__` was given
    /// `_UNCONFIGURED` as its name, so that the subclass's keywords never
    /// reach it), from what that `__init__` passes on, checked as `__new__`
    /// checks it. Does nothing on a breaker `__new__` configured, or once
    /// configured.
    #[pyo3(signature = (
        name, /, *, exclude = None, clock = None, shared_clock = None, fallback = None, latency_histogram = None,
        **options
    ))]
    #[allow(clippy::too_many_arguments)]
    fn __init__(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        exclude: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        shared_clock: Option<&Bound<'_, PyAny>>,
        fallback: Option<&Bound<'_, PyAny>>,
        latency_histogram: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        if !self.name.bind(py).is(unconfigured(py)) || self.host.renamed().is_some() {
            return Ok(());
        }
        let built = Self::new(py, name, exclude, clock, shared_clock, fallback, latency_histogram, options)?;
        let NativeBreaker { name, core, host } = built;
        if !self.host.adopt(host, name) {
            let problem = "must run before the breaker is used (a listener or a with block came first)";
            return Err(option_error(py, true, "CircuitBreaker.__init__", problem));
        }
        let old = std::mem::replace(&mut *self.lock(), core.into_inner().unwrap_or_else(|e| e.into_inner()));
        drop(old);
        Ok(())
    }

    /// The breaker's name (its Prometheus label).
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name_ref().clone_ref(py)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.host.traverse(&visit)
    }

    fn __clear__(&self) {
        self.host.clear();
    }

    /// What a refused call returns instead of raising (called with the
    /// call's arguments), if given.
    #[getter]
    fn fallback(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.host.fallback().map(|f| f.clone_ref(py))
    }

    /// Calls `fn(*args, **kwargs)` if the breaker admits it, reports how it
    /// ended, and returns its result or raises its exception. A refused call
    /// raises `CircuitBreakerError` (`fn` is not called), or returns
    /// `fallback(*args, **kwargs)` if the breaker has a fallback. An
    /// exception counts as a failure unless `exclude` says otherwise; a
    /// cancellation (`asyncio.CancelledError`, `KeyboardInterrupt`,
    /// `SystemExit`, `GeneratorExit`) counts nothing and frees the call's slot.
    #[pyo3(signature = (fn_, /, *args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        fn_: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let permit = match self.admit(py)? {
            Ok(permit) => permit,
            Err(rejection) => {
                return match self.host.fallback() {
                    Some(fallback) => fall_back(py, fallback, args, kwargs),
                    None => Err(refusal(py, self.name_ref().bind(py).as_any(), rejection)),
                };
            }
        };
        match fn_.call(args, kwargs) {
            Ok(value) if unfinished(py, &value) => {
                self.settle(py, permit, Outcome::Cancelled)?;
                Err(unfinished_error(py, "fn", &value))
            }
            Ok(value) => {
                self.settle(py, permit, Outcome::Success)?;
                Ok(value.unbind())
            }
            Err(err) => Err(self.settle_error(py, permit, err)),
        }
    }

    /// Leave to make one call (report it once with `record` or
    /// `record_exception`), or raises `CircuitBreakerError`.
    fn try_acquire(slf: &Bound<'_, Self>) -> PyResult<Permit> {
        let this = slf.get();
        let p = this.acquire(slf.py())?;
        Ok(Permit::new(&p, this.host.id, None))
    }

    /// Enters a `with` block if the breaker admits a call (raising
    /// `CircuitBreakerError` before the block if not: a fallback does not
    /// apply); the block's exit reports it as `call` reports a call.
    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        slf.get().enter(slf.py(), 0)?;
        Ok(slf.clone().unbind())
    }

    /// Leaves a `with` block, reporting its call; the exception (if any) propagates.
    #[pyo3(signature = (_exc_type, exc, _traceback, /))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.leave(py, exc, 0)?;
        Ok(false)
    }

    /// `__enter__` for the package's `__aenter__`: the `async with`
    /// statement is `depth` frames above its caller.
    fn _enter(&self, py: Python<'_>, depth: u32) -> PyResult<()> {
        self.enter(py, depth)
    }

    /// `__exit__` for the package's `__aexit__` (see `_enter`).
    fn _leave(&self, py: Python<'_>, exc: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
        self.leave(py, exc, depth)
    }

    /// Reports how a permitted call ended: `"success"`, `"failure"`,
    /// `"ignored"` or `"cancelled"`. A permit is reported once.
    fn record(&self, py: Python<'_>, permit: &Bound<'_, Permit>, outcome: &str) -> PyResult<()> {
        let outcome = outcome_of(py, outcome)?;
        let p = permit.get().take(py, self.host.id)?;
        self.settle(py, p, outcome)
    }

    /// Reports a permitted call that raised `exc`, counted as `call` counts it.
    fn record_exception(&self, py: Python<'_>, permit: &Bound<'_, Permit>, exc: &Bound<'_, PyAny>) -> PyResult<()> {
        check_exception(py, exc)?;
        let p = permit.get().take(py, self.host.id)?;
        let (outcome, classified) = self.host.classify(py, &PyErr::from_value(exc.clone()));
        self.settle(py, p, outcome).and(classified)
    }

    /// The state now, counting elapsed time: `"CLOSED"`, `"OPEN"` or `"HALF_OPEN"`.
    fn state_name(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.clock(py)?;
        Ok(state_name(self.lock().state(now)))
    }

    /// `"NORMAL"`, `"FORCED_OPEN"` or `"DISABLED"`.
    fn mode(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.clock(py)?;
        Ok(mode_name(self.lock().mode(now)))
    }

    /// Seconds until a call is worth trying: 0.0 now, `None` while held open.
    fn retry_after(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let now = self.clock(py)?;
        Ok(self.lock().retry_after(now).map(secs))
    }

    /// Holds the breaker open for `seconds`, or until `release()` without it
    /// (seed 000's throttle webhook).
    #[pyo3(signature = (seconds = None))]
    fn force_open(&self, py: Python<'_>, seconds: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let d = force_open_for(py, seconds)?;
        self.manual(py, |b, now| b.force_open(now, d))
    }

    /// Holds the breaker open for at least `seconds` (an upstream's
    /// `Retry-After`), never shortening an open period in force: of two
    /// hints, the longer holds.
    fn force_open_at_least(&self, py: Python<'_>, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = seconds_for(py, seconds)?;
        self.manual(py, |b, now| b.force_open_at_least(now, d))
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
        self.manual(py, |core, now| core.handle_timeout(now))
    }

    /// When (seconds on the breaker's clock: compare with `now()`) it next
    /// changes by itself, or `None`; call `handle_timeout()` then.
    fn poll_timeout(&self) -> Option<f64> {
        self.lock().poll_timeout().map(secs_at)
    }

    /// The breaker's clock reading, in seconds (what `poll_timeout` and
    /// `StateChange.at` are on; the default clock's origin is private).
    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(secs_at(self.clock(py)?))
    }

    /// Calls `callback(change)` after every change of state, with no lock
    /// held; an exception it raises is logged (logger `halfopen`), except an
    /// interrupt, an exit or a signal handler's exception: that propagates
    /// from the call that caused the change, once the call is reported.
    fn on_state_change(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        self.host.listen(py, callback)
    }

    /// Counters, times (seconds), error rate and the breaker's counts, as a
    /// dict. `error_rate` is a percentage (0 to 100; the exposition's
    /// `circuit_upstream_error_ratio` is the same figure as a ratio, 0 to 1).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.clock(py)?;
        let reading = {
            let core = self.lock();
            (core.metrics(now), core.counts(now))
        };
        metrics_dict(py, reading)
    }

    /// The Prometheus text exposition of this breaker.
    fn prometheus(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.clock(py)?;
        let group = self.group_reading();
        let m = self.lock().metrics(now);
        let name = self.text(py);
        halfopen::try_render(|out| {
            halfopen::prometheus::render(out, || std::iter::once((name.as_str(), m)))?;
            halfopen::group::render_prometheus(out, || group.map(|g| (name.as_str(), g)).into_iter())
        })
        .map_err(out_of_memory("the exposition"))
    }

    /// The breaker's state as JSON text (the core's versioned snapshot).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.clock(py)?;
        self.lock().snapshot(now).try_into_json().map_err(out_of_memory("the snapshot"))
    }

    /// The breaker's state as compact bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let now = self.clock(py)?;
        let bytes = self.lock().snapshot(now).try_into_bytes().map_err(out_of_memory("the snapshot"))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Replaces the state with a JSON snapshot's (`SnapshotError` if it cannot).
    fn restore_json(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = snapshot_text(py, text)?;
        self.restore(Snapshot::from_json(&text), py)
    }

    /// Replaces the state with a compact snapshot's (`SnapshotError` if it cannot).
    fn restore_bytes(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.restore(Snapshot::from_bytes(data), py)
    }
}
