//! How many calls may be in flight at once: none (no limit), a fixed
//! bulkhead, or an adaptive limit — the rules of admission by count, beside
//! the rules of admission by state in [`policy`](crate::policy).
//!
//! A breaker limits how long failures go on; a limit bounds how many calls
//! an upstream gets at once. Without one, a breaker that closes lets a whole
//! backlog through in the same instant, and an upstream that had just
//! recovered falls over again (seed 000's gateway flags an instance after
//! minutes of 429s). The adaptive limit is TCP's congestion control
//! (Reno, without fast retransmit) applied to calls in flight:
//!
//! - it starts at the probe count (`half_open_max_attempts`, within
//!   `min..=max`), when the breaker is new and after every recovery;
//! - *slow start*: below the threshold, each success adds one (the limit
//!   doubles per round trip);
//! - *congestion avoidance*: from the threshold on, `limit` successes add one
//!   (one per round trip);
//! - a failure (a slow call included) halves it, at most once per *loss
//!   window*: the calls in flight at a cut were sent under the limit that was
//!   just cut, so until as many calls have been reported (whatever their
//!   outcome) no failure cuts again — TCP's "once per window of data",
//!   counted in calls rather than timed, so that it needs no clock reading
//!   at admission; the threshold becomes the halved limit, never below `min`.
//!
//! The simulator (`sim/`, `make demo`) chose it over AIMD (Netflix's
//! concurrency-limits defaults: ×0.9 per drop, +1 per success) and over a
//! limit that does not adapt: see `sim/README.md`. The limit moves with the
//! sequence of reports only (never with the calls in flight when a success
//! ends, nor with when a call began), so successes handed over in bulk under
//! a [`Licence`](crate::Licence) move it exactly as the same successes
//! reported one by one.

use crate::config::Config;
use crate::error::{ConfigError, Field, Problem};
use crate::time::{Duration, Instant};
use crate::window::{Window, WindowCounts};

/// The largest limit a configuration may set.
pub const MAX_CONCURRENCY_LIMIT: u32 = 1_000_000;

/// A limit on the calls in flight at once, counted over every call admitted
/// (closed and half-open) and not yet reported; a call over it is refused
/// with [`Wait::LimitFull`](crate::Wait::LimitFull). A disabled breaker
/// admits every call, whatever the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrencyLimit {
    /// Never more than this many (a bulkhead).
    Fixed(u32),
    /// Adapted to what the upstream takes, within `min..=max` (see the
    /// module's documentation).
    Adaptive {
        /// The limit is never cut below this.
        min: u32,
        /// The limit never grows beyond this.
        max: u32,
    },
}

impl ConcurrencyLimit {
    /// Checks the bounds: at least 1, at most [`MAX_CONCURRENCY_LIMIT`],
    /// `min ≤ max`.
    pub(crate) fn validate(self) -> Result<(), ConfigError> {
        let err = |field, problem| Err(ConfigError { field, problem });
        let (min, max) = match self {
            ConcurrencyLimit::Fixed(n) => {
                return match n {
                    0 => err(Field::ConcurrencyLimit, Problem::Zero),
                    n if n > MAX_CONCURRENCY_LIMIT => err(Field::ConcurrencyLimit, Problem::TooLarge),
                    _ => Ok(()),
                };
            }
            ConcurrencyLimit::Adaptive { min, max } => (min, max),
        };
        match () {
            () if min == 0 => err(Field::AdaptiveLimitMin, Problem::Zero),
            () if max == 0 => err(Field::AdaptiveLimitMax, Problem::Zero),
            () if max > MAX_CONCURRENCY_LIMIT => err(Field::AdaptiveLimitMax, Problem::TooLarge),
            () if min > max => err(Field::AdaptiveLimitMin, Problem::ExceedsMax),
            () => Ok(()),
        }
    }
}

/// The limit in force and what adapts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limiter {
    /// Calls that may be in flight now (`u32::MAX`: no limit).
    pub(crate) limit: u32,
    /// Below it each success adds one; from it on, `limit` successes add one.
    threshold: u32,
    /// Successes toward the next step above the threshold.
    credit: u32,
    /// Reports still to come before a failure may cut again (the calls in
    /// flight at the latest cut).
    recovering: u32,
    /// When the window's counts began (the round-trip estimate's span).
    counting_since: Instant,
}

