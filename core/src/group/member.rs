//! One process's side of a group breaker: when to exchange, what to send,
//! and how its breaker follows what the group answers.

use core::borrow::Borrow;

use super::own_time::OwnTime;
use super::policy;
use super::protocol::{ANY_EPOCH, Answer, GroupLimit, GroupPhase, LimitReport, Proposal, Proposed, Register, Request};
use super::{GroupConfig, GroupConfigError};
use crate::breaker::{Breaker, Local};
use crate::config::{ConcurrencyLimit, Config};
use crate::meter::Meter;
use crate::phase::Probes;
use crate::state::{Reason, Transitions};
use crate::time::{Duration, Instant};
use crate::window::{TIME_BUCKETS, Window};

/// A change in a member's link to its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEvent {
    /// The store failed or did not answer in time: the process decides
    /// alone (its breaker still trips, probes and closes by itself).
    Degraded,
    /// The store answered again: the process follows the group again (and
    /// adopts what the group did meanwhile).
    Recovered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// No answer yet.
    Joining,
    Live,
    /// `failures` store calls in a row failed; the next at `retry_at`.
    Degraded {
        failures: u32,
        retry_at: Instant,
    },
}

/// The latest answer, as the member keeps it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    register: Register,
    /// The store's clock less this process's, µs.
    offset: i64,
    /// Why the group trips on it, if it does.
    trip: Option<Reason>,
}

/// One process of a group breaker (see the module [`group`](crate::group)).
/// Sans-IO: it says when to exchange and what to send; the caller sends it
/// to the store and hands the answer (or the failure) back, with `now`.
#[derive(Debug, Clone)]
pub struct Member {
    id: u64,
    config: GroupConfig,
    link: Link,
    seen: Option<Seen>,
    /// A request is out since then.
    pending: Option<Instant>,
    /// When the latest request was sent.
    last_sent: Option<Instant>,
    /// Whether this process's breaker is open because the group is.
    following: bool,
    /// Whether the caller was last told the link is degraded.
    told_degraded: bool,
    /// The highest epoch answered (kept through outages): one lower means
    /// the store lost the group (restarted empty, evicted, flushed).
    epoch: u64,
    /// The breaker's rejections when it began following the group's open
    /// phase: more since are calls waiting for a probe.
    rejected_at_open: u64,
    /// The lease epoch seen and the store's time when it was first seen: a
    /// lease is over for this process after its own lease length at most.
    lease_seen: Option<(u64, u64)>,
    /// When this process last had calls to make (see `limit_report`).
    demand_at: Option<Instant>,
    /// Its most calls in flight within a member TTL, and when.
    peak: Option<(u32, Instant)>,
    /// Its own time (see `reading`).
    time: OwnTime,
    /// A force-open of the group to send (when it ends, on the member's
    /// time), and the one the request out carries.
    forcing: Option<Instant>,
    forcing_sent: Option<Instant>,
    /// An operator's close of the group to send (why: a force-close or a
    /// reset), and whether the request out carries it.
    closing: Option<Reason>,
    closing_sent: bool,
    /// The highest epoch of the group's limit answered (kept through
    /// outages): one lower means the store lost the limit.
    limit_epoch: u64,
    /// The store's clock less this process's as last answered (kept
    /// through outages: a request's deadline is on the store's clock).
    offset: Option<i64>,
    /// Whether the latest answer counted this process among those with
    /// calls to make (see [`policy::share`]).
    was_active: bool,
}

impl Member {
    /// Member `id` (random per process: two processes never share one) of
    /// a group whose breakers are configured by `breaker`.
    pub fn new(id: u64, config: GroupConfig, breaker: &Config) -> Result<Self, GroupConfigError> {
        config.validate(breaker)?;
        Ok(Member {
            id,
            config,
            link: Link::Joining,
            seen: None,
            pending: None,
            last_sent: None,
            following: false,
            told_degraded: false,
            epoch: 0,
            rejected_at_open: 0,
            lease_seen: None,
            was_active: false,
            offset: None,
            demand_at: None,
            peak: None,
            time: OwnTime::default(),
            forcing: None,
            forcing_sent: None,
            closing: None,
            closing_sent: false,
            limit_epoch: 0,
        })
    }

