//! Every rule a group member decides by, as pure functions: when the group
//! trips (the breaker's trip rule on the merged view, and the quorum), what
//! a process proposes, how long its probes wait for the group, and how it
//! retries a store that failed.

use super::GroupConfig;
use super::protocol::{Answer, GroupLimit, GroupPhase, LimitReport, Proposed};
use crate::breaker::Local;
use crate::config::Config;
use crate::phase::Phase;
use crate::state::Reason;
use crate::time::{Duration, Instant};

/// Why the group opens on `answer`, if it does: the breaker's trip rule on
/// the merged window and the group's run, and failures seen by `quorum`
/// distinct live processes (all of them, if fewer are live).
pub(crate) fn trips(c: &Config, g: &GroupConfig, answer: &Answer) -> Option<Reason> {
    let reason = crate::policy::trip(c, Phase::Closed, answer.run, answer.totals)?;
    let needed = g.quorum.min(answer.live.max(1));
    (answer.failing >= needed).then_some(reason)
}

/// This process's share of the group's concurrency limit `limit`, with
/// `live` processes, `active` of them having calls to make and this one
/// `rank`th among those (by member id; `None`: it has none), at
/// `server_now` (µs on the store's clock), exchanging every `flush`.
///
/// If the limit has a call for every live process, each idle one keeps
/// one (its next call makes it active without waiting for an exchange);
/// else idle ones get none. The active processes split the rest: a whole
/// part each, and the remainder one call each to a window of ranks that
/// moves every [`SHARE_ROUND`] flush intervals (no process is left without
/// calls for long). A process holds a remainder call only if its turn
/// covers both now and one flush interval ago: every process exchanges
/// within a flush interval, so the one whose turn ended has let its call
/// go before the next takes it. The shares of processes that saw the same
/// limit and counts add up to `limit` at most.
pub(crate) fn share(limit: u32, live: u32, active: u32, rank: Option<u32>, server_now: u64, flush: Duration) -> u32 {
    let idle = live.saturating_sub(active);
    let reserved = if limit >= live { idle } else { 0 };
    let Some(rank) = rank.filter(|_| active > 0) else {
        return u32::from(reserved > 0);
    };
    let rest = limit - reserved;
    let (whole, extra) = (rest / active, rest % active);
    let round_us = flush.as_micros().max(1).saturating_mul(SHARE_ROUND);
    let turn = |at: u64| (u64::from(rank) + at / round_us) % u64::from(active) < u64::from(extra);
    whole + u32::from(turn(server_now) && turn(server_now.saturating_sub(flush.as_micros())))
}

/// How many flush intervals a turn at the remainder of the group's limit
/// lasts (the last of them unused, while the turn is handed over).
pub(crate) const SHARE_ROUND: u64 = 10;

/// The group's limit as a process reads `limit` from an answer: within its
/// own adaptive bounds `min..=max` (another's configuration, or steps added
/// by several processes at once, cannot take it outside them); `None`: the
/// group has no limit yet.
pub(crate) fn group_limit(limit: GroupLimit, min: u32, max: u32) -> Option<(u32, u32)> {
    (limit.epoch > 0 && limit.limit > 0).then(|| (limit.limit.clamp(min, max), limit.threshold.clamp(min, max)))
}

/// What a process asks of the group's limit: the first limit, if the group
/// has none (the start: `half_open_max_attempts` within bounds); a halving
/// (never below `min`), if a failure here asks for a cut; else its steps.
pub(crate) fn limit_report(
    c: &Config,
    limit: GroupLimit,
    steps: u32,
    cut: bool,
    active: bool,
    busy: u32,
) -> Option<LimitReport> {
    let Some(crate::config::ConcurrencyLimit::Adaptive { min, max }) = c.concurrency_limit else { return None };
    let set = match group_limit(limit, min, max) {
        None => Some((start_limit(c), max)),
        Some((group, _)) if cut => {
            let halved = (group / 2).max(min);
            Some((halved, halved))
        }
        Some(_) => None,
    };
    Some(LimitReport { epoch: limit.epoch, steps, set, active, busy })
}

/// Whether the group's calls in flight (`busy`: its members' peaks within
/// a member TTL) fill its limit `limit`: nine tenths of it at least. Only
/// then does a refusal in one process grow the group's limit (Reno's rule:
/// the limit grows only while it is what holds calls back); otherwise other
/// processes' shares have room, and the shares move to demand instead.
pub(crate) fn group_full(limit: u32, busy: u32) -> bool {
    busy >= limit - limit / 10
}

