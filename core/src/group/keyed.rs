//! A registry in a group: each name's breaker is one group (the group's
//! name and the breaker's), with a [`Member`] per name, and the names due
//! go together, up to [`NAMES_PER_CALL`] in one store call (one request per
//! name, answered in order), not a call per name.
//!
//! The members of a registry exchange together: at each regular exchange
//! (one per flush interval) every name whose exchange would be due within
//! the next flush interval goes, in calls of at most [`NAMES_PER_CALL`]
//! names one after the other; an exchange a transition asks for sooner
//! carries only the names due then (they join the regular one after). A
//! registry of up to [`NAMES_PER_CALL`] names makes one store call per
//! flush interval, plus one per burst of transitions (at most ten per
//! flush interval, as a single breaker's). A name gets its member at the
//! next regular exchange after its breaker is made (never on the call path:
//! until then, up to a flush interval, it decides alone); a name whose
//! breaker was evicted leaves.
//!
//! A name's breaker replaced (configured, restored, evicted and made
//! again: [`Registry::born`] changes) starts its running totals again; the
//! member sends them on top of what it sent last, so the store, which
//! counts their growth, never mistakes the new breaker's calls for fewer
//! (or its failures for a run). The registry keeps its own time (the
//! clock's readings plus every step back, as a member does), so a clock
//! stepped back neither stalls nor hurries its rounds; a failed exchange is
//! retried after the members' backoff.

use alloc::boxed::Box;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::own_time::OwnTime;
use super::policy;
use super::protocol::{Answer, Request};
use super::{GroupConfig, GroupConfigError, GroupEvent, Member, Tally};
use crate::config::Config;
use crate::meter::Meter;
use crate::registry::Registry;
use crate::state::{Reason, Transitions};
use crate::time::{Duration, Instant};

/// The most names one store call carries. Redis runs a script alone (every
/// other client waits), and the script costs about 50 µs of Redis time per
/// name (BENCHMARKS.md, "Group mode"): a call holds Redis for about 5 ms at
/// most, well within a store timeout, and a registry of more names makes a
/// call per hundred names each flush interval.
pub const NAMES_PER_CALL: usize = 100;

/// A name's member, with what it sends on top of its breaker's totals.
#[derive(Debug)]
struct Named {
    member: Member,
    /// [`Registry::born`] of the breaker its requests count.
    born: u64,
    /// Added to the breaker's running totals: what the name's earlier
    /// breakers had sent.
    base: Tally,
    /// The running totals last sent.
    sent: Tally,
}

