//! An outbox's deliverer (retention across processes, issue 24): the
//! core's `outbox::Deliverer` on this process's monotonic clock (the lease's
//! time runs as Redis's TTL does), and the Redis layout, all from the core
//! (`halfopen::outbox`). The I/O, through the user's redis-py asyncio
//! client, is `python/halfopen/outbox.py`'s.

use halfopen::outbox::{Deliverer, OutboxConfig, OutboxEvent, redis};
use halfopen::{Duration, Instant};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::{config_error, option_error, type_name, value_error};
use crate::options::{count, seconds};
use crate::time::{monotonic, secs, secs_at};

/// One process's deliverer of an outbox; every method reads the monotonic
/// clock itself.
#[pyclass(module = "halfopen._native")]
pub(crate) struct NativeOutbox {
    deliverer: Deliverer,
    /// The breaker state a grant handed on: its JSON, its age then, and when.
    left: Option<(Left, Instant)>,
}

/// An optional seconds option (absent or `None`: the core's default).
fn period(py: Python<'_>, option: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<halfopen::Duration>> {
    v.filter(|v| !v.is_none()).map(|v| seconds(py, option, v)).transpose()
}

#[pymethods]
impl NativeOutbox {
    /// A deliverer asking for the lease at once. `send_timeout`: the
    /// dispatcher's (seconds); `max_messages`: its bound. An invalid option
    /// is a `TypeError`/`ValueError` naming it, with the core's problem code.
    #[new]
    #[pyo3(signature = (seed, send_timeout, max_messages = None, lease = None, page_size = None, poll_interval = None, store_timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        seed: u64,
        send_timeout: &Bound<'_, PyAny>,
        max_messages: Option<u32>,
        lease: Option<&Bound<'_, PyAny>>,
        page_size: Option<&Bound<'_, PyAny>>,
        poll_interval: Option<&Bound<'_, PyAny>>,
        store_timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let defaults = OutboxConfig::new(seconds(py, "timeout", send_timeout)?);
        let c = OutboxConfig {
            lease: period(py, "lease", lease)?,
            page: page_size.filter(|v| !v.is_none()).map(|v| count(py, "page_size", v)).transpose()?,
            poll_interval: period(py, "poll_interval", poll_interval)?.unwrap_or(defaults.poll_interval),
            store_timeout: period(py, "store_timeout", store_timeout)?.unwrap_or(defaults.store_timeout),
            ..defaults
        };
        let names = |field: &str| {
            match field {
                "page" => "page_size",
                "send_timeout" => "timeout",
                other => other,
            }
            .to_owned()
        };
        let deliverer = Deliverer::new(c, max_messages, seed, monotonic())
            .map_err(|e| config_error(py, &names(e.field.name()), e.problem))?;
        Ok(NativeOutbox { deliverer, left: None })
    }

    /// The lease script's arguments (`redis::lease_args`): a renewal (or,
    /// with `release`, giving it up) by `token`, carrying breaker `state`
    /// ("": none), from a process that knows it holds grant `epoch`.
    #[pyo3(signature = (token, state, epoch, release = false))]
    fn lease_args(&self, token: &str, state: &str, epoch: Option<u64>, release: bool) -> [String; 4] {
        let lease = (!release).then(|| self.deliverer.lease());
        redis::lease_args(token, lease, state, epoch)
    }

    /// How many events one read takes.
    fn page_size(&self) -> u32 {
        self.deliverer.page()
    }

    /// At most how many events are handed on, or sends started, in one iteration of the event loop.
    fn turn_events(&self) -> u32 {
        halfopen::outbox::TURN_EVENTS
    }

    /// How long a store call may take, in seconds.
    fn store_timeout(&self) -> f64 {
        secs(self.deliverer.config().store_timeout)
    }

    /// Whether a lease call is due now (marked in flight).
    fn lease_call(&mut self) -> bool {
        self.deliverer.lease_call(monotonic()).is_some()
    }

    /// The lease script's reply: its two numbers, and on a new grant the
    /// breaker state left (`None`: none; bytes or str) and its age in ms.
    /// `False` if it cannot be the script's (the call then counts as failed).
    fn lease_answered(&mut self, reply: &Bound<'_, PyAny>) -> bool {
        let now = monotonic();
        match read_reply(reply) {
            Some((holds, epoch, left)) => {
                let before = self.deliverer.epoch();
                self.deliverer.lease_answered(now, holds, epoch);
                if self.deliverer.epoch() != before {
                    // A new grant: what it handed on (or nothing) replaces what an earlier one did.
                    self.left = left.map(|l| (l, now));
                }
                true
            }
            None => {
                self.deliverer.lease_failed(now);
                false
            }
        }
    }

    /// The breaker state the current grant handed on, once: its JSON and
    /// its age now, in microseconds.
    fn take_left(&mut self) -> Option<(String, u64)> {
        let ((state, age), at) = self.left.take()?;
        Some((state, age.as_micros().saturating_add(monotonic().saturating_since(at).as_micros())))
    }

    /// The holder's breaker changed state: the renewal that carries it comes soon.
    fn breaker_changed(&mut self) {
        self.deliverer.breaker_changed(monotonic());
    }

    /// The lease call failed (an error, or no answer in time).
    fn lease_failed(&mut self) {
        self.deliverer.lease_failed(monotonic());
    }

    /// Applies what is due now.
    fn handle_timeout(&mut self) {
        self.deliverer.handle_timeout(monotonic());
    }

    /// Seconds until something is next due (0: now), or `None`.
    fn delay(&self) -> Option<f64> {
        let now = monotonic();
        self.deliverer.next_timeout().map(|t| secs_at(t).max(secs_at(now)) - secs_at(now))
    }

    /// The next change of role: `("acquired", epoch)` or `("lost", reason)`.
    fn poll_event(&mut self, py: Python<'_>) -> Option<(&'static str, Py<PyAny>)> {
        self.deliverer.poll_event().map(|e| match e {
            OutboxEvent::Acquired { epoch } => {
                ("acquired", epoch.into_pyobject(py).map(|o| o.into_any().unbind()).unwrap_or_else(|_| py.None()))
            }
            OutboxEvent::Lost { reason } => {
                ("lost", reason.code().into_pyobject(py).map(|o| o.into_any().unbind()).unwrap_or_else(|_| py.None()))
            }
        })
    }

    /// Whether a send may start now.
    fn may_send(&self) -> bool {
        self.deliverer.may_send(monotonic())
    }

    /// The epoch of the lease held, or `None`.
    fn epoch(&self) -> Option<u64> {
        self.deliverer.epoch()
    }

    /// Gives the lease up: `True` if the store should be told.
    fn release(&mut self) -> bool {
        self.deliverer.release(monotonic())
    }

    /// How many events to read now, with `held` in the dispatcher and `unremoved` awaiting removal, or `None`.
    fn read_due(&mut self, held: u32, unremoved: u32) -> Option<u32> {
        self.deliverer.read_due(monotonic(), held, unremoved)
    }

    /// A read made under `epoch` gave `got` events: `False` if it is void.
    fn read_answered(&mut self, epoch: u64, got: u32) -> bool {
        self.deliverer.read_answered(monotonic(), epoch, got)
    }

    /// A read made under `epoch` failed.
    fn read_failed(&mut self, epoch: u64) {
        self.deliverer.read_failed(monotonic(), epoch);
    }

    /// This process appended to the log.
    fn appended(&mut self) {
        self.deliverer.appended();
    }

    /// The renewal as it closes is sent now.
    fn close_renewal(&mut self) {
        self.deliverer.close_renewal(monotonic());
    }

    /// The store answered the renewal as it closes: whether this process still holds the lease.
    fn close_renewal_answered(&mut self, holds: bool) {
        self.deliverer.close_renewal_answered(holds);
    }

    /// A removal failed: seconds until it is tried again, or `None`
    /// (closing, and the lease it held leaves no room).
    fn removal_failed(&mut self) -> Option<f64> {
        let now = monotonic();
        self.deliverer.removal_failed(now).map(|at| secs(at.saturating_since(now)))
    }

    /// A removal succeeded.
    fn removal_done(&mut self) {
        self.deliverer.removal_done();
    }
}

