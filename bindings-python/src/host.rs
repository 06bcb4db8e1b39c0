//! What a breaker and a registry share besides their core: the clock (read
//! outside any lock), `exclude`, `fallback`, the listeners and the `with`
//! blocks. Every method here runs with no lock held.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use halfopen::{Instant, Outcome, Transition};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use pyo3::{PyTraverseError, PyVisit};

use crate::blocks::{self, Blocks};
use crate::classify::{self, Exclude, check_exception};
use crate::errors::{log_or_escape, option_error, snapshot_error, type_name};
use crate::events::Listeners;
use crate::fork;
use crate::support::support;
use crate::time::{micros, monotonic};

/// What a breaker or a registry holds besides its core: the id its permits
/// carry (unique in the process, never reused), and what it was given
/// (`clock`, `exclude`, `fallback`), its listeners and its `with` blocks,
/// boxed and made only when one is there. Small, because a process may hold
/// many breakers.
pub(crate) struct Host {
    pub(crate) id: u64,
    extras: OnceLock<Box<Extras>>,
}

/// The parts of a [`Host`] most breakers never have.
#[derive(Default)]
struct Extras {
    clock: Option<Py<PyAny>>,
    /// Whether `clock` reads the same in the process a snapshot comes from
    /// (`shared_clock`): a restore then counts the time since it was taken.
    shared_clock: bool,
    /// The latest good clock reading (µs), for a report whose reading fails.
    last_reading: AtomicU64,
    exclude: Exclude,
    fallback: Option<Py<PyAny>>,
    listeners: Listeners,
    /// The `with` blocks entered and not yet left.
    blocks: Blocks,
    /// The fork generation whose orphaned blocks were taken out of `blocks`.
    orphans_taken: AtomicU64,
    /// The name a subclass's `__init__` gave (see `NativeBreaker::__init__`).
    name: Option<Py<PyString>>,
    /// The breaker's member of its group, if it joined one (`group.rs`).
    group: std::sync::Mutex<Option<Box<halfopen::group::Member>>>,
}

/// Refuses an async callable for `option` (`why`: what would go wrong).
fn check_sync(py: Python<'_>, option: &str, f: &Bound<'_, PyAny>, why: &str) -> PyResult<()> {
    support(py)?.getattr("check_sync")?.call1((option, f, why)).map(drop)
}

/// A callable argument (`None`: absent), checked.
fn callable(py: Python<'_>, option: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Py<PyAny>>> {
    match v {
        Some(c) if !c.is_callable() => {
            Err(option_error(py, true, option, &format!("must be a callable, got {}", type_name(c))))
        }
        v => Ok(v.map(|c| c.clone().unbind())),
    }
}

impl Host {
    /// From the `exclude`, `clock` and `fallback` arguments (checked).
    pub(crate) fn new(
        py: Python<'_>,
        exclude: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        shared_clock: Option<&Bound<'_, PyAny>>,
        fallback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let shared_clock = match shared_clock {
            None => false,
            Some(b) if b.is_instance_of::<PyBool>() => b.is_truthy()?,
            Some(b) => {
                let problem = format!("must be a bool, got {}", type_name(b));
                return Err(option_error(py, true, "shared_clock", &problem));
            }
        };
        if shared_clock && clock.is_none() {
            // The default clock counts from this process's start: no other process shares it.
            let problem =
                "needs a clock of your own (such as time.time): the default one counts from this process's start";
            return Err(option_error(py, false, "shared_clock", problem));
        }
        let exclude = Exclude::new(py, exclude)?;
        let clock = callable(py, "clock", clock)?;
        if let Some(clock) = &clock {
            check_sync(py, "clock", clock.bind(py), "its reading would be a coroutine, not a number")?;
        }
        let fallback = callable(py, "fallback", fallback)?;
        let extras = OnceLock::new();
        if clock.is_some() || fallback.is_some() || !exclude.is_empty() {
            let _ = extras.set(Box::new(Extras { clock, shared_clock, exclude, fallback, ..Extras::default() }));
        }
        static IDS: AtomicU64 = AtomicU64::new(1);
        Ok(Host { id: IDS.fetch_add(1, Ordering::Relaxed), extras })
    }

    fn extras(&self) -> &Extras {
        self.extras.get_or_init(Box::default)
    }

    /// Takes `built`'s clock, `exclude` and `fallback`, and `name`, if
    /// nothing has been given to this host yet (else changes nothing: false).
    pub(crate) fn adopt(&self, built: Host, name: Py<PyString>) -> bool {
        let mut extras = built.extras.into_inner().unwrap_or_default();
        extras.name = Some(name);
        self.extras.set(extras).is_ok()
    }

    /// The name `adopt` gave.
    pub(crate) fn renamed(&self) -> Option<&Py<PyString>> {
        self.extras.get()?.name.as_ref()
    }

    /// The clock's reading; a custom clock's bad value is a `TypeError`/`ValueError`.
    pub(crate) fn now(&self, py: Python<'_>) -> PyResult<Instant> {
        let Some((clock, last)) = self.extras.get().and_then(|x| Some((x.clock.as_ref()?, &x.last_reading))) else {
            return Ok(monotonic());
        };
        let us = reading(py, &clock.bind(py).call0()?)?;
        last.fetch_max(us, Ordering::Relaxed);
        Ok(Instant::from_micros(us))
    }

    /// The breaker's group member, if any (locked before the core, never on
    /// the call path).
    pub(crate) fn group(&self) -> std::sync::MutexGuard<'_, Option<Box<halfopen::group::Member>>> {
        self.extras().group.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The latest good clock reading (the origin before the first), for
    /// what must go on when the clock fails.
    pub(crate) fn last_reading(&self) -> Instant {
        Instant::from_micros(self.extras.get().map_or(0, |x| x.last_reading.load(Ordering::Relaxed)))
    }