    /// Its id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Whether it decides alone because its store failed.
    pub fn degraded(&self) -> bool {
        matches!(self.link, Link::Degraded { .. })
    }

    /// What the Prometheus exposition shows of its group.
    pub fn exposed(&self) -> super::GroupReading {
        super::GroupReading { degraded: self.degraded(), phase: self.register().map(|r| r.phase) }
    }

    /// The group's register as last answered (none before the first
    /// answer, or since the store failed).
    pub fn register(&self) -> Option<Register> {
        self.seen.map(|s| s.register)
    }

    /// When the next exchange is due, for `breaker` (this process's) at
    /// `now`: ask again after each of its transitions. With a request out,
    /// when its answer is overdue (then report it [`failed`](Self::failed)).
    pub fn next_exchange<C: Borrow<Config>, M: Meter>(&self, breaker: &Breaker<C, M>, now: Instant) -> Instant {
        // On the member's time (see `reading`), answered on the caller's.
        let skew = self.time.skew_at(now);
        let due = self.due(breaker, now + Duration::from_micros(skew));
        Instant::from_micros(due.as_micros().saturating_sub(skew))
    }

    /// When the next exchange is due, `now` not before the latest reading.
    fn due<C: Borrow<Config>, M: Meter>(&self, breaker: &Breaker<C, M>, now: Instant) -> Instant {
        if let Some(sent) = self.pending {
            return sent + self.config.store_timeout();
        }
        let (seen, last) = match (self.link, self.seen, self.last_sent) {
            (Link::Degraded { retry_at, .. }, ..) => return retry_at,
            (_, Some(seen), Some(last)) => (seen, last),
            _ => return now,
        };
        // A transition to propose, a force-open to send, or a cut of the
        // group's limit to ask for: soon (the other processes go on at their
        // shares until then).
        if self.wanted(breaker, seen, now).is_some()
            || self.forcing.is_some()
            || self.closing.is_some()
            || breaker.limit_cut_pending()
        {
            return now.max(last + policy::urgent_gap(&self.config));
        }
        let regular = last + self.config.flush_interval;
        // A deadline of the group's that ends before: the open period (a
        // probe round may start) or the lease (another may take it).
        let deadline = match seen.register.phase {
            GroupPhase::Closed => None,
            GroupPhase::Open { until_us, .. } => Some(until_us),
            GroupPhase::HalfOpen { lease, lease_until_us, .. } => (lease != self.id).then_some(lease_until_us),
        };
        deadline.map_or(regular, |d| regular.min(local(seen.offset, d).max(last + policy::urgent_gap(&self.config))))
    }

