//! The package's own Python module (`halfopen._support`): its exception
//! classes and helpers, imported once.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The package's module of exception classes and helpers (Python code).
pub(crate) fn support(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static MODULE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let m = MODULE.get_or_try_init(py, || py.import("halfopen._support").map(|m| m.into_any().unbind()))?;
    Ok(m.bind(py))
}
