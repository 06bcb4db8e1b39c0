//! A breaker's group (one breaker for several processes, issue 23): the
//! core's `group::Member` beside the breaker (in its host, locked before
//! the core and never on the call path), and the Redis script's keys,
//! arguments and reply, all from the core (`halfopen::group`). The I/O, one
//! script call per exchange through the user's redis-py client, is
//! `python/halfopen/group.py`'s.

use halfopen::Duration;
use halfopen::group::{GroupConfig, GroupEvent, Member, MemoryStore, redis};
use pyo3::prelude::*;

use crate::breaker::NativeBreaker;
use crate::errors::{config_error, option_error, type_name};
use crate::options::{count, seconds};
use crate::time::secs;

/// The store script (Lua) every process of a group runs.
#[pyfunction]
pub(crate) fn _group_script() -> &'static str {
    redis::SCRIPT
}

/// The Redis keys of group `name`, in the script's order (one hash slot);
/// a name that is empty or holds a brace (it would split the hash tag) is
/// a `ValueError` (option `group.name`).
#[pyfunction]
pub(crate) fn _group_keys(py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let text: String = name
        .extract()
        .map_err(|_| option_error(py, true, "group.name", &format!("must be a str, got {}", type_name(name))))?;
    let keys = redis::keys(&text).map_err(|_| {
        crate::errors::value_error(
            py,
            "group.name",
            halfopen::Problem::OutOfRange,
            "must be non-empty, hold no { or }, and be at most 1024 bytes of UTF-8",
        )
    })?;
    Ok(keys.into())
}

/// The group's configuration from its options (flush interval, quorum,
/// store timeout, lease, member TTL; absent or `None`: the core's default).
pub(crate) fn group_config(py: Python<'_>, options: [Option<&Bound<'_, PyAny>>; 5]) -> PyResult<GroupConfig> {
    let [flush_interval, quorum, store_timeout, lease, member_ttl] = options;
    let defaults = GroupConfig::default();
    Ok(GroupConfig {
        flush_interval: period(py, "group.flush_interval", flush_interval)?.unwrap_or(defaults.flush_interval),
        quorum: match quorum.filter(|q| !q.is_none()) {
            Some(q) => count(py, "group.quorum", q)?,
            None => defaults.quorum,
        },
        store_timeout: period(py, "group.store_timeout", store_timeout)?.or(defaults.store_timeout),
        lease: period(py, "group.lease", lease)?,
        member_ttl: period(py, "group.member_ttl", member_ttl)?,
    })
}

/// An optional duration option of the group, in seconds.
fn period(py: Python<'_>, option: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    v.filter(|v| !v.is_none()).map(|v| seconds(py, option, v)).transpose()
}

/// Makes `breaker` member `member` of a group (replacing a membership it
/// had); an invalid option is a `TypeError`/`ValueError` naming
/// `group.<option>`, with the core's problem code.
#[pyfunction]
#[pyo3(signature = (breaker, member, flush_interval = None, quorum = None, store_timeout = None, lease = None, member_ttl = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _group_join(
    py: Python<'_>,
    breaker: &NativeBreaker,
    member: u64,
    flush_interval: Option<&Bound<'_, PyAny>>,
    quorum: Option<&Bound<'_, PyAny>>,
    store_timeout: Option<&Bound<'_, PyAny>>,
    lease: Option<&Bound<'_, PyAny>>,
    member_ttl: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let config = group_config(py, [flush_interval, quorum, store_timeout, lease, member_ttl])?;
    let c = *breaker.lock().config();
    let joined = Member::new(member, config, &c)
        .map_err(|e| config_error(py, &format!("group.{}", e.field.name()), e.problem))?;
    let mut group = breaker.host.group();
    if let Some(old) = group.take() {
        old.leave(&mut breaker.lock());
    }
    *group = Some(Box::new(joined));
    Ok(())
}

/// Seconds until the next exchange is due (0: now), from the clock's
/// reading (its latest good one if it fails: the exchange then fails and
/// says why); `None` outside a group.
#[pyfunction]
pub(crate) fn _group_delay(py: Python<'_>, breaker: &NativeBreaker) -> Option<f64> {
    let now = breaker.clock(py).unwrap_or_else(|_| breaker.host.last_reading());
    let group = breaker.host.group();
    let next = group.as_ref()?.next_exchange(&breaker.lock(), now);
    Some(secs(next.saturating_since(now)))
}

/// The script's arguments for the exchange due now (after the keys), or
/// `None` if none is due. A clock that fails raises (the caller reports the
/// exchange failed).
#[pyfunction]
pub(crate) fn _group_request(py: Python<'_>, breaker: &NativeBreaker) -> PyResult<Option<Vec<String>>> {
    let now = breaker.clock(py)?;
    let mut group = breaker.host.group();
    let Some(member) = group.as_mut() else { return Ok(None) };
    let mut core = breaker.lock();
    let Some(request) = member.request(&mut core, now) else { return Ok(None) };
    let ttl = redis::key_ttl(core.config(), member.config());
    Ok(Some(redis::args(&request, ttl)))
}

