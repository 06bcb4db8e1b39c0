//! `Permit`: leave for one call, as Python holds it (reported once, to the
//! breaker or registry that issued it).

use std::sync::atomic::{AtomicBool, Ordering};

use halfopen::{Instant, Permit as CorePermit};
use pyo3::prelude::*;

use crate::errors::option_error;

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
            return Err(option_error(py, true, "permit", "was issued by another breaker"));
        }
        if self.reported.swap(true, Ordering::AcqRel) {
            return Err(option_error(py, false, "permit", "was already reported"));
        }
        Ok(CorePermit::from_parts(self.generation, Instant::from_micros(self.issued_at)))
    }
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
