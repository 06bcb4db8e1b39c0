//! The discrete-event simulation: messages arrive, a pool of workers sends
//! them through a guard to their instance's gateway, answers come back after
//! the gateway's latency (or the sender's timeout), failures are retried.
//! Deterministic: one seeded random source, events ordered by (time, order
//! of scheduling).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use halfopen::Permit;
use halfopen::group::{Answer as GroupAnswer, GroupConfig, Member, MemoryStore};

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

/// The sender processes: how many, and whether their breakers are one
/// group (each process's breaker exchanges with its instance's group store
/// every flush interval; a share of the exchanges is lost).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fleet {
    /// Sender processes; the sends in flight are split evenly among them,
    /// and each job goes to the next process (in turn) with a free slot.
    pub processes: usize,
    /// The group mode, if on.
    pub group: Option<GroupModel>,
}

impl Fleet {
    /// One process, no group: the headline tables.
    pub const ONE: Fleet = Fleet { processes: 1, group: None };
}

/// How the simulated group store behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupModel {
    /// The members' configuration (flush interval, quorum, …).
    pub config: GroupConfig,
    /// A store call's round trip.
    pub round_trip: Micros,
    /// The share of store calls that get no answer (each then fails at the
    /// store timeout).
    pub lost: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival(u32),
    /// An answer: message, the breaker (instance × process) it went
    /// through, whether the sender saw success, whether it was delivered.
    Answer {
        message: u32,
        guard: u32,
        outcome: Settled,
        permit: Option<(u32, u64)>,
    },
    Wake,
    /// A group member's exchange may be due (if still planned for now).
    Exchange(u32),
    /// The store's answer reaches the member (`None`: it was lost).
    Reply(u32, Option<u32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Settled {
    Delivered,
    Swallowed,
    Failed,
}

/// The group mode's state: a member per breaker, a store per instance.
struct Groups {
    model: GroupModel,
    members: Vec<Member>,
    stores: Vec<MemoryStore>,
    /// When each member's next exchange is planned.
    planned: Vec<Option<Micros>>,
    /// Answers on their way back, by index in [`Event::Reply`].
    answers: Vec<GroupAnswer>,
    /// Draws which store calls are lost (apart from the campaign's chance).
    rng: Rng,
}

struct World {
    scenario: Scenario,
    rng: Rng,
    gateways: Vec<Gateway>,
    /// One per instance and process: instance `i`, process `p` at `i × processes + p`.
    guards: Vec<Guard>,
    processes: usize,
    /// Each process's sends in flight, and how many it may have.
    busy: Vec<usize>,
    slots: Vec<usize>,
    /// The process the next job goes to (if it has a free slot).
    turn: usize,
    groups: Option<Groups>,
    resolved: u32,
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
        self.resolved += 1;
    }

    /// The next process (in turn) with a free slot.
    fn free_process(&mut self) -> Option<usize> {
        let n = self.processes;
        let p = (0..n).map(|k| (self.turn + k) % n).find(|&p| self.busy[p] < self.slots[p])?;
        self.turn = (p + 1) % n;
        Some(p)
    }

    /// Plans guard `g`'s next exchange with its group, if it is in one and
    /// messages are still unresolved (an exchange then is useless).
    fn plan(&mut self, g: usize, now: Micros) {
        let Some(groups) = self.groups.as_mut() else { return };
        if self.resolved >= self.scenario.messages {
            return;
        }
        let Guard::Halfopen(breaker) = &self.guards[g] else { return };
        let at = groups.members[g].next_exchange(breaker, at_us(now)).as_micros().max(now);
        if groups.planned[g] != Some(at) {
            groups.planned[g] = Some(at);
            self.schedule(at, Event::Exchange(g as u32));
        }
    }

    /// Guard `g`'s exchange, if it is still due at `now`.
    fn exchange(&mut self, g: usize, now: Micros) {
        let Some(groups) = self.groups.as_mut() else { return };
        if groups.planned[g] != Some(now) {
            return;
        }
        groups.planned[g] = None;
        let Guard::Halfopen(breaker) = &mut self.guards[g] else { return };
        let Some(request) = groups.members[g].request(breaker, at_us(now)) else {
            return self.plan(g, now);
        };
        let instance = g / self.processes;
        let (at, reply) = if groups.rng.unit() < groups.model.lost {
            (now + groups.members[g].config().store_timeout().as_micros(), None)
        } else {
            let answer = groups.stores[instance].exchange(&request, now + groups.model.round_trip / 2);
            groups.answers.push(answer);
            (now + groups.model.round_trip, Some(groups.answers.len() as u32 - 1))
        };
        self.schedule(at, Event::Reply(g as u32, reply));
    }

    /// The store's answer (or its loss) reaches guard `g`'s member.
    fn reply(&mut self, g: usize, reply: Option<u32>, now: Micros) {
        let Some(groups) = self.groups.as_mut() else { return };
        let Guard::Halfopen(breaker) = &mut self.guards[g] else { return };
        match reply {
            Some(i) => {
                let answer = groups.answers[i as usize];
                let _ = groups.members[g].apply(breaker, &answer, at_us(now));
            }
            None => groups.members[g].failed(breaker, at_us(now)),
        }
        self.plan(g, now);
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
            let Some(process) = self.free_process() else { return };
            self.ready.pop();
            self.send(message, process, now);
        }
    }

    fn send(&mut self, message: u32, process: usize, now: Micros) {
        let instance = message as usize % self.scenario.instances;
        let g = instance * self.processes + process;
        let jitter = self.rng.unit();
        let admit = self.guards[g].admit(now, jitter);
        self.plan(g, now);
        match admit {
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
                self.busy[process] += 1;
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
                let guard = g as u32;
                self.schedule(now + latency, Event::Answer { message, guard, outcome, permit });
            }
        }
    }

    fn answer(&mut self, message: u32, g: usize, outcome: Settled, permit: Option<(u32, u64)>, now: Micros) {
        self.in_flight -= 1;
        self.busy[g % self.processes] -= 1;
        let permit =
            permit.map(|(generation, issued)| Permit::from_parts(generation, halfopen::Instant::from_micros(issued)));
        // The sender sees a 200 for a swallowed message: only failures count.
        self.guards[g].report(permit, outcome != Settled::Failed, now);
        self.plan(g, now);
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

fn at_us(t: Micros) -> halfopen::Instant {
    halfopen::Instant::from_micros(t)
}

/// Runs `scenario` with `strategy`, drawing chance from `seed`.
pub fn run(scenario: &Scenario, strategy: Strategy, seed: u64) -> Report {
    run_fleet(scenario, strategy, seed, Fleet::ONE)
}

/// Runs `scenario` with halfopen configured by `config` (a variant of the
/// limited strategy, reported under its name), drawing chance from `seed`.
pub fn run_config(scenario: &Scenario, config: halfopen::Config, seed: u64) -> Report {
    run_guarded(scenario, Strategy::HalfopenLimited, seed, Fleet::ONE, || Guard::with_config(config))
}

/// Runs `scenario` with `strategy` in `fleet`'s processes (a breaker per
/// instance in each; one group per instance in group mode), drawing chance
/// from `seed`. The group mode needs a halfopen strategy.
pub fn run_fleet(scenario: &Scenario, strategy: Strategy, seed: u64, fleet: Fleet) -> Report {
    run_guarded(scenario, strategy, seed, fleet, || Guard::new(strategy))
}

fn run_guarded(scenario: &Scenario, strategy: Strategy, seed: u64, fleet: Fleet, guard: impl Fn() -> Guard) -> Report {
    let processes = fleet.processes.max(1);
    let breakers = scenario.instances * processes;
    let guards: Vec<Guard> = (0..breakers).map(|_| guard()).collect();
    let groups = fleet.group.map(|model| Groups {
        model,
        members: guards
            .iter()
            .enumerate()
            .map(|(g, guard)| {
                let Guard::Halfopen(b) = guard else { panic!("the group mode needs a halfopen strategy") };
                Member::new(g as u64 + 1, model.config, b.config()).expect("the demo's group config is valid")
            })
            .collect(),
        stores: (0..scenario.instances).map(|_| MemoryStore::new()).collect(),
        planned: vec![None; breakers],
        answers: Vec::new(),
        rng: Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15),
    });
    let mut world = World {
        rng: Rng::new(seed),
        gateways: (0..scenario.instances)
            .map(|i| match scenario.weak {
                Some(weak) if i + 1 == scenario.instances => Gateway::new(weak),
                _ => Gateway::new(scenario.model),
            })
            .collect(),
        guards,
        processes,
        busy: vec![0; processes],
        slots: (0..processes)
            .map(|p| scenario.workers / processes + usize::from(p < scenario.workers % processes))
            .collect(),
        turn: 0,
        groups,
        resolved: 0,
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
    for g in 0..breakers {
        world.plan(g, 0);
    }
    while let Some(Reverse((now, order, event))) = world.events.pop() {
        if now > scenario.horizon {
            // Not handled: back where the count of what is left finds it.
            world.events.push(Reverse((now, order, event)));
            break;
        }
        match event {
            Event::Arrival(m) => world.enqueue(now, m),
            Event::Answer { message, guard, outcome, permit } => {
                world.answer(message, guard as usize, outcome, permit, now)
            }
            Event::Wake if world.wake_at == Some(now) => world.wake_at = None,
            Event::Wake => {}
            Event::Exchange(g) => world.exchange(g as usize, now),
            Event::Reply(g, reply) => world.reply(g as usize, reply, now),
        }
        world.dispatch(now);
        let watched = if scenario.weak.is_some() { scenario.instances - 1 } else { 0 };
        let watched_guard = watched * processes;
        let suspended = world.gateways[watched].is_suspended(now);
        let state = world.guards[watched_guard].state(now);
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
