//! Registries in a group, each a simulated process with its own registry
//! and members, around one [`MemoryStore`] per name.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use super::*;
use crate::Config;
use crate::permit::Outcome;
use crate::registry::Registry;
use crate::state::State;
use crate::time::{Duration, Instant};

struct Process {
    registry: Registry,
    members: KeyedMembers,
    /// Store calls made (each carries every name due).
    calls: usize,
    cut_off: bool,
}

struct Fleet {
    stores: BTreeMap<String, MemoryStore>,
    processes: Vec<Process>,
    now_us: u64,
}

const SECOND: u64 = 1_000_000;

impl Fleet {
    fn new(n: usize) -> Fleet {
        let processes = (0..n)
            .map(|i| {
                let registry = Registry::new(Config::default(), 1_000).unwrap();
                let members = KeyedMembers::new(100 + i as u64, GroupConfig::default(), &registry).unwrap();
                Process { registry, members, calls: 0, cut_off: false }
            })
            .collect();
        Fleet { stores: BTreeMap::new(), processes, now_us: 600 * SECOND }
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.now_us)
    }

    fn exchange_due(&mut self) {
        let now = self.now();
        for p in &mut self.processes {
            let Some(requests) = p.members.requests(&mut p.registry, now) else { continue };
            p.calls += 1;
            if p.cut_off {
                p.members.failed(&mut p.registry, now);
                continue;
            }
            let answers: Vec<Answer> = p
                .members
                .names_out()
                .iter()
                .zip(&requests)
                .map(|(name, r)| self.stores.entry(String::from(&**name)).or_default().exchange(r, self.now_us))
                .collect();
            assert!(p.members.apply(&mut p.registry, &answers, now, |_, _| ()));
        }
    }

    fn run(&mut self, us: u64) {
        let end = self.now_us + us;
        while self.now_us < end {
            self.now_us = (self.now_us + 10_000).min(end);
            self.exchange_due();
        }
    }

    fn call(&mut self, i: usize, name: &str, outcome: Outcome) -> bool {
        let now = self.now();
        let r = &mut self.processes[i].registry;
        match r.try_acquire(name, now).unwrap().decision {
            Ok(permit) => {
                r.record(name, permit, outcome, now);
                true
            }
            Err(_) => false,
        }
    }

    fn state(&self, i: usize, name: &str) -> State {
        self.processes[i].registry.state(name, self.now())
    }
}

#[test]
fn each_name_is_a_group_of_its_own_and_one_call_carries_every_name() {
    let mut f = Fleet::new(5);
    for i in 0..5 {
        for name in ["a", "b", "c"] {
            assert!(f.call(i, name, Outcome::Success));
        }
    }
    f.run(2 * SECOND);
    let before: Vec<usize> = f.processes.iter().map(|p| p.calls).collect();
    // Failures of "a" spread over the processes: none trips alone.
    for i in 0..5 {
        assert!(f.call(i, "a", Outcome::Failure));
    }
    assert!((0..5).all(|i| f.state(i, "a") == State::Closed));
    f.run(3 * SECOND);
    assert!((0..5).all(|i| f.state(i, "a") == State::Open), "every process follows a's open");
    assert!((0..5).all(|i| f.state(i, "b") == State::Closed && f.state(i, "c") == State::Closed));
    assert!((0..5).all(|i| f.processes[i].members.len() == 3));
    // Three seconds: three regular calls each, plus those the open asked for sooner.
    for (p, before) in f.processes.iter().zip(before) {
        let calls = p.calls - before;
        assert!((3..=5).contains(&calls), "{calls} calls in 3 s for 3 names");
    }
}

#[test]
fn a_registry_settles_at_one_store_call_per_flush_interval() {
    let mut f = Fleet::new(2);
    // Names made at different times (each joins at the next exchange).
    for (k, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        f.call(0, name, Outcome::Success);
        f.call(1, name, Outcome::Success);
        f.run(SECOND / 8 + k as u64 * 7_000);
    }
    f.run(2 * SECOND);
    let before = f.processes[0].calls;
    for _ in 0..20 {
        for name in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            f.call(0, name, Outcome::Success);
        }
        f.run(SECOND / 2);
    }
    assert_eq!(f.processes[0].calls - before, 10, "10 s of traffic on 8 names: one call per second");
    assert_eq!(f.processes[0].members.len(), 8);
}

