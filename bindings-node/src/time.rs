//! Milliseconds on the caller's clock (JavaScript numbers) to the core's
//! microseconds and back: the one conversion, rounding to the nearest
//! microsecond. Whole milliseconds up to 2^53 map exactly both ways.

use halfopen::{Duration, Instant};

/// Microseconds in `ms`, rounded to the nearest; `None` unless `ms` is a
/// finite number ≥ 0.
pub(crate) fn micros(ms: f64) -> Option<u64> {
    if !(ms.is_finite() && ms >= 0.0) {
        return None;
    }
    let whole = ms.trunc();
    let fraction = ((ms - whole) * 1000.0).round() as u64;
    Some((whole as u64).saturating_mul(1000).saturating_add(fraction))
}

/// A clock reading. The JavaScript side has checked it is a finite number;
/// a negative one is the origin (time before the origin does not exist for
/// the core).
pub(crate) fn instant(ms: f64) -> Instant {
    Instant::from_micros(micros(ms).unwrap_or(0))
}

/// A span the JavaScript side has checked (finite, ≥ 0).
pub(crate) fn duration(ms: f64) -> Duration {
    Duration::from_micros(micros(ms).unwrap_or(0))
}

/// Milliseconds, exact for whole milliseconds up to 2^53.
pub(crate) fn ms(d: Duration) -> f64 {
    let us = d.as_micros();
    (us / 1000) as f64 + (us % 1000) as f64 / 1000.0
}

/// An instant as milliseconds since the origin; `Infinity` for "never".
pub(crate) fn ms_at(t: Instant) -> f64 {
    if t == Instant::MAX { f64::INFINITY } else { ms(t - Instant::ZERO) }
}

/// Whether a restore counts the time since the snapshot was taken: `true`
/// when the JavaScript side says the clock is shared (`sharedClock`).
pub(crate) fn elapsed(counted: bool) -> halfopen::Elapsed {
    if counted { halfopen::Elapsed::Counted } else { halfopen::Elapsed::Ignored }
}
