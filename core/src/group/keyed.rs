//! A registry in a group: each name's breaker is one group (the group's
//! name and the breaker's), with a [`Member`] per name, and every name due
//! is sent in one store call per exchange (one request per name, answered
//! in order), not one per name.
//!
//! The members of a registry exchange together: at each regular exchange
//! (one per flush interval) every name whose exchange would be due within
//! the next flush interval goes, in calls of at most [`NAMES_PER_CALL`]
//! names one after the other; an exchange a transition asks for sooner
//! carries only the names due then (they join the regular one after). A
//! registry of up to [`NAMES_PER_CALL`] names makes one store call per
//! flush interval, plus one per burst of transitions (at most ten per
//! flush interval, as a single breaker's). A name gets its member at the next regular exchange
//! after its breaker is made (never on the call path: until then, up to a
//! flush interval, it decides alone); a name whose breaker was evicted
//! leaves, and one whose breaker was replaced (configured, restored) joins
//! again afresh ([`forget`](KeyedMembers::forget)).

use alloc::boxed::Box;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::protocol::{Answer, Request};
use super::{GroupConfig, GroupConfigError, GroupEvent, Member};
use crate::config::Config;
use crate::meter::Meter;
use crate::registry::Registry;
use crate::state::Transitions;
use crate::time::{Duration, Instant};

/// The most names one store call carries. Redis runs a script alone (every
/// other client waits), and the script costs about 0.1 ms of Redis time
/// per name (BENCHMARKS.md, "Group mode"): a call holds Redis for about
/// 10 ms at most, well within a store timeout, and a registry of more
/// names makes a call per hundred names each flush interval.
pub const NAMES_PER_CALL: usize = 100;

/// The members of a registry's names (see the module).
#[derive(Debug)]
pub struct KeyedMembers {
    id: u64,
    config: GroupConfig,
    members: HashMap<Box<str>, Member>,
    /// The names of the requests out, in their order, and when they went.
    out: Vec<Box<str>>,
    sent: Option<Instant>,
    /// When the next regular exchange is due (none: at once).
    regular: Option<Instant>,
    /// The regular exchange under way: when it ends, and the names it has
    /// still to send (each once: a round longer than a flush interval
    /// starves none).
    round: Option<(Instant, Vec<Box<str>>)>,
    /// Whether the latest exchange failed, and whether the caller was told.
    degraded: bool,
    told_degraded: bool,
}

impl KeyedMembers {
    /// Process `id`'s members of `registry`'s names (its configurations
    /// are checked here; a name configured later, by [`check`](Self::check)).
    pub fn new<M: Meter + Default>(
        id: u64,
        config: GroupConfig,
        registry: &Registry<M>,
    ) -> Result<Self, GroupConfigError> {
        for breaker in registry.configs() {
            config.validate(breaker)?;
        }
        Ok(KeyedMembers {
            id,
            config,
            members: HashMap::new(),
            out: Vec::new(),
            sent: None,
            regular: None,
            round: None,
            degraded: false,
            told_degraded: false,
        })
    }

    /// Whether a name configured by `breaker` can be in the group (a lease
    /// given must outlast its probes).
    pub fn check(&self, breaker: &Config) -> Result<(), GroupConfigError> {
        self.config.validate(breaker)
    }

    /// The group's configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Names with a member.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether no name has a member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Names whose group answered since the store last failed for them.
    pub fn answered(&self) -> usize {
        self.members.values().filter(|m| m.register().is_some()).count()
    }

    /// `name`'s member, if it has one.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// Whether the latest exchange failed: every name decides alone.
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// When the next exchange is due at `now`: with one out, when its
    /// answer is overdue; else the next regular one, or sooner a member's.
    pub fn next_exchange<M: Meter + Default>(&self, registry: &Registry<M>, now: Instant) -> Instant {
        if let Some(sent) = self.sent {
            return sent + self.config.store_timeout();
        }
        if self.round.is_some() {
            return now;
        }
        let mut due = self.regular.unwrap_or(now);
        for (name, breaker) in registry.iter() {
            if let Some(member) = self.members.get(name) {
                due = due.min(member.next_exchange(breaker, now));
            }
        }
        due
    }

