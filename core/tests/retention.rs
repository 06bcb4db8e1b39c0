//! Retention (seed 001): what a dispatcher holds while its breaker refuses,
//! and how it releases it — the story, each rule, and random sequences
//! against the invariants (every message in exactly one place, exactly once,
//! in order with one send at a time, never past the limit).

use std::collections::HashMap;

use halfopen::retention::{
    DeadReason, Event, Overflow, Overflowed, Probe, Rate, Reported, RetentionConfig, RetentionError, RetentionField,
    RetentionQueue, RetentionSnapshot, Submitted,
};
use halfopen::{ConcurrencyLimit, Config, Duration, Elapsed, Instant, Metrics, Outcome, Problem, SnapshotError, State};

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// Seed 001's breaker (5 failures in a row open it for 10 s, one probe)
/// with a concurrency limit of `limit`.
fn webhook(limit: u32) -> halfopen::Breaker<Config, Metrics> {
    let config = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(limit)), ..Config::partner_webhook() };
    halfopen::Breaker::with_meter(config, Metrics::default()).unwrap()
}

fn dispatcher(limit: u32, config: RetentionConfig) -> RetentionQueue<u32> {
    RetentionQueue::new(webhook(limit), config).unwrap()
}

/// Hands out everything `next` gives at `now`.
fn drain(d: &mut RetentionQueue<u32>, now: Instant) -> Vec<u64> {
    core::iter::from_fn(|| d.next(now)).collect()
}

fn events(d: &mut RetentionQueue<u32>) -> Vec<Event<u32>> {
    core::iter::from_fn(|| d.poll_event()).collect()
}

#[test]
fn seed_001_a_partner_outage_loses_nothing_and_delivers_in_order() {
    let mut d = dispatcher(1, RetentionConfig::default());
    let mut delivered = Vec::new();
    let mut partner_calls = Vec::new();
    let down = |t: u64| (1_000..40_000).contains(&t);
    // One event every 100 ms for a minute; the partner is down from 1 s to 40 s.
    for i in 0..600u32 {
        let t = u64::from(i) * 100;
        let now = ms(t);
        let mut ready: Vec<u64> = match d.submit(i, 100, now).unwrap() {
            Submitted::Send(seq) => vec![seq],
            Submitted::Retained(_) => vec![],
        };
        ready.extend(drain(&mut d, now));
        while let Some(seq) = ready.pop() {
            partner_calls.push(t);
            let outcome = if down(t) { Outcome::Failure } else { Outcome::Success };
            if let Some(Reported::Delivered(message)) = d.report(seq, outcome, ms(t + 5)) {
                delivered.push(message);
            }
            ready.extend(drain(&mut d, ms(t + 5)));
        }
    }
    // After the last event, the backlog drains with no new traffic.
    let mut t = 60_000;
    while d.retained() > 0 {
        t = d.poll_timeout().map_or(t + 10, |at| at.as_millis().max(t));
        for seq in drain(&mut d, ms(t)) {
            partner_calls.push(t);
            if let Some(Reported::Delivered(m)) = d.report(seq, Outcome::Success, ms(t + 5)) {
                delivered.push(m);
            }
        }
        t += 5;
    }
    assert_eq!(delivered, (0..600).collect::<Vec<_>>(), "every event, once, in order");
    // While down: 5 failures opened it, then one probe per open period (10 s).
    let during = partner_calls.iter().filter(|&&t| down(t)).count();
    assert!(during <= 5 + 4, "the partner saw {during} calls while down");
    assert_eq!(d.breaker().state(ms(t)), State::Closed);
    let c = d.counters();
    assert_eq!((c.submitted, c.delivered, c.dead, c.dropped, c.refused), (600, 600, 0, 0, 0));
}

#[test]
fn a_new_message_waits_behind_retained_ones_even_when_the_breaker_admits() {
    let mut d = dispatcher(2, RetentionConfig::default());
    let Submitted::Send(first) = d.submit(1, 1, ms(0)).unwrap() else { panic!() };
    let Submitted::Send(second) = d.submit(2, 1, ms(0)).unwrap() else { panic!() };
    assert_eq!(d.submit(3, 1, ms(0)), Ok(Submitted::Retained(2)), "the limit is full");
    assert_eq!(d.report(first, Outcome::Success, ms(1)), Some(Reported::Delivered(1)));
    // A slot is free, but message 3 is retained: 4 goes behind it.
    assert_eq!(d.submit(4, 1, ms(2)), Ok(Submitted::Retained(3)));
    assert_eq!(drain(&mut d, ms(2)), vec![2]);
    d.report(second, Outcome::Success, ms(3));
    assert_eq!(drain(&mut d, ms(3)), vec![3]);
}