/// The threshold a group's limit restarts with: its ceiling (slow start
/// up to the first failure).
pub(crate) fn threshold_ceiling(c: &Config) -> u32 {
    match c.concurrency_limit {
        Some(crate::config::ConcurrencyLimit::Adaptive { max, .. }) => max,
        _ => u32::MAX,
    }
}

/// The limit a group starts with, and restarts with when it closes: the
/// probe count, within the adaptive bounds (a process's own start).
pub(crate) fn start_limit(c: &Config) -> u32 {
    match c.concurrency_limit {
        Some(crate::config::ConcurrencyLimit::Adaptive { min, max }) => {
            u32::from(c.half_open_max_attempts).clamp(min, max)
        }
        _ => u32::MAX,
    }
}

/// What a process knows of its group when it proposes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    /// Its member id.
    pub(crate) me: u64,
    /// The group's phase, as last answered.
    pub(crate) phase: GroupPhase,
    /// Its `now` on the store's clock.
    pub(crate) server_now: u64,
    /// Why the group trips on the latest answer, if it does.
    pub(crate) trip: Option<Reason>,
    /// The generation an open period's jitter is drawn for.
    pub(crate) generation: u32,
    /// Whether calls were rejected here since the group opened: only a
    /// process with calls waiting takes the probe lease.
    pub(crate) demand: bool,
}

/// What a process proposes, standing at `s`, its breaker at `local`. The
/// lease goes to a process with calls waiting, never one held open or
/// disabled by hand; its holder closes the group only on its own probes'
/// success, and renews the lease while its probes are out near its end.
pub(crate) fn proposal(c: &Config, g: &GroupConfig, s: Standing, local: Local) -> Option<Proposed> {
    let Standing { me, phase, server_now, trip, generation, demand } = s;
    let may_probe = demand && local != Local::Manual;
    match phase {
        GroupPhase::Closed => {
            let reason = trip?;
            let open_for = crate::policy::first_open_period(c);
            let for_us = crate::policy::open_period(c, open_for, generation).as_micros();
            Some(Proposed::Open { for_us, open_for_us: open_for.as_micros(), reason })
        }
        GroupPhase::Open { until_us, open_for_us, reason } if server_now >= until_us && may_probe => {
            Some(take_lease(c, g, open_for_us, reason))
        }
        GroupPhase::Open { .. } => None,
        GroupPhase::HalfOpen { lease, lease_until_us, open_for_us, reason } if lease == me => match local {
            // Its probes succeeded.
            Local::Closed { by_probes: true } => Some(Proposed::Closed { reason: Reason::ProbesSucceeded }),
            // A probe failed here: open again, for longer.
            Local::Open { open_for, left } => Some(Proposed::Open {
                for_us: left.as_micros(),
                open_for_us: open_for.as_micros(),
                reason: Reason::ProbeFailed,
            }),
            // Probes out as the lease nears its end: renewed.
            Local::HalfOpen { probes_out: true }
                if lease_until_us.saturating_sub(server_now) <= c.probe_timeout.as_micros() =>
            {
                Some(take_lease(c, g, open_for_us, reason))
            }
            Local::Closed { by_probes: false } | Local::HalfOpen { .. } | Local::Manual => None,
        },
        // The lease holder went silent: take over.
        GroupPhase::HalfOpen { lease_until_us, open_for_us, reason, .. }
            if server_now >= lease_until_us && may_probe =>
        {
            Some(take_lease(c, g, open_for_us, reason))
        }
        GroupPhase::HalfOpen { .. } => None,
    }
}

fn take_lease(c: &Config, g: &GroupConfig, open_for_us: u64, reason: Reason) -> Proposed {
    Proposed::HalfOpen { lease_us: g.lease_for(c).as_micros(), open_for_us, reason }
}

/// Until when, following the group at `now`, a process that does not hold
/// the lease waits for the group's next answer before it probes by itself:
/// two flush intervals and a store timeout (one late or lost exchange does
/// not make it probe; a group it no longer hears from never holds it open).
pub(crate) fn probes_wait_until(g: &GroupConfig, now: Instant) -> Instant {
    let wait = g.flush_interval.as_micros().saturating_mul(2).saturating_add(g.store_timeout().as_micros());
    now + Duration::from_micros(wait)
}

/// The shortest time between two exchanges a transition asks for at once:
/// a tenth of the flush interval, so that proposals that keep losing to
/// other processes' do not hammer the store.
pub(crate) fn urgent_gap(g: &GroupConfig) -> Duration {
    Duration::from_micros(g.flush_interval.as_micros() / 10)
}

