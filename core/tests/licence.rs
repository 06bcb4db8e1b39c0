//! The licensed fast path against the plain protocol: random call sequences
//! go through breaker A one by one (`try_acquire` / `record`) and through
//! breaker B as a binding drives it under [`Licence`]s (admissions,
//! successes and rejections handed over in bulk, with outcomes at distinct
//! times across window-bucket boundaries). States, counts, metrics and the
//! transitions returned must be identical. With a concurrency limit, B admits
//! within the licence's room and stamps its licensed permits with the time
//! it asked for the licence, as the Node binding does.
//!
//! `HALFOPEN_LICENCE_SEQUENCES` sets the number of sequences (default 5,000).

use halfopen::{
    Breaker, ConcurrencyLimit, Config, Duration, Instant, Licence, Metrics, Outcome, Permit, Rejection, Transition,
    Wait, Window,
};

mod common;
use common::Rng;

/// How B (the binding) holds a call it admitted.
struct Held {
    generation: u32,
    issued_at: Instant,
    /// Admitted under a licence, without asking.
    licensed: bool,
}

/// Breaker B and what a binding keeps beside it.
struct Binding {
    breaker: Breaker<Config, Metrics>,
    licence: Option<Licence>,
    /// When the licence was asked for.
    licensed_at: Instant,
    /// Under a licence with room: how much is left.
    room: Option<u32>,
    /// Admissions not yet counted: how many, and the first one's reading.
    admitted: (u32, Instant),
    /// Successes not yet handed over: generation, count, latest reading.
    batch: Option<(u32, u32, Instant)>,
    rejections: u32,
    transitions: Vec<Transition>,
}

impl Binding {
    fn flush(&mut self, now: Instant) {
        let (count, first) = self.admitted;
        let (generation, successes, at) = self.batch.take().unwrap_or((0, 0, first));
        self.transitions.extend(self.breaker.hand_over(count, first, generation, successes, at));
        self.admitted = (0, now);
        if self.rejections > 0 {
            self.breaker.count_rejections(self.rejections, now);
            self.rejections = 0;
        }
    }

    fn relicense(&mut self, now: Instant) {
        let licence = self.breaker.licence(now);
        self.licence = Some(licence);
        self.licensed_at = now;
        self.room = match licence {
            Licence::Admit { room, .. } => room,
            _ => None,
        };
    }

    /// Asks again only when the licence may have changed (the rule in
    /// licence.rs): a transition, none asked yet, or its time ran out.
    fn relicense_if(&mut self, transition: bool, now: Instant) {
        let expired = match self.licence {
            None => true,
            Some(Licence::Admit { until, .. }) => now >= until,
            Some(Licence::Reject { until }) => until.is_some_and(|u| now >= u),
            Some(Licence::Ask) => false,
        };
        if transition || expired {
            self.relicense(now);
        }
    }

    fn acquire(&mut self, now: Instant) -> Result<Held, Rejection> {
        match self.licence {
            // A closed breaker admits every call until its next transition.
            Some(Licence::Admit { generation, slow_after, .. }) if self.room != Some(0) => {
                if self.admitted.0 == 0 {
                    self.admitted.1 = now;
                }
                self.admitted.0 += 1;
                if let Some(room) = &mut self.room {
                    *room -= 1;
                }
                // Without a slow-call threshold, the permit need not know when
                // its call began: it is stamped with the licence's time.
                let issued_at = if slow_after.is_some() { now } else { self.licensed_at };
                return Ok(Held { generation, issued_at, licensed: true });
            }
            Some(Licence::Reject { until }) if until.is_none_or(|u| now < u) => {
                self.rejections += 1;
                let wait = until.map_or(Wait::Held, |u| Wait::UntilHalfOpen { left: u - now, retry: u - now });
                return Err(Rejection { state: halfopen::State::Open, wait });
            }
            _ => {}
        }
        self.flush(now);
        let admission = self.breaker.try_acquire(now);
        self.transitions.extend(admission.transition);
        // Under a limit the room changed with this call: ask again.
        self.relicense_if(admission.transition.is_some() || self.room.is_some(), now);
        admission.decision.map(|p| Held { generation: p.generation(), issued_at: p.issued_at(), licensed: false })
    }

