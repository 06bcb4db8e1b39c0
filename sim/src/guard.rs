//! What stands between the sender and the gateway: nothing, seed 000's
//! TypeScript class (ported below, line for line), or halfopen's core.

use halfopen::{Breaker, Config, Instant, Metrics, Outcome, Permit};

use crate::gateway::{Micros, SECOND};

/// The strategies compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// No breaker; a failed send is retried at once (seed 000's disaster).
    NoBreaker,
    /// Seed 000's class with seed 000's own worker: its rejection fails the
    /// job, BullMQ retries it later (an attempt is used). What the seed's code
    /// does, and a result of that integration more than of the breaker.
    SeedClass,
    /// Seed 000's class with halfopen's queue integration: a rejected job goes
    /// back to the queue without using an attempt, until the open time its
    /// code knows ends (a tenth of it when its half-open limit is reached).
    SeedClassRequeued,
    /// halfopen with its defaults (seed 000's values); a rejected job goes back
    /// to the queue until the breaker's retry time, without using an attempt.
    Halfopen,
    /// halfopen's sender preset ([`Config::sender`]: seed 000's values and
    /// an adaptive concurrency limit from 1 to 1,000); the same queue
    /// integration.
    HalfopenLimited,
}

impl Strategy {
    pub const ALL: [Strategy; 5] = [
        Strategy::NoBreaker,
        Strategy::SeedClass,
        Strategy::SeedClassRequeued,
        Strategy::Halfopen,
        Strategy::HalfopenLimited,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::NoBreaker => "no breaker, immediate retry",
            Strategy::SeedClass => "seed 000's class, its own worker (a rejection uses an attempt)",
            Strategy::SeedClassRequeued => "seed 000's class, requeued like halfopen",
            Strategy::Halfopen => "halfopen (defaults)",
            Strategy::HalfopenLimited => "halfopen + adaptive concurrency limit",
        }
    }
}

/// The answer to "may I send?".
pub enum Admit {
    /// Send; report back with this permit (halfopen only).
    Go(Option<Permit>),
    /// Not now: try again after `retry_after`; `uses_attempt` if the job's
    /// attempt is spent (seed class + BullMQ).
    Wait { retry_after: Micros, uses_attempt: bool },
}

/// One guard per instance.
pub enum Guard {
    None,
    /// The seed's class; `true`: requeued like halfopen.
    Seed(SeedBreaker, bool),
    Halfopen(Box<Breaker<Config, Metrics>>),
}

fn at(t: Micros) -> Instant {
    Instant::from_micros(t)
}

impl Guard {
    pub fn new(strategy: Strategy) -> Self {
        match strategy {
            Strategy::NoBreaker => Guard::None,
            Strategy::SeedClass => Guard::Seed(SeedBreaker::new(), false),
            Strategy::SeedClassRequeued => Guard::Seed(SeedBreaker::new(), true),
            Strategy::Halfopen => Guard::with_config(Config::default()),
            Strategy::HalfopenLimited => Guard::with_config(Config::sender()),
        }
    }

    /// halfopen's core configured by `config`.
    pub fn with_config(config: Config) -> Self {
        let breaker = Breaker::with_meter(config, Metrics::default()).expect("the demo's configs are valid");
        Guard::Halfopen(Box::new(breaker))
    }

    pub fn admit(&mut self, now: Micros, jitter: f64) -> Admit {
        match self {
            Guard::None => Admit::Go(None),
            Guard::Seed(b, requeued) => match (b.begin(now), *requeued) {
                (true, _) => Admit::Go(None),
                (false, false) => Admit::Wait { retry_after: SECOND, uses_attempt: true },
                (false, true) => {
                    let spread = (jitter * SECOND as f64) as Micros;
                    Admit::Wait { retry_after: b.retry_after(now) + spread, uses_attempt: false }
                }
            },
            Guard::Halfopen(b) => match b.try_acquire(at(now)).decision {
                Ok(permit) => Admit::Go(Some(permit)),
                Err(rejection) => {
                    // Come back when the breaker says (the open time left,
                    // or its short hint while every probe slot is taken),
                    // spread over the next second so the jobs do not return
                    // all at once. Held open (no time known): look again in 1 s.
                    let spread = (jitter * SECOND as f64) as Micros;
                    let retry_after = rejection.retry_after().map_or(SECOND, |d| d.as_micros()) + spread;
                    Admit::Wait { retry_after, uses_attempt: false }
                }
            },
        }
    }

