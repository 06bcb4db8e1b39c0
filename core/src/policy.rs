//! The trip policies and the open-time backoff, as pure functions of the
//! configuration and the counts.

use crate::config::Config;
use crate::state::Reason;
use crate::time::Duration;
use crate::window::Totals;

/// Why a breaker with these counts must open, if it must. Judged when a
/// failure is reported; the first policy reached, in this order, is the reason.
pub(crate) fn trip_reason(c: &Config, consecutive: u32, totals: Totals) -> Option<Reason> {
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
    Duration::from_micros(grown).min(c.max_open_timeout).max(current)
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
        assert_eq!(trip_reason(&c, 3, Totals { calls: 3, failures: 3, slow: 0 }), None);
        assert_eq!(trip_reason(&c, 2, Totals { calls: 4, failures: 2, slow: 0 }), Some(Reason::FailureRate));
        assert_eq!(trip_reason(&c, 1, Totals { calls: 5, failures: 2, slow: 0 }), None);
    }

    #[test]
    fn backoff_grows_to_the_cap_and_never_shrinks() {
        let c = Config::default();
        assert_eq!(grown_open_period(&c, Duration::from_secs(30)), Duration::from_secs(60));
        assert_eq!(grown_open_period(&c, Duration::from_secs(200)), Duration::from_secs(300));
        let huge = Config { max_open_timeout: Duration::MAX, ..c };
        assert_eq!(grown_open_period(&huge, Duration::MAX), Duration::MAX);
    }
}
