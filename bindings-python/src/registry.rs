//! `NativeRegistry`: the core registry (one breaker per name, bounded: seed
//! 000's `breakerFor`) behind a mutex, held only while the core decides.
//! Calls go through the registry's own `try_acquire`/`record`, so a breaker
//! with a call in flight is never evicted. The Python class
//! `halfopen.Registry` subclasses it.

use std::sync::{Mutex, MutexGuard};

use halfopen::{Instant, Outcome, Permit as CorePermit, Problem, Registry, RegistryError, Transition};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::blocks;
use crate::breaker::{Gauges, force_open_for, histogram, metrics_dict, seconds_for};
use crate::classify::{check_exception, fall_back, outcome_of, unfinished};
use crate::errors::{
    option_error, out_of_memory, refusal, registry_error, registry_full, snapshot_error, type_name, unfinished_error,
    value_error,
};
use crate::host::{Host, snapshot_text};
use crate::names::{mode_name, state_name};
use crate::options::{self, name_of};
use crate::permit::Permit;
use crate::support::support;
use crate::time::{secs, secs_at};

/// Every breaker's name and metrics, the breakers held and the evictions.
pub(crate) type Readings = (Vec<(String, halfopen::MetricsReading)>, u64, u64);

#[pyclass(frozen, subclass, module = "halfopen._native")]
pub struct NativeRegistry {
    core: Mutex<Registry<Gauges>>,
    host: Host,
    /// Whether each breaker keeps a latency histogram (`latency_histogram`).
    latency: bool,
    /// The most breakers it holds.
    capacity: usize,
    /// Its group, once it joins one (`registry_group.rs`; locked before
    /// `core`, never on the call path).
    group: Mutex<Option<Box<RegistryGroup>>>,
}

/// A registry's group: its members and the group's name (the keys' hash tag).
pub(crate) struct RegistryGroup {
    pub(crate) members: halfopen::group::KeyedMembers,
    pub(crate) name: String,
}

/// Why a call got no permit: its breaker's refusal, or a registry full of
/// breakers none of which the core's sample found idle (`room`: the next
/// sample, which a retry draws, holds an idle one).
enum Refused {
    Breaker(halfopen::Rejection),
    Full { room: bool },
}

/// The exception for a refusal from `admit`.
fn refused_error(py: Python<'_>, name: &Bound<'_, PyAny>, text: &str, refused: Refused) -> PyErr {
    match refused {
        Refused::Breaker(rejection) => refusal(py, name, rejection),
        Refused::Full { room } => registry_full(py, text, room),
    }
}

/// A name argument, checked (`from_py_with`).
fn checked_name(name: &Bound<'_, PyAny>) -> PyResult<String> {
    name_of(name.py(), name)
}

impl NativeRegistry {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Registry<Gauges>> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its group, if it joined one (locked before the core).
    pub(crate) fn group(&self) -> MutexGuard<'_, Option<Box<RegistryGroup>>> {
        self.group.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Each grouped name's group reading (none outside a group).
    pub(crate) fn group_readings(&self) -> Vec<(String, halfopen::group::GroupReading)> {
        let group = self.group();
        let Some(g) = group.as_ref() else { return Vec::new() };
        g.members.iter().map(|(n, m)| (n.to_owned(), m.exposed())).collect()
    }

    pub(crate) fn host(&self) -> &Host {
        &self.host
    }

    /// Every breaker's name and metrics now, the breakers held and the
    /// evictions (for `_native._collect`).
    pub(crate) fn readings(&self, py: Python<'_>) -> PyResult<Readings> {
        let now = self.clock(py)?;
        let core = self.lock();
        let breakers =
            halfopen::try_collect(core.iter().map(|(name, b)| Ok((halfopen::try_to_string(name)?, b.metrics(now)))))
                .map_err(out_of_memory("the readings"))?;
        Ok((breakers, core.len() as u64, core.evictions()))
    }

    /// The clock's reading, after the orphaned `with` blocks of a fork's
    /// child are reported (as `NativeBreaker` does).
    pub(crate) fn clock(&self, py: Python<'_>) -> PyResult<Instant> {
        let now = self.host.now(py)?;
        for (_frame, name, permit) in self.host.orphans() {
            let name = name.unwrap_or_default();
            self.change(py, &name, |core| ((), core.record(&name, permit, Outcome::Cancelled, now))).1?;
        }
        Ok(now)
    }