/// The adaptive bounds, if the limit adapts.
fn adaptive(c: &Config) -> Option<(u32, u32)> {
    match c.concurrency_limit {
        Some(ConcurrencyLimit::Adaptive { min, max }) => Some((min, max)),
        _ => None,
    }
}

impl Limiter {
    /// A new breaker's limit, counting from `now`.
    pub(crate) fn new(c: &Config, now: Instant) -> Self {
        let mut limiter =
            Limiter { limit: u32::MAX, threshold: u32::MAX, credit: 0, recovering: 0, counting_since: now };
        limiter.restart(c, now);
        limiter
    }

    /// After a recovery (or a reset): the starting limit, slow start anew,
    /// the window counted from `now`.
    pub(crate) fn restart(&mut self, c: &Config, now: Instant) {
        self.counting_since = now;
        self.credit = 0;
        self.recovering = 0;
        match c.concurrency_limit {
            None => self.limit = u32::MAX,
            Some(ConcurrencyLimit::Fixed(n)) => self.limit = n,
            Some(ConcurrencyLimit::Adaptive { min, max }) => {
                self.limit = u32::from(c.half_open_max_attempts).clamp(min, max);
                self.threshold = max;
            }
        }
    }

    /// Whether a call may go while `in_flight` are out.
    #[inline(always)]
    pub(crate) fn admits(&self, in_flight: u32) -> bool {
        in_flight < self.limit
    }

    /// A new state period began: the calls in flight are stale, and none
    /// will be reported.
    pub(crate) fn forget_in_flight(&mut self) {
        self.recovering = 0;
    }

    /// A call was reported without a verdict (ignored, cancelled).
    pub(crate) fn ended(&mut self) {
        self.recovering = self.recovering.saturating_sub(1);
    }

    /// A success was counted: the adaptive limit grows.
    #[inline(always)]
    pub(crate) fn succeeded(&mut self, c: &Config) {
        if let Some((_, max)) = adaptive(c) {
            self.recovering = self.recovering.saturating_sub(1);
            self.grow(max);
        }
    }

    fn grow(&mut self, max: u32) {
        if self.limit < self.threshold {
            self.limit += 1;
        } else {
            self.credit += 1;
            if self.credit >= self.limit {
                self.credit = 0;
                self.limit += 1;
            }
        }
        self.limit = self.limit.min(max);
    }

    /// A failure (or slow call) was counted, `in_flight` calls still out:
    /// the adaptive limit is halved, once per loss window.
    pub(crate) fn failed(&mut self, c: &Config, in_flight: u32) {
        let Some((min, _)) = adaptive(c) else { return };
        if self.recovering > 0 {
            self.recovering -= 1;
            return;
        }
        self.threshold = (self.limit / 2).max(min);
        self.limit = self.threshold;
        self.credit = 0;
        self.recovering = in_flight;
    }

    /// When a caller refused because the limit is full should try again:
    /// about one round trip, by Little's law from what the window counted
    /// (`in_flight` calls out, `counted` calls ended over the time the window
    /// covers); a tenth of `open_timeout` when the window counts no time or
    /// nothing yet. At least 1 µs, at most `open_timeout`.
    pub(crate) fn retry_hint(&self, c: &Config, in_flight: u32, counted: WindowCounts, now: Instant) -> Duration {
        let fallback = Duration::from_micros((c.open_timeout.as_micros() / 10).max(1));
        let Window::Time(length) = c.window else { return fallback };
        if counted.calls == 0 {
            return fallback;
        }
        let span = (now - self.counting_since).min(length);
        let round_trip = u128::from(span.as_micros()) * u128::from(in_flight.max(1)) / u128::from(counted.calls);
        let round_trip = u64::try_from(round_trip).unwrap_or(u64::MAX);
        Duration::from_micros(round_trip.clamp(1, c.open_timeout.as_micros().max(1)))
    }

    /// The spread added to an open rejection's hint at `now` with a limit
    /// (none without): uniform over the tenth of `open_timeout` after the
    /// deadline, drawn from the seed and the moment, so that a backlog
    /// refused while open does not come back in one instant.
    pub(crate) fn spread(&self, c: &Config, generation: u32, now: Instant) -> Duration {
        if c.concurrency_limit.is_none() {
            return Duration::ZERO;
        }
        let width = (c.open_timeout.as_micros() / 10).max(1);
        let draw = crate::jitter::draw(c.jitter_seed ^ now.as_micros(), generation);
        Duration::from_micros(draw % width)
    }
}

