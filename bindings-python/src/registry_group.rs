//! A registry in a group (issue 23): each name's breaker a group of its
//! own, the names due in script calls of at most 100 names (the core's
//! `group::KeyedMembers`, in the registry, locked before its core and never
//! on the call path); the keys, arguments and reply are the core's
//! (`group::redis`). The I/O is `python/halfopen/group.py`'s, as for a
//! breaker.

use halfopen::Transitions;
use halfopen::group::{GroupEvent, KeyedMembers, redis};
use pyo3::prelude::*;

use crate::errors::{config_error, value_error};
use crate::group::group_config;
use crate::registry::{NativeRegistry, RegistryGroup};
use crate::time::secs;

/// Puts every name of `registry` in group `name` as member `member`
/// (replacing a membership it had); an invalid option, or one a name's own
/// configuration cannot take, is a `TypeError`/`ValueError` naming
/// `group.<option>`.
#[pyfunction]
#[pyo3(signature = (registry, name, member, flush_interval = None, quorum = None, store_timeout = None, lease = None, member_ttl = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _registry_group_join(
    py: Python<'_>,
    registry: &NativeRegistry,
    name: String,
    member: u64,
    flush_interval: Option<&Bound<'_, PyAny>>,
    quorum: Option<&Bound<'_, PyAny>>,
    store_timeout: Option<&Bound<'_, PyAny>>,
    lease: Option<&Bound<'_, PyAny>>,
    member_ttl: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    redis::keys(&name).map_err(|_| {
        value_error(py, "group.name", halfopen::Problem::OutOfRange, "must be non-empty, hold no { or }")
    })?;
    let config = group_config(py, [flush_interval, quorum, store_timeout, lease, member_ttl])?;
    // (The error is built with no lock held: building it runs Python code.)
    let refused = {
        let mut group = registry.group();
        let mut core = registry.lock();
        match KeyedMembers::new(member, config, &core) {
            Ok(members) => {
                if let Some(old) = group.take() {
                    old.members.leave(&mut core);
                }
                *group = Some(Box::new(RegistryGroup { members, name }));
                None
            }
            Err(e) => Some(e),
        }
    };
    match refused {
        Some(e) => Err(config_error(py, &format!("group.{}", e.field.name()), e.problem)),
        None => Ok(()),
    }
}

/// Seconds until the next exchange is due (0: now); `None` outside a group.
#[pyfunction]
pub(crate) fn _registry_group_delay(py: Python<'_>, registry: &NativeRegistry) -> Option<f64> {
    let now = registry.clock(py).unwrap_or_else(|_| registry.host().last_reading());
    let group = registry.group();
    let next = group.as_ref()?.members.next_exchange(&registry.lock(), now);
    Some(secs(next.saturating_since(now)))
}

/// The script call due now, `(keys, args)` (every name due in it), or
/// `None`. A clock that fails raises (the caller reports the exchange failed).
#[pyfunction]
pub(crate) fn _registry_group_request(
    py: Python<'_>,
    registry: &NativeRegistry,
) -> PyResult<Option<(Vec<String>, Vec<String>)>> {
    let now = registry.clock(py)?;
    let mut group = registry.group();
    let Some(group) = group.as_mut() else { return Ok(None) };
    let mut core = registry.lock();
    let Some(requests) = group.members.requests(&mut core, now) else { return Ok(None) };
    let (mut keys, mut args) = (Vec::new(), Vec::new());
    for (name, request) in group.members.names_out().iter().zip(&requests) {
        let config = core.peek(name).map_or(core.config(), |b| b.config());
        let ttl = redis::key_ttl(config, group.members.config());
        // The group's name was checked at join: a name's keys always are.
        keys.extend(redis::keyed_keys(&group.name, name).into_iter().flatten());
        args.extend(redis::args(request, ttl));
    }
    Ok(Some((keys, args)))
}

/// Applies the script's reply now; each name's transitions go to the
/// listeners. `False` if the reply is not the script's (the exchange then
/// counts as failed). A clock that fails raises.
#[pyfunction]
pub(crate) fn _registry_group_apply(py: Python<'_>, registry: &NativeRegistry, reply: Vec<String>) -> PyResult<bool> {
    let now = registry.clock(py)?;
    let mut guard = registry.group();
    let Some(group) = guard.as_mut() else { return Ok(true) };
    let applied = {
        let mut core = registry.lock();
        match redis::answers(&reply) {
            Ok(answers) => group.members.apply(&mut core, &answers, now, |name, t| {
                registry.host().note(|| name.to_owned(), t);
            }),
            Err(_) => {
                group.members.failed(&mut core, now);
                false
            }
        }
    };
    // Delivered with no lock held (a listener may use the registry).
    drop(guard);
    registry.host().deliver(py).map(|()| applied)
}

