//! Every rule a breaker decides by, as pure functions of the configuration,
//! its phase, its counts and `now`: what a call meets (the admission table),
//! what a report says of the upstream, what trips it, what counts as slow,
//! how probes are admitted and when they close it or are given up, how long
//! it stays open and what ends an open period, what a binding may do without
//! asking, and when a registry may forget it. [`Breaker`](crate::Breaker)
//! applies them; the concurrency limit's own rules are in
//! [`limit`](crate::limit), retention's in `retention::policy`.

use crate::config::Config;
use crate::jitter;
use crate::permit::Outcome;
use crate::phase::{Phase, Probes};
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
    let rates = rates(c);
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

/// Whether a trip is judged on a rate, which counts the window's calls (a
/// count of failures, or of consecutive ones, does not).
pub(crate) fn rates(c: &Config) -> bool {
    c.failure_rate_threshold.is_some() || c.slow_call_rate_threshold.is_some()
}

/// Whether the window bucket a success lands in can change what a call is
/// told: a rate counts the window's calls, and a full concurrency limit's
/// retry hint divides the time the window counted by them (`Limiter::retry_hint`).
pub(crate) fn bucket_decides(c: &Config) -> bool {
    rates(c) || c.concurrency_limit.is_some()
}

/// The open period after a failed half-open trial: `current` × `backoff_factor`,
/// at most `max_open_timeout`, never shorter than `current`.
pub(crate) fn grown_open_period(c: &Config, current: Duration) -> Duration {
    let grown = (current.as_micros() as f64 * c.backoff_factor) as u64;
    Duration::from_micros(grown).min(c.open_timeout_cap()).max(current)
}

/// What a call meets at `now` in `phase` (a timed change that is due
/// counted as made), before the concurrency limit has its say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Admitted, whatever the limit: disabled, or the probes in flight are
    /// given up (their slots with them).
    Pass,
    /// Refused until the open period ends at `until`.
    UntilHalfOpen { until: Instant },
    /// Refused: held open until released.
    Held,
    /// Refused: every probe slot is taken. `retry`: when to come back;
    /// `give_up`: when the probes in flight are given up at the latest.
    ProbesBusy { retry: Duration, give_up: Duration },
    /// Admitted if the concurrency limit has room. `probing`: the call would
    /// be a probe (refused, it gets the probes' hint); `restarted`: probing
    /// begins with it, and with probing the limit starts again.
    Limit { probing: bool, restarted: bool },
}

/// The admission table: what a call meets at `now` in `phase`, with
/// `probes_in_flight` half-open probes out, the probes going from `probes`.
pub(crate) fn gate(c: &Config, phase: Phase, probes_in_flight: u16, probes: Probes, now: Instant) -> Gate {
    match phase {
        Phase::Disabled => Gate::Pass,
        Phase::Closed => Gate::Limit { probing: false, restarted: false },
        Phase::Open { until } | Phase::ForcedOpen { until } if now < until => Gate::UntilHalfOpen { until },
        Phase::HeldOpen => Gate::Held,
        // The open period has ended, or probing: another process's probes.
        _ if probes_elsewhere(probes, now) => {
            let wait = probes.awaited_until() - now;
            Gate::ProbesBusy { retry: wait, give_up: wait }
        }
        Phase::Open { .. } | Phase::ForcedOpen { .. } => Gate::Limit { probing: true, restarted: true },
        _ if probes_given_up(phase, probes_in_flight, now) => Gate::Pass,
        Phase::HalfOpen { give_up_at } if !admits_probe(c, probes_in_flight) => {
            let give_up = give_up_at - now;
            Gate::ProbesBusy { retry: probe_retry_hint(c, give_up), give_up }
        }
        Phase::HalfOpen { .. } => Gate::Limit { probing: true, restarted: false },
    }
}

/// Whether another process of the group probes at `now` (see [`Probes`]).
pub(crate) fn probes_elsewhere(probes: Probes, now: Instant) -> bool {
    now < probes.awaited_until()
}