/// The lease script (Lua).
#[pyfunction]
pub(crate) fn _outbox_lease_script() -> &'static str {
    redis::LEASE_SCRIPT
}

/// The dead-letter script (Lua).
#[pyfunction]
pub(crate) fn _outbox_dead_script() -> &'static str {
    redis::DEAD_SCRIPT
}

/// Partner `partner`'s keys: the log, the dead letters, the lease, its
/// epoch counter and the breaker state left (one hash slot); a name that is
/// empty, too long or holds a brace is a `ValueError` (option `partner`).
#[pyfunction]
pub(crate) fn _outbox_keys(py: Python<'_>, partner: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let text: String = partner
        .extract()
        .map_err(|_| option_error(py, true, "partner", &format!("must be a str, got {}", type_name(partner))))?;
    let k = redis::keys(&text).map_err(|_| {
        value_error(
            py,
            "partner",
            halfopen::Problem::OutOfRange,
            "must be non-empty, hold no { or }, and be at most 1024 bytes of UTF-8",
        )
    })?;
    let [lease, epoch, breaker] = k.lease;
    Ok(vec![k.log, k.dead, lease, epoch, breaker])
}

/// A breaker state handed on with a grant: its text, its age.
type Left = (String, Duration);

/// The lease script's reply read: whether the caller holds the lease, its
/// epoch, and what a new grant handed on (the state's text, its age); `None`
/// for anything the script cannot have answered.
fn read_reply(reply: &Bound<'_, PyAny>) -> Option<(bool, u64, Option<Left>)> {
    let items: Vec<Bound<'_, PyAny>> = reply.extract().ok()?;
    let numbers = [items.first()?.extract::<i64>().ok()?, items.get(1)?.extract::<i64>().ok()?];
    let (holds, epoch) = redis::lease_reply(&numbers).ok()?;
    let left = match items.get(2..) {
        None | Some([]) => None,
        Some([state, age]) => {
            let age = redis::left_age(age.extract::<i64>().ok()?).ok()?;
            if state.is_none() {
                None
            } else if let Ok(b) = state.cast::<PyBytes>() {
                // Not UTF-8: not a state (the resume says it is malformed).
                Some((String::from_utf8_lossy(b.as_bytes()).into_owned(), age))
            } else {
                Some((state.cast::<PyString>().ok()?.to_str().ok()?.to_owned(), age))
            }
        }
        Some(_) => return None,
    };
    Some((holds, epoch, left))
}

/// An entry's fields in the streams: key, payload, reason, id.
#[pyfunction]
pub(crate) fn _outbox_fields() -> [&'static str; 4] {
    [redis::FIELD_KEY, redis::FIELD_PAYLOAD, redis::FIELD_REASON, redis::FIELD_ID]
}
