//! Seed 001's story: a payment provider sends every event to a partner's
//! webhook endpoint; the endpoint goes down for four minutes. Without
//! retention the events sent meanwhile are lost (the partner must call a
//! reprocessing endpoint); the seed's own flow retains them and, once a new
//! event's message gets through, sends everything retained at once; halfopen
//! retains them in order, probes with the oldest and releases the backlog
//! through an adaptive concurrency limit. Deterministic, on the injected
//! clock, through the core's public API (`halfopen::retention`).
//!
//! The partner: down from minute 2 to minute 6 (every call times out, 10 s);
//! when up it takes 50 calls a second (100 ms each) and beyond that its calls
//! time out too — so a backlog sent at once fails again. Events: 20 a
//! second for 10 minutes (12,000). The sender: at most 200 calls in flight,
//! a 10 s timeout (a timeout is a failure), seed 001's breaker (5
//! consecutive failures open it for 10 s, one probe).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write;

use halfopen::retention::{Event, Probe, Reported, RetentionConfig, RetentionQueue, Submitted};
use halfopen::{Breaker, ConcurrencyLimit, Config, Instant, Metrics, Outcome, Permit, State};

type Micros = u64;
const SECOND: Micros = 1_000_000;
const EVENTS: u32 = 12_000;
const EVERY: Micros = SECOND / 20;
const DOWN: (Micros, Micros) = (120 * SECOND, 360 * SECOND);
const CAPACITY_PER_SECOND: usize = 50;
const LATENCY: Micros = 100_000;
const TIMEOUT: Micros = 10 * SECOND;
const SENDER_CONCURRENCY: u32 = 200;
const HORIZON: Micros = 3_600 * SECOND;

/// How the sender treats an endpoint that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Every event is sent when it happens; a failed one is lost.
    NoBreaker,
    /// Seed 001's breaker, nothing retained: an event refused is lost.
    BreakerOnly,
    /// Seed 001's flow: retained events wait for a new event's message to
    /// probe, then all are sent at once (only the sender's concurrency
    /// bounds them).
    SeedRetention,
    /// halfopen: the oldest retained event probes, the backlog goes out in
    /// order through an adaptive concurrency limit.
    Halfopen,
}

impl Strategy {
    pub const ALL: [Strategy; 4] =
        [Strategy::NoBreaker, Strategy::BreakerOnly, Strategy::SeedRetention, Strategy::Halfopen];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::NoBreaker => "no breaker (failures lost)",
            Strategy::BreakerOnly => "seed 001's breaker, no retention",
            Strategy::SeedRetention => "seed 001's retention (new event probes, all released at once)",
            Strategy::Halfopen => "halfopen retention (oldest probes, adaptive limit)",
        }
    }
}

/// What a run ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub strategy: Strategy,
    pub delivered: u32,
    pub lost: u32,
    /// Still retained or in flight at the horizon.
    pub waiting: u32,
    /// Delivered after an event that happened later.
    pub out_of_order: u32,
    /// Calls the partner got while it was down.
    pub calls_while_down: u64,
    /// Times the breaker opened after the partner was back.
    pub reopened: u32,
    /// From the partner's recovery to the last delivery.
    pub drain: Micros,
}

/// The partner's endpoint: its answer to a call made at `t`.
struct Partner {
    /// When the latest calls were made (the last second's).
    recent: VecDeque<Micros>,
    calls_while_down: u64,
}

impl Partner {
    /// The call's end and whether it succeeded.
    fn call(&mut self, t: Micros) -> (Micros, bool) {
        if (DOWN.0..DOWN.1).contains(&t) {
            self.calls_while_down += 1;
            return (t + TIMEOUT, false);
        }
        while self.recent.front().is_some_and(|&c| c + SECOND <= t) {
            self.recent.pop_front();
        }
        self.recent.push_back(t);
        if self.recent.len() > CAPACITY_PER_SECOND { (t + TIMEOUT, false) } else { (t + LATENCY, true) }
    }
}

/// The simulation's events, by time then by order of scheduling.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Happening {
    /// Event number `n` happens.
    Event(u32),
    /// A call ends: its ticket, and whether it succeeded.
    Answer(u64, bool),
    /// The dispatcher said to look again.
    Wake,
}

fn breaker(limit: Option<ConcurrencyLimit>) -> Breaker<Config, Metrics> {
    Breaker::with_meter(Config { concurrency_limit: limit, ..Config::partner_webhook() }, Metrics::default())
        .expect("seed 001's breaker")
}

