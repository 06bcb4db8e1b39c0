//! Time as the breaker sees it: plain integer microseconds from an origin the
//! caller chooses.
//!
//! The breaker never reads a clock. Callers pass `now` as an [`Instant`]: a count
//! of microseconds since any fixed origin (process start, boot, the Unix epoch).
//! A `u64` of microseconds lasts 584,000 years, and every arithmetic operation
//! here saturates, so no input can overflow.
//!
//! **Time never goes backwards for the breaker.** A `now` earlier than the
//! latest one the breaker has seen is treated as that latest one (time is taken
//! as not moving), and subtracting a later instant from an earlier one gives
//! zero.

use core::ops::{Add, Sub};

/// A point in time: microseconds since an origin chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A span of time in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000))
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the origin.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `micros` microseconds.
    pub const fn from_micros(micros: u64) -> Self {
        Duration(micros)
    }

    /// A span of `millis` milliseconds (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Duration(millis.saturating_mul(1_000))
    }

    /// A span of `secs` seconds (saturating).
    pub const fn from_secs(secs: u64) -> Self {
        Duration(secs.saturating_mul(1_000_000))
    }

    /// Length in microseconds.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Length in whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000
    }

    /// Whether the span is empty.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`].
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero: time never goes backwards.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl From<core::time::Duration> for Duration {
    /// Saturates at [`Duration::MAX`]; sub-microsecond parts are dropped.
    fn from(d: core::time::Duration) -> Self {
        Duration(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        core::time::Duration::from_micros(d.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::from_millis(1) - Instant::from_millis(5), Duration::ZERO);
        assert_eq!(Instant::from_millis(u64::MAX), Instant::MAX);
        assert_eq!(Duration::from(core::time::Duration::MAX), Duration::MAX);
        assert_eq!(Duration::from(core::time::Duration::from_nanos(2_500)).as_micros(), 2);
    }
}