/// The members of a registry's names (see the module).
#[derive(Debug)]
pub struct KeyedMembers {
    id: u64,
    config: GroupConfig,
    members: HashMap<Box<str>, Named>,
    /// Names evicted: the totals they last sent, and when (kept for a
    /// member TTL, while the store may still know them).
    left: HashMap<Box<str>, (Tally, Instant)>,
    /// The names of the requests out, in their order, and when they went.
    out: Vec<Box<str>>,
    sent: Option<Instant>,
    /// When the next regular exchange is due (none: at once).
    regular: Option<Instant>,
    /// The regular exchange under way: when it ends, and the names it has
    /// still to send (each once: a round longer than a flush interval
    /// starves none).
    round: Option<(Instant, Vec<Box<str>>)>,
    /// Exchanges failed in a row, and when to try again.
    failures: u32,
    retry_at: Option<Instant>,
    /// Names whose member decides alone (its latest exchange failed).
    alone: usize,
    /// Whether the caller was last told the link is degraded.
    told_degraded: bool,
    /// Its own time (as a member's).
    time: OwnTime,
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
            left: HashMap::new(),
            out: Vec::new(),
            sent: None,
            regular: None,
            round: None,
            failures: 0,
            retry_at: None,
            alone: 0,
            told_degraded: false,
            time: OwnTime::default(),
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
        self.members.values().filter(|n| n.member.register().is_some()).count()
    }

    /// Every name with a member, and the member (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Member)> {
        self.members.iter().map(|(name, n)| (&**name, &n.member))
    }

    /// `name`'s member, if it has one.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name).map(|n| &n.member)
    }

    /// Whether some names decide alone: an exchange that carried them
    /// failed, and the store has not answered them since (or the latest
    /// exchange failed before it was made).
    pub fn degraded(&self) -> bool {
        self.failures > 0 || self.alone > 0
    }

    /// When the next exchange is due at `now`: with one out, when its
    /// answer is overdue; after a failure, not before the retry; else the
    /// next regular one, or sooner a member's.
    pub fn next_exchange<M: Meter + Default>(&self, registry: &Registry<M>, now: Instant) -> Instant {
        let skew = self.time.skew_at(now);
        let own = now + Duration::from_micros(skew);
        let due = if let Some(sent) = self.sent {
            sent + self.config.store_timeout()
        } else if self.round.is_some() {
            own
        } else {
            let mut due = self.regular.unwrap_or(own);
            for (name, breaker) in registry.iter() {
                if let Some(n) = self.members.get(name) {
                    due = due.min(n.member.next_exchange(breaker, now) + Duration::from_micros(skew));
                }
            }
            due.max(self.retry_at.unwrap_or(Instant::ZERO))
        };
        Instant::from_micros(due.as_micros().saturating_sub(skew))
    }

    /// The requests to send at `now`, if an exchange is due, one per name
    /// ([`names_out`](Self::names_out) in the same order); none while one is
    /// out (one out past the store timeout fails first).
    pub fn requests<M: Meter + Default>(&mut self, registry: &mut Registry<M>, now: Instant) -> Option<Vec<Request>> {
        let own = self.reading(now);
        if let Some(sent) = self.sent {
            if own < sent + self.config.store_timeout() {
                return None;
            }
            self.failed(registry, now);
        }
        if now < self.next_exchange(registry, now) {
            return None;
        }
        let flush = self.config.flush_interval;
        // (A round under way finishes first.)
        let regular = self.round.is_none() && self.regular.is_none_or(|at| own >= at);
        if regular {
            // Names evicted leave (what they sent kept for a member TTL);
            // new ones join.
            let ttl = self.config.member_ttl();
            self.left.retain(|_, (_, at)| own < *at + ttl);
            let (left, alone) = (&mut self.left, &mut self.alone);
            self.members.retain(|name, n| {
                let here = registry.peek(name).is_some();
                if !here {
                    left.insert(name.clone(), (n.sent, own));
                    *alone -= usize::from(n.member.degraded());
                }
                here
            });
            for (name, breaker) in registry.iter() {
                if !self.members.contains_key(name)
                    && let Ok(member) = Member::new(self.id, self.config, breaker.config())
                {
                    let base = self.left.remove(name).map_or(Tally::default(), |(sent, _)| sent);
                    let born = registry.born(name).unwrap_or_default();
                    self.members.insert(name.into(), Named { member, born, base, sent: base });
                }
            }
            self.regular = Some(own + flush);
            self.round = Some((own + flush, self.members.keys().cloned().collect()));
        }
        let mut requests = Vec::new();
        self.out.clear();
        match &mut self.round {
            // In a round, its names due before it ends.
            Some((end, names)) => {
                let ahead = Duration::from_micros(end.saturating_since(own).as_micros().saturating_sub(1));
                while requests.len() < NAMES_PER_CALL
                    && let Some(name) = names.pop()
                {
                    if let Some(request) = Self::request(&mut self.members, registry, &name, now, ahead) {
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
                let names: Vec<Box<str>> = self.members.keys().cloned().collect();
                for name in names {
                    if requests.len() == NAMES_PER_CALL {
                        break;
                    }
                    if let Some(request) = Self::request(&mut self.members, registry, &name, now, Duration::ZERO) {
                        requests.push(request);
                        self.out.push(name);
                    }
                }
            }
        }
        if requests.is_empty() {
            return None;
        }
        self.sent = Some(own);
        Some(requests)
    }

    /// `name`'s request at `now`, if one is due within `ahead`, its totals
    /// on top of its earlier breakers'.
    fn request<M: Meter + Default>(
        members: &mut HashMap<Box<str>, Named>,
        registry: &mut Registry<M>,
        name: &str,
        now: Instant,
        ahead: Duration,
    ) -> Option<Request> {
        let born = registry.born(name)?;
        let (n, breaker) = (members.get_mut(name)?, registry.peek_mut(name)?);
        if n.born != born {
            // A new breaker: its totals start again, on top of those sent
            // (and its rejections, the demand for a probe, from its own).
            n.born = born;
            n.base = n.sent;
            n.member.replaced(breaker);
        }
        let mut request = n.member.request_ahead(breaker, now, ahead)?;
        let (t, base) = (&mut request.tally, n.base);
        t.calls = t.calls.saturating_add(base.calls);
        t.failures = t.failures.saturating_add(base.failures);
        t.slow = t.slow.saturating_add(base.slow);
        n.sent = *t;
        Some(request)
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
        self.reading(now);
        if answers.len() != self.out.len() || self.sent.is_none() {
            self.failed(registry, now);
            return false;
        }
        self.sent = None;
        self.failures = 0;
        self.retry_at = None;
        for (name, answer) in self.out.drain(..).zip(answers) {
            let (Some(n), Some(breaker)) = (self.members.get_mut(&name), registry.peek_mut(&name)) else {
                continue;
            };
            let was = n.member.degraded();
            each(&name, n.member.apply(breaker, answer, now));
            self.alone -= usize::from(was);
        }
        true
    }

    /// The exchange out failed, or its answer is overdue, or none could be
    /// made (a clock that failed), at `now`: every name in it decides alone
    /// until the store answers again, and the next is tried after a backoff.
    pub fn failed<M: Meter + Default>(&mut self, registry: &mut Registry<M>, now: Instant) {
        let own = self.reading(now);
        self.sent = None;
        // (The round ends: its other names go when due, each.)
        self.round = None;
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(own + policy::retry_after(&self.config, self.failures, self.id));
        for name in self.out.drain(..) {
            if let (Some(n), Some(breaker)) = (self.members.get_mut(&name), registry.peek_mut(&name)) {
                self.alone += usize::from(!n.member.degraded());
                n.member.failed(breaker, now);
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
        let n = self.named(registry, name)?;
        let breaker = registry.peek_mut(name)?;
        Some(n.member.force_open(breaker, now, period))
    }

    /// Closes `name`'s group (`reason`: [`Reason::ForcedClose`] or
    /// [`Reason::Reset`]; see [`Member::force_close`]): its breaker at once,
    /// the other processes at their next exchange. None if `name` has no
    /// breaker (make it first).
    pub fn force_close<M: Meter + Default>(
        &mut self,
        registry: &mut Registry<M>,
        name: &str,
        now: Instant,
        reason: Reason,
    ) -> Option<Transitions> {
        let n = self.named(registry, name)?;
        let breaker = registry.peek_mut(name)?;
        Some(n.member.force_close(breaker, now, reason))
    }

    /// `name`'s member, made if it has none yet (its breaker must exist).
    fn named<M: Meter + Default>(&mut self, registry: &Registry<M>, name: &str) -> Option<&mut Named> {
        let born = registry.born(name)?;
        if !self.members.contains_key(name) {
            let member = Member::new(self.id, self.config, registry.peek(name)?.config()).ok()?;
            let base = self.left.remove(name).map_or(Tally::default(), |(sent, _)| sent);
            self.members.insert(name.into(), Named { member, born, base, sent: base });
        }
        self.members.get_mut(name)
    }

    /// Leaves the group: every name decides alone from now on.
    pub fn leave<M: Meter + Default>(self, registry: &mut Registry<M>) {
        for (name, n) in self.members {
            if let Some(breaker) = registry.peek_mut(&name) {
                n.member.leave(breaker);
            }
        }
    }

    /// A change of the link since the last call, if any.
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        let degraded = self.degraded();
        if degraded == self.told_degraded {
            return None;
        }
        self.told_degraded = degraded;
        Some(if degraded { GroupEvent::Degraded } else { GroupEvent::Recovered })
    }

    /// Its time for the caller's reading `now` (see `OwnTime`).
    fn reading(&mut self, now: Instant) -> Instant {
        self.time.reading(now)
    }
}