/// Whether the half-open probes in flight are given up by `now`: none was
/// reported within `probe_timeout` of the latest probe's admission (a lost
/// promise cannot hold the breaker half-open).
pub(crate) fn probes_given_up(phase: Phase, probes_in_flight: u16, now: Instant) -> bool {
    matches!(phase, Phase::HalfOpen { give_up_at } if probes_in_flight > 0 && now >= give_up_at)
}

/// The change an open period makes by itself once `now` reaches its end:
/// to half-open, at the time it ended. A timed force-open ends in half-open
/// too (probe first, never closed); held open ends only when released.
pub(crate) fn open_period_ended(phase: Phase, now: Instant) -> Option<(Instant, Reason)> {
    match phase {
        Phase::Open { until } if now >= until => Some((until, Reason::OpenTimeout)),
        Phase::ForcedOpen { until } if now >= until => Some((until, Reason::ForcedOpenEnded)),
        _ => None,
    }
}

/// When `phase` changes by itself: its open period ends, or its probes in
/// flight are given up (the concurrency limit's own deadline aside).
pub(crate) fn phase_deadline(phase: Phase, probes_in_flight: u16) -> Option<Instant> {
    match phase {
        Phase::Open { until } | Phase::ForcedOpen { until } => Some(until),
        Phase::HalfOpen { give_up_at } if probes_in_flight > 0 => Some(give_up_at),
        _ => None,
    }
}

/// What a report says of the upstream: `Some(failed)` if it counts (a
/// failure; a success, failed if it was slow), `None` if it counts nothing:
/// ignored, cancelled, or a permit of an earlier state period (stale).
pub(crate) fn verdict(outcome: Outcome, stale: bool, slow: bool) -> Option<bool> {
    match outcome {
        _ if stale => None,
        Outcome::Success => Some(slow),
        Outcome::Failure => Some(true),
        Outcome::Ignored | Outcome::Cancelled => None,
    }
}

/// Why a failure counted in `phase` (closed or disabled) opens the breaker,
/// if it does: a disabled breaker counts every call but never trips.
pub(crate) fn trip(c: &Config, phase: Phase, consecutive: u32, totals: WindowCounts) -> Option<Reason> {
    match phase {
        Phase::Disabled => None,
        _ => trip_reason(c, consecutive, totals),
    }
}

/// How long an open period of `open_for` (before jitter) lasts when it
/// starts generation `generation`: `jitter` shortens it by a fraction drawn
/// from the seed and the generation (never lengthens it: the cap stays a
/// cap; no state, so it survives a snapshot).
pub(crate) fn open_period(c: &Config, open_for: Duration, generation: u32) -> Duration {
    jitter::shorten(open_for, c.jitter, c.jitter_seed, generation)
}

/// What a binding may do without asking at `now` (see
/// [`Licence`](crate::Licence)), before the breaker fills in the details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Admit every call (the breaker gives the window bucket's end and the room).
    Admit,
    /// Reject every call read before `until` (`None`: every call, held open).
    Reject { until: Option<Instant> },
    /// Ask for every call.
    Ask,
}

