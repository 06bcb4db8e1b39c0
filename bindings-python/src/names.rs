//! The seed's names of states and modes, and the `halfopen.State` members.

use halfopen::{Mode, State};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::support::support;

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