    /// Whether a restore counts the time since the snapshot was taken.
    pub(crate) fn elapsed(&self) -> halfopen::Elapsed {
        match self.extras.get() {
            Some(x) if x.shared_clock => halfopen::Elapsed::Counted,
            _ => halfopen::Elapsed::Ignored,
        }
    }

    /// A reading for a report: a call already made is reported even if the
    /// clock fails now (at the latest good reading; the failure is logged).
    /// An interrupt, an exit or a signal handler's exception from the clock
    /// is handed back to be raised once the report is made.
    pub(crate) fn now_for_report(&self, py: Python<'_>) -> (Instant, PyResult<()>) {
        match self.now(py) {
            Ok(now) => (now, Ok(())),
            Err(e) => {
                let last = self.extras.get().map_or(0, |x| x.last_reading.load(Ordering::Relaxed));
                (Instant::from_micros(last), log_or_escape(py, "the clock failed; reporting at its latest reading", e))
            }
        }
    }

    /// What a refused call returns instead of raising, if given.
    pub(crate) fn fallback(&self) -> Option<&Py<PyAny>> {
        self.extras.get()?.fallback.as_ref()
    }

    /// Adds a listener (checked: a callable, not an async one).
    pub(crate) fn listen(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        let Some(callback) = callable(py, "callback", Some(callback))? else { return Ok(()) };
        check_sync(
            py,
            "callback",
            callback.bind(py),
            "listeners are called, never awaited (start a task from a plain one)",
        )?;
        self.extras().listeners.add(callback);
        Ok(())
    }

    /// The `with` blocks entered and not yet left.
    pub(crate) fn blocks(&self) -> &Blocks {
        &self.extras().blocks
    }

    /// In a fork's child, once: the `with` blocks entered by frames that ran
    /// on threads the fork left behind (they are never left), taken out, for
    /// their permits to be reported as cancelled. Two atomic reads otherwise.
    pub(crate) fn orphans(&self) -> Vec<blocks::Block> {
        let Some(x) = self.extras.get() else { return Vec::new() };
        let generation = fork::generation();
        if x.orphans_taken.swap(generation, Ordering::AcqRel) == generation {
            return Vec::new();
        }
        blocks::take_orphans(&x.blocks)
    }

    /// Notes the transitions of the breaker `name()` for the listeners
    /// (`Listeners::note`: with the core's lock held).
    pub(crate) fn note(&self, name: impl FnOnce() -> String, transitions: impl IntoIterator<Item = Transition>) {
        if let Some(x) = self.extras.get() {
            x.listeners.note(name, transitions);
        }
    }

    /// Calls the listeners with every change noted (`Listeners::deliver`).
    pub(crate) fn deliver(&self, py: Python<'_>) -> PyResult<()> {
        self.extras.get().map_or(Ok(()), |x| x.listeners.deliver(py))
    }

    /// Shows the garbage collector the Python objects held (a listener that
    /// refers to its breaker makes a cycle it must be able to collect).
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(x) = self.extras.get() else { return Ok(()) };
        visit.call(&x.clock)?;
        visit.call(&x.fallback)?;
        x.exclude.traverse(visit)?;
        x.listeners.traverse(visit)?;
        blocks::traverse(&x.blocks, visit)
    }

    /// Drops the listeners and the blocks not left (the collector breaking
    /// a cycle through them: the breaker is garbage).
    pub(crate) fn clear(&self) {
        if let Some(x) = self.extras.get() {
            // Taken under the locks, dropped after them (drops run Python code).
            let listeners = x.listeners.take();
            let blocks = std::mem::take(&mut *x.blocks.lock().unwrap_or_else(|e| e.into_inner()));
            drop((listeners, blocks));
        }
    }

    /// What a `with` block's exit says of its call: a success without an
    /// exception, else as `classify` counts `exc` (which must be one).
    pub(crate) fn exit_outcome(&self, py: Python<'_>, exc: &Bound<'_, PyAny>) -> PyResult<(Outcome, PyResult<()>)> {
        if exc.is_none() {
            return Ok((Outcome::Success, Ok(())));
        }
        check_exception(py, exc)?;
        Ok(self.classify(py, &PyErr::from_value(exc.clone())))
    }

    /// What an exception from the call says (`classify::classify`, with
    /// this host's `exclude`).
    pub(crate) fn classify(&self, py: Python<'_>, err: &PyErr) -> (Outcome, PyResult<()>) {
        classify::classify(py, self.extras.get().map(|x| &x.exclude), err)
    }
}

/// A JSON snapshot's text: a `str` of valid Unicode, else a `SnapshotError`.
/// Not a `str` is a `TypeError` (as `restore_bytes` of anything but bytes is).
pub(crate) fn snapshot_text(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<String> {
    if !text.is_instance_of::<PyString>() {
        return Err(option_error(
            py,
            true,
            "text",
            &format!("must be a str (a JSON snapshot), got {}", type_name(text)),
        ));
    }
    text.extract::<String>().map_err(|_| {
        snapshot_error(py, halfopen::SnapshotError::Malformed("a JSON snapshot is a str of valid Unicode".into()))
    })
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
    let exact = support(py)?.getattr("exact_micros")?.call1((v,)).map_err(|_| out_of_range())?;
    if exact.is_none() {
        return Err(option_error(py, true, "clock", &format!("must return a number of seconds, got {}", type_name(v))));
    }
    exact.extract::<u64>().map_err(|_| out_of_range())
}
