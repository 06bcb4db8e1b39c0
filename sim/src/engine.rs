//! The discrete-event simulation: messages arrive, a pool of workers sends
//! them through a guard to their instance's gateway, answers come back after
//! the gateway's latency (or the sender's timeout), failures are retried.
//! Deterministic: one seeded random source, events ordered by (time, order
//! of scheduling).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use halfopen::Permit;

use crate::gateway::{Answer, Gateway, GatewayModel, Micros, SECOND};
use crate::guard::{Admit, Guard, Strategy};
use crate::rng::Rng;

/// A campaign and the world it runs in.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// File name of its picture.
    pub slug: &'static str,
    pub instances: usize,
    pub messages: u32,
    /// Messages arrive evenly over this span, spread over the instances in turn.
    pub arrival_span: Micros,
    pub model: GatewayModel,
    /// The last instance's model, if it differs: a newer number with lower
    /// limits. The timeline follows this instance (else the first).
    pub weak: Option<GatewayModel>,
    /// Sends in flight at most (the sender's concurrency).
    pub workers: usize,
    /// The sender gives up on an answer after this (a failure).
    pub sender_timeout: Micros,
    /// Upstream failures after which a message is given up (lost).
    pub max_attempts: u32,
    /// A slow-upstream incident: from, until, latency multiplier.
    pub incident: Option<(Micros, Micros, f64)>,
    /// The simulation stops here; messages still waiting are "queued".
    pub horizon: Micros,
}

/// One second of the timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Requests that reached the upstream.
    pub calls: u32,
    /// Of those, answered with a failure (429 or timeout) or swallowed.
    pub failures: u32,
    /// The watched instance's breaker state (0 closed, 1 half-open, 2 open).
    pub state: Option<u8>,
    /// Whether the watched instance was suspended.
    pub suspended: bool,
}

/// What a run ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub strategy: Strategy,
    pub messages: u32,
    pub delivered: u32,
    /// Taken by a suspended instance and never delivered.
    pub swallowed: u32,
    /// Given up after `max_attempts` failures.
    pub gave_up: u32,
    /// At the horizon: waiting in the queue, or not arrived yet (counted from
    /// the queue and the pending arrivals, not as what is left over).
    pub waiting: u32,
    /// At the horizon: sent, not answered yet.
    pub in_flight: u32,
    pub upstream_calls: u64,
    /// Calls that failed or were swallowed.
    pub wasted_calls: u64,
    /// Time any instance spent suspended (summed).
    pub suspended: Micros,
    /// Times a breaker opened (summed over instances; `None` without one).
    pub opens: Option<u64>,
    /// When the last message was resolved (delivered or lost).
    pub duration: Micros,
    pub timeline: Vec<Second>,
}

impl Report {
    pub fn lost(&self) -> u32 {
        self.swallowed + self.gave_up
    }