    /// Runs `op` on the registry, noting the transitions of `name`'s breaker
    /// it returns for the listeners under the lock, then delivers them with
    /// the lock released; what a listener raised that must propagate comes
    /// back beside the result.
    fn change<R, T: IntoIterator<Item = Transition>>(
        &self,
        py: Python<'_>,
        name: &str,
        op: impl FnOnce(&mut Registry<Gauges>) -> (R, T),
    ) -> (R, PyResult<()>) {
        let result = {
            let mut core = self.lock();
            let (result, transitions) = op(&mut core);
            self.host.note(|| name.to_owned(), transitions);
            result
        };
        (result, self.host.deliver(py))
    }

    /// Admits a call through `name`'s breaker, or says why not: `Ok(Err(_))`
    /// is a refusal (the breaker's, or a registry full of busy breakers),
    /// built as an exception only if no fallback takes it. If a listener
    /// raised what must propagate, a permit is reported (cancelled) and that
    /// is raised.
    fn admit(&self, py: Python<'_>, name: &str) -> PyResult<Result<CorePermit, Refused>> {
        let now = self.clock(py)?;
        // No Python code runs while the lock is held: errors are built after.
        let (admission, delivered) = self.change(py, name, |core| match core.try_acquire(name, now) {
            Ok(admission) => {
                // A breaker the registry made (or restored) has no histogram yet.
                if self.latency
                    && admission.decision.is_ok()
                    && let Ok(breaker) = core.get(name, now)
                    && breaker.meter().1.is_none()
                {
                    breaker.meter_mut().1 = Some(Box::default());
                }
                (Ok(admission.decision), admission.transition)
            }
            Err(e) => {
                let room = matches!(e, RegistryError::Full { .. }) && core.has_room(now);
                (Err((e, room)), None)
            }
        });
        if let Err(e) = delivered {
            if let Ok(Ok(permit)) = admission {
                self.settle(py, name, permit, Outcome::Cancelled)?;
            }
            return Err(e);
        }
        match admission {
            Ok(decision) => Ok(decision.map_err(Refused::Breaker)),
            Err((RegistryError::Full { .. }, room)) => Ok(Err(Refused::Full { room })),
            Err((e, room)) => Err(registry_error(py, name, e, room)),
        }
    }

    /// Admits a call through `name` (the `str` given, `text` its contents) or raises.
    fn acquire(&self, py: Python<'_>, name: &Bound<'_, PyAny>, text: &str) -> PyResult<CorePermit> {
        self.admit(py, text)?.map_err(|refused| refused_error(py, name, text, refused))
    }

    /// Reports `outcome` of a permit's call, as `NativeBreaker` does.
    fn settle(&self, py: Python<'_>, name: &str, permit: CorePermit, outcome: Outcome) -> PyResult<()> {
        let (now, read) = self.host.now_for_report(py);
        let ((), delivered) = self.change(py, name, |core| ((), core.record(name, permit, outcome, now)));
        read.and(delivered)
    }

    /// Reports the call that raised `err`, as `NativeBreaker` does.
    fn settle_error(&self, py: Python<'_>, name: &str, permit: CorePermit, err: PyErr) -> PyErr {
        let (outcome, classified) = self.host.classify(py, &err);
        let settled = self.settle(py, name, permit, outcome);
        settled.and(classified).err().unwrap_or(err)
    }

    fn manual<T: IntoIterator<Item = Transition> + Default>(
        &self,
        py: Python<'_>,
        name: &str,
        op: impl FnOnce(&mut halfopen::Keyed<Gauges>, Instant) -> T,
    ) -> PyResult<()> {
        let now = self.clock(py)?;
        let (done, delivered) = self.change(py, name, |core| match core.get(name, now) {
            Ok(breaker) => (Ok(()), op(breaker, now)),
            Err(e) => {
                let room = matches!(e, RegistryError::Full { .. }) && core.has_room(now);
                (Err((e, room)), T::default())
            }
        });
        done.map_err(|(e, room)| registry_error(py, name, e, room))?;
        delivered
    }

    fn take(&self, py: Python<'_>, permit: &Bound<'_, Permit>) -> PyResult<(String, CorePermit)> {
        let p = permit.get();
        let core = p.take(py, self.host.id)?;
        Ok((p.name.clone().unwrap_or_default(), core))
    }