#[test]
fn a_failed_message_goes_back_to_its_place() {
    let mut d = dispatcher(1, RetentionConfig::default());
    let Submitted::Send(first) = d.submit(10, 1, ms(0)).unwrap() else { panic!() };
    d.submit(11, 1, ms(0)).unwrap();
    d.submit(12, 1, ms(0)).unwrap();
    assert_eq!(d.report(first, Outcome::Failure, ms(1)), Some(Reported::Retained));
    let again = drain(&mut d, ms(2));
    assert_eq!(again, vec![first], "the failed message is sent again before the later ones");
    assert_eq!(d.message(first), Some(&10));
    assert_eq!(d.report(first, Outcome::Success, ms(3)), Some(Reported::Delivered(10)));
    assert_eq!(d.report(first, Outcome::Success, ms(3)), None, "reported once");
}

/// Five messages sent side by side (a limit of 5) that all fail: the
/// breaker opens (5 in a row) at `t = 4 ms`, with the five retained.
fn tripped(config: RetentionConfig) -> RetentionQueue<u32> {
    let mut d = dispatcher(5, config);
    let sent: Vec<u64> = (0..5u32)
        .map(|i| match d.submit(i, 1, ms(u64::from(i))) {
            Ok(Submitted::Send(seq)) => seq,
            other => panic!("message {i}: {other:?}"),
        })
        .collect();
    for (i, seq) in sent.into_iter().enumerate() {
        assert_eq!(d.report(seq, Outcome::Failure, ms(i as u64)), Some(Reported::Retained));
    }
    assert_eq!(d.breaker().state(ms(4)), State::Open);
    assert_eq!(d.retained(), 5, "the five failed messages are held");
    d
}

#[test]
fn in_half_open_the_oldest_retained_message_probes_without_new_traffic() {
    let mut d = tripped(RetentionConfig::default());
    assert_eq!(d.poll_timeout(), Some(ms(4 + 10_000)), "when the open time ends");
    assert_eq!(drain(&mut d, ms(9_000)), Vec::<u64>::new(), "nothing while open");
    assert_eq!(d.submit(5, 1, ms(9_001)), Ok(Submitted::Retained(5)));
    assert_eq!(drain(&mut d, ms(10_004)), vec![0], "the oldest probes (one probe), no new message needed");
    assert_eq!(d.report(0, Outcome::Success, ms(10_005)), Some(Reported::Delivered(0)));
    assert!(events(&mut d).iter().any(|e| matches!(e, Event::Transition(t) if t.to == State::Closed)));
    assert_eq!(drain(&mut d, ms(10_006)), vec![1, 2, 3, 4, 5], "then the rest, in order, within the limit");
}

#[test]
fn seed_001s_rule_a_new_message_probes_and_the_retained_wait() {
    let mut d = tripped(RetentionConfig { probe: Probe::NewMessage, ..RetentionConfig::default() });
    assert_eq!(d.breaker().state(ms(10_004)), State::HalfOpen);
    assert_eq!(drain(&mut d, ms(10_004)), Vec::<u64>::new(), "retained messages do not probe");
    let Ok(Submitted::Send(probe)) = d.submit(99, 1, ms(10_005)) else { panic!("the new message probes") };
    assert_eq!(d.message(probe), Some(&99));
    assert_eq!(d.report(probe, Outcome::Success, ms(10_006)), Some(Reported::Delivered(99)));
    assert_eq!(drain(&mut d, ms(10_007)), vec![0, 1, 2, 3, 4], "closed: the retained go, oldest first");
}

