//! A member's own time: the clock's readings plus every step back the clock
//! made (a wall clock under NTP), so that it never goes back and goes on at
//! the clock's pace after a step. A member's exchanges keep their pace
//! through a step, and the times it gives its breaker are never before the
//! latest reading (the group's open period holds).

use crate::time::{Duration, Instant};

/// The latest time given, on its own time, and how far the clock has
/// stepped back in all.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OwnTime {
    latest: Instant,
    /// µs.
    skew: u64,
}

impl OwnTime {
    /// Its time for the caller's reading `now`.
    pub(crate) fn reading(&mut self, now: Instant) -> Instant {
        self.skew = self.skew_at(now);
        self.latest = self.latest.max(now + Duration::from_micros(self.skew));
        self.latest
    }

    /// The skew `reading(now)` would use (changes nothing): its time for
    /// `now` is `now` plus this.
    pub(crate) fn skew_at(&self, now: Instant) -> u64 {
        let stepped = now + Duration::from_micros(self.skew);
        self.skew.saturating_add(self.latest.saturating_since(stepped).as_micros())
    }
}