#[test]
fn a_failed_call_leaves_every_name_alone_once_and_recovery_is_said_once() {
    let mut f = Fleet::new(1);
    f.call(0, "a", Outcome::Success);
    f.call(0, "b", Outcome::Success);
    f.run(2 * SECOND);
    let p = &mut f.processes[0];
    assert_eq!(p.members.poll_event(), None);
    p.cut_off = true;
    f.run(2 * SECOND);
    let p = &mut f.processes[0];
    assert!(p.members.degraded());
    assert_eq!(p.members.poll_event(), Some(GroupEvent::Degraded));
    assert_eq!(p.members.poll_event(), None);
    assert!(p.members.member("a").unwrap().degraded() && p.members.member("b").unwrap().degraded());
    p.cut_off = false;
    f.run(40 * SECOND);
    let p = &mut f.processes[0];
    assert_eq!(p.members.poll_event(), Some(GroupEvent::Recovered));
    assert!(!p.members.member("a").unwrap().degraded());
}

#[test]
fn answers_that_do_not_match_the_requests_fail_the_exchange() {
    let mut f = Fleet::new(1);
    f.call(0, "a", Outcome::Success);
    f.call(0, "b", Outcome::Success);
    let now = f.now();
    let p = &mut f.processes[0];
    let requests = p.members.requests(&mut p.registry, now).unwrap();
    assert_eq!(requests.len(), 2);
    let one = MemoryStore::new().exchange(&requests[0], 1);
    assert!(!p.members.apply(&mut p.registry, &[one], now, |_, _| ()));
    assert!(p.members.degraded());
    // A late answer to nothing out changes nothing either.
    assert!(!p.members.apply(&mut p.registry, &[], now, |_, _| ()));
}

#[test]
fn an_evicted_name_leaves() {
    let mut f = Fleet::new(1);
    f.processes[0].registry = Registry::new(Config::default(), 2).unwrap();
    f.call(0, "a", Outcome::Success);
    f.call(0, "b", Outcome::Success);
    f.run(2 * SECOND);
    assert_eq!(f.processes[0].members.len(), 2);
    f.call(0, "c", Outcome::Success); // evicts a or b (idle)
    f.run(2 * SECOND);
    let p = &f.processes[0];
    assert_eq!(p.members.len(), 2);
    assert!(p.members.member("c").is_some());
}

/// A registry whose breakers trip on five consecutive failures only.
fn consecutive() -> Config {
    Config { failure_threshold: None, consecutive_failures: Some(5), ..Config::default() }
}

/// Ten successes of "a", its breaker replaced by `replace`, then twelve
/// calls that alternate success and failure: no two failures in a row, so
/// neither the breaker nor its group opens.
fn counts_on_top_after(capacity: usize, replace: impl FnOnce(&mut Fleet)) {
    let mut f = Fleet::new(1);
    f.processes[0].registry = Registry::new(consecutive(), capacity).unwrap();
    f.processes[0].members = KeyedMembers::new(100, GroupConfig::default(), &f.processes[0].registry).unwrap();
    for _ in 0..10 {
        f.call(0, "a", Outcome::Success);
    }
    f.run(2 * SECOND);
    replace(&mut f);
    for i in 0..12 {
        let outcome = if i % 2 == 0 { Outcome::Success } else { Outcome::Failure };
        f.call(0, "a", outcome);
    }
    f.run(3 * SECOND);
    assert_eq!(f.state(0, "a"), State::Closed);
    assert_eq!(f.stores["a"].register().epoch, 0, "the group never opened");
}

#[test]
fn a_replaced_breaker_counts_on_top_of_what_its_name_sent_never_as_a_run_of_failures() {
    // Review: a configured, restored or evicted-and-made-again breaker
    // starts its totals again; sent as they were, ten successes then six
    // failures among twelve calls read as two calls and six failures: a
    // run, and the group opened though no two failures were in a row.
    counts_on_top_after(10, |f| {
        let now = f.now();
        let _ = f.processes[0].registry.configure("a", consecutive(), now).unwrap();
    });
    counts_on_top_after(1, |f| {
        f.call(0, "b", Outcome::Success); // evicts a
        f.run(SECOND);
    });
}