#[test]
fn under_seed_001s_rule_a_full_queue_lets_the_oldest_probe() {
    let config = RetentionConfig { probe: Probe::NewMessage, max_messages: Some(5), ..RetentionConfig::default() };
    let mut d = tripped(config);
    assert_eq!(drain(&mut d, ms(10_004)), Vec::<u64>::new());
    assert_eq!(d.submit(99, 1, ms(10_005)), Err(Overflowed { message: 99 }), "full");
    assert_eq!(drain(&mut d, ms(10_005)), vec![0], "the refused message's turn goes to the oldest");
}

#[test]
fn a_bound_refuses_the_new_message_or_drops_the_oldest() {
    let reject = RetentionConfig { max_messages: Some(2), ..RetentionConfig::default() };
    let mut d = dispatcher(1, reject);
    d.submit(1, 1, ms(0)).unwrap();
    d.submit(2, 1, ms(0)).unwrap();
    assert_eq!(d.submit(3, 1, ms(0)), Err(Overflowed { message: 3 }));
    assert_eq!(d.counters().refused, 1);

    let drop = RetentionConfig { max_bytes: Some(10), overflow: Overflow::DropOldest, ..RetentionConfig::default() };
    let mut d = dispatcher(1, drop);
    let Submitted::Send(_) = d.submit(1, 4, ms(0)).unwrap() else { panic!() };
    d.submit(2, 4, ms(0)).unwrap();
    d.submit(3, 2, ms(0)).unwrap();
    assert_eq!(d.submit(4, 3, ms(0)), Ok(Submitted::Retained(3)));
    assert_eq!(
        events(&mut d),
        vec![Event::Dropped { seq: 1, message: 2 }],
        "the oldest retained, not the one in flight"
    );
    assert_eq!(d.bytes(), 9);
    assert_eq!(d.submit(5, 11, ms(0)), Err(Overflowed { message: 5 }), "larger than the bound itself");
    assert_eq!(d.submit(6, 7, ms(0)), Err(Overflowed { message: 6 }), "dropping every retained one is not enough");
    assert_eq!(d.counters().dropped, 1, "so none is dropped for it");
    assert_eq!(d.retained(), 2);
}

#[test]
fn dead_letters_after_max_attempts_max_age_or_a_refusal() {
    let config =
        RetentionConfig { max_attempts: Some(2), max_age: Some(Duration::from_secs(60)), ..RetentionConfig::default() };
    let mut d: RetentionQueue<u32> = RetentionQueue::new(
        halfopen::Breaker::with_meter(
            Config {
                concurrency_limit: Some(ConcurrencyLimit::Fixed(5)),
                consecutive_failures: None,
                failure_threshold: Some(100),
                ..Config::partner_webhook()
            },
            Metrics::default(),
        )
        .unwrap(),
        config,
    )
    .unwrap();
    let Submitted::Send(a) = d.submit(1, 1, ms(0)).unwrap() else { panic!() };
    d.report(a, Outcome::Failure, ms(1));
    assert_eq!(drain(&mut d, ms(2)), vec![a]);
    assert_eq!(d.report(a, Outcome::Failure, ms(3)), Some(Reported::Dead));
    let Submitted::Send(b) = d.submit(2, 1, ms(4)).unwrap() else { panic!() };
    assert_eq!(d.report(b, Outcome::Ignored, ms(5)), Some(Reported::Dead));
    let Submitted::Send(c) = d.submit(3, 1, ms(6)).unwrap() else { panic!() };
    // Held open by hand: the cancelled message waits, and ages out.
    let _ = d.breaker_mut().force_open(ms(7), None);
    d.report(c, Outcome::Cancelled, ms(7));
    assert_eq!(d.poll_timeout(), Some(ms(60_006)), "when the retained one ages out");
    d.handle_timeout(ms(60_006));
    assert_eq!(
        events(&mut d),
        vec![
            Event::Dead { seq: a, message: 1, reason: DeadReason::Attempts, attempts: 2 },
            Event::Dead { seq: b, message: 2, reason: DeadReason::Refused, attempts: 1 },
            Event::Dead { seq: c, message: 3, reason: DeadReason::Age, attempts: 0 },
        ]
    );
    let counters = d.counters();
    assert_eq!((counters.dead, counters.failed, d.retained(), d.bytes()), (3, 2, 0, 0));
}

