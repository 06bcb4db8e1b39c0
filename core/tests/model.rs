//! Property test: random operation sequences drive the core and an
//! independently written reference model side by side; every answer must
//! agree, and invariants must hold at every step.
//!
//! The model keeps plain lists (every reported call with its time, every
//! in-flight probe) where the core keeps fixed-size rings and counters.
//! (The licensed fast path is checked against the plain protocol in
//! `licence.rs`.)
//!
//! `HALFOPEN_MODEL_SEQUENCES` sets the number of sequences (default 30,000;
//! `make test-long` runs 1,000,000).

use std::collections::{HashMap, VecDeque};

use halfopen::{
    Breaker, Config, Duration, Elapsed, Instant, LatencyHistogram, MAX_SAVED_COUNTER, Metrics, Mode, Outcome, Permit,
    Reason, Snapshot, State, TIME_BUCKETS, Transition, Window,
};

mod common;
use common::Rng;

#[derive(Debug, Clone, Copy, PartialEq)]
enum ModelState {
    Closed,
    Open { until: u64, forced: bool },
    HeldOpen,
    HalfOpen { lease: u64, successes: u32 },
    Disabled,
}

struct Model {
    c: Config,
    now: u64,
    state: ModelState,
    generation: u64,
    /// Every counted call: (time, failed, slow).
    calls: Vec<(u64, bool, bool)>,
    /// Outcomes of the last calls (count windows).
    last: VecDeque<(bool, bool)>,
    consecutive: u32,
    open_for: u64,
    /// In-flight probe ids.
    probes: Vec<u64>,
}

impl Model {
    fn new(c: Config) -> Self {
        Model {
            now: 0,
            state: ModelState::Closed,
            generation: 0,
            calls: Vec::new(),
            last: VecDeque::new(),
            consecutive: 0,
            open_for: c.open_timeout.as_micros(),
            probes: Vec::new(),
            c,
        }
    }

    fn public(&self, s: ModelState) -> State {
        match s {
            ModelState::Closed | ModelState::Disabled => State::Closed,
            ModelState::Open { .. } | ModelState::HeldOpen => State::Open,
            ModelState::HalfOpen { .. } => State::HalfOpen,
        }
    }

    fn set(&mut self, s: ModelState) {
        self.state = s;
        self.generation += 1;
        self.probes.clear();
    }

    /// Applies time; returns the timed transition.
    fn tick(&mut self, now: u64) -> Option<Transition> {
        self.now = self.now.max(now);
        match self.state {
            ModelState::Open { until, forced } if self.now >= until => {
                self.set(ModelState::HalfOpen { lease: 0, successes: 0 });
                let reason = if forced { Reason::ForcedOpenEnded } else { Reason::OpenTimeout };
                Some(Transition { from: State::Open, to: State::HalfOpen, reason, at: Instant::from_micros(until) })
            }
            ModelState::HalfOpen { lease, .. } if self.now >= lease && !self.probes.is_empty() => {
                self.probes.clear();
                self.generation += 1;
                None
            }
            _ => None,
        }
    }

    /// The open time's cap: as set, or 5 min (the open time if longer).
    fn cap(&self) -> u64 {
        self.c.max_open_timeout.map_or(self.c.open_timeout.as_micros().max(300_000_000), Duration::as_micros)
    }

    fn width(&self) -> u64 {
        match self.c.window {
            Window::Time(d) => (d.as_micros() / u64::from(TIME_BUCKETS)).max(1),
            Window::Count(_) => 0,
        }
    }

    /// (calls, failures, slow) in the window at the model's time.
    fn totals(&self, now: u64) -> (u32, u32, u32) {
        let mut t = (0, 0, 0);
        let mut add = |failed: bool, slow: bool| {
            t.0 += 1;
            t.1 += u32::from(failed);
            t.2 += u32::from(slow);
        };
        match self.c.window {
            Window::Time(_) => {
                let w = self.width();
                for &(at, failed, slow) in &self.calls {
                    if now / w - at / w < u64::from(TIME_BUCKETS) {
                        add(failed, slow);
                    }
                }
            }
            Window::Count(_) => self.last.iter().for_each(|&(f, s)| add(f, s)),
        }
        t
    }