/// The licence rules: a closed breaker licenses admissions unless it
/// measures latency (each call must then be timed by it) or its limit has no
/// room (`room`: `None` without a limit); an open one licenses rejections
/// until its period ends, unless a limit draws each rejection's hint; held
/// open, every rejection. Anything else (half-open, disabled) asks.
pub(crate) fn grant(c: &Config, phase: Phase, now: Instant, measures_latency: bool, room: Option<u32>) -> Grant {
    let limited = c.concurrency_limit.is_some();
    match phase {
        Phase::Closed if !measures_latency && room != Some(0) => Grant::Admit,
        Phase::Open { until } | Phase::ForcedOpen { until } if now < until && !limited => {
            Grant::Reject { until: Some(until) }
        }
        Phase::HeldOpen => Grant::Reject { until: None },
        _ => Grant::Ask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConcurrencyLimit;
    use crate::window::WindowCounts;

    fn at(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }

    const HERE: Probes = Probes::HERE;

    #[test]
    fn the_admission_table() {
        let c = Config::default(); // 3 probes, open 30 s (retry hint 3 s), probes given up after 60 s
        assert_eq!(gate(&c, Phase::Disabled, 0, HERE, at(0)), Gate::Pass);
        assert_eq!(gate(&c, Phase::Closed, 0, HERE, at(0)), Gate::Limit { probing: false, restarted: false });
        assert_eq!(gate(&c, Phase::Open { until: at(30) }, 0, HERE, at(29)), Gate::UntilHalfOpen { until: at(30) });
        assert_eq!(
            gate(&c, Phase::ForcedOpen { until: at(30) }, 0, HERE, at(0)),
            Gate::UntilHalfOpen { until: at(30) }
        );
        // An open period that has ended: the call is the first probe.
        assert_eq!(
            gate(&c, Phase::Open { until: at(30) }, 0, HERE, at(30)),
            Gate::Limit { probing: true, restarted: true }
        );
        assert_eq!(gate(&c, Phase::HeldOpen, 0, HERE, at(1_000_000)), Gate::Held);
        let half_open = Phase::HalfOpen { give_up_at: at(90) };
        assert_eq!(gate(&c, half_open, 2, HERE, at(40)), Gate::Limit { probing: true, restarted: false });
        let busy = Gate::ProbesBusy { retry: Duration::from_secs(3), give_up: Duration::from_secs(50) };
        assert_eq!(gate(&c, half_open, 3, HERE, at(40)), busy);
        // Close to the give-up, the hint is no later than it.
        let soon = Gate::ProbesBusy { retry: Duration::from_secs(1), give_up: Duration::from_secs(1) };
        assert_eq!(gate(&c, half_open, 3, HERE, at(89)), soon);
        // Probes not reported in time are given up: the call passes.
        assert_eq!(gate(&c, half_open, 3, HERE, at(90)), Gate::Pass);
    }

    #[test]
    fn probes_elsewhere_in_the_group_hold_calls_until_the_groups_answer_is_due() {
        let c = Config::default();
        let elsewhere = Probes::elsewhere(at(35));
        let busy = |left| Gate::ProbesBusy { retry: Duration::from_secs(left), give_up: Duration::from_secs(left) };
        // Open: as alone until the period ends; then no probe from here.
        assert_eq!(
            gate(&c, Phase::Open { until: at(30) }, 0, elsewhere, at(29)),
            Gate::UntilHalfOpen { until: at(30) }
        );
        assert_eq!(gate(&c, Phase::Open { until: at(30) }, 0, elsewhere, at(31)), busy(4));
        assert_eq!(gate(&c, Phase::HalfOpen { give_up_at: at(90) }, 0, elsewhere, at(33)), busy(2));
        // Closed, held, disabled: the group's probes do not matter.
        assert_eq!(gate(&c, Phase::Closed, 0, elsewhere, at(31)), Gate::Limit { probing: false, restarted: false });
        assert_eq!(gate(&c, Phase::HeldOpen, 0, elsewhere, at(31)), Gate::Held);
        // No answer by then: the breaker probes by itself.
        assert_eq!(
            gate(&c, Phase::Open { until: at(30) }, 0, elsewhere, at(35)),
            Gate::Limit { probing: true, restarted: true }
        );
        assert_eq!(
            gate(&c, Phase::HalfOpen { give_up_at: at(90) }, 0, elsewhere, at(35)),
            Gate::Limit { probing: true, restarted: false }
        );
    }

    #[test]
    fn what_ends_an_open_period_and_when() {
        assert_eq!(open_period_ended(Phase::Open { until: at(30) }, at(29)), None);
        assert_eq!(open_period_ended(Phase::Open { until: at(30) }, at(45)), Some((at(30), Reason::OpenTimeout)));
        assert_eq!(
            open_period_ended(Phase::ForcedOpen { until: at(30) }, at(30)),
            Some((at(30), Reason::ForcedOpenEnded))
        );
        assert_eq!(open_period_ended(Phase::HeldOpen, at(u64::MAX / 2_000_000)), None);
        assert_eq!(phase_deadline(Phase::ForcedOpen { until: at(7) }, 0), Some(at(7)));
        assert_eq!(phase_deadline(Phase::HalfOpen { give_up_at: at(60) }, 0), None);
        assert_eq!(phase_deadline(Phase::HalfOpen { give_up_at: at(60) }, 1), Some(at(60)));
        assert_eq!(phase_deadline(Phase::HeldOpen, 0), None);
        assert!(!probes_given_up(Phase::HalfOpen { give_up_at: at(60) }, 0, at(61)));
        assert!(probes_given_up(Phase::HalfOpen { give_up_at: at(60) }, 1, at(60)));
    }

    #[test]
    fn what_a_report_says_of_the_upstream() {
        assert_eq!(verdict(Outcome::Success, false, false), Some(false));
        assert_eq!(verdict(Outcome::Success, false, true), Some(true));
        assert_eq!(verdict(Outcome::Failure, false, false), Some(true));
        assert_eq!(verdict(Outcome::Ignored, false, false), None);
        assert_eq!(verdict(Outcome::Cancelled, false, false), None);
        assert_eq!(verdict(Outcome::Failure, true, false), None);
    }

    #[test]
    fn a_disabled_breaker_never_trips() {
        let c = Config { consecutive_failures: Some(1), ..Config::default() };
        let totals = WindowCounts { calls: 9, failures: 9, slow: 0 };
        assert_eq!(trip(&c, Phase::Closed, 9, totals), Some(Reason::ConsecutiveFailures));
        assert_eq!(trip(&c, Phase::Disabled, 9, totals), None);
    }

    #[test]
    fn jitter_only_ever_shortens_an_open_period() {
        let c = Config { jitter: 0.5, ..Config::default() };
        for generation in 0..64 {
            let d = open_period(&c, Duration::from_secs(30), generation);
            assert!(d <= Duration::from_secs(30) && d >= Duration::from_secs(15), "{d:?}");
        }
        assert_eq!(open_period(&Config::default(), Duration::from_secs(30), 1), Duration::from_secs(30));
    }

    #[test]
    fn a_successs_bucket_decides_with_a_rate_or_a_limit() {
        let counts = Config { failure_threshold: Some(5), consecutive_failures: Some(3), ..Config::default() };
        let counts = Config { failure_rate_threshold: None, slow_call_rate_threshold: None, ..counts };
        assert!(!bucket_decides(&counts));
        assert!(bucket_decides(&Config { failure_rate_threshold: Some(50.0), ..counts }));
        assert!(bucket_decides(&Config { slow_call_rate_threshold: Some(50.0), ..counts }));
        assert!(bucket_decides(&Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(2)), ..counts }));
        // Without those, the trip rule reads nothing a success changes: the
        // window's calls are compared only by a rate.
        let totals = WindowCounts { calls: 1_000, failures: 4, slow: 0 };
        let fewer = WindowCounts { calls: 5, ..totals };
        assert_eq!(trip_reason(&counts, 0, totals), trip_reason(&counts, 0, fewer));
        let rate = Config { failure_rate_threshold: Some(50.0), minimum_calls: 1, ..counts };
        assert_ne!(trip_reason(&rate, 0, totals), trip_reason(&rate, 0, fewer));
    }

    #[test]
    fn the_licence_rules() {
        let c = Config::default();
        assert_eq!(grant(&c, Phase::Closed, at(0), false, None), Grant::Admit);
        assert_eq!(grant(&c, Phase::Closed, at(0), true, None), Grant::Ask);
        assert_eq!(grant(&c, Phase::Closed, at(0), false, Some(0)), Grant::Ask);
        assert_eq!(grant(&c, Phase::Open { until: at(30) }, at(1), false, None), Grant::Reject { until: Some(at(30)) });
        assert_eq!(grant(&c, Phase::Open { until: at(30) }, at(30), false, None), Grant::Ask);
        assert_eq!(grant(&c, Phase::HeldOpen, at(1), false, None), Grant::Reject { until: None });
        assert_eq!(grant(&c, Phase::Disabled, at(1), false, None), Grant::Ask);
        let limited = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(4)), ..c };
        assert_eq!(grant(&limited, Phase::Open { until: at(30) }, at(1), false, Some(4)), Grant::Ask);
        assert_eq!(grant(&limited, Phase::Closed, at(1), false, Some(4)), Grant::Admit);
    }

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
