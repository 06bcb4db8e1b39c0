//! A group of simulated processes around one [`MemoryStore`]: each with its
//! own breaker, member and clock (offset from the store's by up to
//! minutes), exchanging when its member says.

use alloc::vec::Vec;

use super::*;
use crate::permit::{Outcome, Wait};
use crate::state::{Reason, State};
use crate::time::{Duration, Instant};
use crate::{Breaker, Config};

/// One sender process.
struct Process {
    breaker: Breaker,
    member: Member,
    /// Its clock less the store's, µs (its `now` is the store's plus this).
    skew: i64,
    /// Whether its store calls fail.
    cut_off: bool,
    /// Its exchanges answered.
    exchanges: usize,
}

struct Group {
    store: MemoryStore,
    processes: Vec<Process>,
    /// The store's clock, µs.
    now_us: u64,
}

const SECOND: u64 = 1_000_000;

impl Group {
    fn new(n: usize, config: Config, group: GroupConfig, skews: &[i64]) -> Group {
        let processes = (0..n)
            .map(|i| Process {
                breaker: Breaker::new(config).unwrap(),
                member: Member::new(100 + i as u64, group, &config).unwrap(),
                skew: skews.get(i).copied().unwrap_or(0),
                cut_off: false,
                exchanges: 0,
            })
            .collect();
        // Clocks start 10 minutes in, so that skews back stay positive.
        Group { store: MemoryStore::new(), processes, now_us: 600 * SECOND }
    }

    fn local(&self, i: usize) -> Instant {
        Instant::from_micros((self.now_us as i64 + self.processes[i].skew) as u64)
    }

    /// Lets every process exchange that is due now.
    fn exchange_due(&mut self) {
        for i in 0..self.processes.len() {
            let now = self.local(i);
            let now_us = self.now_us;
            let p = &mut self.processes[i];
            let Some(request) = p.member.request(&mut p.breaker, now) else { continue };
            if p.cut_off {
                p.member.failed(&mut p.breaker, now);
                continue;
            }
            let answer = self.store.exchange(&request, now_us);
            let _ = p.member.apply(&mut p.breaker, &answer, now);
            p.exchanges += 1;
        }
    }

    /// Advances the store's clock by `us` in steps of 10 ms, exchanging as due.
    fn run(&mut self, us: u64) {
        let end = self.now_us + us;
        while self.now_us < end {
            self.now_us = (self.now_us + 10_000).min(end);
            self.exchange_due();
        }
    }

    /// Process `i` makes a call that ends with `outcome`: true if admitted.
    fn call(&mut self, i: usize, outcome: Outcome) -> bool {
        let now = self.local(i);
        let b = &mut self.processes[i].breaker;
        match b.try_acquire(now).decision {
            Ok(permit) => {
                b.record(permit, outcome, now);
                true
            }
            Err(_) => false,
        }
    }

    fn states(&self) -> Vec<State> {
        (0..self.processes.len()).map(|i| self.processes[i].breaker.state(self.local(i))).collect()
    }

    fn phase(&self) -> GroupPhase {
        self.store.register().phase
    }
}

fn all(states: &[State], state: State) -> bool {
    states.iter().all(|&s| s == state)
}

#[test]
fn failures_spread_over_ten_processes_open_the_group_though_none_trips_alone() {
    let mut g = Group::new(10, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    // 10 failures in all, one per process: no process sees 5.
    for i in 0..10 {
        assert!(g.call(i, Outcome::Failure));
    }
    assert!(all(&g.states(), State::Closed));
    // One flush interval brings the counts in, the next exchange proposes.
    g.run(2 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { reason: Reason::FailureThreshold, .. }), "{:?}", g.phase());
    g.run(SECOND);
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
    assert!((0..10).all(|i| !g.call(i, Outcome::Success)), "every process rejects");
}

#[test]
fn one_poisoned_process_does_not_open_the_group() {
    let mut g = Group::new(10, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for _ in 0..20 {
        g.call(0, Outcome::Failure);
        for i in 1..10 {
            g.call(i, Outcome::Success);
        }
    }
    g.run(5 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed);
    let states = g.states();
    assert_eq!(states[0], State::Open, "it opens alone");
    assert!(all(&states[1..], State::Closed), "{states:?}");
}

/// A group opened by failures everywhere, run to the end of its open period.
fn opened(n: usize, skews: &[i64]) -> Group {
    let mut g = Group::new(n, Config::default(), GroupConfig::default(), skews);
    g.run(SECOND);
    for round in 0..5 {
        for i in 0..n {
            let _ = round;
            g.call(i, Outcome::Failure);
        }
    }
    g.run(3 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { .. }));
    // Calls keep coming, and are rejected: a probe would serve them.
    for i in 0..n {
        assert!(!g.call(i, Outcome::Success));
    }
    g
}