#[test]
fn a_rate_paces_the_release() {
    let config =
        RetentionConfig { release_rate: Some(Rate { per_second: 10, burst: 2 }), ..RetentionConfig::default() };
    let mut d = dispatcher(100, config);
    let sent: Vec<bool> = (0..5).map(|i| matches!(d.submit(i, 1, ms(0)), Ok(Submitted::Send(_)))).collect();
    assert_eq!(sent, [true, true, false, false, false], "a burst of two");
    assert_eq!(d.poll_timeout(), Some(ms(100)), "a token every 100 ms");
    assert_eq!(drain(&mut d, ms(99)), Vec::<u64>::new());
    assert_eq!(drain(&mut d, ms(100)), vec![2]);
    assert_eq!(drain(&mut d, ms(350)), vec![3, 4]);
}

#[test]
fn a_dispatcher_needs_something_to_pace_its_release_and_sane_bounds() {
    let unlimited = halfopen::Breaker::with_meter(Config::partner_webhook(), Metrics::default()).unwrap();
    let err = RetentionQueue::<u32>::new(unlimited, RetentionConfig::default()).err();
    assert_eq!(err, Some(RetentionError { field: RetentionField::ReleaseRate, problem: Problem::Missing }));
    let paced = RetentionConfig { release_rate: Some(Rate { per_second: 5, burst: 1 }), ..RetentionConfig::default() };
    let unlimited = halfopen::Breaker::with_meter(Config::partner_webhook(), Metrics::default()).unwrap();
    assert!(RetentionQueue::<u32>::new(unlimited, paced).is_ok());
    for (config, field) in [
        (RetentionConfig { max_messages: Some(0), ..RetentionConfig::default() }, RetentionField::MaxMessages),
        (RetentionConfig { max_bytes: Some(0), ..RetentionConfig::default() }, RetentionField::MaxBytes),
        (RetentionConfig { max_attempts: Some(0), ..RetentionConfig::default() }, RetentionField::MaxAttempts),
        (RetentionConfig { max_age: Some(Duration::ZERO), ..RetentionConfig::default() }, RetentionField::MaxAge),
        (
            RetentionConfig { release_rate: Some(Rate { per_second: 0, burst: 1 }), ..RetentionConfig::default() },
            RetentionField::ReleaseRate,
        ),
    ] {
        assert_eq!(config.validate(true), Err(RetentionError { field, problem: Problem::Zero }));
    }
}

/// A xorshift generator: the same sequences on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The caller's timeout: a send not answered in 10 s is a failure (seed
/// 001's), well within the breaker's 60 s probe timeout, as documented.
const TIMEOUT_MS: u64 = 10_000;

/// One random run: a dispatcher, the sends in flight (and when each was
/// handed out), where every message went.
struct Run {
    d: RetentionQueue<u32>,
    limit: u32,
    config: RetentionConfig,
    /// Every message the dispatcher holds, by sequence number (what a
    /// binding keeps, to hand back on restore).
    held: HashMap<u64, u32>,
    restores: u32,
    rng: Random,
    failing: u64,
    in_flight: Vec<(u64, u64)>,
    submitted: u32,
    delivered: Vec<u32>,
    gone: Vec<u32>,
    refused: Vec<u32>,
}

impl Run {
    fn report(&mut self, seq: u64, outcome: Outcome, now: Instant) {
        if let Some(Reported::Delivered(m)) = self.d.report(seq, outcome, now) {
            assert_eq!(self.held.remove(&seq), Some(m));
            self.delivered.push(m);
        }
    }

    /// A restart: the state through a snapshot (JSON or compact, at
    /// random), restored on a clock that starts again at `now`; the sends
    /// in flight are forgotten (their outcome is lost with the process), so
    /// the restored dispatcher sends them again.
    fn restart(&mut self, now: Instant) {
        let saved = self.d.snapshot(now);
        let decoded = if self.rng.below(2) == 0 {
            RetentionSnapshot::from_json(&saved.to_json())
        } else {
            RetentionSnapshot::from_bytes(&saved.to_bytes())
        };
        let config = *self.d.breaker().config();
        let held = &self.held;
        self.d = RetentionQueue::restore(config, self.config, &decoded.unwrap(), now, Elapsed::Ignored, |seq| {
            held.get(&seq).copied()
        })
        .expect("a dispatcher restores its own snapshot");
        self.in_flight.clear();
        self.restores += 1;
    }

