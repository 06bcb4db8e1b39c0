//! The one error adapter: every exception the extension raises for a
//! refusal, a bad argument or an output that did not fit is built here.
//!
//! - A bad argument: a `TypeError` (wrong type) or a `ValueError` (a value
//!   it cannot take) whose message starts with the argument's name and whose
//!   `option` attribute is it. For a configuration option the `ValueError`
//!   also carries `problem`: the core's `Problem::code` (`"zero"`,
//!   `"out_of_range"`, ...), the same code in every binding; the message is
//!   words and may change.
//! - A refusal: the package's exception classes (`_support.py`):
//!   `CircuitOpenError`, `ConcurrencyLimitError`, `RegistryFullError`,
//!   `SnapshotError` (with the core's `kind`).
//! - An output that did not fit the memory: `MemoryError`.
//! - A user callback's exception: logged, or handed back to be raised
//!   (an interrupt, an exit, a signal handler's).

use halfopen::retention::RetentionError;
use halfopen::{MAX_CONCURRENCY_LIMIT, MAX_HALF_OPEN_ATTEMPTS, MAX_WINDOW_CALLS, Problem, RegistryError, Rejection};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::names::state_member;
use crate::support::support;
use crate::time::secs;

/// A `Collector`'s source that is not one (a `TypeError`).
pub(crate) fn not_a_source(source: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "sources must be CircuitBreakers, Registries or RetentionQueues, got {}",
        type_name(source)
    ))
}

/// Two breakers of a `Collector`'s sources with one name (a `ValueError`:
/// their series would be one).
pub(crate) fn same_name(name: &str) -> PyErr {
    PyValueError::new_err(format!(
        "two breakers are named {name:?}: their series would be one (names must be unique across sources)"
    ))
}

/// A `with` block left more times than it was entered (a `RuntimeError`).
pub(crate) fn unbalanced_block() -> PyErr {
    PyRuntimeError::new_err("a with block was left more times than it was entered")
}

/// The name of `v`'s type, for a message.
pub(crate) fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into())
}

/// A `TypeError` or `ValueError` whose message starts with the option's
/// name, and whose `option` attribute is it.
pub(crate) fn option_error(py: Python<'_>, type_error: bool, option: &str, problem: &str) -> PyErr {
    let message = format!("{option} {problem}");
    let err = if type_error { PyTypeError::new_err(message) } else { PyValueError::new_err(message) };
    // Setting an attribute on a fresh exception instance cannot fail.
    let _ = err.value(py).setattr("option", option);
    err
}

/// What is wrong with an `int` a whole-number option's type cannot hold:
/// negative (out of range), else above the type's largest (too large) — the
/// rule every binding uses.
pub(crate) fn int_problem(v: &Bound<'_, PyAny>) -> Problem {
    if v.lt(0).unwrap_or(false) { Problem::OutOfRange } else { Problem::TooLarge }
}

/// A `ValueError` for the configuration option `option`: `words` start the
/// message after its name, `problem` is the code callers read.
pub(crate) fn value_error(py: Python<'_>, option: &str, problem: Problem, words: &str) -> PyErr {
    let err = option_error(py, false, option, words);
    // Setting an attribute on a fresh exception instance cannot fail.
    let _ = err.value(py).setattr("problem", problem.code());
    err
}

/// A `ValueError` for the core's refusal of `option`'s value (the option,
/// never the core's field: `adaptive_limit`, not `adaptive_limit_min`),
/// saying, for a whole number out of bounds, the bounds.
pub(crate) fn config_error(py: Python<'_>, option: &str, problem: Problem) -> PyErr {
    let words = match problem {
        _ if option == "adaptive_limit" => ADAPTIVE.to_owned(),
        Problem::Zero | Problem::TooLarge if whole_range(option).is_some() => out_of_range(option),
        problem => problem.describe().to_owned(),
    };
    value_error(py, option, problem, &words)
}

/// What `adaptive_limit` must be.
pub(crate) const ADAPTIVE: &str = "must be a (min, max) tuple of whole numbers with 1 <= min <= max <= 1000000";

/// The whole numbers a count option takes, if it is one.
fn whole_range(option: &str) -> Option<(u64, u64)> {
    let most = match option {
        "failure_threshold" | "consecutive_failures" | "minimum_calls" => u32::MAX.into(),
        "concurrency_limit" => MAX_CONCURRENCY_LIMIT.into(),
        "window_calls" => MAX_WINDOW_CALLS.into(),
        "half_open_max_attempts" | "half_open_successes" => MAX_HALF_OPEN_ATTEMPTS.into(),
        _ => return None,
    };
    Some((1, most))
}

/// "must be a whole number from 1 to N", N the option's largest value.
pub(crate) fn out_of_range(option: &str) -> String {
    let (least, most) = whole_range(option).unwrap_or((0, u32::MAX.into()));
    format!("must be a whole number from {least} to {most}")
}

/// A registry's refusal of a new name (full: `room` as for [`Refused`]), or
/// its configuration errors.
pub(crate) fn registry_error(py: Python<'_>, name: &str, e: RegistryError, room: bool) -> PyErr {
    match e {
        RegistryError::Full { .. } => registry_full(py, name, room),
        RegistryError::Config(c) => value_error(py, c.field.name(), c.problem, c.problem.describe()),
        RegistryError::Capacity => value_error(py, "capacity", Problem::OutOfRange, "must be from 1 to 4294967295"),
        RegistryError::TooManyConfigured { capacity } => {
            let words = format!("{capacity} reached: no more names can be given their own configuration");
            value_error(py, "capacity", Problem::TooLarge, &words)
        }
        // A name too long for the core.
        other => value_error(py, "name", Problem::TooLarge, &format!("refused: {other}")),
    }
}

/// `RegistryFullError` for `name`: `retry_after` 0.0 if a retry now would
/// find an idle breaker to evict (`room`), else `None` (none is known to be).
pub(crate) fn registry_full(py: Python<'_>, name: &str, room: bool) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let retry_after = room.then_some(0.0);
        Ok(PyErr::from_value(support(py)?.getattr("RegistryFullError")?.call1((name, retry_after))?))
    };
    build().unwrap_or_else(|err| err)
}

/// What `max_messages`, `max_attempts` and `release_rate`'s parts take (0 refused).
pub(crate) const U32_RANGE: &str = "must be a whole number from 1 to 4294967295";

/// A `ValueError` naming the option, saying what it takes (not the core's
/// "invalid max_attempts: ...", which would name it twice).
pub(crate) fn retention_error(py: Python<'_>, e: RetentionError) -> PyErr {
    let option = e.field.name();
    let problem = match (option, e.problem) {
        ("max_bytes", Problem::Zero) => "must be a whole number from 1 to 2**53 - 1".to_owned(),
        ("max_age", Problem::Zero) => "must be above 0 seconds".to_owned(),
        ("release_rate", Problem::Missing) => "is required: a dispatcher needs a release rate or its breaker a \
                                               concurrency limit, or a recovered upstream would get the whole \
                                               backlog at once"
            .to_owned(),
        ("release_rate", Problem::Zero) => {
            "must be (per_second, burst), each a whole number from 1 to 4294967295".to_owned()
        }
        (_, Problem::Zero) => U32_RANGE.to_owned(),
        _ => {
            let text = e.to_string();
            text.strip_prefix(&format!("invalid {option}: ")).map_or(text.clone(), str::to_owned)
        }
    };
    value_error(py, option, e.problem, &problem)
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