    /// The requests to send at `now`, if an exchange is due, one per name
    /// ([`names_out`](Self::names_out) in the same order); none while one is
    /// out (one out past the store timeout fails first).
    pub fn requests<M: Meter + Default>(&mut self, registry: &mut Registry<M>, now: Instant) -> Option<Vec<Request>> {
        if let Some(sent) = self.sent {
            if now < sent + self.config.store_timeout() {
                return None;
            }
            self.failed(registry, now);
        }
        if now < self.next_exchange(registry, now) {
            return None;
        }
        // Names evicted leave; new ones join at a regular exchange.
        self.members.retain(|name, _| registry.peek(name).is_some());
        let flush = self.config.flush_interval;
        // (A round under way finishes first.)
        let regular = self.round.is_none() && self.regular.is_none_or(|at| now >= at);
        if regular {
            for (name, breaker) in registry.iter() {
                if !self.members.contains_key(name)
                    && let Ok(member) = Member::new(self.id, self.config, breaker.config())
                {
                    self.members.insert(name.into(), member);
                }
            }
        }
        if regular {
            self.regular = Some(now + flush);
            self.round = Some((now + flush, self.members.keys().cloned().collect()));
        }
        let mut requests = Vec::new();
        self.out.clear();
        match &mut self.round {
            // In a round, its names due before it ends.
            Some((end, names)) => {
                let ahead = Duration::from_micros(end.saturating_since(now).as_micros().saturating_sub(1));
                while requests.len() < NAMES_PER_CALL
                    && let Some(name) = names.pop()
                {
                    let (Some(member), Some(breaker)) = (self.members.get_mut(&name), registry.peek_mut(&name)) else {
                        continue;
                    };
                    if let Some(request) = member.request_ahead(breaker, now, ahead) {
                        requests.push(request);
                        self.out.push(name);
                    }
                }
                if names.is_empty() {
                    self.round = None;
                }
            }
            // Else those due now (a transition's).
            None => {
                for (name, member) in &mut self.members {
                    if requests.len() == NAMES_PER_CALL {
                        break;
                    }
                    let Some(breaker) = registry.peek_mut(name) else { continue };
                    if let Some(request) = member.request_ahead(breaker, now, Duration::ZERO) {
                        requests.push(request);
                        self.out.push(name.clone());
                    }
                }
            }
        }
        if requests.is_empty() {
            return None;
        }
        self.sent = Some(now);
        Some(requests)
    }

    /// The names of the requests out, in order.
    pub fn names_out(&self) -> &[Box<str>] {
        &self.out
    }

    /// Applies the store's `answers` (one per request, in order) at `now`;
    /// `each` gets every name's transitions. Answers that do not match the
    /// requests out (a count that differs) are a failed exchange: false.
    pub fn apply<M: Meter + Default>(
        &mut self,
        registry: &mut Registry<M>,
        answers: &[Answer],
        now: Instant,
        mut each: impl FnMut(&str, Transitions),
    ) -> bool {
        if answers.len() != self.out.len() || self.sent.is_none() {
            self.failed(registry, now);
            return false;
        }
        self.sent = None;
        self.degraded = false;
        for (name, answer) in self.out.drain(..).zip(answers) {
            let (Some(member), Some(breaker)) = (self.members.get_mut(&name), registry.peek_mut(&name)) else {
                continue;
            };
            each(&name, member.apply(breaker, answer, now));
        }
        true
    }

    /// The exchange out failed, or its answer is overdue, at `now`: every
    /// name in it decides alone until the store answers again.
    pub fn failed<M: Meter + Default>(&mut self, registry: &mut Registry<M>, now: Instant) {
        self.sent = None;
        // (The round ends: its other names go when due, each.)
        self.round = None;
        self.degraded = true;
        for name in self.out.drain(..) {
            if let (Some(member), Some(breaker)) = (self.members.get_mut(&name), registry.peek_mut(&name)) {
                member.failed(breaker, now);
            }
        }
    }

    /// Opens `name`'s group for `period` at `now` (see
    /// [`Member::force_open`]): its breaker at once, the other processes at
    /// their next exchange. None if `name` has no breaker (make it first).
    pub fn force_open<M: Meter + Default>(
        &mut self,
        registry: &mut Registry<M>,
        name: &str,
        now: Instant,
        period: Duration,
    ) -> Option<Transitions> {
        let breaker = registry.peek_mut(name)?;
        if !self.members.contains_key(name) {
            let member = Member::new(self.id, self.config, breaker.config()).ok()?;
            self.members.insert(name.into(), member);
        }
        let member = self.members.get_mut(name)?;
        Some(member.force_open(breaker, now, period))
    }

    /// `name`'s breaker was replaced (configured, restored): its member
    /// leaves, and the new breaker joins afresh at the next exchange.
    pub fn forget(&mut self, name: &str) {
        self.members.remove(name);
    }

    /// Every breaker was replaced (a restore): as [`forget`](Self::forget) for each.
    pub fn forget_all(&mut self) {
        self.members.clear();
    }

    /// Leaves the group: every name decides alone from now on.
    pub fn leave<M: Meter + Default>(self, registry: &mut Registry<M>) {
        for (name, member) in self.members {
            if let Some(breaker) = registry.peek_mut(&name) {
                member.leave(breaker);
            }
        }
    }

    /// A change of the link since the last call, if any.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        if self.degraded == self.told_degraded {
            return None;
        }
        self.told_degraded = self.degraded;
        Some(if self.degraded { GroupEvent::Degraded } else { GroupEvent::Recovered })
    }
}
