//! What a state change looks like in Python: `StateChange` (as listeners
//! receive it), and `Listeners` (the listeners of one breaker or registry
//! and the changes noted for them, delivered in the core's order with no
//! lock held).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use halfopen::Transition;
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use crate::errors::log_or_escape;
use crate::fork;
use crate::names::state_member;
use crate::time::secs_at;

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

/// State changes noted (in the core's order: under its lock) and not yet
/// delivered, and whether a thread is delivering them: the fork generation
/// it was set in (a fork's child has no thread delivering).
#[derive(Default)]
struct Events {
    queue: VecDeque<(String, Transition)>,
    delivering: Option<u64>,
}

/// The state-change listeners of a breaker or a registry, and the changes
/// noted for them.
#[derive(Default)]
pub(crate) struct Listeners {
    listeners: Mutex<Vec<Py<PyAny>>>,
    /// Whether `listeners` holds any (read without its lock, on every call).
    listening: AtomicBool,
    events: Mutex<Events>,
    /// Changes noted and not yet taken for delivery (read without a lock).
    pending: AtomicUsize,
}

impl Listeners {
    /// Adds a listener (a callable, checked by the caller).
    pub(crate) fn add(&self, callback: Py<PyAny>) {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner()).push(callback);
        self.listening.store(true, Ordering::Release);
    }

    /// Notes the transitions of the breaker `name()`, if any listener
    /// listens. Called with the core's lock held, so that changes are
    /// delivered in the order the core made them; runs no Python code.
    pub(crate) fn note(&self, name: impl FnOnce() -> String, transitions: impl IntoIterator<Item = Transition>) {
        let mut transitions = transitions.into_iter().peekable();
        if transitions.peek().is_none() || !self.listening.load(Ordering::Acquire) {
            return;
        }
        let name = name();
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let before = events.queue.len();
        events.queue.extend(transitions.map(|t| (name.clone(), t)));
        self.pending.fetch_add(events.queue.len() - before, Ordering::Release);
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
        if self.pending.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            let generation = fork::generation();
            if events.delivering == Some(generation) || events.queue.is_empty() {
                return Ok(());
            }
            events.delivering = Some(generation);
        }
        loop {
            let next = {
                let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
                let next = events.queue.pop_front();
                if next.is_some() {
                    self.pending.fetch_sub(1, Ordering::Release);
                }
                events.delivering = events.delivering.filter(|_| next.is_some());
                next
            };
            let Some((name, t)) = next else { return Ok(()) };
            let listeners: Vec<Py<PyAny>> =
                self.listeners.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|l| l.clone_ref(py)).collect();
            let Ok(change) = Py::new(py, StateChange::new(py, name, t)) else { continue };
            let mut escaped = Ok(());
            for listener in &listeners {
                if let Err(e) = listener.bind(py).call1((change.clone_ref(py),)) {
                    escaped = escaped.and(log_or_escape(py, "a state-change listener raised", e));
                }
            }
            if escaped.is_err() {
                self.events.lock().unwrap_or_else(|e| e.into_inner()).delivering = None;
                return escaped;
            }
        }
    }

    /// Shows the garbage collector the listeners (a lock held elsewhere
    /// means a thread is using them: they are alive).
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(listeners) = self.listeners.try_lock() {
            for l in listeners.iter() {
                visit.call(l)?;
            }
        }
        Ok(())
    }

    /// The listeners, taken out (to be dropped with no lock held).
    pub(crate) fn take(&self) -> Vec<Py<PyAny>> {
        std::mem::take(&mut *self.listeners.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
