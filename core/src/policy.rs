//! Every rule a breaker decides by, as pure functions of the configuration
//! and the counts: what trips it, what counts as slow, how probes are
//! admitted and when they close it or are given up, how long it stays open,
//! and when a registry may forget it.

use crate::config::Config;
use crate::state::Reason;
#[cfg(feature = "alloc")]
use crate::state::{Counts, Mode, State};
use crate::time::{Duration, Instant};
use crate::window::WindowCounts;

/// Whether a call that took `latency` is slow (and so a failure).
#[inline]
pub(crate) fn is_slow(c: &Config, latency: Duration) -> bool {
    c.slow_call_duration.is_some_and(|limit| latency > limit)
}

/// The latency beyond which a call is slow, if any.
pub(crate) fn slow_after(c: &Config) -> Option<Duration> {
    c.slow_call_duration
}

/// Whether another probe may go while `in_flight` are out.
pub(crate) fn admits_probe(c: &Config, in_flight: u16) -> bool {
    in_flight < c.half_open_max_attempts
}

/// Whether `successes` successful probes close the breaker.
pub(crate) fn probes_close(c: &Config, successes: u16) -> bool {
    successes >= c.successes_to_close()
}

/// When the probes in flight are given up, the latest admitted at `admitted`.
pub(crate) fn probe_give_up_at(c: &Config, admitted: Instant) -> Instant {
    admitted + c.probe_timeout
}

/// When a caller refused because every probe slot is taken should try again:
/// a tenth of `open_timeout` (at least 1 µs), no later than `give_up` (when
/// the slots free at the latest; never zero while they are busy).
pub(crate) fn probe_retry_hint(c: &Config, give_up: Duration) -> Duration {
    Duration::from_micros((c.open_timeout.as_micros() / 10).max(1)).min(give_up)
}

/// Whether an open period in force (`Some(until)`; `Some(None)` when held
/// until released, `None` when not open) already lasts until `wanted`: then a
/// hint to stay open that long (`force_open_at_least`) changes nothing.
pub(crate) fn open_lasts_until(in_force: Option<Option<Instant>>, wanted: Instant) -> bool {
    match in_force {
        Some(None) => true,
        Some(Some(until)) => until >= wanted,
        None => false,
    }
}

/// The open period after a trip from closed: the backoff starts afresh.
pub(crate) fn first_open_period(c: &Config) -> Duration {
    c.open_timeout
}

/// Whether a registry may forget a breaker: closed, in no manual mode, with
/// no call in flight, and nothing counted that a policy uses: no failure in
/// its window, none in a row if `consecutive_failures` is set, and no call at
/// all in its window if a rate is judged (the successes a rate counts would
/// be forgotten too). A new breaker would decide the same, so no protection
/// is lost. (A rate breaker over a count window thus stays once used.)
#[cfg(feature = "alloc")]
pub(crate) fn forgettable(c: &Config, state: State, mode: Mode, counts: &Counts, in_flight: u32) -> bool {
    let run_matters = c.consecutive_failures.is_some();
    let rates = c.failure_rate_threshold.is_some() || c.slow_call_rate_threshold.is_some();
    state == State::Closed
        && mode == Mode::Normal
        && in_flight == 0
        && !(run_matters && counts.consecutive_failures > 0)
        && counts.window.failures == 0
        && !(rates && counts.window.calls > 0)
}

/// Why a breaker with these counts must open, if it must. Judged when a
/// failure is reported; the first policy reached, in this order, is the reason.
pub(crate) fn trip_reason(c: &Config, consecutive: u32, totals: WindowCounts) -> Option<Reason> {
    if c.consecutive_failures.is_some_and(|n| consecutive >= n) {
        return Some(Reason::ConsecutiveFailures);
    }
    if c.failure_threshold.is_some_and(|n| totals.failures >= n) {
        return Some(Reason::FailureThreshold);
    }
    if totals.calls < c.minimum_calls {
        return None;
    }
    let reached = |threshold: Option<f64>, count: u32| {
        threshold.is_some_and(|p| f64::from(count) * 100.0 >= p * f64::from(totals.calls))
    };
    if reached(c.failure_rate_threshold, totals.failures) {
        return Some(Reason::FailureRate);
    }
    reached(c.slow_call_rate_threshold, totals.slow).then_some(Reason::SlowCallRate)
}

/// The open period after a failed half-open trial: `current` × `backoff_factor`,
/// at most `max_open_timeout`, never shorter than `current`.
pub(crate) fn grown_open_period(c: &Config, current: Duration) -> Duration {
    let grown = (current.as_micros() as f64 * c.backoff_factor) as u64;
    Duration::from_micros(grown).min(c.open_timeout_cap()).max(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_judged_only_from_the_minimum_number_of_calls() {
        let c = Config {
            failure_threshold: None,
            failure_rate_threshold: Some(50.0),
            minimum_calls: 4,
            ..Config::default()
        };
        assert_eq!(trip_reason(&c, 3, WindowCounts { calls: 3, failures: 3, slow: 0 }), None);
        assert_eq!(trip_reason(&c, 2, WindowCounts { calls: 4, failures: 2, slow: 0 }), Some(Reason::FailureRate));
        assert_eq!(trip_reason(&c, 1, WindowCounts { calls: 5, failures: 2, slow: 0 }), None);
    }

    #[test]
    fn backoff_grows_to_the_cap_and_never_shrinks() {
        let c = Config::default();
        assert_eq!(grown_open_period(&c, Duration::from_secs(30)), Duration::from_secs(60));
        assert_eq!(grown_open_period(&c, Duration::from_secs(200)), Duration::from_secs(300));
        let huge = Config { max_open_timeout: Some(Duration::MAX), ..c };
        assert_eq!(grown_open_period(&huge, Duration::MAX), Duration::MAX);
    }

    #[test]
    fn an_open_hint_never_shortens_the_open_period_in_force() {
        let at = |s| Instant::ZERO + Duration::from_secs(s);
        assert!(open_lasts_until(Some(None), at(1_000)));
        assert!(open_lasts_until(Some(Some(at(120))), at(120)));
        assert!(!open_lasts_until(Some(Some(at(119))), at(120)));
        assert!(!open_lasts_until(None, at(0)));
    }
}