/// Runs the story with `strategy`.
pub fn run(strategy: Strategy) -> Report {
    let mut queue: BinaryHeap<Reverse<(Micros, u64, Happening)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut at = |queue: &mut BinaryHeap<_>, t: Micros, h: Happening| {
        order += 1;
        queue.push(Reverse((t, order, h)));
    };
    for n in 0..EVENTS {
        at(&mut queue, u64::from(n) * EVERY, Happening::Event(n));
    }
    let mut partner = Partner { recent: VecDeque::new(), calls_while_down: 0 };
    let mut report = Report {
        strategy,
        delivered: 0,
        lost: 0,
        waiting: 0,
        out_of_order: 0,
        calls_while_down: 0,
        reopened: 0,
        drain: 0,
    };
    let mut latest_delivered: Option<u32> = None;
    let mut deliver = |report: &mut Report, n: u32, t: Micros| {
        report.delivered += 1;
        if latest_delivered.is_some_and(|l| l > n) {
            report.out_of_order += 1;
        }
        latest_delivered = Some(latest_delivered.map_or(n, |l| l.max(n)));
        report.drain = report.drain.max(t.saturating_sub(DOWN.1));
    };
    // Plain sends (no breaker, breaker only): ticket = event number.
    let mut plain = breaker(None);
    let mut permits: std::collections::HashMap<u64, Permit> = std::collections::HashMap::new();
    let mut in_flight = 0u32;
    // Retention: ticket = the dispatcher's sequence number.
    let (limit, probe) = match strategy {
        Strategy::SeedRetention => (ConcurrencyLimit::Fixed(SENDER_CONCURRENCY), Probe::NewMessage),
        _ => (ConcurrencyLimit::Adaptive { min: 1, max: SENDER_CONCURRENCY }, Probe::Oldest),
    };
    let config = RetentionConfig { probe, ..RetentionConfig::default() };
    let mut dispatcher: RetentionQueue<u32> = RetentionQueue::new(breaker(Some(limit)), config).expect("paced");
    let mut woken_at: Option<Micros> = None;
    while let Some(Reverse((t, _, happening))) = queue.pop() {
        if t > HORIZON {
            break;
        }
        let now = Instant::from_micros(t);
        match (strategy, happening) {
            (Strategy::NoBreaker | Strategy::BreakerOnly, Happening::Event(n)) => {
                if in_flight >= SENDER_CONCURRENCY {
                    report.lost += 1;
                    continue;
                }
                if strategy == Strategy::BreakerOnly {
                    match plain.try_acquire(now).decision {
                        Ok(permit) => {
                            permits.insert(u64::from(n), permit);
                        }
                        Err(_) => {
                            report.lost += 1;
                            continue;
                        }
                    }
                }
                in_flight += 1;
                let (end, ok) = partner.call(t);
                at(&mut queue, end, Happening::Answer(u64::from(n), ok));
            }
            (Strategy::NoBreaker | Strategy::BreakerOnly, Happening::Answer(n, ok)) => {
                in_flight -= 1;
                if let Some(permit) = permits.remove(&n) {
                    let was_open = plain.state(now) == State::Open;
                    let t2 = plain.record(permit, if ok { Outcome::Success } else { Outcome::Failure }, now);
                    if t2.is_some_and(|tr| tr.to == State::Open) && !was_open && t >= DOWN.1 {
                        report.reopened += 1;
                    }
                }
                if ok {
                    deliver(&mut report, n as u32, t);
                } else {
                    report.lost += 1;
                }
            }
            (_, Happening::Event(n)) => {
                let sent = match dispatcher.submit(n, 1, now) {
                    Ok(Submitted::Send(seq)) => Some(seq),
                    Ok(Submitted::Retained(_)) => None,
                    Err(_) => unreachable!("unbounded"),
                };
                if let Some(seq) = sent {
                    let (end, ok) = partner.call(t);
                    at(&mut queue, end, Happening::Answer(seq, ok));
                }
            }
            (_, Happening::Answer(seq, ok)) => {
                let outcome = if ok { Outcome::Success } else { Outcome::Failure };
                if let Some(Reported::Delivered(n)) = dispatcher.report(seq, outcome, now) {
                    deliver(&mut report, n, t);
                }
            }
            (_, Happening::Wake) => woken_at = None,
        }
        if matches!(strategy, Strategy::SeedRetention | Strategy::Halfopen) {
            while let Some(seq) = dispatcher.next(now) {
                let (end, ok) = partner.call(t);
                at(&mut queue, end, Happening::Answer(seq, ok));
            }
            while let Some(event) = dispatcher.poll_event() {
                if let Event::Transition(tr) = event
                    && tr.to == State::Open
                    && tr.from == State::Closed
                    && t >= DOWN.1
                {
                    report.reopened += 1;
                }
            }
            if let Some(wake) = dispatcher.poll_timeout().map(|i| i.as_micros().max(t + 1))
                && woken_at.is_none_or(|w| w > wake)
            {
                woken_at = Some(wake);
                at(&mut queue, wake, Happening::Wake);
            }
        }
    }
    report.calls_while_down = partner.calls_while_down;
    if matches!(strategy, Strategy::SeedRetention | Strategy::Halfopen) {
        report.waiting = (dispatcher.retained() + dispatcher.in_flight()) as u32;
    }
    report
}

fn minutes(us: Micros) -> String {
    let s = us / SECOND;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// The story's table, as `make demo` prints it and the README shows it.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::from(
        "| strategy | delivered | lost | still waiting | out of order | calls while down | reopened after recovery | drained after recovery |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in reports {
        let drained = if r.waiting == 0 { minutes(r.drain) } else { "not in the hour".to_owned() };
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} ({:.1} %) | {} | {} | {} | {} | {} | {} |",
            r.strategy.name(),
            r.delivered,
            100.0 * f64::from(r.delivered) / f64::from(EVENTS),
            r.lost,
            r.waiting,
            r.out_of_order,
            r.calls_while_down,
            r.reopened,
            drained,
        );
    }
    out
}