    fn record(&mut self, held: Held, outcome: Outcome, now: Instant) {
        let batchable = held.licensed
            && outcome == Outcome::Success
            && matches!(self.licence, Some(Licence::Admit { generation, until, slow_after, .. })
                if generation == held.generation && now < until && slow_after.is_none_or(|s| now - held.issued_at <= s));
        if batchable {
            if let Some(room) = &mut self.room {
                *room += 1;
            }
            match &mut self.batch {
                Some((generation, count, at)) if *generation == held.generation => {
                    *count += 1;
                    *at = now;
                }
                _ => {
                    self.flush(now);
                    self.batch = Some((held.generation, 1, now));
                }
            }
            return;
        }
        let before = self.transitions.len();
        self.flush(now);
        let permit = Permit::from_parts(held.generation, held.issued_at);
        self.transitions.extend(self.breaker.record(permit, outcome, now));
        // Under a limit, any report may have cut it: ask again.
        self.relicense_if(self.transitions.len() > before || self.room.is_some(), now);
    }
}

fn random_config(rng: &mut Rng) -> Config {
    let mut c = Config {
        failure_threshold: None,
        window: if rng.chance(70) {
            Window::Time(Duration::from_millis(8 + rng.below(2_000)))
        } else {
            Window::Count(1 + rng.below(20) as u16)
        },
        open_timeout: Duration::from_millis(1 + rng.below(1_000)),
        probe_timeout: Duration::from_millis(1 + rng.below(2_000)),
        minimum_calls: 1 + rng.below(6) as u32,
        half_open_max_attempts: 1 + rng.below(3) as u16,
        ..Config::default()
    };
    if rng.chance(60) {
        c.failure_threshold = Some(1 + rng.below(8) as u32);
    }
    if rng.chance(40) {
        c.consecutive_failures = Some(1 + rng.below(5) as u32);
    }
    if rng.chance(50) {
        c.failure_rate_threshold = Some([25.0, 50.0, 66.6][rng.below(3) as usize]);
    }
    if rng.chance(30) {
        c.slow_call_duration = Some(Duration::from_millis(1 + rng.below(100)));
        if rng.chance(50) {
            c.slow_call_rate_threshold = Some(50.0);
        }
    }
    if c.failure_threshold.is_none() && c.consecutive_failures.is_none() && c.failure_rate_threshold.is_none() {
        c.consecutive_failures = Some(3);
    }
    if let Window::Count(n) = c.window {
        c.minimum_calls = c.minimum_calls.min(u32::from(n));
        c.failure_threshold = c.failure_threshold.map(|t| t.min(u32::from(n)));
    }
    c.concurrency_limit = match rng.below(10) {
        0..2 => Some(ConcurrencyLimit::Fixed(1 + rng.below(6) as u32)),
        2..5 => {
            let min = 1 + rng.below(3) as u32;
            Some(ConcurrencyLimit::Adaptive { min, max: min + rng.below(10) as u32 })
        }
        _ => None,
    };
    c
}

fn run_sequence(seed: u64, steps: usize, batched: &mut u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let config = random_config(&mut rng);
    let mut a = Breaker::with_meter(config, Metrics::default()).expect("valid config");
    let mut b = Binding {
        breaker: Breaker::with_meter(config, Metrics::default()).expect("valid config"),
        licence: None,
        licensed_at: Instant::ZERO,
        room: None,
        admitted: (0, Instant::ZERO),
        batch: None,
        rejections: 0,
        transitions: Vec::new(),
    };
    let mut a_transitions = Vec::new();
    // A binding may hold a licence before the first call (asked by a read).
    if rng.chance(50) {
        b.relicense(Instant::ZERO);
    }
    let mut calls: Vec<(Permit, Held)> = Vec::new();
    let mut now = Instant::ZERO;
    let ctx = |step: usize, what: &str| format!("seed {seed} step {step}: {what} ({config:?})");
    for step in 0..steps {
        now = now
            + Duration::from_micros(match rng.below(10) {
                0 => rng.below(3_000_000),
                1..4 => 0,
                _ => rng.below(60_000),
            });
        match rng.below(100) {
            0..45 => {
                let got_a = a.try_acquire(now);
                a_transitions.extend(got_a.transition);
                match (got_a.decision, b.acquire(now)) {
                    (Ok(p), Ok(held)) => calls.push((p, held)),
                    (Err(ra), Err(rb)) => {
                        assert_eq!(ra.retry_after(), rb.retry_after(), "{}", ctx(step, "retry after"));
                        assert_eq!(ra.state, rb.state, "{}", ctx(step, "rejection state"));
                    }
                    (ga, gb) => panic!("{}: A {:?}, B {:?}", ctx(step, "admission"), ga.is_ok(), gb.is_ok()),
                }
            }
            45..90 if !calls.is_empty() => {
                let (permit, held) = calls.swap_remove(rng.below(calls.len() as u64) as usize);
                let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored, Outcome::Cancelled]
                    [[0, 0, 0, 0, 0, 1, 1, 2, 3][rng.below(9) as usize]];
                *batched += u64::from(held.licensed && outcome == Outcome::Success);
                a_transitions.extend(a.record(permit, outcome, now));
                b.record(held, outcome, now);
            }
            90..95 => {
                let op = rng.below(5);
                let d = (rng.chance(50)).then(|| Duration::from_millis(1 + rng.below(500)));
                b.flush(now);
                let (ta, tb) = match op {
                    0 => (a.force_open(now, d), b.breaker.force_open(now, d)),
                    1 => (a.force_close(now), b.breaker.force_close(now)),
                    2 => (a.disable(now), b.breaker.disable(now)),
                    3 => (a.release(now), b.breaker.release(now)),
                    _ => (a.reset(now), b.breaker.reset(now)),
                };
                a_transitions.extend(ta);
                b.transitions.extend(tb);
                b.relicense(now);
            }
            _ => {
                // A read: the binding hands everything over first.
                b.flush(now);
                let (ma, mb) = (a.metrics(now), b.breaker.metrics(now));
                assert_eq!(ma, mb, "{}", ctx(step, "metrics"));
                assert_eq!(a.counts(now), b.breaker.counts(now), "{}", ctx(step, "counts"));
                assert_eq!(a.state(now), b.breaker.state(now), "{}", ctx(step, "state"));
                assert_eq!(a.retry_after(now), b.breaker.retry_after(now), "{}", ctx(step, "retry_after"));
                assert_eq!(a_transitions, b.transitions, "{}", ctx(step, "transitions"));
            }
        }
    }
}

