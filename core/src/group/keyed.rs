//! A registry in a group: each name's breaker is one group (the group's
//! name and the breaker's), with a [`Member`] per name, and every name due
//! is sent in one store call per exchange (one request per name, answered
//! in order), not one per name.
//!
//! The members of a registry exchange together: at each regular exchange
//! (one per flush interval) every name whose exchange would be due within
//! the next flush interval goes in the same call; an exchange a transition
//! asks for sooner carries only the names due then (they join the regular
//! one after). A registry makes one store call per flush interval, plus
//! one per burst of transitions (at most ten per flush interval, as a
//! single breaker's). A name gets its member at the first exchange after
//! its breaker is made (never on the call path: until then it decides
//! alone); a name whose breaker was evicted leaves, and one whose breaker
//! was replaced (configured, restored) joins again afresh
//! ([`forget`](KeyedMembers::forget)).

use alloc::boxed::Box;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::policy;
use super::protocol::{Answer, Request};
use super::{GroupConfig, GroupConfigError, GroupEvent, Member};
use crate::config::Config;
use crate::meter::Meter;
use crate::registry::Registry;
use crate::state::Transitions;
use crate::time::{Duration, Instant};

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
    /// Whether the latest exchange failed, and whether the caller was told.
    degraded: bool,
    told_degraded: bool,
}

impl KeyedMembers {
    /// Process `id`'s members of a registry whose breakers are configured
    /// by `breaker` (the registry's configuration; a name's own is checked
    /// by [`check`](Self::check)).
    pub fn new(id: u64, config: GroupConfig, breaker: &Config) -> Result<Self, GroupConfigError> {
        config.validate(breaker)?;
        Ok(KeyedMembers {
            id,
            config,
            members: HashMap::new(),
            out: Vec::new(),
            sent: None,
            regular: None,
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

    /// `name`'s member, if it has one.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// Whether the latest exchange failed: every name decides alone.
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// When the next exchange is due at `now`: with one out, when its
    /// answer is overdue; a name without a member yet, a tenth of a flush
    /// interval after the latest exchange at most.
    pub fn next_exchange<M: Meter + Default>(&self, registry: &Registry<M>, now: Instant) -> Instant {
        if let Some(sent) = self.sent {
            return sent + self.config.store_timeout();
        }
        let newcomer = self.members.values().filter_map(Member::last_sent).max();
        let newcomer = newcomer.map_or(now, |t| now.max(t + policy::urgent_gap(&self.config)));
        let mut due = self.regular.unwrap_or(now);
        for (name, breaker) in registry.iter() {
            let at = match self.members.get(name) {
                Some(member) => member.next_exchange(breaker, now),
                None => newcomer,
            };
            due = due.min(at);
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
        // Names evicted leave; new ones join.
        self.members.retain(|name, _| registry.peek(name).is_some());
        for (name, breaker) in registry.iter() {
            if !self.members.contains_key(name)
                && let Ok(member) = Member::new(self.id, self.config, breaker.config())
            {
                self.members.insert(name.into(), member);
            }
        }
        let flush = self.config.flush_interval;
        let regular = self.regular.is_none_or(|at| now >= at);
        let ahead = if regular { flush } else { Duration::ZERO };
        let mut requests = Vec::new();
        self.out.clear();
        for (name, member) in &mut self.members {
            let Some(breaker) = registry.peek_mut(name) else { continue };
            if let Some(request) = member.request_ahead(breaker, now, ahead) {
                requests.push(request);
                self.out.push(name.clone());
            }
        }
        if regular {
            self.regular = Some(now + flush);
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