    /// One step at `t`: maybe a submission, what `next` hands out, maybe a
    /// report; then the invariants.
    fn step(&mut self, t: u64, healthy: bool) {
        let now = ms(t);
        // Sends past the caller's timeout fail, before anything else.
        while let Some(i) = self.in_flight.iter().position(|&(_, sent)| t - sent >= TIMEOUT_MS) {
            let (seq, _) = self.in_flight.swap_remove(i);
            self.report(seq, Outcome::Failure, now);
        }
        // Seed 001's rule needs new traffic to probe: it comes even when healthy.
        let waits = self.d.config().probe == Probe::NewMessage && self.d.breaker().state(now) == State::HalfOpen;
        if (!healthy && self.rng.below(3) == 0) || (healthy && waits) {
            let message = self.submitted;
            self.submitted += 1;
            match self.d.submit(message, 1 + self.rng.below(20), now) {
                Ok(Submitted::Send(seq)) => {
                    self.held.insert(seq, message);
                    self.in_flight.push((seq, t));
                }
                Ok(Submitted::Retained(seq)) => {
                    self.held.insert(seq, message);
                }
                Err(Overflowed { message }) => self.refused.push(message),
            }
        }
        self.in_flight.extend(drain(&mut self.d, now).into_iter().map(|seq| (seq, t)));
        // Once `next` hands out nothing, the time to call it again is to come.
        let again = self.d.poll_timeout();
        assert!(again.is_none_or(|at| at > now), "poll_timeout {again:?} at {now:?}, after next");
        if !self.in_flight.is_empty() && self.rng.below(2) == 0 {
            let (seq, _) = self.in_flight.swap_remove(self.rng.below(self.in_flight.len() as u64) as usize);
            let outcome = match self.rng.below(100) {
                _ if healthy => Outcome::Success,
                r if r < self.failing => Outcome::Failure,
                r if r < self.failing + 3 => Outcome::Ignored,
                r if r < self.failing + 6 => Outcome::Cancelled,
                _ => Outcome::Success,
            };
            self.report(seq, outcome, now);
        }
        while let Some(e) = self.d.poll_event() {
            if let Event::Dead { seq, message, .. } | Event::Dropped { seq, message } = e {
                assert_eq!(self.held.remove(&seq), Some(message));
                self.gone.push(message);
            }
        }
        if self.rng.below(40) == 0 {
            self.restart(now);
        }
        let c = self.d.counters();
        let placed = c.refused + c.delivered + c.dead + c.dropped + (self.d.retained() + self.d.in_flight()) as u64;
        assert_eq!(c.submitted, placed, "every message in one place at {t}: {c:?}");
        assert_eq!(self.d.in_flight(), self.in_flight.len());
        assert!(self.d.in_flight() <= self.limit as usize, "past the limit");
    }
}

