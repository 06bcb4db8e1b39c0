//! What a call's end says of the upstream: an exception is a failure unless
//! it is a cancellation or `exclude` says it is not the upstream's; a value
//! the call returned must be finished (a coroutine is for `call_async`).

use halfopen::Outcome;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::errors::{log_or_escape, option_error, type_name, unfinished_error};
use crate::support::support;

/// What never counts as the upstream's failure: exception classes, then
/// predicates (each called with the exception, in order), from `exclude`.
#[derive(Default)]
pub(crate) struct Exclude {
    classes: Option<Py<PyTuple>>,
    predicates: Vec<Py<PyAny>>,
}

impl Exclude {
    /// From the `exclude` argument, checked and flattened by the package.
    pub(crate) fn new(py: Python<'_>, exclude: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(exclude) = exclude else { return Ok(Exclude::default()) };
        let (classes, predicates): (Bound<'_, PyTuple>, Vec<Py<PyAny>>) =
            support(py)?.getattr("exclusions")?.call1((exclude,))?.extract()?;
        Ok(Exclude { classes: (!classes.is_empty()).then(|| classes.unbind()), predicates })
    }

    pub(crate) fn is_empty(&self) -> bool {
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

/// The outcome called `name` (the core's names).
pub(crate) fn outcome_of(py: Python<'_>, name: &str) -> PyResult<Outcome> {
    Outcome::ALL.into_iter().find(|o| o.name() == name).ok_or_else(|| {
        option_error(py, false, "outcome", "must be \"success\", \"failure\", \"ignored\" or \"cancelled\"")
    })
}

/// What a protected call must not return: a coroutine, a generator or a
/// future, whose work has not happened yet (`call_async` is for those).
pub(crate) fn unfinished(py: Python<'_>, value: &Bound<'_, PyAny>) -> bool {
    static TYPES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let types = TYPES.get_or_try_init(py, || support(py)?.getattr("UNFINISHED").map(Bound::unbind));
    // By the value's type (no `__class__` lookup: a call's every result is checked).
    types.is_ok_and(|t| value.get_type().is_subclass(t.bind(py)).unwrap_or(false))
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

/// `record_exception`'s argument must be an exception.
pub(crate) fn check_exception(py: Python<'_>, exc: &Bound<'_, PyAny>) -> PyResult<()> {
    if exc.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        return Ok(());
    }
    Err(option_error(py, true, "exc", &format!("must be an exception, got {}", type_name(exc))))
}

/// What an exception from the call says: cancellations (`asyncio`'s, an
/// interrupt, an exit) and excluded errors count nothing; anything else
/// is a failure (so is an exception an `exclude` predicate raises). A
/// predicate interrupted (an interrupt, an exit, a signal handler's
/// exception) says nothing: the call counts as cancelled, and that
/// exception comes back, to be raised (its context the call's) once
/// the call is reported.
pub(crate) fn classify(py: Python<'_>, exclude: Option<&Exclude>, err: &PyErr) -> (Outcome, PyResult<()>) {
    let value = err.value(py);
    if cancellations(py).is_ok_and(|c| value.is_instance(c).unwrap_or(false)) {
        return (Outcome::Cancelled, Ok(()));
    }
    let Some(exclude) = exclude else { return (Outcome::Failure, Ok(())) };
    match exclude.excludes(py, value) {
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

impl Exclude {
    /// Shows the garbage collector the classes and predicates.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.classes)?;
        for p in &self.predicates {
            visit.call(p)?;
        }
        Ok(())
    }
}