#[cfg(feature = "serde")]
mod saved {
    use super::*;

    /// An adaptive limit's state in a snapshot (a fixed one has none).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct SavedLimit {
        pub(crate) limit: u32,
        pub(crate) threshold: u32,
        pub(crate) credit: u32,
        /// How long the window had counted, at most its length.
        pub(crate) counting_for_us: u64,
    }

    impl Limiter {
        pub(crate) fn save(&self, c: &Config, now: Instant) -> Option<SavedLimit> {
            let counting_for = match c.window {
                Window::Time(length) => (now - self.counting_since).min(length),
                Window::Count(_) => Duration::ZERO,
            };
            adaptive(c).map(|_| SavedLimit {
                limit: self.limit,
                threshold: self.threshold,
                credit: self.credit,
                counting_for_us: counting_for.as_micros(),
            })
        }

        /// The limiter `saved` describes at `now`. Calls issued before `now`
        /// are stale for the restored breaker, so no loss window is open.
        pub(crate) fn load(
            c: &Config,
            saved: Option<&SavedLimit>,
            now: Instant,
        ) -> Result<Self, crate::error::SnapshotError> {
            let corrupt = Err(crate::error::SnapshotError::Corrupt("concurrency limit"));
            let mut limiter = Limiter::new(c, now);
            match (adaptive(c), saved) {
                (None, None) => Ok(limiter),
                (Some((min, max)), Some(s)) => {
                    let in_bounds = |n: u32| (min..=max).contains(&n);
                    if !in_bounds(s.limit) || !in_bounds(s.threshold) || s.credit > s.limit {
                        return corrupt;
                    }
                    let counting_for = Duration::from_micros(s.counting_for_us);
                    if matches!(c.window, Window::Time(length) if counting_for > length) {
                        return corrupt;
                    }
                    limiter.limit = s.limit;
                    limiter.threshold = s.threshold;
                    limiter.credit = s.credit;
                    // (From the clock's origin at the earliest.)
                    limiter.counting_since = Instant::from_micros(now.as_micros().saturating_sub(counting_for.as_micros()));
                    Ok(limiter)
                }
                _ => corrupt,
            }
        }
    }
}

#[cfg(feature = "serde")]
pub(crate) use saved::SavedLimit;

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive_config(min: u32, max: u32) -> Config {
        Config { concurrency_limit: Some(ConcurrencyLimit::Adaptive { min, max }), ..Config::default() }
    }

    #[test]
    fn slow_start_doubles_then_one_per_round_trip() {
        let c = adaptive_config(1, 100);
        let mut l = Limiter::new(&c, Instant::ZERO);
        assert_eq!(l.limit, 3);
        for _ in 0..3 {
            l.succeeded(&c);
        }
        assert_eq!(l.limit, 6);
        // Cut with 2 calls still in flight: their reports do not cut again.
        l.failed(&c, 2);
        assert_eq!((l.limit, l.threshold), (3, 3));
        l.failed(&c, 1);
        l.ended();
        assert_eq!(l.limit, 3);
        for _ in 0..3 {
            l.succeeded(&c);
        }
        assert_eq!(l.limit, 4);
        l.failed(&c, 0);
        l.failed(&c, 0);
        assert_eq!(l.limit, 1, "cut twice, never below min");
    }

    #[test]
    fn bounds_are_checked() {
        let bad = |l: ConcurrencyLimit| l.validate().unwrap_err();
        assert_eq!(bad(ConcurrencyLimit::Fixed(0)).field, Field::ConcurrencyLimit);
        assert_eq!(bad(ConcurrencyLimit::Adaptive { min: 5, max: 4 }).problem, Problem::ExceedsMax);
        assert_eq!(bad(ConcurrencyLimit::Adaptive { min: 1, max: MAX_CONCURRENCY_LIMIT + 1 }).problem, Problem::TooLarge);
        assert!(ConcurrencyLimit::Adaptive { min: 1, max: 1 }.validate().is_ok());
    }
}