    /// The request to send at `now`, if one is due (none while one is out;
    /// one out for longer than the store timeout, never reported, counts as
    /// failed here, so that a caller that lost it cannot stall the member).
    pub fn request<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        now: Instant,
    ) -> Option<Request> {
        self.request_ahead(breaker, now, Duration::ZERO)
    }

    /// The request to send at `now` if one is due within `ahead` (a
    /// registry sends its names' exchanges together: one store call).
    pub fn request_ahead<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        now: Instant,
        ahead: Duration,
    ) -> Option<Request> {
        let now = self.reading(now);
        if let Some(sent) = self.pending {
            if now < sent + self.config.store_timeout() {
                return None;
            }
            self.failed(breaker, now);
        }
        if now + ahead < self.next_exchange(breaker, now) {
            return None;
        }
        // A force-open that has ended, or that a longer one in the group
        // covers, is not sent.
        if let Some(until) = self.forcing {
            let covered = match self.seen.map(|s| (s.register.phase, s.offset)) {
                Some((GroupPhase::Open { until_us, .. }, offset)) => local(offset, until_us) >= until,
                _ => false,
            };
            if until <= now || covered {
                self.forcing = None;
            }
        }
        let proposal = match (self.forcing, self.link, self.seen) {
            // An operator's close, as a force-open: any epoch, until answered.
            _ if self.closing.is_some() => {
                self.closing.map(|reason| Proposal { epoch: ANY_EPOCH, to: Proposed::Closed { reason } })
            }
            // An operator's force-open wins over any epoch (and is sent until
            // the store has answered a request carrying it), for what is left
            // of it.
            (Some(until), ..) => {
                let c = breaker.config();
                let open_for_us = crate::policy::first_open_period(c).as_micros();
                let for_us = until.saturating_since(now).as_micros();
                let to = Proposed::Open { for_us, open_for_us, reason: Reason::ForcedOpen };
                Some(Proposal { epoch: ANY_EPOCH, to })
            }
            (None, Link::Live, Some(seen)) => {
                self.wanted(breaker, seen, now).map(|to| Proposal { epoch: seen.register.epoch, to })
            }
            _ => None,
        };
        self.forcing_sent = self.forcing;
        self.closing_sent = self.closing.is_some();
        self.pending = Some(now);
        self.last_sent = Some(now);
        let closes = proposal.is_some_and(|p| matches!(p.to, Proposed::Closed { .. }));
        let limit = self.limit_report(breaker, now, closes);
        let c = breaker.config();
        let (bucket_us, window_us) = match c.window {
            Window::Time(span) if c.windowed() => (span.as_micros() / u64::from(TIME_BUCKETS), span.as_micros()),
            _ => (0, self.config.member_ttl().as_micros()),
        };
        // Given up at the store timeout: later, it must change nothing.
        let deadline_us = self.offset.map_or(0, |offset| server(offset, now + self.config.store_timeout()).max(1));
        Some(Request {
            member: self.id,
            tally: breaker.tally(),
            consecutive: breaker.counts(now).consecutive_failures,
            bucket_us,
            window_us,
            member_ttl_us: self.config.member_ttl().as_micros(),
            proposal,
            limit,
            deadline_us,
        })
    }

    /// What this process sends of its adaptive limit: its steps and demand
    /// since the last exchange, a cut its failures ask for, the group's
    /// restart when it `closes` the group (the first limit, if the group
    /// has none). Live, the limit is the group's; joining or degraded, this
    /// process's own, until the group answers.
    fn limit_report<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        now: Instant,
        closes: bool,
    ) -> Option<LimitReport> {
        let c = *breaker.config();
        let (share, busy) = breaker.take_share().unwrap_or_default();
        let seen = GroupLimit { epoch: share.epoch, limit: share.group, threshold: share.threshold };
        // Calls to make since the last exchange, or within a member TTL
        // before (demand that comes and goes keeps its share), or joining.
        if share.wanted || busy > 0 || share.epoch == 0 {
            self.demand_at = Some(now);
        }
        let active = self.demand_at.is_some_and(|at| now < at + self.config.member_ttl());
        // Its most calls in flight within a member TTL: the group is full if
        // its members' peaks fill its limit (a burst counts until then).
        let peak = share.peak.max(busy);
        let ttl = self.config.member_ttl();
        self.peak = match self.peak {
            Some((held, at)) if held > peak && now < at + ttl => Some((held, at)),
            _ => Some((peak, now)),
        };
        let peak = self.peak.map_or(peak, |(held, _)| held);
        let mut report = policy::limit_report(&c, seen, share.steps, share.cut, active, peak)?;
        if closes {
            report.set = Some((policy::start_limit(&c), policy::threshold_ceiling(&c)));
            report.steps = 0;
        }
        Some(report)
    }

    /// Applies the store's `answer` at `now` to `breaker`: it follows the
    /// group's phase. As a manual operation, it first applies a timed
    /// change that is due (an open period that ended unnoticed), then its
    /// own. Returns the breaker's transitions.
    pub fn apply<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        answer: &Answer,
        now: Instant,
    ) -> Transitions {
        let now = self.reading(now);
        let observed = breaker.handle_timeout(now);
        self.pending = None;
        self.link = Link::Live;
        // Answered: the force-open sent is the group's (one asked for since
        // is still to send).
        if let Some(sent) = self.forcing_sent.take()
            && self.forcing == Some(sent)
        {
            self.forcing = None;
        }
        if core::mem::take(&mut self.closing_sent) {
            self.closing = None;
        }
        let offset = i128::from(answer.now_us) - i128::from(now.as_micros());
        let offset = offset.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        self.offset = Some(offset);
        if answer.register.epoch < self.epoch {
            // The store lost the group: what it says now is no one's
            // decision. The breaker's own open period goes on, and it
            // probes by itself (closing only on its own probes).
            self.following = false;
            self.lease_seen = None;
            breaker.set_probes(Probes::HERE);
        }
        self.epoch = answer.register.epoch;
        if let GroupPhase::HalfOpen { .. } = answer.register.phase
            && self.lease_seen.is_none_or(|(epoch, _)| epoch != answer.register.epoch)
        {
            self.lease_seen = Some((answer.register.epoch, answer.now_us));
        }
        let changed = self.seen.is_none_or(|s| s.register != answer.register);
        let trip = match answer.register.phase {
            GroupPhase::Closed => policy::trips(breaker.config(), &self.config, answer),
            _ => None,
        };
        self.seen = Some(Seen { register: answer.register, offset, trip });
        let transitions = self.follow(breaker, answer.register.phase, offset, changed, now);
        // The store lost the group's limit (restarted empty, flushed,
        // evicted, with no call failing): the share held is no one's now.
        // The process's own limit until the group has one again (its next
        // request proposes the first).
        if answer.limit.epoch < self.limit_epoch {
            breaker.leave_limit();
        }
        self.limit_epoch = answer.limit.epoch;
        // The group's limit, once it has one: this process's share of it.
        if let Some(ConcurrencyLimit::Adaptive { min, max }) = breaker.config().concurrency_limit
            && let Some((group, threshold)) = policy::group_limit(answer.limit, min, max)
        {
            let flush = self.config.flush_interval;
            let share = policy::share(group, answer.live, answer.active, answer.rank, answer.now_us, flush);
            // New among the active ones: at most an even split among the
            // live ones, this round (those that saw fewer active ones hold
            // larger shares until their next exchange).
            let share = match (answer.rank, self.was_active) {
                (Some(_), false) => share.min(group / answer.live.max(1)),
                _ => share,
            };
            self.was_active = answer.rank.is_some();
            let full = policy::group_full(group, answer.busy);
            // Lapses after ten member TTLs without an answer (the store has
            // long dropped this member by then: its exchanges have stopped,
            // not merely run late).
            let ttl = self.config.member_ttl().as_micros();
            let expires = now + Duration::from_micros(ttl.saturating_mul(10));
            let epoch = answer.limit.epoch;
            let seen = crate::limit::Share { group, threshold, epoch, full, expires, ..Default::default() };
            breaker.follow_limit(seen, share);
        }
        // (Nothing else was due at `now` once the timed change was applied:
        // following adds at most its own.)
        match observed {
            Some(_) => {
                debug_assert!(transitions.iter().count() <= 1, "{transitions:?}");
                Transitions::of(observed, transitions.last())
            }
            None => transitions,
        }
    }

    /// The request out failed, or its answer is overdue, at `now`: the
    /// process (`breaker`) decides alone until the store answers again, its
    /// concurrency limit included.
    pub fn failed<C: Borrow<Config>, M: Meter>(&mut self, breaker: &mut Breaker<C, M>, now: Instant) {
        let now = self.reading(now);
        self.pending = None;
        self.forcing_sent = None;
        self.closing_sent = false;
        let failures = match self.link {
            Link::Degraded { failures, .. } => failures.saturating_add(1),
            _ => 1,
        };
        // One lost exchange keeps the share of the group's limit (until the
        // retry); from the second failure in a row the limit is this
        // process's own (never left at a share of none while the store is away).
        if failures >= 2 || self.seen.is_none() {
            breaker.leave_limit();
        }
        let retry_at = now + policy::retry_after(&self.config, failures, self.id);
        self.link = Link::Degraded { failures, retry_at };
        // What the group said may be stale by the time it answers again.
        // Probes from elsewhere stay awaited until their wait runs out by
        // itself: one late answer does not make this process probe.
        self.seen = None;
    }

    /// The member's time for the caller's reading `now`: the reading plus
    /// every step back the clock made (a wall clock under NTP), so that it
    /// never goes back and goes on at the clock's pace after a step (the
    /// exchanges keep their pace, and the times given to the breaker are
    /// never before its latest reading: the group's open period holds).
    fn reading(&mut self, now: Instant) -> Instant {
        self.time.reading(now)
    }

    /// Opens the whole group for `period` (an operator's or a throttle
    /// webhook's force-open received by this process): `breaker` opens at
    /// once, and the next exchange (due at once) opens the group's register
    /// whatever its epoch, every process following within its next
    /// exchange; sent again until the store answers it (a store that is
    /// down gets it when it is back). When the period ends the group
    /// probes, as after any open period. Returns `breaker`'s transitions.
    pub fn force_open<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        now: Instant,
        period: Duration,
    ) -> Transitions {
        let now = self.reading(now);
        let period = period.min(Duration::from_micros(super::protocol::MAX_PERIOD_US));
        // Of two force-opens asked here, the longer holds (a close asked
        // before is superseded).
        self.forcing = self.forcing.max(Some(now + period));
        self.closing = None;
        if !self.following {
            self.rejected_at_open = breaker.tally().rejected;
        }
        self.following = true;
        let open_for = crate::policy::first_open_period(breaker.config());
        // Open here until the end asked, or the group's open period if it
        // ends later (a shorter force-open never shortens it).
        let group_until = match self.seen.map(|s| (s.register.phase, s.offset)) {
            Some((GroupPhase::Open { until_us, .. }, offset)) => local(offset, until_us),
            _ => Instant::ZERO,
        };
        let until = (now + period).max(group_until);
        let probes = Probes::elsewhere(policy::probes_wait_until(&self.config, until));
        breaker.follow_open(now, until, open_for, Reason::ForcedOpen, probes)
    }

    /// Closes the whole group (an operator's force-close, or a reset:
    /// `reason` is [`Reason::ForcedClose`] or [`Reason::Reset`]): `breaker`
    /// at once (`force_close` or `reset`), and the next exchange (due at
    /// once) closes the group's register whatever its epoch, forgetting
    /// its window, its run and its backoff; every process follows within
    /// its next exchange, and the group's limit starts again. Sent again
    /// until the store answers it; a force-open asked before is superseded
    /// (and one asked after supersedes it). Returns `breaker`'s transitions.
    pub fn force_close<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        now: Instant,
        reason: Reason,
    ) -> Transitions {
        let now = self.reading(now);
        self.closing = Some(reason);
        self.forcing = None;
        self.following = false;
        match reason {
            Reason::Reset => breaker.reset(now),
            _ => breaker.force_close(now),
        }
    }

    /// `breaker` replaced the one this member followed (a registry made a
    /// new breaker for its name): its rejections count from its own.
    #[cfg(feature = "alloc")]
    pub(crate) fn replaced<C: Borrow<Config>, M: Meter>(&mut self, breaker: &Breaker<C, M>) {
        self.rejected_at_open = breaker.tally().rejected;
    }

    /// Leaves the group: `breaker` decides alone from now on (its limit
    /// adapts by itself again, from its share).
    pub fn leave<C: Borrow<Config>, M: Meter>(self, breaker: &mut Breaker<C, M>) {
        breaker.leave_limit();
        breaker.set_probes(Probes::HERE);
    }

    /// A change of the link since the last call, if any. (A change undone
    /// before it is asked for is not reported.)
    pub fn poll_event(&mut self) -> Option<GroupEvent> {
        let degraded = self.degraded();
        if degraded == self.told_degraded {
            return None;
        }
        self.told_degraded = degraded;
        Some(if degraded { GroupEvent::Degraded } else { GroupEvent::Recovered })
    }

    /// What this process proposes at `now`, seeing `seen`.
    fn wanted<C: Borrow<Config>, M: Meter>(
        &self,
        breaker: &Breaker<C, M>,
        seen: Seen,
        now: Instant,
    ) -> Option<super::protocol::Proposed> {
        let c = breaker.config();
        // A lease is over here after this process's own lease length at
        // most (another's configuration cannot hold the group).
        let phase = match (seen.register.phase, self.lease_seen) {
            (GroupPhase::HalfOpen { lease, lease_until_us, open_for_us, reason }, Some((_, seen_at))) => {
                let own = seen_at.saturating_add(self.config.lease_for(c).as_micros());
                GroupPhase::HalfOpen { lease, lease_until_us: lease_until_us.min(own), open_for_us, reason }
            }
            (phase, _) => phase,
        };
        let standing = policy::Standing {
            me: self.id,
            phase,
            server_now: server(seen.offset, now),
            trip: seen.trip,
            generation: seen.register.epoch as u32,
            demand: breaker.tally().rejected > self.rejected_at_open,
        };
        policy::proposal(c, &self.config, standing, breaker.local(now))
    }

    /// Makes `breaker` follow `phase` (store time `offset` ahead of this
    /// process's); `changed`: a phase not followed yet. Periods are held to
    /// this process's own bounds (another's configuration cannot set them).
    /// A breaker closed here while the group is open (a reset) opens again.
    fn follow<C: Borrow<Config>, M: Meter>(
        &mut self,
        breaker: &mut Breaker<C, M>,
        phase: GroupPhase,
        offset: i64,
        changed: bool,
        now: Instant,
    ) -> Transitions {
        let g = self.config;
        let c = *breaker.config();
        let cap = |d: Duration| d.min(c.open_timeout_cap()).max(c.open_timeout);
        let begin = |m: &mut Self, b: &Breaker<C, M>| {
            if !m.following {
                m.rejected_at_open = b.tally().rejected;
            }
            m.following = true;
        };
        match phase {
            // A force-open asked here and not answered yet: an answer to an
            // earlier request does not close it.
            GroupPhase::Closed if self.forcing.is_some() => Transitions::default(),
            GroupPhase::Closed => {
                let was = core::mem::replace(&mut self.following, false);
                let reason = self.seen.and_then(|s| s.register.closed_by).unwrap_or(Reason::ProbesSucceeded);
                if was { breaker.follow_close(now, reason) } else { Transitions::default() }
            }
            // An operator's close asked here and not answered yet: an
            // answer to an earlier request does not open it again.
            _ if self.closing.is_some() => Transitions::default(),
            GroupPhase::Open { until_us, open_for_us, reason } => {
                begin(self, breaker);
                // Held to this process's own cap, except an operator's
                // force-open (a period asked for, not a backoff).
                let longest = match reason {
                    Reason::ForcedOpen => Duration::from_micros(super::protocol::MAX_PERIOD_US),
                    _ => c.open_timeout_cap(),
                };
                // A longer force-open asked here and not answered yet holds.
                let until = local(offset, until_us).min(now + longest).max(self.forcing.unwrap_or(Instant::ZERO));
                let probes = Probes::elsewhere(policy::probes_wait_until(&g, until.max(now)));
                let closed_here = matches!(breaker.local(now), Local::Closed { .. });
                if changed || closed_here {
                    breaker.follow_open(now, until, cap(Duration::from_micros(open_for_us)), reason, probes)
                } else {
                    breaker.set_probes(probes);
                    Transitions::default()
                }
            }
            GroupPhase::HalfOpen { lease, .. } if lease == self.id => {
                begin(self, breaker);
                if changed { breaker.follow_probe(now) } else { Transitions::default() }
            }
            GroupPhase::HalfOpen { lease_until_us, open_for_us, reason, .. } => {
                begin(self, breaker);
                let probes = Probes::elsewhere(policy::probes_wait_until(&g, now));
                match breaker.local(now) {
                    // Open until the lease ends, at most its own lease length.
                    Local::Closed { .. } => {
                        let until = local(offset, lease_until_us).min(now + g.lease_for(&c)).max(now);
                        let probes = Probes::elsewhere(policy::probes_wait_until(&g, until));
                        breaker.follow_open(now, until, cap(Duration::from_micros(open_for_us)), reason, probes)
                    }
                    Local::Open { left, .. } => {
                        breaker.set_probes(Probes::elsewhere(policy::probes_wait_until(&g, now + left)));
                        Transitions::default()
                    }
                    Local::HalfOpen { .. } | Local::Manual => {
                        breaker.set_probes(probes);
                        Transitions::default()
                    }
                }
            }
        }
    }
}

/// The store's time `server_us` on this process's clock.
fn local(offset: i64, server_us: u64) -> Instant {
    let at = i128::from(server_us) - i128::from(offset);
    Instant::from_micros(at.clamp(0, i128::from(u64::MAX)) as u64)
}

/// This process's `now` on the store's clock.
fn server(offset: i64, now: Instant) -> u64 {
    let at = i128::from(now.as_micros()) + i128::from(offset);
    at.clamp(0, i128::from(u64::MAX)) as u64
}