/// Random sequences: submissions, sends that succeed or fail at random,
/// bounds, dead letters, drops, a rate. After each step every message is in
/// exactly one place; in the end, with the upstream healthy, the backlog
/// drains, every message is delivered or given up exactly once, and with one
/// send at a time and the oldest probing, delivery is in submission order.
#[test]
fn random_sequences_keep_every_message_exactly_once() {
    let sequences: u64 = std::env::var("HALFOPEN_RETENTION_SEQUENCES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let mut rng = Random(0x2545_f491_4f6c_dd1d);
    let mut restores = 0;
    for run in 0..sequences {
        let limit = 1 + rng.below(4) as u32;
        let config = RetentionConfig {
            max_messages: (rng.below(3) == 0).then(|| 5 + rng.below(30) as u32),
            max_bytes: (rng.below(4) == 0).then(|| 50 + rng.below(200)),
            overflow: if rng.below(2) == 0 { Overflow::Reject } else { Overflow::DropOldest },
            probe: if rng.below(4) == 0 { Probe::NewMessage } else { Probe::Oldest },
            max_attempts: (rng.below(3) == 0).then(|| 1 + rng.below(5) as u32),
            max_age: (rng.below(4) == 0).then(|| Duration::from_millis(5_000 + rng.below(60_000))),
            release_rate: (rng.below(3) == 0)
                .then(|| Rate { per_second: 1 + rng.below(50) as u32, burst: 1 + rng.below(5) as u32 }),
        };
        let failing = rng.below(100);
        // Probes up to 3, and sometimes a probe timeout shorter than the
        // sends' own (the breaker then gives probes up while they are out).
        let breaker = Config {
            concurrency_limit: Some(ConcurrencyLimit::Fixed(limit)),
            half_open_max_attempts: 1 + rng.below(3) as u16,
            probe_timeout: Duration::from_millis(if rng.below(3) == 0 { 4_000 } else { 60_000 }),
            ..Config::partner_webhook()
        };
        let mut r = Run {
            d: RetentionQueue::new(halfopen::Breaker::with_meter(breaker, Metrics::default()).unwrap(), config)
                .unwrap(),
            limit,
            config,
            held: HashMap::new(),
            restores: 0,
            rng: Random(rng.below(u64::MAX) | 1),
            failing,
            in_flight: Vec::new(),
            submitted: 0,
            delivered: Vec::new(),
            gone: Vec::new(),
            refused: Vec::new(),
        };
        let mut t = 0u64;
        for _ in 0..400 {
            t += r.rng.below(500);
            r.step(t, false);
        }
        // Healthy from now on: the backlog drains, paced by time alone.
        for _ in 0..100_000 {
            if r.d.retained() == 0 && r.d.in_flight() == 0 {
                break;
            }
            // The next time something is due, and no later than a timeout.
            let deadline = r.in_flight.iter().map(|&(_, sent)| sent + TIMEOUT_MS).min();
            let due = r.d.poll_timeout().map_or(t + 50, |at| at.as_millis());
            t = due.min(deadline.unwrap_or(u64::MAX)).max(t + 1);
            r.step(t, true);
        }
        assert_eq!((r.d.retained(), r.d.in_flight()), (0, 0), "run {run}: drained ({config:?})");
        let mut all: Vec<u32> = r.delivered.iter().chain(&r.gone).chain(&r.refused).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..r.submitted).collect::<Vec<_>>(), "run {run}: each message exactly once");
        restores += r.restores;
        if limit == 1 && config.probe == Probe::Oldest {
            assert!(r.delivered.windows(2).all(|w| w[0] < w[1]), "run {run}: in order: {:?} {config:?}", r.delivered);
        }
    }
    assert!(restores > sequences as u32, "restarts happened: {restores}");
}

#[test]
fn a_snapshot_mid_outage_restores_on_another_clock_and_sends_what_was_in_flight_again() {
    let config = RetentionConfig { max_age: Some(Duration::from_secs(3_600)), ..RetentionConfig::default() };
    let mut d = tripped(config);
    let messages: HashMap<u64, u32> = (0..5).map(|i| (i, i as u32)).collect();
    // The open time ends; the oldest probes and is in flight at the snapshot.
    assert_eq!(drain(&mut d, ms(10_004)), vec![0]);
    let saved = d.snapshot(ms(10_005));
    for decoded in [RetentionSnapshot::from_json(&saved.to_json()), RetentionSnapshot::from_bytes(&saved.to_bytes())] {
        // A fresh process whose clock starts at zero.
        let mut r: RetentionQueue<u32> =
            RetentionQueue::restore(*d.breaker().config(), config, &decoded.unwrap(), ms(0), Elapsed::Ignored, |seq| {
                messages.get(&seq).copied()
            })
            .unwrap();
        assert_eq!((r.retained(), r.in_flight()), (5, 0), "the probe in flight is retained again");
        assert_eq!(r.breaker().state(ms(0)), State::HalfOpen);
        assert_eq!(drain(&mut r, ms(0)), vec![0], "and sent again first");
        r.report(0, Outcome::Success, ms(1));
        assert_eq!(drain(&mut r, ms(2)), vec![1, 2, 3, 4]);
        assert_eq!(r.poll_timeout(), None);
        assert_eq!(r.counters().submitted, 5);
    }
}