    /// Still waiting or in flight at the horizon.
    pub fn queued(&self) -> u32 {
        self.waiting + self.in_flight
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival(u32),
    /// An answer: message, whether the sender saw success, whether it was delivered.
    Answer {
        message: u32,
        outcome: Settled,
        permit: Option<(u32, u64)>,
    },
    Wake,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Settled {
    Delivered,
    Swallowed,
    Failed,
}

struct World {
    scenario: Scenario,
    rng: Rng,
    gateways: Vec<Gateway>,
    guards: Vec<Guard>,
    events: BinaryHeap<Reverse<(Micros, u64, Event)>>,
    ready: BinaryHeap<Reverse<(Micros, u64, u32)>>,
    order: u64,
    attempts: Vec<u32>,
    in_flight: usize,
    wake_at: Option<Micros>,
    report: Report,
}

impl World {
    fn schedule(&mut self, at: Micros, event: Event) {
        self.order += 1;
        self.events.push(Reverse((at, self.order, event)));
    }

    fn enqueue(&mut self, at: Micros, message: u32) {
        self.order += 1;
        self.ready.push(Reverse((at, self.order, message)));
    }

    fn second(&mut self, t: Micros) -> &mut Second {
        let s = (t / SECOND) as usize;
        if self.report.timeline.len() <= s {
            self.report.timeline.resize(s + 1, Second::default());
        }
        &mut self.report.timeline[s]
    }

    fn resolve(&mut self, now: Micros) {
        self.report.duration = self.report.duration.max(now);
    }

    fn dispatch(&mut self, now: Micros) {
        while self.in_flight < self.scenario.workers {
            let Some(&Reverse((ready_at, _, message))) = self.ready.peek() else { return };
            if ready_at > now {
                // One pending wake-up at a time, the earliest needed.
                if self.wake_at.is_none_or(|w| w > ready_at) {
                    self.wake_at = Some(ready_at);
                    self.schedule(ready_at, Event::Wake);
                }
                return;
            }
            self.ready.pop();
            self.send(message, now);
        }
    }

    fn send(&mut self, message: u32, now: Micros) {
        let instance = message as usize % self.scenario.instances;
        let jitter = self.rng.unit();
        match self.guards[instance].admit(now, jitter) {
            Admit::Wait { retry_after, uses_attempt: false } => self.enqueue(now + retry_after, message),
            Admit::Wait { uses_attempt: true, .. } => {
                // BullMQ's exponential backoff, 1 s doubling.
                self.attempts[message as usize] += 1;
                let n = self.attempts[message as usize];
                if n >= self.scenario.max_attempts {
                    self.report.gave_up += 1;
                    self.resolve(now);
                } else {
                    self.enqueue(now + SECOND * (1 << (n - 1).min(10)), message);
                }
            }
            Admit::Go(permit) => {
                self.in_flight += 1;
                self.report.upstream_calls += 1;
                self.second(now).calls += 1;
                let (answer, mut latency) = self.gateways[instance].request(now, &mut self.rng);
                if let Some((from, until, factor)) = self.scenario.incident
                    && (from..until).contains(&now)
                    && answer == Answer::Delivered
                {
                    latency = (latency as f64 * factor) as Micros;
                }
                let outcome = match answer {
                    Answer::Delivered if latency > self.scenario.sender_timeout => Settled::Failed,
                    Answer::Delivered => Settled::Delivered,
                    Answer::Swallowed => Settled::Swallowed,
                    Answer::Throttled => Settled::Failed,
                };
                let latency = latency.min(self.scenario.sender_timeout);
                let permit = permit.map(|p| (p.generation(), p.issued_at().as_micros()));
                self.schedule(now + latency, Event::Answer { message, outcome, permit });
            }
        }
    }

    fn answer(&mut self, message: u32, outcome: Settled, permit: Option<(u32, u64)>, now: Micros) {
        self.in_flight -= 1;
        let instance = message as usize % self.scenario.instances;
        let permit =
            permit.map(|(generation, issued)| Permit::from_parts(generation, halfopen::Instant::from_micros(issued)));
        // The sender sees a 200 for a swallowed message: only failures count.
        self.guards[instance].report(permit, outcome != Settled::Failed, now);
        match outcome {
            Settled::Delivered => {
                self.report.delivered += 1;
                self.resolve(now);
            }
            Settled::Swallowed => {
                self.report.swallowed += 1;
                self.report.wasted_calls += 1;
                self.second(now).failures += 1;
                self.resolve(now);
            }
            Settled::Failed => {
                self.report.wasted_calls += 1;
                self.second(now).failures += 1;
                self.attempts[message as usize] += 1;
                if self.attempts[message as usize] >= self.scenario.max_attempts {
                    self.report.gave_up += 1;
                    self.resolve(now);
                } else {
                    // The app retries at once (seed 000: "App faz retry imediato").
                    self.enqueue(now, message);
                }
            }
        }
    }
}

/// Runs `scenario` with `strategy`, drawing chance from `seed`.
pub fn run(scenario: &Scenario, strategy: Strategy, seed: u64) -> Report {
    run_guarded(scenario, strategy, seed, || Guard::new(strategy))
}

/// Runs `scenario` with halfopen configured by `config` (a variant of the
/// limited strategy, reported under its name), drawing chance from `seed`.
pub fn run_config(scenario: &Scenario, config: halfopen::Config, seed: u64) -> Report {
    run_guarded(scenario, Strategy::HalfopenLimited, seed, || Guard::with_config(config))
}

fn run_guarded(scenario: &Scenario, strategy: Strategy, seed: u64, guard: impl Fn() -> Guard) -> Report {
    let mut world = World {
        rng: Rng::new(seed),
        gateways: (0..scenario.instances)
            .map(|i| match scenario.weak {
                Some(weak) if i + 1 == scenario.instances => Gateway::new(weak),
                _ => Gateway::new(scenario.model),
            })
            .collect(),
        guards: (0..scenario.instances).map(|_| guard()).collect(),
        events: BinaryHeap::new(),
        ready: BinaryHeap::new(),
        order: 0,
        attempts: vec![0; scenario.messages as usize],
        in_flight: 0,
        wake_at: None,
        report: Report {
            strategy,
            messages: scenario.messages,
            delivered: 0,
            swallowed: 0,
            gave_up: 0,
            waiting: 0,
            in_flight: 0,
            upstream_calls: 0,
            wasted_calls: 0,
            suspended: 0,
            opens: None,
            duration: 0,
            timeline: Vec::new(),
        },
        scenario: scenario.clone(),
    };
    let gap = scenario.arrival_span / u64::from(scenario.messages.max(1));
    for m in 0..scenario.messages {
        world.schedule(u64::from(m) * gap, Event::Arrival(m));
    }
    while let Some(Reverse((now, order, event))) = world.events.pop() {
        if now > scenario.horizon {
            // Not handled: back where the count of what is left finds it.
            world.events.push(Reverse((now, order, event)));
            break;
        }
        match event {
            Event::Arrival(m) => world.enqueue(now, m),
            Event::Answer { message, outcome, permit } => world.answer(message, outcome, permit, now),
            Event::Wake if world.wake_at == Some(now) => world.wake_at = None,
            Event::Wake => {}
        }
        world.dispatch(now);
        let watched = if scenario.weak.is_some() { scenario.instances - 1 } else { 0 };
        let suspended = world.gateways[watched].is_suspended(now);
        let state = world.guards[watched].state(now);
        let second = world.second(now);
        second.suspended |= suspended;
        second.state = state.max(second.state);
    }
    // What is left, counted where it is (so that a message lost by the
    // engine shows up as a broken sum in the tests).
    let not_arrived = world.events.iter().filter(|Reverse((_, _, e))| matches!(e, Event::Arrival(_))).count();
    world.report.waiting = (world.ready.len() + not_arrived) as u32;
    world.report.in_flight = world.in_flight as u32;
    world.report.suspended = world.gateways.iter().map(|g| g.suspended_for).sum();
    world.report.opens = world.guards.iter().map(Guard::opens).sum();
    world.report
}