/// Opens `name`'s group for `seconds` (its breaker made if it has none):
/// here at once, the other processes at their next exchange; `False`
/// outside a group. A bad duration is a `TypeError`/`ValueError` naming
/// `seconds`; a registry full of busy breakers raises `RegistryFullError`.
#[pyfunction]
pub(crate) fn _registry_group_force_open(
    py: Python<'_>,
    registry: &NativeRegistry,
    name: String,
    seconds: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let period = crate::options::seconds(py, "seconds", seconds)?;
    let now = registry.clock(py)?;
    registry.group_manual(py, &name, now, |members, core| members.force_open(core, &name, now, period))
}

/// Closes `name`'s group (`reset`: a reset, else a force-close; its
/// breaker made if it has none): here at once, the other processes at
/// their next exchange; `False` outside a group.
#[pyfunction]
pub(crate) fn _registry_group_force_close(
    py: Python<'_>,
    registry: &NativeRegistry,
    name: String,
    reset: bool,
) -> PyResult<bool> {
    let now = registry.clock(py)?;
    let reason = if reset { halfopen::Reason::Reset } else { halfopen::Reason::ForcedClose };
    registry.group_manual(py, &name, now, |members, core| members.force_close(core, &name, now, reason))
}

impl NativeRegistry {
    /// Runs `op` at `now` on `name`'s group (its breaker made if it has none);
    /// `False` outside a group. No Python code runs while a lock is held
    /// (another thread may wait for the lock holding the GIL): a refusal
    /// becomes an exception, and the transitions reach the listeners, after
    /// both are released.
    fn group_manual(
        &self,
        py: Python<'_>,
        name: &str,
        now: halfopen::Instant,
        op: impl FnOnce(&mut KeyedMembers, &mut halfopen::Registry<crate::breaker::Gauges>) -> Option<Transitions>,
    ) -> PyResult<bool> {
        let refused = {
            let mut guard = self.group();
            let Some(group) = guard.as_mut() else { return Ok(false) };
            let mut core = self.lock();
            match core.get(name, now) {
                Ok(_) => {
                    let transitions = op(&mut group.members, &mut core);
                    self.host().note(|| name.to_owned(), transitions.into_iter().flatten());
                    None
                }
                Err(e) => {
                    let room = matches!(e, halfopen::RegistryError::Full { .. }) && core.has_room(now);
                    Some((e, room))
                }
            }
        };
        if let Some((e, room)) = refused {
            return Err(crate::errors::registry_error(py, name, e, room));
        }
        self.host().deliver(py).map(|()| true)
    }
}

/// The exchange out failed or took too long.
#[pyfunction]
pub(crate) fn _registry_group_failed(py: Python<'_>, registry: &NativeRegistry) {
    let now = registry.clock(py).unwrap_or_else(|_| registry.host().last_reading());
    if let Some(group) = registry.group().as_mut() {
        group.members.failed(&mut registry.lock(), now);
    }
}

/// A change of the link to the store: `"degraded"`, `"recovered"`, or `None`.
#[pyfunction]
pub(crate) fn _registry_group_event(registry: &NativeRegistry) -> Option<&'static str> {
    let event = registry.group().as_mut()?.members.poll_event()?;
    Some(match event {
        GroupEvent::Degraded => "degraded",
        GroupEvent::Recovered => "recovered",
    })
}

/// `(degraded, names, answered)`: whether some names decide alone, the
/// names in the group, those whose group answered; `None` outside a group.
#[pyfunction]
pub(crate) fn _registry_group_status(registry: &NativeRegistry) -> Option<(bool, usize, usize)> {
    let group = registry.group();
    let g = group.as_ref()?;
    Some((g.members.degraded(), g.members.len(), g.members.answered()))
}

/// How long an exchange may take (seconds), once joined.
#[pyfunction]
pub(crate) fn _registry_group_store_timeout(registry: &NativeRegistry) -> Option<f64> {
    registry.group().as_ref().map(|g| secs(g.members.config().store_timeout()))
}

/// Leaves the group: every name decides alone from now on.
#[pyfunction]
pub(crate) fn _registry_group_leave(registry: &NativeRegistry) {
    if let Some(group) = registry.group().take() {
        group.members.leave(&mut registry.lock());
    }
}