/// How long after its `failures`-th failure in a row a store call is tried
/// again: the flush interval doubled each time up to 30 s, less up to a
/// fifth drawn from `seed` (the processes of a group do not retry together).
pub(crate) fn retry_after(g: &GroupConfig, failures: u32, seed: u64) -> Duration {
    const CAP: Duration = Duration::from_secs(30);
    let doubled = g.flush_interval.as_micros().saturating_mul(1u64 << failures.saturating_sub(1).min(20));
    let base = Duration::from_micros(doubled).min(CAP.max(g.flush_interval));
    crate::jitter::shorten(base, 0.2, seed, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowCounts;

    fn answer(failures: u32, live: u32, failing: u32) -> Answer {
        Answer {
            now_us: 0,
            register: Default::default(),
            totals: WindowCounts { calls: 100, failures, slow: 0 },
            run: 0,
            live,
            failing,
            limit: GroupLimit::default(),
            active: 0,
            rank: None,
            busy: 0,
        }
    }

    #[test]
    fn the_group_trips_on_the_merged_window_with_a_quorum_of_failing_processes() {
        let c = Config { failure_threshold: Some(5), ..Config::default() };
        let g = GroupConfig { quorum: 3, ..GroupConfig::default() };
        assert_eq!(trips(&c, &g, &answer(4, 10, 10)), None, "below the threshold");
        assert_eq!(trips(&c, &g, &answer(5, 10, 2)), None, "two processes poison nothing");
        assert_eq!(trips(&c, &g, &answer(5, 10, 3)), Some(Reason::FailureThreshold));
        // Fewer live processes than the quorum: all of them.
        assert_eq!(trips(&c, &g, &answer(5, 2, 2)), Some(Reason::FailureThreshold));
        assert_eq!(trips(&c, &g, &answer(5, 1, 1)), Some(Reason::FailureThreshold));
        assert_eq!(trips(&c, &g, &answer(5, 2, 1)), None);
    }

    fn at(me: u64, phase: GroupPhase, server_now: u64) -> Standing {
        Standing { me, phase, server_now, trip: None, generation: 0, demand: true }
    }

    #[test]
    fn the_lease_holder_proposes_what_its_probes_found_and_others_take_over_a_silent_lease() {
        let c = Config::default();
        let g = GroupConfig::default();
        let half_open = GroupPhase::HalfOpen {
            lease: 1,
            lease_until_us: 100,
            open_for_us: 30_000_000,
            reason: Reason::FailureRate,
        };
        assert_eq!(
            proposal(&c, &g, at(1, half_open, 50), Local::Closed { by_probes: true }),
            Some(Proposed::Closed { reason: Reason::ProbesSucceeded })
        );
        assert_eq!(proposal(&c, &g, at(1, half_open, 50), Local::HalfOpen { probes_out: false }), None);
        let left = Duration::from_secs(60);
        let open_for = Duration::from_secs(60);
        assert_eq!(
            proposal(&c, &g, at(1, half_open, 50), Local::Open { open_for, left }),
            Some(Proposed::Open { for_us: 60_000_000, open_for_us: 60_000_000, reason: Reason::ProbeFailed })
        );
        assert_eq!(proposal(&c, &g, at(2, half_open, 99), Local::Open { open_for, left }), None);
        let lease_us = (c.probe_timeout.as_micros()) + 1_000_000;
        let take = Some(Proposed::HalfOpen { lease_us, open_for_us: 30_000_000, reason: Reason::FailureRate });
        assert_eq!(proposal(&c, &g, at(2, half_open, 100), Local::HalfOpen { probes_out: false }), take);
        let open = GroupPhase::Open { until_us: 100, open_for_us: 30_000_000, reason: Reason::FailureRate };
        assert_eq!(proposal(&c, &g, at(2, open, 99), Local::Closed { by_probes: true }), None);
        assert_eq!(proposal(&c, &g, at(2, open, 100), Local::Closed { by_probes: true }), take);
        assert_eq!(proposal(&c, &g, at(2, GroupPhase::Closed, 100), Local::Closed { by_probes: true }), None);
    }

    #[test]
    fn retries_back_off_to_thirty_seconds_with_jitter() {
        let g = GroupConfig::default();
        let first = retry_after(&g, 1, 7);
        assert!(first <= Duration::from_secs(1) && first > Duration::from_millis(800), "{first:?}");
        let tenth = retry_after(&g, 10, 7);
        assert!(tenth <= Duration::from_secs(30) && tenth > Duration::from_secs(24), "{tenth:?}");
        assert!(retry_after(&g, u32::MAX, 7) <= Duration::from_secs(30));
    }
}