#[test]
fn a_snapshot_that_cannot_be_restored_is_refused_with_why() {
    let config = RetentionConfig::default();
    let d = tripped(config);
    let breaker_config = *d.breaker().config();
    let saved = d.snapshot(ms(100));
    let all = |seq: u64| Some(seq as u32);
    let restore = |s: &RetentionSnapshot, c: RetentionConfig, m: &dyn Fn(u64) -> Option<u32>| {
        RetentionQueue::<u32>::restore(breaker_config, c, s, ms(0), Elapsed::Ignored, m).map(|_| ())
    };
    assert_eq!(restore(&saved, config, &all), Ok(()));
    assert_eq!(
        restore(&saved, config, &|seq| (seq != 3).then_some(seq as u32)),
        Err(SnapshotError::Corrupt("a retained message is missing"))
    );
    let aged = RetentionConfig { max_age: Some(Duration::from_secs(1)), ..config };
    assert_eq!(restore(&saved, aged, &all), Err(SnapshotError::Corrupt("retained message age")));
    let small = RetentionConfig { max_messages: Some(2), ..config };
    assert_eq!(restore(&saved, small, &all), Err(SnapshotError::Corrupt("more retained messages than max_messages")));
    let mut text: serde_json::Value = serde_json::from_str(&saved.to_json()).unwrap();
    text["counters"][0] = serde_json::Value::from(99);
    let forged = RetentionSnapshot::from_json(&text.to_string()).unwrap();
    assert_eq!(restore(&forged, config, &all), Err(SnapshotError::Corrupt("retention counters")));
    text["version"] = serde_json::Value::from(9);
    assert!(matches!(RetentionSnapshot::from_json(&text.to_string()), Err(SnapshotError::NewerVersion { .. })));
    let bytes = saved.to_bytes();
    for len in 0..bytes.len() {
        assert!(RetentionSnapshot::from_bytes(&bytes[..len]).is_err(), "{len} bytes");
    }
}

// Regression tests for what a hostile review of the dispatcher found.

#[test]
fn huge_sizes_are_refused_not_an_overflow() {
    let mut d = dispatcher(1, RetentionConfig::default());
    assert_eq!(d.submit(1, u64::MAX, ms(0)), Err(Overflowed { message: 1 }), "more than 2^53 - 1 bytes held");
    let Ok(Submitted::Send(_)) = d.submit(2, (1 << 53) - 2, ms(0)) else { panic!() };
    assert_eq!(d.submit(3, 2, ms(0)), Err(Overflowed { message: 3 }));
    assert_eq!(d.submit(4, 1, ms(0)), Ok(Submitted::Retained(1)));
}

#[test]
fn a_restored_count_of_attempts_at_its_maximum_does_not_overflow() {
    let mut d = dispatcher(1, RetentionConfig::default());
    let Ok(Submitted::Send(_)) = d.submit(7, 1, ms(0)) else { panic!() };
    let mut v: serde_json::Value = serde_json::from_str(&d.snapshot(ms(1)).to_json()).unwrap();
    v["messages"][0][2] = serde_json::Value::from(u32::MAX);
    let s = RetentionSnapshot::from_json(&v.to_string()).unwrap();
    let mut r: RetentionQueue<u32> =
        RetentionQueue::restore(*d.breaker().config(), RetentionConfig::default(), &s, ms(0), Elapsed::Ignored, |_| {
            Some(7)
        })
        .unwrap();
    let seq = r.next(ms(0)).unwrap();
    assert_eq!(r.report(seq, Outcome::Failure, ms(1)), Some(Reported::Retained));
}

#[test]
fn a_disabled_breaker_still_releases_within_the_limit() {
    let mut d = dispatcher(1, RetentionConfig::default());
    for i in 0..50 {
        d.submit(i, 1, ms(0)).unwrap();
    }
    let _ = d.breaker_mut().disable(ms(1));
    assert_eq!(drain(&mut d, ms(1)), Vec::<u64>::new(), "the first is still in flight");
    assert_eq!(d.in_flight(), 1);
}

#[test]
fn sends_the_breaker_gave_up_on_still_count_until_reported() {
    // Closed, a limit of 1: the breaker gives its call up after the probe
    // timeout; the dispatcher's send is still out, so nothing more goes.
    let mut d = dispatcher(1, RetentionConfig::default());
    let Ok(Submitted::Send(a)) = d.submit(0, 1, ms(0)) else { panic!() };
    assert_eq!(d.submit(1, 1, ms(1)), Ok(Submitted::Retained(1)));
    assert_eq!(drain(&mut d, ms(120_000)), Vec::<u64>::new());
    assert_eq!(d.report(a, Outcome::Success, ms(120_001)), Some(Reported::Delivered(0)));
    assert_eq!(drain(&mut d, ms(120_002)), vec![1], "then in order");
    // Half-open: one probe out, given up by the breaker: no second probe.
    let mut d = dispatcher(1, RetentionConfig::default());
    let _ = d.breaker_mut().force_open(ms(0), Some(Duration::from_secs(10)));
    d.submit(0, 1, ms(0)).unwrap();
    d.submit(1, 1, ms(0)).unwrap();
    assert_eq!(drain(&mut d, ms(10_000)), vec![0], "the oldest probes");
    assert_eq!(drain(&mut d, ms(200_000)), Vec::<u64>::new(), "no second probe while the first is out");
}