    /// A snapshot of more breakers than the capacity is refused (kind
    /// `corrupt`, as the core refuses it) saying so: it may well be a
    /// larger registry's. What else is wrong with it the restore says.
    fn check_count(&self, py: Python<'_>, breakers: Result<usize, halfopen::SnapshotError>) -> PyResult<()> {
        match breakers {
            Ok(n) if n > self.capacity => {
                let message = format!(
                    "the snapshot holds {n} breakers, more than this registry's capacity of {}: \
                     restore it into a Registry(capacity={n}) or larger (a snapshot of a larger registry \
                     is not damaged)",
                    self.capacity
                );
                let build = || -> PyResult<PyErr> {
                    Ok(PyErr::from_value(support(py)?.getattr("SnapshotError")?.call1((message, "corrupt"))?))
                };
                Err(build().unwrap_or_else(|e| e))
            }
            _ => Ok(()),
        }
    }

    /// Restores with `op`, noting each breaker's transitions under the lock.
    fn restore(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut Registry<Gauges>) -> Result<Vec<(String, Transition)>, halfopen::SnapshotError>,
    ) -> PyResult<()> {
        let result = {
            let mut core = self.lock();
            op(&mut core).map(|changes| {
                for (name, t) in changes {
                    self.host.note(|| name, [t]);
                }
            })
        };
        let delivered = self.host.deliver(py);
        result.map_err(|e| snapshot_error(py, e))?;
        delivered
    }
}

#[pymethods]
impl NativeRegistry {
    #[new]
    #[pyo3(signature = (
        *, capacity = None, exclude = None, clock = None, shared_clock = None, fallback = None, latency_histogram = None,
        **options
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        capacity: Option<&Bound<'_, PyAny>>,
        exclude: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        shared_clock: Option<&Bound<'_, PyAny>>,
        fallback: Option<&Bound<'_, PyAny>>,
        latency_histogram: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let latency = histogram(py, latency_histogram)?;
        let capacity = match capacity {
            None => halfopen::DEFAULT_CAPACITY as u32,
            Some(c) if c.is_instance_of::<PyInt>() && !c.is_instance_of::<PyBool>() => c
                .extract::<u32>()
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(|| value_error(py, "capacity", Problem::OutOfRange, "must be from 1 to 4294967295"))?,
            Some(c) => {
                return Err(option_error(py, true, "capacity", &format!("must be an int, got {}", type_name(c))));
            }
        };
        let empty = PyDict::new(py);
        let config = options::config(py, options.unwrap_or(&empty))?;
        let host = Host::new(py, exclude, clock, shared_clock, fallback)?;
        let core = Registry::new(config, capacity as usize).map_err(|e| registry_error(py, "", e, false))?;
        Ok(NativeRegistry {
            core: Mutex::new(core),
            host,
            latency,
            capacity: capacity as usize,
            group: Mutex::new(None),
        })
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