    pub fn report(&mut self, permit: Option<Permit>, ok: bool, now: Micros) {
        match (self, permit) {
            (Guard::Seed(b, _), _) => b.end(ok, now),
            (Guard::Halfopen(b), Some(p)) => {
                b.record(p, if ok { Outcome::Success } else { Outcome::Failure }, at(now));
            }
            _ => {}
        }
    }

    /// Times the breaker opened; `None` without one.
    pub fn opens(&self) -> Option<u64> {
        match self {
            Guard::None => None,
            Guard::Seed(b, _) => Some(b.opens),
            Guard::Halfopen(b) => Some(b.meter().counters().opens),
        }
    }

    /// 0 closed, 1 half-open, 2 open; `None` without a breaker.
    pub fn state(&mut self, now: Micros) -> Option<u8> {
        match self {
            Guard::None => None,
            Guard::Seed(b, _) => {
                b.transition_if_needed(now);
                Some(match b.state {
                    SeedState::Closed => 0,
                    SeedState::HalfOpen => 1,
                    SeedState::Open => 2,
                })
            }
            Guard::Halfopen(b) => Some(b.state(at(now)).gauge()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedState {
    Closed,
    Open,
    HalfOpen,
}

/// Seed 000's `CircuitBreaker` (TypeScript), ported: same fields, same rules,
/// with the seed's options (5 failures in 60 s, 30 s open, 3 half-open
/// attempts, doubling to 5 min). `begin`/`end` are `execute`'s two halves.
pub struct SeedBreaker {
    state: SeedState,
    failures: Vec<Micros>,
    opened_at: Micros,
    half_open_attempts: u32,
    half_open_successes: u32,
    current_timeout: Micros,
    /// Times it opened (not in the seed's class: counted for the tables).
    opens: u64,
}

const SEED_THRESHOLD: usize = 5;
const SEED_WINDOW: Micros = 60 * SECOND;
const SEED_OPEN: Micros = 30 * SECOND;
const SEED_HALF_OPEN: u32 = 3;

impl SeedBreaker {
    fn new() -> Self {
        SeedBreaker {
            state: SeedState::Closed,
            failures: Vec::new(),
            opened_at: 0,
            half_open_attempts: 0,
            half_open_successes: 0,
            current_timeout: SEED_OPEN,
            opens: 0,
        }
    }

    /// `execute` up to calling `fn`: whether it is called.
    fn begin(&mut self, now: Micros) -> bool {
        self.transition_if_needed(now);
        match self.state {
            SeedState::Open => false,
            SeedState::HalfOpen if self.half_open_attempts >= SEED_HALF_OPEN => false,
            SeedState::HalfOpen => {
                self.half_open_attempts += 1;
                true
            }
            SeedState::Closed => true,
        }
    }

    /// What its code knows of when to come back after a refusal: the open
    /// time left; when its half-open limit is reached, a tenth of the open
    /// time (the rule halfopen's core uses).
    fn retry_after(&self, now: Micros) -> Micros {
        match self.state {
            SeedState::Open => (self.opened_at + self.current_timeout).saturating_sub(now),
            SeedState::HalfOpen | SeedState::Closed => self.current_timeout / 10,
        }
    }

    fn transition_if_needed(&mut self, now: Micros) {
        if self.state == SeedState::Open && now - self.opened_at >= self.current_timeout {
            self.state = SeedState::HalfOpen;
            self.half_open_attempts = 0;
            self.half_open_successes = 0;
        }
        self.failures.retain(|&t| now - t < SEED_WINDOW);
    }

    /// `execute` after `fn` settled.
    fn end(&mut self, ok: bool, now: Micros) {
        if ok {
            if self.state == SeedState::HalfOpen {
                self.half_open_successes += 1;
                if self.half_open_successes >= SEED_HALF_OPEN {
                    self.state = SeedState::Closed;
                    self.failures.clear();
                    self.current_timeout = SEED_OPEN;
                }
            }
            return;
        }
        if self.state == SeedState::HalfOpen {
            self.state = SeedState::Open;
            self.opens += 1;
            self.opened_at = now;
            self.current_timeout = (self.current_timeout * 2).min(300 * SECOND);
            return;
        }
        self.failures.push(now);
        if self.failures.len() >= SEED_THRESHOLD {
            self.state = SeedState::Open;
            self.opens += 1;
            self.opened_at = now;
        }
    }
}