#[cfg(feature = "snapshot")]
#[test]
fn a_restored_breaker_counts_on_top_of_what_its_name_sent() {
    counts_on_top_after(10, |f| {
        let now = f.now();
        let r = &mut f.processes[0].registry;
        let snapshot = serde_json::to_string(&r.snapshot(now)).unwrap();
        let _ = r.restore_json(&snapshot, now, crate::Elapsed::Ignored).unwrap();
    });
}

#[test]
fn a_clock_stepped_back_keeps_the_rounds_going() {
    // Review: the registry's rounds were on the raw clock: five minutes
    // back, no exchange for five minutes.
    let mut f = Fleet::new(1);
    f.call(0, "a", Outcome::Success);
    f.run(2 * SECOND);
    let p = &mut f.processes[0];
    let before = p.calls;
    let mut now = f.now_us - 300 * SECOND;
    for _ in 0..500 {
        now += 10_000;
        let at = Instant::from_micros(now);
        let Some(requests) = p.members.requests(&mut p.registry, at) else { continue };
        p.calls += 1;
        let store = f.stores.get_mut("a").unwrap();
        let answers: Vec<Answer> = requests.iter().map(|r| store.exchange(r, f.now_us + now % SECOND)).collect();
        assert!(p.members.apply(&mut p.registry, &answers, at, |_, _| ()));
    }
    // Five seconds: a round a second.
    assert!((4..=6).contains(&(p.calls - before)), "{} calls", p.calls - before);
}

#[test]
fn a_failure_with_nothing_out_backs_off() {
    // Review: a clock that throws failed every exchange before it was
    // made; nothing backed off, and the link spun on a 1 ms timer.
    let mut f = Fleet::new(1);
    f.call(0, "a", Outcome::Success);
    let now = f.now();
    let p = &mut f.processes[0];
    p.members.failed(&mut p.registry, now);
    assert!(p.members.degraded());
    let next = p.members.next_exchange(&p.registry, now);
    assert!(next >= now + Duration::from_millis(800), "retried after the backoff, not at once: {next:?}");
    assert!(p.members.requests(&mut p.registry, now).is_none());
}

#[test]
fn a_force_open_of_one_name_opens_that_name_everywhere() {
    let mut f = Fleet::new(3);
    for i in 0..3 {
        f.call(i, "a", Outcome::Success);
        f.call(i, "b", Outcome::Success);
    }
    f.run(2 * SECOND);
    let now = f.now();
    let p = &mut f.processes[0];
    assert!(p.members.force_open(&mut p.registry, "nobody", now, Duration::from_secs(60)).is_none());
    assert!(p.members.force_open(&mut p.registry, "a", now, Duration::from_secs(60)).is_some());
    assert_eq!(f.state(0, "a"), State::Open);
    f.run(2 * SECOND);
    assert!((0..3).all(|i| f.state(i, "a") == State::Open && f.state(i, "b") == State::Closed));
}

#[test]
fn a_name_whose_configuration_cannot_be_in_the_group_is_refused() {
    let group = GroupConfig { lease: Some(Duration::from_secs(60)), ..GroupConfig::default() };
    let slow = Config { probe_timeout: Duration::from_secs(90), ..Config::default() };
    let mut registry: Registry = Registry::new(Config::default(), 10).unwrap();
    let members = KeyedMembers::new(1, group, &registry).unwrap();
    assert_eq!(members.check(&slow).map_err(|e| e.field), Err(GroupField::Lease));
    registry.configure("slow", slow, Instant::ZERO).unwrap();
    assert_eq!(KeyedMembers::new(1, group, &registry).map(|_| ()).map_err(|e| e.field), Err(GroupField::Lease));
}

#[test]
fn a_registry_of_many_names_sends_them_a_hundred_per_call_one_round_per_flush_interval() {
    let mut f = Fleet::new(2);
    let names: Vec<String> = (0..250).map(|i| alloc::format!("n{i}")).collect();
    for name in &names {
        f.call(0, name, Outcome::Success);
        f.call(1, name, Outcome::Success);
    }
    f.run(3 * SECOND);
    assert_eq!(f.processes[0].members.len(), 250);
    let before = f.processes[0].calls;
    for _ in 0..10 {
        for name in &names {
            f.call(0, name, Outcome::Success);
        }
        f.run(SECOND);
    }
    // Ten rounds of three calls (100 + 100 + 50 names), one after the other.
    assert_eq!(f.processes[0].calls - before, 30);
    // Every name heard from the group this round: its latest answer is recent.
    let now = f.now();
    let p = &mut f.processes[0];
    assert!(p.members.next_exchange(&p.registry, now) > now);
}

