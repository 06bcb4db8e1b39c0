//! The Python extension `halfopen._native`: the core breaker for Python
//! (threads and asyncio). The package `halfopen` (python/halfopen) builds
//! its public API on it; every decision is the core's.
#![forbid(unsafe_code)]

mod blocks;
mod breaker;
mod classify;
mod collector;
mod errors;
mod events;
mod fork;
mod group;
mod host;
mod names;
mod options;
mod outbox;
mod permit;
mod registry;
mod registry_group;
mod retention;
mod support;
mod time;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<breaker::NativeBreaker>()?;
    m.add_class::<permit::Permit>()?;
    m.add_class::<events::StateChange>()?;
    m.add_class::<registry::NativeRegistry>()?;
    m.add_class::<retention::NativeRetentionQueue>()?;
    m.add_class::<group::GroupMemoryStore>()?;
    m.add_class::<outbox::NativeOutbox>()?;
    m.add_function(wrap_pyfunction!(fork::_forked, m)?)?;
    m.add_function(wrap_pyfunction!(collector::_collect, m)?)?;
    m.add_function(wrap_pyfunction!(collector::_opentelemetry_instruments, m)?)?;
    for f in [
        wrap_pyfunction!(outbox::_outbox_lease_script, m)?,
        wrap_pyfunction!(outbox::_outbox_keys, m)?,
        wrap_pyfunction!(outbox::_outbox_dead_script, m)?,
        wrap_pyfunction!(outbox::_outbox_fields, m)?,
        wrap_pyfunction!(group::_group_script, m)?,
        wrap_pyfunction!(group::_group_keys, m)?,
        wrap_pyfunction!(group::_group_join, m)?,
        wrap_pyfunction!(group::_group_delay, m)?,
        wrap_pyfunction!(group::_group_request, m)?,
        wrap_pyfunction!(group::_group_apply, m)?,
        wrap_pyfunction!(group::_group_failed, m)?,
        wrap_pyfunction!(group::_group_force_open, m)?,
        wrap_pyfunction!(group::_group_event, m)?,
        wrap_pyfunction!(group::_group_status, m)?,
        wrap_pyfunction!(group::_group_store_timeout, m)?,
        wrap_pyfunction!(group::_group_leave, m)?,
        wrap_pyfunction!(group::_group_force_close, m)?,
        wrap_pyfunction!(registry_group::_registry_group_force_close, m)?,
        wrap_pyfunction!(registry_group::_registry_group_join, m)?,
        wrap_pyfunction!(registry_group::_registry_group_delay, m)?,
        wrap_pyfunction!(registry_group::_registry_group_request, m)?,
        wrap_pyfunction!(registry_group::_registry_group_apply, m)?,
        wrap_pyfunction!(registry_group::_registry_group_failed, m)?,
        wrap_pyfunction!(registry_group::_registry_group_force_open, m)?,
        wrap_pyfunction!(registry_group::_registry_group_event, m)?,
        wrap_pyfunction!(registry_group::_registry_group_status, m)?,
        wrap_pyfunction!(registry_group::_registry_group_store_timeout, m)?,
        wrap_pyfunction!(registry_group::_registry_group_leave, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add("_UNCONFIGURED", breaker::unconfigured(m.py()))?;
    m.add("_DEFAULT_SEND_TIMEOUT", time::secs(halfopen::retention::DEFAULT_SEND_TIMEOUT))?;
    m.add("_CLOCK_FAILURE_RETRY", time::secs(halfopen::retention::CLOCK_FAILURE_RETRY))?;
    Ok(())
}