/// Applies the script's reply (its values as text) now; the breaker's
/// transitions go to its listeners. `False` if the reply is not the
/// script's (the exchange then counts as failed). A clock that fails
/// raises (the caller reports the exchange failed).
#[pyfunction]
pub(crate) fn _group_apply(py: Python<'_>, breaker: &NativeBreaker, reply: Vec<String>) -> PyResult<bool> {
    let now = breaker.clock(py)?;
    let mut group = breaker.host.group();
    let Some(member) = group.as_mut() else { return Ok(true) };
    let Ok(answer) = redis::answer(&reply) else {
        member.failed(&mut breaker.lock(), now);
        return Ok(false);
    };
    {
        // Noted under the core's lock (in order with the call path's), and
        // delivered with no lock held (a listener may use the breaker).
        let mut core = breaker.lock();
        let transitions = member.apply(&mut core, &answer, now);
        breaker.host.note(|| breaker.text(py), transitions);
    }
    drop(group);
    breaker.host.deliver(py).map(|()| true)
}

/// Opens the whole group for `seconds` (this breaker at once, the others at
/// their next exchange); `False` outside a group. A bad duration is a
/// `TypeError`/`ValueError` naming `seconds`; a clock that fails raises.
#[pyfunction]
pub(crate) fn _group_force_open(py: Python<'_>, breaker: &NativeBreaker, seconds: &Bound<'_, PyAny>) -> PyResult<bool> {
    let period = crate::options::seconds(py, "seconds", seconds)?;
    let now = breaker.clock(py)?;
    let mut group = breaker.host.group();
    let Some(member) = group.as_mut() else { return Ok(false) };
    {
        let mut core = breaker.lock();
        let transitions = member.force_open(&mut core, now, period);
        breaker.host.note(|| breaker.text(py), transitions);
    }
    drop(group);
    breaker.host.deliver(py).map(|()| true)
}

/// Closes the whole group (`reset`: a reset, else a force-close): this
/// breaker at once, the others at their next exchange; `False` outside a
/// group. A clock that fails raises.
#[pyfunction]
pub(crate) fn _group_force_close(py: Python<'_>, breaker: &NativeBreaker, reset: bool) -> PyResult<bool> {
    let now = breaker.clock(py)?;
    let mut group = breaker.host.group();
    let Some(member) = group.as_mut() else { return Ok(false) };
    let reason = if reset { halfopen::Reason::Reset } else { halfopen::Reason::ForcedClose };
    {
        let mut core = breaker.lock();
        let transitions = member.force_close(&mut core, now, reason);
        breaker.host.note(|| breaker.text(py), transitions);
    }
    drop(group);
    breaker.host.deliver(py).map(|()| true)
}

/// The exchange out failed or took too long (at the clock's reading, or
/// its latest good one).
#[pyfunction]
pub(crate) fn _group_failed(py: Python<'_>, breaker: &NativeBreaker) {
    let now = breaker.clock(py).unwrap_or_else(|_| breaker.host.last_reading());
    if let Some(member) = breaker.host.group().as_mut() {
        member.failed(&mut breaker.lock(), now);
    }
}

/// A change of the link to the store: `"degraded"`, `"recovered"`, or `None`.
#[pyfunction]
pub(crate) fn _group_event(breaker: &NativeBreaker) -> Option<&'static str> {
    let event = breaker.host.group().as_mut()?.poll_event()?;
    Some(match event {
        GroupEvent::Degraded => "degraded",
        GroupEvent::Recovered => "recovered",
    })
}

/// `(degraded, phase)`: whether the member decides alone because its store
/// failed, and the group's phase as last answered (`"closed"`, `"open"`,
/// `"half_open"`, or `None`: no answer yet, or the store failed since);
/// `None` outside a group.
#[pyfunction]
pub(crate) fn _group_status(breaker: &NativeBreaker) -> Option<(bool, Option<&'static str>)> {
    let group = breaker.host.group();
    let member = group.as_ref()?;
    let phase = member.register().map(|r| r.phase.name());
    Some((member.degraded(), phase))
}

/// How long an exchange may take (seconds), once joined.
#[pyfunction]
pub(crate) fn _group_store_timeout(breaker: &NativeBreaker) -> Option<f64> {
    breaker.host.group().as_ref().map(|m| secs(m.config().store_timeout()))
}

/// Leaves the group: the breaker decides alone from now on (its
/// concurrency limit adapts by itself again, from its share).
#[pyfunction]
pub(crate) fn _group_leave(breaker: &NativeBreaker) {
    if let Some(member) = breaker.host.group().take() {
        member.leave(&mut breaker.lock());
    }
}

/// The group's reference store in memory (the core's `MemoryStore`),
/// answering the Redis script's own arguments as the script would: the
/// store of the group protocol's conformance cases
/// (tests/test_group_conformance.py), whose clock is the case's.
#[pyclass(module = "halfopen._native")]
#[derive(Default)]
pub(crate) struct GroupMemoryStore {
    store: MemoryStore,
}

#[pymethods]
impl GroupMemoryStore {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// The script's reply to `args` (one request or several) at the
    /// store's `now_ms` (whole ms); arguments no exchange wrote are a
    /// `ValueError`.
    fn exchange(&mut self, args: Vec<String>, now_ms: u64) -> PyResult<Vec<String>> {
        redis::exchange(&mut self.store, &args, now_ms.saturating_mul(1000)).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err("arguments the group script's caller cannot have written")
        })
    }

    /// Forgets everything (a Redis restarted empty).
    fn restart(&mut self) {
        self.store = MemoryStore::new();
    }

    /// The register's phase: `closed`, `open` or `half_open`.
    fn phase(&self) -> &'static str {
        self.store.register().phase.name()
    }

    /// The register's epoch.
    fn epoch(&self) -> u64 {
        self.store.register().epoch
    }

    /// The group's concurrency limit (0: none set).
    fn limit(&self) -> u32 {
        self.store.limit().limit
    }
}