    fn clear_counts(&mut self) {
        self.calls.clear();
        self.last.clear();
        self.consecutive = 0;
    }

    fn close(&mut self) {
        self.set(ModelState::Closed);
        self.clear_counts();
        self.open_for = self.c.open_timeout.as_micros();
    }

    /// The documented jitter: splitmix64's draw number `generation` from the seed.
    fn jittered(&self, period: u64, generation: u64) -> u64 {
        if self.c.jitter == 0.0 {
            return period;
        }
        let mut z = self.c.jitter_seed.wrapping_add((generation + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
        let cut = (period as f64 * self.c.jitter * unit) as u64;
        period - cut.min(period - 1)
    }

    fn open(&mut self, reason: Reason, from: State) -> Option<Transition> {
        // The open period starts the next generation; its jitter is drawn for it.
        let period = self.jittered(self.open_for, self.generation + 1);
        self.set(ModelState::Open { until: self.now.saturating_add(period), forced: false });
        Some(Transition { from, to: State::Open, reason, at: Instant::from_micros(self.now) })
    }

    /// Admitted: Ok(probe id or 0 in closed). Rejected: Err(retry_after µs).
    fn acquire(&mut self, id: u64) -> (Result<(), Option<u64>>, Option<Transition>) {
        let t = self.tick(self.now);
        let r = match self.state {
            ModelState::Closed | ModelState::Disabled => Ok(()),
            ModelState::HalfOpen { successes, .. }
                if self.probes.len() < usize::from(self.c.half_open_max_attempts) =>
            {
                self.probes.push(id);
                self.state = ModelState::HalfOpen { lease: self.now + self.c.probe_timeout.as_micros(), successes };
                Ok(())
            }
            // Every slot taken: retry after a tenth of the open time, or when
            // the probes are given up if that is sooner.
            ModelState::HalfOpen { lease, .. } => {
                Err(Some((lease - self.now).min(self.c.open_timeout.as_micros() / 10)))
            }
            ModelState::Open { until, .. } => Err(Some(until - self.now)),
            ModelState::HeldOpen => Err(None),
        };
        (r, t)
    }

    fn record(&mut self, id: u64, generation: u64, issued: u64, outcome: Outcome) -> Option<Transition> {
        let t = self.tick(self.now);
        if generation != self.generation {
            return t;
        }
        let slow = self.c.slow_call_duration.is_some_and(|d| self.now - issued > d.as_micros());
        let failed = match outcome {
            Outcome::Success => slow,
            Outcome::Failure => true,
            Outcome::Ignored | Outcome::Cancelled => {
                self.probes.retain(|&p| p != id);
                return None;
            }
        };
        match self.state {
            ModelState::Closed | ModelState::Disabled => {
                self.consecutive = if failed { self.consecutive + 1 } else { 0 };
                let windowed = self.c.failure_threshold.is_some()
                    || self.c.failure_rate_threshold.is_some()
                    || self.c.slow_call_rate_threshold.is_some();
                if windowed {
                    self.calls.push((self.now, failed, slow));
                    if let Window::Count(n) = self.c.window {
                        self.last.push_back((failed, slow));
                        if self.last.len() > usize::from(n) {
                            self.last.pop_front();
                        }
                    }
                }
                if !failed || self.state == ModelState::Disabled {
                    return None;
                }
                let reason = self.trip_reason()?;
                self.open_for = self.c.open_timeout.as_micros();
                self.open(reason, State::Closed)
            }
            ModelState::HalfOpen { lease, successes } => {
                self.probes.retain(|&p| p != id);
                if failed {
                    let grown = (self.open_for as f64 * self.c.backoff_factor) as u64;
                    self.open_for = grown.min(self.cap()).max(self.open_for);
                    return self.open(Reason::ProbeFailed, State::HalfOpen);
                }
                let needed = self.c.half_open_successes.unwrap_or(self.c.half_open_max_attempts);
                if successes + 1 >= u32::from(needed) {
                    self.close();
                    let at = Instant::from_micros(self.now);
                    return Some(Transition {
                        from: State::HalfOpen,
                        to: State::Closed,
                        reason: Reason::ProbesSucceeded,
                        at,
                    });
                }
                self.state = ModelState::HalfOpen { lease, successes: successes + 1 };
                None
            }
            _ => unreachable!("no current permit while open"),
        }
    }

    fn trip_reason(&self) -> Option<Reason> {
        if self.c.consecutive_failures.is_some_and(|n| self.consecutive >= n) {
            return Some(Reason::ConsecutiveFailures);
        }
        let (calls, failures, slow) = self.totals(self.now);
        if self.c.failure_threshold.is_some_and(|n| failures >= n) {
            return Some(Reason::FailureThreshold);
        }
        if calls < self.c.minimum_calls {
            return None;
        }
        if self.c.failure_rate_threshold.is_some_and(|p| f64::from(failures) * 100.0 >= p * f64::from(calls)) {
            return Some(Reason::FailureRate);
        }
        self.c
            .slow_call_rate_threshold
            .is_some_and(|p| f64::from(slow) * 100.0 >= p * f64::from(calls))
            .then_some(Reason::SlowCallRate)
    }

    /// The state a `&self` query would report at `now` (no mutation).
    fn peek(&self, now: u64) -> (State, usize) {
        let now = now.max(self.now);
        match self.state {
            ModelState::Open { until, .. } if now >= until => (State::HalfOpen, 0),
            ModelState::HalfOpen { lease, .. } if now >= lease => (State::HalfOpen, 0),
            s => (self.public(s), self.probes.len()),
        }
    }

    /// A manual operation: the timed change due first, then its own.
    fn manual(&mut self, op: u64, for_us: u64) -> Vec<Transition> {
        let timed = self.tick(self.now);
        let own = self.manual_own(op, for_us);
        timed.into_iter().chain(own).collect()
    }

    fn manual_own(&mut self, op: u64, for_us: u64) -> Option<Transition> {
        let from = self.public(self.state);
        let (to, reason) = match op {
            0 => {
                let next = if for_us == 0 {
                    ModelState::HeldOpen
                } else {
                    ModelState::Open { until: self.now.saturating_add(for_us), forced: true }
                };
                self.set(next);
                (State::Open, Reason::ForcedOpen)
            }
            1 => {
                self.close();
                (State::Closed, Reason::ForcedClose)
            }
            2 => {
                if from != State::Closed {
                    self.close();
                }
                self.set(ModelState::Disabled);
                (State::Closed, Reason::Disabled)
            }
            3 => {
                return match self.state {
                    ModelState::Open { forced: true, .. } | ModelState::HeldOpen => {
                        self.set(ModelState::HalfOpen { lease: 0, successes: 0 });
                        let at = Instant::from_micros(self.now);
                        Some(Transition { from: State::Open, to: State::HalfOpen, reason: Reason::Released, at })
                    }
                    ModelState::Disabled => {
                        self.set(ModelState::Closed);
                        None
                    }
                    _ => None,
                };
            }
            _ => {
                self.close();
                (State::Closed, Reason::Reset)
            }
        };
        (from != to).then_some(Transition { from, to, reason, at: Instant::from_micros(self.now) })
    }
}

fn random_config(rng: &mut Rng) -> Config {
    let mut c = Config {
        failure_threshold: None,
        window: if rng.chance(50) {
            Window::Time(Duration::from_millis(8 + rng.below(20_000)))
        } else {
            Window::Count(1 + rng.below(128) as u16)
        },
        open_timeout: Duration::from_millis(1 + rng.below(5_000)),
        backoff_factor: [1.0, 1.5, 2.0, 3.0][rng.below(4) as usize],
        jitter: if rng.chance(30) { 0.5 } else { 0.0 },
        jitter_seed: rng.next(),
        probe_timeout: Duration::from_millis(1 + rng.below(3_000)),
        minimum_calls: 1 + rng.below(8) as u32,
        ..Config::default()
    };
    if rng.chance(70) {
        c.max_open_timeout = Some(Duration::from_micros(c.open_timeout.as_micros() * (1 + rng.below(10))));
    }
    c.half_open_max_attempts = 1 + rng.below(4) as u16;
    if rng.chance(70) {
        c.half_open_successes = Some(1 + rng.below(u64::from(c.half_open_max_attempts)) as u16);
    }
    if rng.chance(60) {
        c.failure_threshold = Some(1 + rng.below(6) as u32);
    }
    if rng.chance(40) {
        c.consecutive_failures = Some(1 + rng.below(5) as u32);
    }
    if rng.chance(30) {
        c.failure_rate_threshold = Some([25.0, 50.0, 66.6, 100.0][rng.below(4) as usize]);
    }
    if rng.chance(40) {
        c.slow_call_duration = Some(Duration::from_millis(1 + rng.below(500)));
        if rng.chance(50) {
            c.slow_call_rate_threshold = Some(50.0);
        }
    }
    if c.failure_threshold.is_none()
        && c.consecutive_failures.is_none()
        && c.failure_rate_threshold.is_none()
        && c.slow_call_rate_threshold.is_none()
    {
        c.consecutive_failures = Some(2);
    }
    if let Window::Count(n) = c.window {
        c.minimum_calls = c.minimum_calls.min(u32::from(n));
        c.failure_threshold = c.failure_threshold.map(|t| t.min(u32::from(n)));
    }
    c
}

/// Whether `t` is a transition the state machine may make.
fn allowed(t: &Transition) -> bool {
    use Reason::*;
    use State::*;
    match (t.from, t.to) {
        (Closed, Open) => {
            matches!(t.reason, ConsecutiveFailures | FailureThreshold | FailureRate | SlowCallRate | ForcedOpen)
        }
        (Open, HalfOpen) => matches!(t.reason, OpenTimeout | ForcedOpenEnded | Released),
        (HalfOpen, Open) => matches!(t.reason, ProbeFailed | ForcedOpen),
        (HalfOpen | Open, Closed) => matches!(t.reason, ProbesSucceeded | ForcedClose | Disabled | Reset),
        _ => false,
    }
}

fn run_sequence(seed: u64, steps: usize, seen: &mut HashMap<Reason, u64>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let config = random_config(&mut rng);
    let meter = (Metrics::default(), LatencyHistogram::default());
    let mut breaker = Breaker::with_meter(config, meter).unwrap_or_else(|e| panic!("seed {seed}: {e} for {config:?}"));
    let (mut rejections, mut opens, mut first_use) = (0u64, 0u64, None::<u64>);
    let mut model = Model::new(config);
    let mut permits: Vec<(u64, Permit, u64)> = Vec::new(); // (id, permit, model generation)
    let mut now: u64 = 0;
    // The state as of the last transition returned: the chain's end.
    let mut reported = State::Closed;
    let ctx = |step: usize, what: &str| format!("seed {seed} step {step}: {what} ({config:?})");
    // Measured before the breaker was last restored (a latency histogram is not saved).
    let mut latency_before_restore = 0;
    for step in 0..steps {
        // Halfway, the breaker goes through a snapshot (JSON or compact,
        // alternately) and is restored. The restored breaker starts a new
        // generation: the permits held are stale, and probes given up.
        if step == steps / 2 {
            let at = Instant::from_micros(model.now);
            // A snapshot holds each state's time up to 2^53 − 1 µs (what
            // JSON holds exactly): a longer one is saved as that.
            let m = breaker.metrics(at);
            let saved_time: u64 = [m.time_closed, m.time_open, m.time_half_open]
                .iter()
                .map(|d| d.as_micros().min(MAX_SAVED_COUNTER))
                .sum();
            first_use = first_use.map(|_| model.now - saved_time);
            let saved = breaker.snapshot(at);
            let decoded = if seed.is_multiple_of(2) {
                Snapshot::from_json(&saved.to_json())
            } else {
                Snapshot::from_bytes(&saved.to_bytes())
            };
            assert_eq!(decoded.as_ref(), Ok(&saved), "{}", ctx(step, "snapshot encoding round trip"));
            breaker = Breaker::restore(config, &saved, at, Elapsed::Ignored)
                .unwrap_or_else(|e| panic!("{}: {e}", ctx(step, "restore")));
            let c = breaker.metrics(at).counters;
            latency_before_restore = c.successes + c.failures;
            model.generation += 1;
            model.probes.clear();
        }
        // Move the clock: mostly a little, sometimes a lot, sometimes backwards.
        now = match rng.below(20) {
            0 => now.saturating_sub(rng.below(10_000_000)),
            1 => now + rng.below(10_000_000_000),
            2 if rng.chance(2) => now + 3_155_760_000_000_000, // a century
            _ => now + rng.below(400_000),
        };
        let at = Instant::from_micros(now);
        model.now = model.now.max(now);
        let mut transitions = Vec::new();
        match rng.below(100) {
            0..45 => {
                let id = step as u64 + 1;
                let admission = breaker.try_acquire(at);
                first_use.get_or_insert(model.now);
                let (expected, mt) = model.acquire(id);
                assert_eq!(admission.transition, mt, "{}", ctx(step, "acquire transition"));
                transitions.extend(admission.transition);
                match (admission.decision, expected) {
                    (Ok(permit), Ok(())) => permits.push((id, permit, model.generation)),
                    (Err(r), Err(retry)) => {
                        rejections += 1;
                        assert_eq!(r.retry_after().map(Duration::as_micros), retry, "{}", ctx(step, "retry_after"));
                    }
                    (got, want) => panic!("{}: core {got:?}, model {want:?}", ctx(step, "admission")),
                }
            }
            45..88 if !permits.is_empty() => {
                let (id, permit, generation) = permits.swap_remove(rng.below(permits.len() as u64) as usize);
                let issued = permit.issued_at().as_micros();
                let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored, Outcome::Cancelled]
                    [[0, 0, 0, 1, 1, 1, 1, 2, 3][rng.below(9) as usize]];
                let got = breaker.record(permit, outcome, at);
                let want = model.record(id, generation, issued, outcome);
                assert_eq!(got, want, "{}", ctx(step, "record transition"));
                transitions.extend(got);
            }
            88..98 => {
                let op = rng.below(5);
                let for_us = if rng.chance(50) { 0 } else { 1 + rng.below(5_000_000) };
                let got = match op {
                    0 => breaker.force_open(at, (for_us > 0).then_some(Duration::from_micros(for_us))),
                    1 => breaker.force_close(at),
                    2 => breaker.disable(at),
                    3 => breaker.release(at),
                    _ => breaker.reset(at),
                };
                let want = model.manual(op, for_us);
                assert_eq!(got.iter().collect::<Vec<_>>(), want, "{}", ctx(step, "manual op"));
                transitions.extend(got);
            }
            _ => {
                let got = breaker.handle_timeout(at);
                assert_eq!(got, model.tick(now), "{}", ctx(step, "handle_timeout"));
                transitions.extend(got);
            }
        }
        // Invariants and side-effect-free reads, checked after every step.
        for t in &transitions {
            assert!(allowed(t), "{}", ctx(step, &format!("forbidden transition {t:?}")));
            assert_eq!(t.from, reported, "{}", ctx(step, &format!("transition {t:?} breaks the chain")));
            reported = t.to;
            *seen.entry(t.reason).or_default() += 1;
            opens += u64::from(t.to == State::Open);
            first_use.get_or_insert(t.at.as_micros());
        }
        let (state, in_flight) = model.peek(now);
        let pending_timeout = reported == State::Open && state == State::HalfOpen;
        assert!(state == reported || pending_timeout, "{}", ctx(step, "state differs from the last reported"));
        let counts = breaker.counts(at);
        assert_eq!(breaker.state(at), state, "{}", ctx(step, "state"));
        assert_eq!(usize::from(counts.probes_in_flight), in_flight, "{}", ctx(step, "probes in flight"));
        assert!(counts.probes_in_flight <= config.half_open_max_attempts, "{}", ctx(step, "too many probes"));
        let (calls, failures, slow) = model.totals(model.now);
        assert_eq!(
            (counts.window.calls, counts.window.failures, counts.window.slow),
            (calls, failures, slow),
            "{}",
            ctx(step, "window totals")
        );
        assert!(counts.window.slow <= counts.window.failures && counts.window.failures <= counts.window.calls);
        assert_eq!(counts.consecutive_failures, model.consecutive, "{}", ctx(step, "consecutive"));
        let mode_ok = match (breaker.mode(at), model.state) {
            (Mode::Disabled, ModelState::Disabled) | (Mode::ForcedOpen { until: None }, ModelState::HeldOpen) => true,
            (Mode::ForcedOpen { until: Some(u) }, ModelState::Open { until, forced: true }) => u.as_micros() == until,
            (Mode::Normal, ModelState::Open { forced: true, until }) => now.max(model.now) >= until,
            (Mode::Normal, s) => {
                !matches!(s, ModelState::Disabled | ModelState::HeldOpen | ModelState::Open { forced: true, .. })
            }
            _ => false,
        };
        assert!(mode_ok, "{}", ctx(step, "mode"));
        // Metrics add up (read every few steps: a read scans the latency histogram).
        if step % 16 != 15 {
            continue;
        }
        let m = breaker.metrics(at);
        let c = m.counters;
        let reported = c.successes + c.failures + c.ignored + c.cancelled + c.stale;
        assert_eq!(c.admitted, reported + permits.len() as u64, "{}", ctx(step, "admitted = reported + in flight"));
        assert_eq!(c.rejections, rejections, "{}", ctx(step, "rejections"));
        assert_eq!(c.opens, opens, "{}", ctx(step, "opens"));
        assert!(c.slow <= c.failures, "{}", ctx(step, "slow ⊆ failures"));
        let total = m.time_closed.as_micros() + m.time_open.as_micros() + m.time_half_open.as_micros();
        let lived = first_use.map_or(0, |t| model.now - t);
        assert_eq!(total, lived, "{}", ctx(step, "time in states = time since first use"));
        let measured = m.latency.map_or(0, |l| l.count);
        assert_eq!(measured, c.successes + c.failures - latency_before_restore, "{}", ctx(step, "latency count"));
    }
}

#[test]
fn core_agrees_with_the_reference_model() {
    let sequences: u64 = std::env::var("HALFOPEN_MODEL_SEQUENCES").ok().and_then(|v| v.parse().ok()).unwrap_or(30_000);
    let start = std::time::Instant::now();
    let mut seen = HashMap::new();
    for seed in 0..sequences {
        run_sequence(seed, 60, &mut seen);
    }
    println!("model: {sequences} sequences × 60 steps agreed in {:.1?}", start.elapsed());
    let mut reasons: Vec<_> = seen.iter().map(|(r, n)| format!("{}={n}", r.name())).collect();
    reasons.sort();
    println!("model: transitions seen: {}", reasons.join(" "));
    // The sequences must reach every transition, or they test less than they claim.
    assert_eq!(seen.len(), 13, "some transition reasons were never reached: {reasons:?}");
}