/// Runs `g` past its open period; the process holding the probe lease.
fn probing(g: &mut Group) -> usize {
    g.run(30 * SECOND);
    let GroupPhase::HalfOpen { lease, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    (lease - 100) as usize
}

#[test]
fn exactly_one_probe_round_for_the_whole_group() {
    let mut g = opened(10, &[]);
    let holder = probing(&mut g);
    // Every process tries as hard as it can: 3 probes in all.
    let mut admitted = 0;
    for _ in 0..5 {
        for i in 0..10 {
            let now = g.local(i);
            // Admitted probes stay out (not reported).
            if g.processes[i].breaker.try_acquire(now).decision.is_ok() {
                admitted += 1;
                assert_eq!(i, holder, "only the lease holder probes");
            }
        }
    }
    assert_eq!(admitted, 3, "half_open_max_attempts for the group");
    let other = (holder + 1) % 10;
    let now = g.local(other);
    let wait = g.processes[other].breaker.try_acquire(now).decision.unwrap_err().wait;
    assert!(matches!(wait, Wait::ProbesBusy { .. }), "{wait:?}");
}

#[test]
fn the_lease_holders_probes_close_every_process_within_two_flush_intervals() {
    let mut g = opened(10, &[]);
    let holder = probing(&mut g);
    for _ in 0..3 {
        assert!(g.call(holder, Outcome::Success));
    }
    assert_eq!(g.processes[holder].breaker.state(g.local(holder)), State::Closed);
    g.run(2 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed);
    assert!(all(&g.states(), State::Closed), "{:?}", g.states());
    // The group starts counting afresh: one failure per process opens nothing.
    for i in 0..4 {
        g.call(i, Outcome::Failure);
    }
    g.run(3 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed);
}

#[test]
fn a_failed_probe_opens_the_group_again_for_twice_as_long() {
    let mut g = opened(5, &[]);
    let holder = probing(&mut g);
    assert!(g.call(holder, Outcome::Failure));
    g.run(SECOND);
    let GroupPhase::Open { until_us, open_for_us, reason } = g.phase() else { panic!("{:?}", g.phase()) };
    assert_eq!((open_for_us, reason), (60 * SECOND, Reason::ProbeFailed));
    assert!(until_us > g.now_us + 58 * SECOND);
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
}

#[test]
fn a_silent_lease_holder_is_taken_over_after_its_lease() {
    let mut g = opened(3, &[]);
    g.run(30 * SECOND);
    let GroupPhase::HalfOpen { lease, lease_until_us, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    let holder = (lease - 100) as usize;
    // The holder crashed: it never exchanges again.
    g.processes.remove(holder);
    g.run(lease_until_us - g.now_us + 2 * SECOND);
    let GroupPhase::HalfOpen { lease: next, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    assert_ne!(next, lease);
}

#[test]
fn clocks_minutes_apart_follow_one_open_period() {
    // Five processes whose clocks are off by up to five minutes.
    let skews = [0, 300 * SECOND as i64, -180 * SECOND as i64, 7, -240 * SECOND as i64];
    let mut g = opened(5, &skews);
    let GroupPhase::Open { until_us, .. } = g.phase() else { panic!() };
    g.run(until_us - g.now_us - 100_000);
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
    g.run(2 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::HalfOpen { .. }));
    let open = g.states().iter().filter(|&&s| s == State::Open).count();
    assert_eq!(open, 0, "every process's open period ended with the group's: {:?}", g.states());
}

#[test]
fn a_store_outage_leaves_each_process_deciding_alone_and_it_adopts_the_group_on_recovery() {
    let mut g = Group::new(3, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    g.processes[2].cut_off = true;
    g.run(2 * SECOND);
    assert_eq!(g.processes[2].member.poll_event(), Some(GroupEvent::Degraded));
    assert_eq!(g.processes[2].member.poll_event(), None);
    // Alone, it still trips by itself.
    for _ in 0..5 {
        g.call(2, Outcome::Failure);
    }
    assert_eq!(g.processes[2].breaker.state(g.local(2)), State::Open);
    // Meanwhile the others open the group.
    for _ in 0..5 {
        g.call(0, Outcome::Failure);
        g.call(1, Outcome::Failure);
    }
    g.run(3 * SECOND);
    let GroupPhase::Open { until_us, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    for i in 0..2 {
        assert!(!g.call(i, Outcome::Success), "rejected: calls are waiting");
    }
    g.processes[2].cut_off = false;
    g.run(40 * SECOND);
    assert_eq!(g.processes[2].member.poll_event(), Some(GroupEvent::Recovered));
    assert!(!g.processes[2].member.degraded());
    // It follows the group's probe round now: one holder for the three.
    assert!(g.now_us > until_us);
    assert!(matches!(g.phase(), GroupPhase::HalfOpen { .. }), "{:?}", g.phase());
    let probing = (0..3).filter(|&i| g.processes[i].breaker.check(g.local(i)).is_ok()).count();
    assert_eq!(probing, 1);
}

#[test]
fn an_outage_backs_off_and_never_holds_a_process_open() {
    let mut g = opened(2, &[]);
    g.processes[1].cut_off = true;
    g.run(120 * SECOND);
    // Its own open period ended; alone, it probes by itself.
    assert!(g.processes[1].member.degraded());
    assert!(g.call(1, Outcome::Success));
}

#[test]
fn a_store_restarted_empty_starts_the_group_afresh_without_a_false_open() {
    let mut g = Group::new(4, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for _ in 0..100 {
        for i in 0..4 {
            g.call(i, Outcome::Success);
        }
    }
    for i in 0..4 {
        g.call(i, Outcome::Failure);
    }
    g.run(2 * SECOND);
    g.store = MemoryStore::new();
    g.run(5 * SECOND);
    // The running totals of before are a baseline, not a burst.
    assert_eq!(g.phase(), GroupPhase::Closed);
    assert!(all(&g.states(), State::Closed));
}

#[test]
fn a_request_applied_twice_counts_once_and_a_stale_proposal_changes_nothing() {
    let config = Config::default();
    let mut breaker = Breaker::new(config).unwrap();
    let mut member = Member::new(1, GroupConfig::default(), &config).unwrap();
    let mut store = MemoryStore::new();
    let now = Instant::from_micros(SECOND);
    let first = member.request(&mut breaker, now).unwrap();
    store.exchange(&first, SECOND);
    for _ in 0..3 {
        let p = breaker.try_acquire(now).decision.unwrap();
        breaker.record(p, Outcome::Failure, now);
    }
    let mut request = first;
    request.tally = breaker.tally();
    let once = store.exchange(&request, SECOND + 1);
    let twice = store.exchange(&request, SECOND + 2);
    assert_eq!((once.totals.failures, twice.totals.failures), (3, 3));
    // Two proposals made at the same epoch: the first changes the register.
    let open = Proposed::Open { for_us: SECOND, open_for_us: SECOND, reason: Reason::FailureThreshold };
    request.proposal = Some(Proposal { epoch: 0, to: open });
    assert_eq!(store.exchange(&request, SECOND + 3).register.epoch, 1);
    request.proposal = Some(Proposal { epoch: 0, to: Proposed::Closed { reason: Reason::ProbesSucceeded } });
    let answer = store.exchange(&request, SECOND + 4);
    assert_eq!(answer.register.epoch, 1);
    assert!(matches!(answer.register.phase, GroupPhase::Open { .. }));
    let _ = Duration::ZERO;
}

// Regressions from the hostile review.

fn acquire(g: &mut Group, i: usize) -> bool {
    let now = g.local(i);
    g.processes[i].breaker.try_acquire(now).decision.is_ok()
}

#[test]
fn one_failed_exchange_does_not_make_a_process_probe_beside_the_lease_holder() {
    let mut g = opened(3, &[]);
    let holder = probing(&mut g);
    g.run(SECOND);
    assert!(acquire(&mut g, holder), "the holder probes");
    let other = (holder + 1) % 3;
    assert!(!acquire(&mut g, other), "the other waits");
    g.processes[other].cut_off = true;
    while !g.processes[other].member.degraded() {
        g.run(10_000);
    }
    g.processes[other].cut_off = false;
    assert!(!acquire(&mut g, other), "one failed exchange: it still waits");
}

#[test]
fn the_holder_renews_its_lease_while_its_probes_are_out() {
    let mut g = opened(3, &[]);
    g.run(30 * SECOND);
    let GroupPhase::HalfOpen { lease, lease_until_us, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    let holder = (lease - 100) as usize;
    // Its first probe just before the lease would end.
    g.run(lease_until_us - g.now_us - 200_000);
    assert!(acquire(&mut g, holder));
    g.run(3 * SECOND);
    let GroupPhase::HalfOpen { lease: still, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    assert_eq!(still, lease, "the lease stays with the process whose probe is out");
    for i in 0..3 {
        if i != holder {
            assert!(!acquire(&mut g, i));
        }
    }
}

#[test]
fn a_store_that_lost_the_group_closes_no_process_without_a_probe() {
    let mut g = opened(3, &[]);
    g.run(SECOND);
    assert!(all(&g.states(), State::Open));
    g.store = MemoryStore::new();
    g.run(2 * SECOND);
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
}

#[test]
fn a_process_reset_by_hand_follows_the_group_and_never_closes_it_without_probes() {
    let mut g = opened(3, &[]);
    let now = g.local(0);
    let _ = g.processes[0].breaker.reset(now);
    g.run(2 * SECOND);
    assert_eq!(g.processes[0].breaker.state(g.local(0)), State::Open, "open again with its group");
    let GroupPhase::Open { until_us, .. } = g.phase() else { panic!() };
    g.run(until_us - g.now_us + 500_000);
    assert_ne!(g.phase(), GroupPhase::Closed);
}

#[test]
fn a_process_held_open_by_hand_never_takes_the_lease() {
    let mut g = opened(3, &[]);
    let now = g.local(0);
    let _ = g.processes[0].breaker.force_open(now, None);
    let GroupPhase::Open { until_us, .. } = g.phase() else { panic!() };
    g.run(until_us - g.now_us + 500_000);
    assert!(matches!(g.phase(), GroupPhase::HalfOpen { lease, .. } if lease != 100), "{:?}", g.phase());
}

#[test]
fn a_process_waiting_for_the_probes_does_not_flap_between_open_and_half_open() {
    let mut g = opened(3, &[]);
    let holder = probing(&mut g);
    let other = (holder + 1) % 3;
    let before = g.processes[other].breaker.state(g.local(other));
    let mut changes = 0;
    for _ in 0..100 {
        g.run(100_000);
        let now = g.local(other);
        let _ = g.processes[other].breaker.handle_timeout(now);
        changes += usize::from(g.processes[other].breaker.state(now) != before);
    }
    assert_eq!(changes, 0, "it stays {before:?} while another process probes");
}

#[test]
fn the_busy_process_takes_the_lease_not_the_idle_ones() {
    let mut g = Group::new(10, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for i in 0..10 {
        for _ in 0..5 {
            g.call(i, Outcome::Failure);
        }
    }
    g.run(3 * SECOND);
    let GroupPhase::Open { until_us, .. } = g.phase() else { panic!("{:?}", g.phase()) };
    // Only process 9 has calls from now on, one every 100 ms.
    while g.now_us < until_us + 5 * SECOND && g.phase() != GroupPhase::Closed {
        g.run(100_000);
        g.call(9, Outcome::Success);
    }
    assert_eq!(g.phase(), GroupPhase::Closed, "process 9 probed within seconds of the open period's end");
}

#[test]
fn another_process_configuration_cannot_hold_this_one_open_longer_than_its_own() {
    let long = Config { open_timeout: Duration::from_secs(365 * 86_400), ..Config::default() };
    let mut g = Group::new(2, Config::default(), GroupConfig::default(), &[]);
    g.processes[1].breaker = Breaker::new(long).unwrap();
    g.processes[1].member = Member::new(101, GroupConfig::default(), &long).unwrap();
    g.run(SECOND);
    for _ in 0..3 {
        g.call(0, Outcome::Failure);
        g.call(1, Outcome::Failure);
    }
    g.run(3 * SECOND);
    let left = g.processes[0].breaker.retry_after(g.local(0)).unwrap();
    assert!(left <= Config::default().open_timeout_cap(), "{left:?}");
}

#[test]
fn a_request_whose_answer_never_comes_counts_as_failed_and_the_member_goes_on() {
    let config = Config::default();
    let mut breaker = Breaker::new(config).unwrap();
    let mut member = Member::new(1, GroupConfig::default(), &config).unwrap();
    let now = Instant::from_micros(SECOND);
    assert!(member.request(&mut breaker, now).is_some());
    // Lost: neither answered nor reported failed.
    assert!(member.request(&mut breaker, now + Duration::from_millis(100)).is_none(), "one out at a time");
    let later = now + Duration::from_secs(1);
    assert!(member.request(&mut breaker, later).is_none(), "counted failed: a retry waits its backoff");
    assert!(member.degraded());
    let retry = member.next_exchange(&breaker, later);
    assert!(member.request(&mut breaker, retry).is_some(), "and then goes on");
}

fn adaptive() -> Config {
    Config { concurrency_limit: Some(crate::ConcurrencyLimit::Adaptive { min: 1, max: 1_000 }), ..Config::default() }
}

impl Group {
    /// Each process's limit now (its share, in the group).
    fn limits(&self) -> Vec<u32> {
        (0..self.processes.len())
            .map(|i| self.processes[i].breaker.counts(self.local(i)).concurrency_limit.unwrap())
            .collect()
    }

    /// Every process takes as many calls as its limit admits (held, not
    /// reported), then the calls end with `outcome`: the calls admitted.
    fn burst(&mut self, outcome: Outcome) -> usize {
        let mut held = Vec::new();
        for i in 0..self.processes.len() {
            let now = self.local(i);
            while let Ok(permit) = self.processes[i].breaker.try_acquire(now).decision {
                held.push((i, permit));
            }
        }
        let admitted = held.len();
        for (i, permit) in held {
            let now = self.local(i);
            self.processes[i].breaker.record(permit, outcome, now);
        }
        admitted
    }
}

#[test]
fn the_group_has_one_limit_and_each_process_admits_within_its_share_below_one_call_each() {
    let mut g = Group::new(10, adaptive(), GroupConfig::default(), &[]);
    g.run(SECOND);
    // Every process has calls to make: the group starts at the probe count
    // in all, not three per process.
    let first = g.burst(Outcome::Success);
    assert!(first <= 10, "each process alone before the first answer: {first}");
    g.run(2 * SECOND);
    let start = g.store.limit();
    assert!(start.epoch >= 1);
    let sum: u32 = g.limits().iter().sum();
    assert!(sum <= start.limit, "shares {:?} within the group's {}", g.limits(), start.limit);
    assert!(g.limits().contains(&0), "below one call per process: {:?}", g.limits());
    // Successes while every process is held back grow the group's limit,
    // and the shares stay within it (one flush interval's growth aside).
    let mut grown = start.limit;
    for _ in 0..12 {
        let admitted = g.burst(Outcome::Success) as u32;
        assert!(admitted <= grown, "{admitted} calls at once, the group's limit {grown}");
        g.run(SECOND);
        let limit = g.store.limit().limit;
        assert!(limit >= grown, "it only grows on successes");
        grown = limit;
        let sum: u32 = g.limits().iter().sum();
        assert!(sum <= grown, "shares {:?} within {grown}", g.limits());
    }
    assert!(grown > 3 * start.limit, "slow start grew it: {} -> {grown}", start.limit);
}

#[test]
fn a_failure_in_one_process_halves_the_groups_limit_once() {
    let mut g = Group::new(10, adaptive(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for _ in 0..10 {
        g.burst(Outcome::Success);
        g.run(SECOND);
    }
    let before = g.store.limit();
    assert!(before.limit >= 20, "{before:?}");
    // Three processes fail at once: one cut for the group, not three.
    for i in [0, 4, 7] {
        assert!(g.call(i, Outcome::Failure) || g.limits()[i] == 0);
    }
    g.run(SECOND / 5);
    let after = g.store.limit();
    // Halved once, from the limit the process saw (at most one flush
    // interval's steps behind: one per process here).
    assert_eq!(after.epoch, before.epoch + 1, "one cut: {before:?} -> {after:?}");
    assert!(after.limit * 2 <= before.limit && after.limit * 2 + 11 >= before.limit, "{before:?} -> {after:?}");
    assert_eq!(after.threshold, after.limit);
    g.run(SECOND);
    let sum: u32 = g.limits().iter().sum();
    assert!(sum <= after.limit, "every share follows the cut: {:?}", g.limits());
}

#[test]
fn the_group_restarts_its_limit_when_it_closes_and_an_outage_leaves_each_process_its_own() {
    let mut g = Group::new(4, adaptive(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for _ in 0..6 {
        g.burst(Outcome::Success);
        g.run(SECOND);
    }
    assert!(g.store.limit().limit > 3);
    // Failures everywhere open the group; its probes close it.
    for _ in 0..3 {
        for i in 0..4 {
            g.call(i, Outcome::Failure);
        }
        g.run(SECOND / 5);
    }
    g.run(2 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { .. }), "{:?}", g.phase());
    g.run(30 * SECOND);
    for _ in 0..40 {
        for i in 0..4 {
            g.call(i, Outcome::Success);
        }
        g.run(SECOND / 10);
    }
    assert_eq!(g.phase(), GroupPhase::Closed);
    g.run(2 * SECOND);
    let limit = g.store.limit();
    assert!(limit.limit <= 3 + 4, "restarted at the probe count (and a flush's steps): {limit:?}");
    let sum: u32 = g.limits().iter().sum();
    assert!(sum <= limit.limit, "{:?} within {limit:?}", g.limits());
    // The store goes away: each process adapts alone, from at least one call.
    for p in &mut g.processes {
        p.cut_off = true;
    }
    g.run(2 * SECOND);
    assert!(g.processes.iter().all(|p| p.member.degraded()));
    assert!(g.limits().iter().all(|&l| l >= 1), "{:?}", g.limits());
    assert!(g.burst(Outcome::Success) >= 4, "no process is left at none while the store is away");
}

#[test]
fn a_share_is_a_whole_part_and_the_remainder_moves_without_overlap() {
    let flush = Duration::from_secs(1);
    let round = policy::SHARE_ROUND * SECOND;
    // 3 calls for 10 processes, each exchanging at its own moment in the
    // flush interval: at no time do the shares they hold exceed 3.
    for t in (0..40 * round).step_by(100_000) {
        let held: u32 = (0..10u32)
            .map(|rank| {
                // Process `rank` exchanged last at this moment.
                let offset = u64::from(rank) * 97_000;
                let last = (t.saturating_sub(offset) / SECOND) * SECOND + offset;
                policy::share(3, 10, 10, Some(rank), last.min(t), flush)
            })
            .sum();
        assert!(held <= 3, "at {t}: {held}");
    }
    assert_eq!(policy::share(25, 10, 10, Some(0), 0, flush), 3);
    assert_eq!(policy::share(25, 10, 10, Some(9), 0, flush), 2);
    // 12 calls, 10 processes, 2 of them active: 8 idle keep one each, the
    // 2 active split the other 4.
    assert_eq!(policy::share(12, 10, 2, None, 0, flush), 1, "an idle process may make itself known");
    assert_eq!(policy::share(12, 10, 2, Some(1), 0, flush), 2);
    assert_eq!(policy::share(5, 10, 2, None, 0, flush), 0, "fewer calls than processes: idle ones get none");
    assert_eq!(policy::share(5, 10, 2, Some(0), 0, flush), 3);
    // Every rank gets its turn.
    let turns = (0..10u32)
        .filter(|&rank| (0..10).any(|r| policy::share(3, 10, 10, Some(rank), r * round + SECOND, flush) == 1));
    assert_eq!(turns.count(), 10);
}

#[test]
fn a_request_given_up_that_arrives_late_changes_nothing() {
    // Two processes; Redis restarts empty while one's request is queued by
    // its client, then delivered after the restart (before the fresh one).
    let mut g = Group::new(2, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    let now = g.local(0);
    let p = &mut g.processes[0];
    let late = p.member.request(&mut p.breaker, now + Duration::from_secs(1)).expect("due");
    assert!(late.deadline_us > 0, "the process knows the store's clock");
    p.member.failed(&mut p.breaker, now + Duration::from_secs(2));
    g.store = MemoryStore::new();
    g.now_us += 2 * SECOND;
    // While the store was away, the process failed alone.
    for _ in 0..5 {
        g.call(0, Outcome::Failure);
    }
    let answer = g.store.exchange(&late, g.now_us);
    assert_eq!(answer.live, 0, "it changed nothing: {answer:?}");
    assert_eq!(MemoryStore::new().exchange(&late, late.deadline_us).live, 1, "up to its deadline it counts");
    g.run(5 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed, "no false open from failures made alone");
}

#[test]
fn a_store_that_lost_the_groups_limit_starts_it_again_and_no_process_keeps_a_stale_share() {
    let mut g = Group::new(3, adaptive(), GroupConfig::default(), &[]);
    g.run(SECOND);
    for _ in 0..4 {
        g.burst(Outcome::Success);
        g.run(SECOND);
    }
    assert!(g.store.limit().epoch >= 1);
    // Flushed (or restarted empty) with no exchange failing.
    g.store = MemoryStore::new();
    g.run(3 * SECOND);
    let limit = g.store.limit();
    assert!(limit.epoch >= 1 && limit.limit >= 1, "the group has a limit again: {limit:?}");
    g.burst(Outcome::Success);
    g.run(2 * SECOND);
    let sum: u32 = g.limits().iter().sum();
    assert!(sum <= g.store.limit().limit, "{:?} within {:?}", g.limits(), g.store.limit());
    assert!(g.burst(Outcome::Success) >= 1, "calls go through");
}

#[test]
fn a_clock_stepped_back_never_stalls_the_exchanges() {
    let mut g = Group::new(2, Config::default(), GroupConfig::default(), &[0, 0]);
    g.run(SECOND);
    // Process 0's clock steps back 30 s (NTP on a wall clock).
    g.processes[0].skew -= 30 * SECOND as i64;
    let before = g.processes[0].exchanges;
    g.run(5 * SECOND);
    let made = g.processes[0].exchanges - before;
    assert!(made >= 4, "one exchange per flush interval: {made} in 5 s");
    assert!(!g.processes[0].member.degraded());
    // The group opens (failures elsewhere): the stepped-back process
    // follows the whole open period, and rejects meanwhile.
    let mut g2 = Group::new(3, Config::default(), GroupConfig::default(), &[0, 0, 0]);
    g2.run(SECOND);
    g2.processes[0].skew -= 30 * SECOND as i64;
    for _ in 0..3 {
        g2.call(1, Outcome::Failure);
        g2.call(2, Outcome::Failure);
    }
    g2.run(3 * SECOND);
    assert!(matches!(g2.phase(), GroupPhase::Open { .. }), "{:?}", g2.phase());
    for _ in 0..20 {
        g2.run(SECOND);
        assert!(!acquire(&mut g2, 0), "open for the group's period at {:?}", g2.phase());
        if !matches!(g2.phase(), GroupPhase::Open { .. }) {
            break;
        }
    }
}

#[test]
fn force_opens_keep_the_longer_and_an_ended_one_is_not_replayed() {
    let mut g = Group::new(2, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    // Asked while its store is away, for 2 s: ended before the store is
    // back, it is not sent.
    g.processes[0].cut_off = true;
    let now = g.local(0);
    let p = &mut g.processes[0];
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(2));
    g.run(5 * SECOND);
    g.processes[0].cut_off = false;
    g.run(5 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed, "an ended force-open is not replayed");
    // An hour, then a second asked here: the hour holds.
    let now = g.local(0);
    let p = &mut g.processes[0];
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(3_600));
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(1));
    g.run(5 * SECOND);
    match g.phase() {
        GroupPhase::Open { until_us, reason: Reason::ForcedOpen, .. } => {
            assert!(until_us > g.now_us + 3_000 * SECOND, "the hour holds")
        }
        other => panic!("{other:?}"),
    }
    // A second from the other process: covered by the hour, not sent.
    let now = g.local(1);
    let p = &mut g.processes[1];
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(1));
    g.run(5 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { until_us, .. } if until_us > g.now_us + 3_000 * SECOND));
    // Beyond the breaker's own cap (5 minutes): a forced period is not a
    // backoff, it holds in every process.
    g.run(600 * SECOND);
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
}

#[test]
fn a_force_open_from_one_process_opens_the_whole_group_whatever_its_epoch() {
    let mut g = Group::new(4, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    let now = g.local(2);
    let p = &mut g.processes[2];
    let t = p.member.force_open(&mut p.breaker, now, Duration::from_secs(120));
    assert!(t.into_iter().any(|t| t.to == State::Open && t.reason == Reason::ForcedOpen));
    // Its store is away at first: the force-open waits for it.
    g.processes[2].cut_off = true;
    g.run(2 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed);
    assert_eq!(g.states()[2], State::Open);
    g.processes[2].cut_off = false;
    g.run(3 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { reason: Reason::ForcedOpen, .. }), "{:?}", g.phase());
    assert!(all(&g.states(), State::Open), "{:?}", g.states());
    // It ends by itself: with calls waiting, the group probes, as after
    // any open period.
    for i in 0..4 {
        assert!(!acquire(&mut g, i), "rejected while forced open");
    }
    g.run(121 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::HalfOpen { .. }), "{:?}", g.phase());
}

#[test]
fn a_share_whose_exchanges_stopped_lapses_and_the_limit_is_the_processs_own() {
    let mut g = Group::new(4, adaptive(), GroupConfig::default(), &[]);
    g.run(SECOND);
    g.burst(Outcome::Success);
    g.run(2 * SECOND);
    // Process 3's exchanges stop without failing (its event loop ended):
    // the others go on and take the group's limit between them.
    let i = g.limits().iter().position(|&l| l == 0).expect("a process with no share of 3 calls among 4");
    let mut stopped = g.processes.remove(i);
    g.run(40 * SECOND);
    let later = g.local(0);
    let mut admitted = 0;
    for _ in 0..3 {
        if stopped.breaker.try_acquire(later).decision.is_ok() {
            admitted += 1;
        }
    }
    assert!(admitted >= 1, "its share lapsed: at least its own minimum admits");
}

#[test]
fn a_force_close_or_reset_received_by_one_process_closes_the_whole_group() {
    for reason in [Reason::ForcedClose, Reason::Reset] {
        let mut g = Group::new(3, Config::default(), GroupConfig::default(), &[]);
        g.run(SECOND);
        for _ in 0..3 {
            g.call(1, Outcome::Failure);
            g.call(2, Outcome::Failure);
        }
        g.run(3 * SECOND);
        assert!(all(&g.states(), State::Open), "{:?}", g.states());
        let now = g.local(0);
        let p = &mut g.processes[0];
        let t = p.member.force_close(&mut p.breaker, now, reason);
        assert_eq!(t.last().map(|t| t.reason), Some(reason));
        assert_eq!(g.processes[0].breaker.state(now), State::Closed);
        g.run(2 * SECOND);
        assert_eq!(g.phase(), GroupPhase::Closed);
        assert_eq!(g.store.register().closed_by, Some(reason));
        assert!(all(&g.states(), State::Closed), "{reason:?}: {:?}", g.states());
        // The window went with the open: one more failure each trips nothing.
        g.call(1, Outcome::Failure);
        g.call(2, Outcome::Failure);
        g.run(3 * SECOND);
        assert_eq!(g.phase(), GroupPhase::Closed);
    }
}

#[test]
fn a_force_close_asked_while_the_store_is_away_is_sent_when_it_is_back_and_not_undone_meanwhile() {
    let mut g = Group::new(2, Config::default(), GroupConfig::default(), &[]);
    g.run(SECOND);
    let now = g.local(0);
    let p = &mut g.processes[0];
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(3_600));
    g.run(2 * SECOND);
    assert!(all(&g.states(), State::Open));
    g.processes[0].cut_off = true;
    let now = g.local(0);
    let p = &mut g.processes[0];
    let _ = p.member.force_close(&mut p.breaker, now, Reason::ForcedClose);
    g.run(3 * SECOND);
    assert_eq!(g.processes[0].breaker.state(g.local(0)), State::Closed, "closed here meanwhile");
    assert_eq!(g.processes[1].breaker.state(g.local(1)), State::Open, "the others wait for the store");
    g.processes[0].cut_off = false;
    g.run(40 * SECOND);
    assert_eq!(g.phase(), GroupPhase::Closed);
    assert!(all(&g.states(), State::Closed), "{:?}", g.states());
    // A force-open asked after supersedes it.
    let now = g.local(1);
    let p = &mut g.processes[1];
    let _ = p.member.force_close(&mut p.breaker, now, Reason::ForcedClose);
    let _ = p.member.force_open(&mut p.breaker, now, Duration::from_secs(60));
    g.run(2 * SECOND);
    assert!(matches!(g.phase(), GroupPhase::Open { reason: Reason::ForcedOpen, .. }), "{:?}", g.phase());
}