#[test]
fn a_round_longer_than_a_flush_interval_starves_no_name() {
    // 1,000 names, each store call taking 30 ms: a round of ten calls takes
    // 300 ms, three flush intervals.
    let group = GroupConfig { flush_interval: Duration::from_millis(100), ..GroupConfig::default() };
    let mut registry: Registry = Registry::new(Config::default(), 1_000).unwrap();
    let mut members = KeyedMembers::new(1, group, &registry).unwrap();
    let mut store: BTreeMap<String, MemoryStore> = BTreeMap::new();
    let mut answered: BTreeMap<String, u32> = BTreeMap::new();
    let mut now_us = 600 * SECOND;
    for i in 0..1_000 {
        let name = alloc::format!("n{i}");
        let admission = registry.try_acquire(&name, Instant::from_micros(now_us)).unwrap();
        registry.record(&name, admission.decision.unwrap(), Outcome::Success, Instant::from_micros(now_us));
    }
    while now_us < 605 * SECOND {
        now_us += 1_000;
        let Some(requests) = members.requests(&mut registry, Instant::from_micros(now_us)) else { continue };
        now_us += 30_000;
        let names: Vec<String> = members.names_out().iter().map(|n| String::from(&**n)).collect();
        let answers: Vec<Answer> =
            names.iter().zip(&requests).map(|(n, r)| store.entry(n.clone()).or_default().exchange(r, now_us)).collect();
        assert!(members.apply(&mut registry, &answers, Instant::from_micros(now_us), |_, _| ()));
        for n in names {
            *answered.entry(n).or_default() += 1;
        }
    }
    assert_eq!(answered.len(), 1_000, "every name answered");
    let fewest = answered.values().min().copied().unwrap();
    assert!(fewest >= 14, "each name in every round: {fewest}");
}

#[test]
fn names_left_alone_keep_the_link_degraded_until_the_store_answers_them() {
    // Review: one failed call of 100 names, then a call of others that
    // succeeded, said "recovered" while the first 100 decided alone.
    let mut registry: Registry = Registry::new(Config::default(), 1_000).unwrap();
    let mut members = KeyedMembers::new(1, GroupConfig::default(), &registry).unwrap();
    let mut stores: BTreeMap<String, MemoryStore> = BTreeMap::new();
    let mut now_us = 600 * SECOND;
    for i in 0..150 {
        let name = alloc::format!("n{i}");
        let admission = registry.try_acquire(&name, Instant::from_micros(now_us)).unwrap();
        registry.record(&name, admission.decision.unwrap(), Outcome::Success, Instant::from_micros(now_us));
    }
    let mut events = Vec::new();
    let mut answered_calls = 0;
    let mut first = true;
    while now_us < 660 * SECOND {
        now_us += 10_000;
        let now = Instant::from_micros(now_us);
        if let Some(requests) = members.requests(&mut registry, now) {
            // The first call of the first full round fails; every other is answered.
            if first && requests.len() == NAMES_PER_CALL {
                first = false;
                members.failed(&mut registry, now);
            } else {
                let names: Vec<String> = members.names_out().iter().map(|n| String::from(&**n)).collect();
                let answers: Vec<Answer> = names
                    .iter()
                    .zip(&requests)
                    .map(|(n, r)| stores.entry(n.clone()).or_default().exchange(r, now_us))
                    .collect();
                assert!(members.apply(&mut registry, &answers, now, |_, _| ()));
                answered_calls += 1;
            }
        }
        events.extend(members.poll_event());
        if answered_calls == 1 && !first {
            assert!(members.degraded(), "the failed call's names still decide alone");
        }
    }
    assert!(!first && answered_calls > 2);
    assert_eq!(events, [GroupEvent::Degraded, GroupEvent::Recovered], "said once each");
    assert!(!members.degraded());
    assert_eq!(members.answered(), 150);
}