#[test]
fn the_licensed_fast_path_leaves_the_breaker_as_the_plain_protocol_does() {
    let sequences: u64 = std::env::var("HALFOPEN_LICENCE_SEQUENCES").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000);
    let mut batched = 0;
    for seed in 0..sequences {
        run_sequence(seed, 120, &mut batched);
    }
    println!("licence: {sequences} sequences agreed; {batched} successes went in batches");
    // The sequences must exercise the batches, or they test less than they claim.
    assert!(batched > sequences, "too few batched successes: {batched}");
}

#[test]
fn counted_rejections_reach_the_meter_only() {
    let mut b = Breaker::with_meter(Config::default(), Metrics::default()).expect("valid");
    let t = Instant::from_millis(5);
    for _ in 0..5 {
        let p = b.try_acquire(t).decision.expect("closed");
        b.record(p, Outcome::Failure, t);
    }
    let before = b.counts(t);
    assert_eq!(b.licence(t), Licence::Reject { until: Some(Instant::from_millis(30_005)) });
    b.count_rejections(7, Instant::from_millis(10));
    assert_eq!(b.metrics(Instant::from_millis(10)).counters.rejections, 7);
    assert_eq!(b.counts(Instant::from_millis(10)), before);
    assert_eq!(b.state(Instant::from_millis(10)), halfopen::State::Open);
}

#[test]
fn a_licence_to_admit_ends_where_the_window_bucket_ends() {
    let config = Config { window: Window::Time(Duration::from_millis(800)), ..Config::default() };
    let mut b = Breaker::new(config).expect("valid");
    let p = b.try_acquire(Instant::from_millis(250)).decision.expect("closed");
    b.record(p, Outcome::Success, Instant::from_millis(250));
    let generation = b.counts(Instant::from_millis(250)).generation;
    let until = Instant::from_millis(300);
    assert_eq!(
        b.licence(Instant::from_millis(250)),
        Licence::Admit { generation, until, slow_after: None, bucket_decides: false, room: None }
    );
    let slow = Config { slow_call_duration: Some(Duration::from_secs(1)), ..Config::default() };
    let licence = Breaker::new(slow).expect("valid").licence(Instant::ZERO);
    assert_eq!(
        licence,
        Licence::Admit {
            generation: 0,
            until: Instant::from_millis(7_500),
            slow_after: Some(Duration::from_secs(1)),
            bucket_decides: false,
            room: None
        }
    );
    // A rate counts the window's calls: a success's bucket decides.
    let rate = Config { failure_rate_threshold: Some(50.0), ..Config::default() };
    let licence = Breaker::new(rate).expect("valid").licence(Instant::ZERO);
    assert!(matches!(licence, Licence::Admit { bucket_decides: true, .. }), "{licence:?}");
    let histogram = Breaker::with_meter(Config::default(), halfopen::LatencyHistogram::default()).expect("valid");
    assert_eq!(histogram.licence(Instant::ZERO), Licence::Ask);
}
