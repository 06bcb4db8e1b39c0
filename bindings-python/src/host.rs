//! What a breaker and a registry share: the clock (read outside any lock),
//! what never counts as a failure (`exclude`), the state-change listeners,
//! the exceptions a refusal raises, and the permits and events handed to
//! Python. Every method here runs with no lock held.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use halfopen::{Instant, Mode, Outcome, Permit as CorePermit, Rejection, State, Transition};
use pyo3::exceptions::{PyMemoryError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::blocks::{self, Blocks};
use crate::fork;
use crate::options::{option_error, type_name};
use crate::time::{micros, monotonic, secs, secs_at};

/// Leave to make one call, from `try_acquire`; report it once with `record`.
#[pyclass(frozen, module = "halfopen._native")]
pub struct Permit {
    generation: u32,
    issued_at: u64,
    /// The breaker or registry that issued it (its id: a permit is reported
    /// to it only), and, from a registry, the name.
    owner: u64,
    pub(crate) name: Option<String>,
    reported: AtomicBool,
}

impl Permit {
    pub(crate) fn new(permit: &CorePermit, owner: u64, name: Option<String>) -> Self {
        Permit {
            generation: permit.generation(),
            issued_at: permit.issued_at().as_micros(),
            owner,
            name,
            reported: AtomicBool::new(false),
        }
    }

    /// The core permit, once: a permit of another owner is a `TypeError`, a
    /// second report a `ValueError`.
    pub(crate) fn take(&self, py: Python<'_>, owner: u64) -> PyResult<CorePermit> {
        if self.owner != owner {
            return Err(PyErr::new::<PyTypeError, _>("permit was issued by another breaker"));
        }
        if self.reported.swap(true, Ordering::AcqRel) {
            return Err(option_error(py, false, "permit", "was already reported"));
        }
        Ok(CorePermit::from_parts(self.generation, Instant::from_micros(self.issued_at)))
    }
}

/// A change of state, as listeners receive it.
#[pyclass(frozen, get_all, module = "halfopen._native")]
pub struct StateChange {
    /// The breaker's name (its registry key).
    pub name: String,
    /// `halfopen.State` members (equal to `"CLOSED"`, `"OPEN"`, `"HALF_OPEN"`).
    pub from_state: Py<PyAny>,
    pub to_state: Py<PyAny>,
    /// Why, in the core's words (`"failure_threshold"`, `"open_timeout"`, ...).
    pub reason: &'static str,
    /// When it took effect, in seconds on the breaker's clock.
    pub at: f64,
}

impl StateChange {
    /// The change `t` of the breaker `name`.
    pub(crate) fn new(py: Python<'_>, name: String, t: Transition) -> Self {
        StateChange {
            name,
            from_state: state_member(py, t.from).unbind(),
            to_state: state_member(py, t.to).unbind(),
            reason: t.reason.name(),
            at: secs_at(t.at),
        }
    }
}

/// What never counts as the upstream's failure: exception classes, then
/// predicates (each called with the exception, in order), from `exclude`.
#[derive(Default)]
pub(crate) struct Exclude {
    classes: Option<Py<PyTuple>>,
    predicates: Vec<Py<PyAny>>,
}

impl Exclude {
    /// From the `exclude` argument, checked and flattened by the package.
    fn new(py: Python<'_>, exclude: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(exclude) = exclude else { return Ok(Exclude::default()) };
        let (classes, predicates): (Bound<'_, PyTuple>, Vec<Py<PyAny>>) =
            support(py)?.getattr("exclusions")?.call1((exclude,))?.extract()?;
        Ok(Exclude { classes: (!classes.is_empty()).then(|| classes.unbind()), predicates })
    }

    fn is_empty(&self) -> bool {
        self.classes.is_none() && self.predicates.is_empty()
    }

    /// Whether `value` must not count: an instance of a class, or a
    /// predicate says so (what a predicate raises is the caller's).
    fn excludes(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Some(classes) = &self.classes
            && value.is_instance(classes.bind(py).as_any())?
        {
            return Ok(true);
        }
        for p in &self.predicates {
            if p.bind(py).call1((value,))?.is_truthy()? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The seed's name of a state.
pub(crate) fn state_name(s: State) -> &'static str {
    match s {
        State::Closed => "CLOSED",
        State::Open => "OPEN",
        State::HalfOpen => "HALF_OPEN",
    }
}

/// The `halfopen.State` member of a state (a `str` enum: it equals its
/// name), or the name itself if the package's module cannot be read.
pub(crate) fn state_member(py: Python<'_>, s: State) -> Bound<'_, PyAny> {
    static MEMBERS: PyOnceLock<[Py<PyAny>; 3]> = PyOnceLock::new();
    let members = MEMBERS.get_or_try_init(py, || {
        let class = support(py)?.getattr("State")?;
        let member = |name: &str| class.getattr(name).map(Bound::unbind);
        Ok::<_, PyErr>([member("CLOSED")?, member("OPEN")?, member("HALF_OPEN")?])
    });
    let i = match s {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
    };
    match members {
        Ok(m) => m[i].bind(py).clone(),
        Err(_) => PyString::new(py, state_name(s)).into_any(),
    }
}

pub(crate) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Normal => "NORMAL",
        Mode::ForcedOpen { .. } => "FORCED_OPEN",
        Mode::Disabled => "DISABLED",
    }
}

pub(crate) fn outcome_of(py: Python<'_>, name: &str) -> PyResult<Outcome> {
    match name {
        "success" => Ok(Outcome::Success),
        "failure" => Ok(Outcome::Failure),
        "ignored" => Ok(Outcome::Ignored),
        "cancelled" => Ok(Outcome::Cancelled),
        _ => Err(option_error(py, false, "outcome", "must be \"success\", \"failure\", \"ignored\" or \"cancelled\"")),
    }
}

/// The package's module of exception classes and helpers (Python code).
pub(crate) fn support(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static MODULE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let m = MODULE.get_or_try_init(py, || py.import("halfopen._support").map(|m| m.into_any().unbind()))?;
    Ok(m.bind(py))
}

/// What a protected call must not return: a coroutine, a generator or a
/// future, whose work has not happened yet (`call_async` is for those).
pub(crate) fn unfinished(py: Python<'_>, value: &Bound<'_, PyAny>) -> bool {
    static TYPES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let types = TYPES.get_or_try_init(py, || support(py)?.getattr("UNFINISHED").map(Bound::unbind));
    // By the value's type (no `__class__` lookup: a call's every result is checked).
    types.is_ok_and(|t| value.get_type().is_subclass(t.bind(py)).unwrap_or(false))
}

/// The `TypeError` for `option` (`fn`, `fallback`) that returned `value`
/// unfinished; `value` is closed (a coroutine never awaited warns otherwise).
pub(crate) fn unfinished_error(py: Python<'_>, option: &str, value: &Bound<'_, PyAny>) -> PyErr {
    if let Ok(close) = value.getattr("close") {
        let _ = close.call0();
    }
    let problem =
        format!("returned {}, whose work has not run: use call_async() (or a plain function)", type_name(value));
    option_error(py, true, option, &problem)
}

/// What a refused call returns: `fallback(*args, **kwargs)`, which must be
/// finished (an awaitable is for `call_async`).
pub(crate) fn fall_back(
    py: Python<'_>,
    fallback: &Py<PyAny>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let value = fallback.bind(py).call(args, kwargs)?;
    if unfinished(py, &value) {
        return Err(unfinished_error(py, "fallback", &value));
    }
    Ok(value.unbind())
}

/// Exceptions that end a call without saying anything of the upstream.
fn cancellations(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static TYPES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let types = TYPES.get_or_try_init(py, || support(py)?.getattr("CANCELLATIONS").map(Bound::unbind))?;
    Ok(types.bind(py))
}

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
    listeners: Mutex<Vec<Py<PyAny>>>,
    /// Whether `listeners` holds any (read without its lock, on every call).
    listening: AtomicBool,
    events: Mutex<Events>,
    /// Changes noted and not yet taken for delivery (read without a lock).
    pending: AtomicUsize,
    /// The `with` blocks entered and not yet left.
    blocks: Blocks,
    /// The fork generation whose orphaned blocks were taken out of `blocks`.
    orphans_taken: AtomicU64,
    /// The name a subclass's `__init__` gave (see `NativeBreaker::__init__`).
    name: Option<Py<PyString>>,
}

/// State changes noted (in the core's order: under its lock) and not yet
/// delivered, and whether a thread is delivering them: the fork generation
/// it was set in (a fork's child has no thread delivering).
#[derive(Default)]
struct Events {
    queue: VecDeque<(String, Transition)>,
    delivering: Option<u64>,
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
        let x = self.extras();
        x.listeners.lock().unwrap_or_else(|e| e.into_inner()).push(callback);
        x.listening.store(true, Ordering::Release);
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

    /// Notes the transitions of the breaker `name()` for the listeners, if
    /// any listen. Called with the core's lock held, so that changes are
    /// delivered in the order the core made them; runs no Python code.
    pub(crate) fn note(&self, name: impl FnOnce() -> String, transitions: impl IntoIterator<Item = Transition>) {
        let mut transitions = transitions.into_iter().peekable();
        let Some(x) = self.extras.get() else { return };
        if transitions.peek().is_none() || !x.listening.load(Ordering::Acquire) {
            return;
        }
        let name = name();
        let mut events = x.events.lock().unwrap_or_else(|e| e.into_inner());
        let before = events.queue.len();
        events.queue.extend(transitions.map(|t| (name.clone(), t)));
        x.pending.fetch_add(events.queue.len() - before, Ordering::Release);
    }

    /// Calls the listeners with every change noted, in order, with no lock
    /// held — unless a thread is delivering already (this one, from a
    /// listener that changed the breaker; or another): then that thread
    /// delivers them after the change it is delivering. A listener's
    /// exception is logged, except an interrupt, an exit or a signal
    /// handler's: the change still reaches every listener, then the
    /// delivery stops (what is still queued goes with the next one, in
    /// order) and the exception is returned, to be raised.
    pub(crate) fn deliver(&self, py: Python<'_>) -> PyResult<()> {
        let Some(x) = self.extras.get() else { return Ok(()) };
        if x.pending.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        {
            let mut events = x.events.lock().unwrap_or_else(|e| e.into_inner());
            let generation = fork::generation();
            if events.delivering == Some(generation) || events.queue.is_empty() {
                return Ok(());
            }
            events.delivering = Some(generation);
        }
        loop {
            let next = {
                let mut events = x.events.lock().unwrap_or_else(|e| e.into_inner());
                let next = events.queue.pop_front();
                if next.is_some() {
                    x.pending.fetch_sub(1, Ordering::Release);
                }
                events.delivering = events.delivering.filter(|_| next.is_some());
                next
            };
            let Some((name, t)) = next else { return Ok(()) };
            let listeners: Vec<Py<PyAny>> =
                x.listeners.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|l| l.clone_ref(py)).collect();
            let Ok(change) = Py::new(py, StateChange::new(py, name, t)) else { continue };
            let mut escaped = Ok(());
            for listener in &listeners {
                if let Err(e) = listener.bind(py).call1((change.clone_ref(py),)) {
                    escaped = escaped.and(log_or_escape(py, "a state-change listener raised", e));
                }
            }
            if escaped.is_err() {
                x.events.lock().unwrap_or_else(|e| e.into_inner()).delivering = None;
                return escaped;
            }
        }
    }

    /// Shows the garbage collector the Python objects held (a listener that
    /// refers to its breaker makes a cycle it must be able to collect).
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(x) = self.extras.get() else { return Ok(()) };
        visit.call(&x.clock)?;
        visit.call(&x.fallback)?;
        visit.call(&x.exclude.classes)?;
        for p in &x.exclude.predicates {
            visit.call(p)?;
        }
        // A lock held elsewhere means a thread is using them: they are alive.
        if let Ok(listeners) = x.listeners.try_lock() {
            for l in listeners.iter() {
                visit.call(l)?;
            }
        }
        blocks::traverse(&x.blocks, visit)
    }

    /// Drops the listeners and the blocks not left (the collector breaking
    /// a cycle through them: the breaker is garbage).
    pub(crate) fn clear(&self) {
        if let Some(x) = self.extras.get() {
            // Taken under the locks, dropped after them (drops run Python code).
            let listeners = std::mem::take(&mut *x.listeners.lock().unwrap_or_else(|e| e.into_inner()));
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

    /// What an exception from the call says: cancellations (`asyncio`'s, an
    /// interrupt, an exit) and excluded errors count nothing; anything else
    /// is a failure (so is an exception an `exclude` predicate raises). A
    /// predicate interrupted (an interrupt, an exit, a signal handler's
    /// exception) says nothing: the call counts as cancelled, and that
    /// exception comes back, to be raised (its context the call's) once
    /// the call is reported.
    pub(crate) fn classify(&self, py: Python<'_>, err: &PyErr) -> (Outcome, PyResult<()>) {
        let value = err.value(py);
        if cancellations(py).is_ok_and(|c| value.is_instance(c).unwrap_or(false)) {
            return (Outcome::Cancelled, Ok(()));
        }
        let Some(x) = self.extras.get() else { return (Outcome::Failure, Ok(())) };
        match x.exclude.excludes(py, value) {
            Ok(true) => (Outcome::Ignored, Ok(())),
            Ok(false) => (Outcome::Failure, Ok(())),
            Err(e) => match log_or_escape(py, "the exclude predicate raised; the call counts as a failure", e) {
                Ok(()) => (Outcome::Failure, Ok(())),
                Err(e) => {
                    let _ = e.value(py).setattr("__context__", value);
                    (Outcome::Cancelled, Err(e))
                }
            },
        }
    }
}

/// A refusal's state (a `halfopen.State`) and reason (the core's words, a
/// string made once): a refusal allocates only its exception and its `retry_after`.
fn refusal_words<'py>(py: Python<'py>, rejection: &Rejection) -> (Bound<'py, PyAny>, Bound<'py, PyString>) {
    let state = state_member(py, rejection.state);
    let reason = match rejection.wait.reason() {
        "open" => intern!(py, "open").clone(),
        "probes_busy" => intern!(py, "probes_busy").clone(),
        "limit_full" => intern!(py, "limit_full").clone(),
        "held" => intern!(py, "held").clone(),
        other => PyString::new(py, other),
    };
    (state, reason)
}

/// The exception for `rejection` of the breaker `name` (state and reason as
/// the core says): `ConcurrencyLimitError` for a full limit, else `CircuitOpenError`.
pub(crate) fn refusal(py: Python<'_>, name: &Bound<'_, PyAny>, rejection: Rejection) -> PyErr {
    static CLASSES: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();
    let retry = rejection.retry_after().map(secs);
    let build = || -> PyResult<PyErr> {
        let (open, limit) = CLASSES.get_or_try_init(py, || {
            let m = support(py)?;
            Ok::<_, PyErr>((m.getattr("CircuitOpenError")?.unbind(), m.getattr("ConcurrencyLimitError")?.unbind()))
        })?;
        let class = if matches!(rejection.wait, halfopen::Wait::LimitFull { .. }) { limit } else { open };
        let (state, reason) = refusal_words(py, &rejection);
        Ok(PyErr::from_value(class.bind(py).call1((name, state, retry, reason))?))
    };
    build().unwrap_or_else(|e| e)
}

/// `record_exception`'s argument must be an exception.
pub(crate) fn check_exception(py: Python<'_>, exc: &Bound<'_, PyAny>) -> PyResult<()> {
    if exc.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        return Ok(());
    }
    Err(option_error(py, true, "exc", &format!("must be an exception, got {}", type_name(exc))))
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

/// A `MemoryError` for an output (an exposition, a snapshot) that did not fit.
pub(crate) fn out_of_memory(what: &str) -> impl FnOnce(halfopen::OutOfMemory) -> PyErr + '_ {
    move |_| PyMemoryError::new_err(format!("out of memory: {what} did not fit"))
}

/// `halfopen.SnapshotError` with its `kind`.
pub(crate) fn snapshot_error(py: Python<'_>, e: halfopen::SnapshotError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = support(py)?.getattr("SnapshotError")?;
        Ok(PyErr::from_value(class.call1((e.to_string(), e.kind()))?))
    };
    build().unwrap_or_else(|err| err)
}

/// Logs `err` on the `halfopen` logger (a callback's failure never breaks a
/// call), unless it is an interrupt, an exit or a signal handler's exception
/// (`_support.escapes`): that is handed back, to be raised once the
/// breaker's bookkeeping is done.
pub(crate) fn log_or_escape(py: Python<'_>, what: &str, err: PyErr) -> PyResult<()> {
    // If asking fails (an interrupt meanwhile), what made it fail is raised.
    if support(py)?.getattr("escapes")?.call1((err.value(py), err.traceback(py)))?.is_truthy()? {
        return Err(err);
    }
    let _ = support(py).and_then(|m| m.getattr("log_error")).and_then(|f| f.call1((what, err.value(py))));
    Ok(())
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

    /// The registry name it was issued for (`None` from a single breaker).
    #[getter]
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}