    /// Calls `fn(*args, **kwargs)` through `name`'s breaker (made on first
    /// use); see `CircuitBreaker.call`. A registry full of busy breakers
    /// raises `RegistryFullError`.
    #[pyo3(signature = (name, fn_, /, *args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        fn_: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let text = name_of(py, name)?;
        let permit = match self.admit(py, &text)? {
            Ok(permit) => permit,
            Err(refused) => {
                return match self.host.fallback() {
                    Some(fallback) => fall_back(py, fallback, args, kwargs),
                    None => Err(refused_error(py, name, &text, refused)),
                };
            }
        };
        let name = text;
        match fn_.call(args, kwargs) {
            Ok(value) if unfinished(py, &value) => {
                self.settle(py, &name, permit, Outcome::Cancelled)?;
                Err(unfinished_error(py, "fn", &value))
            }
            Ok(value) => {
                self.settle(py, &name, permit, Outcome::Success)?;
                Ok(value.unbind())
            }
            Err(err) => Err(self.settle_error(py, &name, permit, err)),
        }
    }

    /// Leave to make one call through `name`'s breaker, or raises.
    fn try_acquire(slf: &Bound<'_, Self>, name: &Bound<'_, PyAny>) -> PyResult<Permit> {
        let this = slf.get();
        let text = name_of(slf.py(), name)?;
        let p = this.acquire(slf.py(), name, &text)?;
        Ok(Permit::new(&p, this.host.id, Some(text)))
    }

    /// Enters a `with` block of `name`'s breaker (`KeyedBreaker`'s, whose
    /// statement is `depth` frames above this call), or raises
    /// `CircuitBreakerError` before it.
    #[pyo3(signature = (name, depth = 1))]
    fn _enter(&self, py: Python<'_>, name: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
        let text = name_of(py, name)?;
        let permit = self.acquire(py, name, &text)?;
        blocks::enter(py, self.host.blocks(), Some(text.clone()), permit, depth)
            .or_else(|(e, permit)| self.settle(py, &text, permit, Outcome::Cancelled).and(Err(e)))
    }

    /// Leaves a `with` block of `name`'s breaker (see `_enter`), reporting
    /// its call as ended by `exc` (`None`: a success; as `CircuitBreaker`'s
    /// `__exit__` does with anything else).
    #[pyo3(signature = (name, exc, depth = 1))]
    fn _leave(&self, py: Python<'_>, name: &Bound<'_, PyAny>, exc: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
        let text = name_of(py, name)?;
        let permit = blocks::leave(py, self.host.blocks(), Some(&text), depth)?;
        let (outcome, classified) = self.host.exit_outcome(py, exc).unwrap_or_else(|e| (Outcome::Cancelled, Err(e)));
        self.settle(py, &text, permit, outcome).and(classified)
    }

    /// Reports how a permitted call ended (see `CircuitBreaker.record`).
    fn record(&self, py: Python<'_>, permit: &Bound<'_, Permit>, outcome: &str) -> PyResult<()> {
        let outcome = outcome_of(py, outcome)?;
        let (name, p) = self.take(py, permit)?;
        self.settle(py, &name, p, outcome)
    }

    /// Reports a permitted call that raised `exc`, counted as `call` counts it.
    fn record_exception(&self, py: Python<'_>, permit: &Bound<'_, Permit>, exc: &Bound<'_, PyAny>) -> PyResult<()> {
        check_exception(py, exc)?;
        let (name, p) = self.take(py, permit)?;
        let (outcome, classified) = self.host.classify(py, &PyErr::from_value(exc.clone()));
        self.settle(py, &name, p, outcome).and(classified)
    }

    /// Gives `name` its own options: the registry's, changed by these (the
    /// core's `ConfigPatch` rule: an option given replaces the registry's, a
    /// window or a limit whole; `None` unsets it; a `preset` starts from
    /// that preset); at most `capacity` names. A breaker `name` has is
    /// replaced by a closed one.
    #[pyo3(signature = (name, /, **options))]
    fn configure(&self, py: Python<'_>, name: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let name = name_of(py, name)?;
        let empty = PyDict::new(py);
        let options = options.unwrap_or(&empty);
        let patch = options::patch(py, options)?;
        let now = self.clock(py)?;
        // A name in a group: its probes must not outlast the group's lease.
        let fits = self.group().as_ref().is_none_or(|g| g.members.check(&patch.apply(self.lock().config())).is_ok());
        if !fits {
            return Err(value_error(
                py,
                "probe_timeout",
                Problem::TooLarge,
                "must be at most the group's lease (the RedisGroup's lease)",
            ));
        }
        let (done, delivered) = self.change(py, &name, |core| match core.configure_from(&name, &patch, now) {
            Ok(t) => (Ok(()), t),
            Err(e) => (Err(e), None),
        });
        done.map_err(|e| match e {
            // Named as the options given name it (`window_calls`, not `window`).
            RegistryError::Config(c) => options::config_error(py, c, options),
            e => registry_error(py, &name, e, false),
        })?;
        delivered
    }

    /// `name`'s state, or `"CLOSED"` if it has no breaker (a new one would be).
    fn state_name(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<&'static str> {
        let now = self.clock(py)?;
        Ok(state_name(self.lock().state(&name, now)))
    }

    /// `name`'s mode (`"NORMAL"` if it has no breaker).
    fn mode(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<&'static str> {
        let now = self.clock(py)?;
        Ok(mode_name(self.lock().mode(&name, now)))
    }

    /// Seconds until a call for `name` is worth trying (0.0 now; `None`:
    /// held open, or the registry full of busy breakers).
    fn retry_after(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<Option<f64>> {
        let now = self.clock(py)?;
        Ok(self.lock().retry_after(&name, now).map(secs))
    }

    #[pyo3(signature = (name, seconds = None))]
    fn force_open(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = checked_name)] name: String,
        seconds: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let d = force_open_for(py, seconds)?;
        self.manual(py, &name, |b, now| b.force_open(now, d))
    }

    fn force_open_at_least(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = checked_name)] name: String,
        seconds: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let d = seconds_for(py, seconds)?;
        self.manual(py, &name, |b, now| b.force_open_at_least(now, d))
    }

    fn force_close(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<()> {
        self.manual(py, &name, |b, now| b.force_close(now))
    }

    fn disable(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<()> {
        self.manual(py, &name, |b, now| b.disable(now))
    }

    fn release(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<()> {
        self.manual(py, &name, |b, now| b.release(now))
    }

    fn reset(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<()> {
        self.manual(py, &name, |b, now| b.reset(now))
    }

    fn handle_timeout(&self, py: Python<'_>, #[pyo3(from_py_with = checked_name)] name: String) -> PyResult<()> {
        self.manual(py, &name, |b, now| b.handle_timeout(now))
    }

    /// When (seconds on the registry's clock: compare with `now()`) `name`'s
    /// breaker next changes by itself; call `handle_timeout(name)` then.
    fn poll_timeout(&self, #[pyo3(from_py_with = checked_name)] name: String) -> Option<f64> {
        self.lock().peek(&name).and_then(|b| b.poll_timeout()).map(secs_at)
    }

    /// The registry's clock reading, in seconds (what `poll_timeout` and
    /// `StateChange.at` are on; the default clock's origin is private).
    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(secs_at(self.clock(py)?))
    }

    /// `name`'s metrics and counts, or `None` if it has no breaker.
    fn metrics<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = checked_name)] name: String,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let now = self.clock(py)?;
        let reading = self.lock().peek(&name).map(|b| (b.metrics(now), b.counts(now)));
        reading.map(|r| metrics_dict(py, r)).transpose()
    }

    /// Calls `callback(change)` after every change of state of any breaker
    /// (`change.name` says which), with no lock held.
    fn on_state_change(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        self.host.listen(py, callback)
    }

    /// The names of the breakers held.
    fn names(&self) -> PyResult<Vec<String>> {
        self.lock().try_names().map_err(out_of_memory("the names"))
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    fn __contains__(&self, #[pyo3(from_py_with = checked_name)] name: String) -> bool {
        self.lock().peek(&name).is_some()
    }

    /// Idle breakers evicted so far.
    #[getter]
    fn evictions(&self) -> u64 {
        self.lock().evictions()
    }

    /// The Prometheus text exposition of every breaker.
    fn prometheus(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.clock(py)?;
        let group = self.group_readings();
        let registry = self.lock();
        halfopen::try_render(|out| {
            registry.render_prometheus(out, now)?;
            halfopen::group::render_prometheus(out, || group.iter().map(|(n, g)| (n.as_str(), *g)))
        })
        .map_err(out_of_memory("the exposition"))
    }

    /// Every breaker's state as JSON text.
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        let now = self.clock(py)?;
        let snapshot = self.lock().try_snapshot(now);
        snapshot.and_then(|s| s.try_into_json()).map_err(out_of_memory("the snapshot"))
    }

    /// Every breaker's state as compact bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let now = self.clock(py)?;
        let snapshot = self.lock().try_snapshot(now);
        let bytes = snapshot.and_then(|s| s.try_into_bytes()).map_err(out_of_memory("the snapshot"))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Replaces every breaker with a JSON snapshot's (transitions emitted).
    fn restore_json(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = snapshot_text(py, text)?;
        self.check_count(py, halfopen::RegistrySnapshot::count_json(&text))?;
        let now = self.clock(py)?;
        let elapsed = self.host.elapsed();
        self.restore(py, |core| core.restore_json(&text, now, elapsed))
    }

    /// Replaces every breaker with a compact snapshot's.
    fn restore_bytes(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.check_count(py, halfopen::RegistrySnapshot::count_bytes(data))?;
        let now = self.clock(py)?;
        let elapsed = self.host.elapsed();
        self.restore(py, |core| core.restore_bytes(data, now, elapsed))
    }
}
