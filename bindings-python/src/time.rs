//! Seconds (Python's unit) to the core's microseconds, and the default
//! clock: monotonic, read in Rust (no call into Python).

use std::sync::OnceLock;

use halfopen::{Duration, Instant, Problem};
use pyo3::prelude::*;

/// Microseconds of `seconds`, if it is finite, not negative, and fits.
pub(crate) fn micros(seconds: f64) -> Option<u64> {
    let us = (seconds * 1e6).round();
    (us.is_finite() && us >= 0.0 && us <= u64::MAX as f64).then_some(us as u64)
}

/// Why `seconds` has no microseconds (`micros` gave none): the core's code
/// for it and what an error says of it.
pub(crate) fn seconds_problem(seconds: f64) -> (Problem, &'static str) {
    if !seconds.is_finite() {
        (Problem::NotFinite, "must be a finite number of seconds")
    } else if seconds < 0.0 {
        (Problem::OutOfRange, "must not be negative")
    } else {
        (Problem::TooLarge, "is too large: at most 18446744073709 seconds (2**64 - 1 microseconds)")
    }
}

/// A Python number (an `int` or a `float`) as a float: an `int` too large
/// for one (`10**400`) is the largest finite float of its sign, so that it
/// is refused as too large (or negative), not as "not finite".
pub(crate) fn float_of(number: &Bound<'_, PyAny>) -> f64 {
    number.extract::<f64>().unwrap_or_else(|_| if number.lt(0).unwrap_or(false) { f64::MIN } else { f64::MAX })
}

/// Seconds of a duration.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_micros() as f64 / 1e6
}

/// Seconds of an instant on the breaker's clock.
pub(crate) fn secs_at(t: Instant) -> f64 {
    t.as_micros() as f64 / 1e6
}

/// The default clock: microseconds since this process first read it.
pub(crate) fn monotonic() -> Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    Instant::from_micros(u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX))
}