#[test]
fn drop_oldest_drops_nothing_when_dropping_cannot_make_room() {
    let c = RetentionConfig { max_bytes: Some(10), overflow: Overflow::DropOldest, ..RetentionConfig::default() };
    let mut d = dispatcher(1, c);
    d.submit(1, 6, ms(0)).unwrap();
    d.submit(2, 2, ms(0)).unwrap();
    d.submit(3, 2, ms(0)).unwrap();
    assert_eq!(d.submit(4, 5, ms(0)), Err(Overflowed { message: 4 }));
    assert_eq!(events(&mut d), Vec::new(), "the in-flight 6 bytes leave no room for 5");
    assert_eq!(d.submit(5, 4, ms(0)), Ok(Submitted::Retained(3)));
    assert_eq!(events(&mut d), vec![Event::Dropped { seq: 1, message: 2 }, Event::Dropped { seq: 2, message: 3 }]);
}

#[test]
fn a_report_of_an_unknown_send_changes_nothing() {
    let c = RetentionConfig { max_age: Some(Duration::from_secs(60)), ..RetentionConfig::default() };
    let mut d = dispatcher(1, c);
    d.submit(1, 1, ms(0)).unwrap();
    d.submit(2, 1, ms(0)).unwrap();
    assert_eq!(d.report(999, Outcome::Success, ms(1_000_000)), None);
    d.handle_timeout(ms(1));
    assert_eq!(events(&mut d), Vec::new(), "its time was not taken as the clock's");
}

#[test]
fn after_a_release_by_hand_poll_timeout_says_now() {
    let mut d = dispatcher(1, RetentionConfig::default());
    let _ = d.breaker_mut().force_open(ms(0), None);
    d.submit(1, 1, ms(2)).unwrap();
    assert_eq!(drain(&mut d, ms(2)), Vec::<u64>::new());
    assert_eq!(d.poll_timeout(), None, "held open: no time is known");
    let _ = d.breaker_mut().release(ms(3));
    assert!(d.poll_timeout().is_some_and(|at| at <= ms(3)), "released: at once");
    assert_eq!(drain(&mut d, ms(3)), vec![0]);
}

#[test]
fn under_seed_001s_rule_a_new_message_that_cannot_probe_yet_lets_the_oldest_probe_later() {
    let c = RetentionConfig {
        probe: Probe::NewMessage,
        release_rate: Some(Rate { per_second: 1, burst: 1 }),
        ..RetentionConfig::default()
    };
    let mut d = dispatcher(5, c);
    let Ok(Submitted::Send(x)) = d.submit(0, 1, ms(0)) else { panic!() };
    d.report(x, Outcome::Success, ms(0));
    let _ = d.breaker_mut().force_open(ms(1), Some(Duration::from_millis(100)));
    assert_eq!(d.submit(1, 1, ms(101)), Ok(Submitted::Retained(1)), "no token yet");
    // Following poll_timeout, with no new message, it goes once a token comes.
    let mut sent = Vec::new();
    for _ in 0..10 {
        let at = d.poll_timeout().expect("a time to look again");
        sent = drain(&mut d, at);
        if !sent.is_empty() {
            assert_eq!(at, ms(1_000), "the token's time");
            break;
        }
    }
    assert_eq!(sent, vec![1]);
}

#[test]
#[allow(deprecated)]
fn the_former_name_dispatcher_still_names_the_queue() {
    let queue: halfopen::retention::Dispatcher<u32> =
        halfopen::retention::Dispatcher::new(webhook(1), RetentionConfig::default()).expect("paced by its limit");
    let _same: RetentionQueue<u32> = queue;
}
