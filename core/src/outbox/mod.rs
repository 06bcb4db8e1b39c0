//! Retention across processes (seed 001 for a fleet), sans-IO: one durable,
//! ordered log per partner in a store (a Redis Stream, in the bindings),
//! which any process appends to, and one deliverer at a time, which reads
//! it in pages and releases it through its dispatcher (breaker, limit,
//! pacing: `retention`).
//!
//! **The lease.** A [`Deliverer`] says when to ask the store for the
//! partner's lease ([`Deliverer::lease_call`]) and follows its answers
//! ([`Deliverer::lease_answered`], [`Deliverer::lease_failed`]). The store
//! is a fenced register with a time to live (`lease.lua`): it grants the
//! lease to one process at a time, each grant with a new epoch, and lets it
//! lapse by itself when its holder stops renewing. The holder counts its
//! lease from when it *sent* the call (never later than the store does), and
//! stops starting sends twice the send timeout before it ends
//! ([`Deliverer::may_send`]): every send it started is over before another
//! process may hold the lease; and after losing it, it starts none for as
//! long, even holding it again. So two processes never deliver a partner's
//! events at once, and the successor of a holder that died starts at most
//! a lease (and one retry) later.
//!
//! **The log.** The holder reads the log from its start, in pages
//! ([`Deliverer::read_due`]), with at most two pages held in memory (and
//! the dispatcher's bound): a backlog of any length costs the memory of
//! its pages. An event is removed from the log once delivered or dead
//! (removal is its own store call, retried until the store confirms it); a
//! process that takes over reads what is left, so an event whose removal
//! was not confirmed is sent again (at least once, with its key).
//!
//! **The breaker.** Every renewal carries the holder's breaker state, and
//! a change of its state asks for one soon ([`Deliverer::breaker_changed`]);
//! the next holder resumes from the last it left (`carried`, feature
//! `snapshot`).

#[cfg(feature = "snapshot")]
pub mod carried;
mod config;
pub(crate) mod policy;
#[cfg(feature = "alloc")]
pub mod redis;

pub use config::{
    DEFAULT_PAGE, MAX_OUTBOX_PERIOD, MAX_PAGE, MIN_POLL_INTERVAL, MIN_STORE_TIMEOUT, OutboxConfig, OutboxConfigError,
    OutboxField, TURN_EVENTS,
};

use crate::time::{Duration, Instant};

/// What a lease call asks the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCall {
    /// Take the lease if nobody holds it (a new epoch).
    Acquire,
    /// Extend the lease this process holds.
    Renew,
}

/// Why a deliverer stopped holding its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The store says another process holds it (this one's lapsed).
    Taken,
    /// It was not renewed in time: the holder stopped sending before it ended.
    Expired,
    /// The process gave it up ([`Deliverer::release`]).
    Released,
}

impl LostReason {
    /// The reason's snake_case code.
    pub const fn code(self) -> &'static str {
        match self {
            LostReason::Taken => "taken",
            LostReason::Expired => "expired",
            LostReason::Released => "released",
        }
    }
}

/// A change of the deliverer's role, drained with [`Deliverer::poll_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxEvent {
    /// This process delivers from now on: read the log from its start.
    Acquired {
        /// The lease's epoch (each grant a larger one).
        epoch: u64,
    },
    /// This process no longer delivers: stop starting sends (it already
    /// may not), forget what was read; the log keeps every event.
    Lost {
        /// Why.
        reason: LostReason,
    },
}

#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: u64,
    until: Instant,
}

/// A process closing after it released a held lease.
#[derive(Debug, Clone, Copy)]
struct Closing {
    /// Until when the lease it held is surely its own.
    until: Instant,
    /// When the renewal as it closed was sent (until answered).
    renewal: Option<Instant>,
    /// Its removal tries that failed since it began to close.
    failures: u32,
}

/// One process's part in an outbox: when it asks for the lease, whether it
/// may send, when it reads a page and retries a removal. Every method takes
/// `now` (an earlier one counts as the latest).
#[derive(Debug, Clone)]
pub struct Deliverer {
    config: OutboxConfig,
    max_messages: Option<u32>,
    page: u32,
    seed: u64,
    last: Instant,
    held: Option<Held>,
    /// When the lease call in flight was sent.
    sent: Option<Instant>,
    /// When the last lease call was sent.
    asked_at: Option<Instant>,
    /// The breaker changed since the last lease call was sent (which
    /// carried the state before): the next renewal is due soon.
    changed: bool,
    next_call: Instant,
    failures: u32,
    reading: bool,
    /// The last read found the end of the log (or failed) then.
    caught_up_at: Option<Instant>,
    removal_failures: u32,
    closed: bool,
    /// Closed while holding: how its last removals are retried.
    closing: Option<Closing>,
    /// After a loss, sends it started may still run until then: it starts
    /// none before, even holding the lease again.
    quiet_until: Instant,
    /// Undrained changes: a loss, then a grant (a grant lost before it was
    /// drained was never acted on: both go).
    lost: Option<LostReason>,
    acquired: Option<u64>,
}

impl Deliverer {
    /// A process's deliverer, asking for the lease at once; `max_messages`
    /// is its dispatcher's bound, `seed` spreads its retries from other
    /// processes'.
    pub fn new(
        config: OutboxConfig,
        max_messages: Option<u32>,
        seed: u64,
        now: Instant,
    ) -> Result<Self, OutboxConfigError> {
        config.validate(max_messages)?;
        Ok(Deliverer {
            page: config.page(max_messages),
            config,
            max_messages,
            seed,
            last: now,
            held: None,
            sent: None,
            asked_at: None,
            changed: false,
            next_call: now,
            failures: 0,
            reading: false,
            caught_up_at: None,
            removal_failures: 0,
            closed: false,
            closing: None,
            quiet_until: now,
            lost: None,
            acquired: None,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &OutboxConfig {
        &self.config
    }

    /// How many events one read takes.
    pub fn page(&self) -> u32 {
        self.page
    }

    /// The lease's length, as the store is asked for it.
    pub fn lease(&self) -> Duration {
        self.config.lease()
    }

    fn at(&mut self, now: Instant) -> Instant {
        self.last = self.last.max(now);
        self.last
    }

    /// The next role change, oldest first.
    pub fn poll_event(&mut self) -> Option<OutboxEvent> {
        if let Some(reason) = self.lost.take() {
            return Some(OutboxEvent::Lost { reason });
        }
        self.acquired.take().map(|epoch| OutboxEvent::Acquired { epoch })
    }

    /// The epoch of the lease this process holds, if it holds it.
    pub fn epoch(&self) -> Option<u64> {
        self.held.map(|h| h.epoch)
    }

    /// Whether a send may start now: the lease is held, a send started now
    /// is over before it ends, and every send started before the lease was
    /// last lost is over.
    pub fn may_send(&self, now: Instant) -> bool {
        let now = self.last.max(now);
        now >= self.quiet_until && self.held.is_some_and(|h| now < policy::stop_sending_at(&self.config, h.until))
    }

    /// The lease call due now, if any (marked in flight: one at a time).
    pub fn lease_call(&mut self, now: Instant) -> Option<LeaseCall> {
        let now = self.at(now);
        self.handle_timeout(now);
        if self.closed || self.sent.is_some() || now < self.next_call {
            return None;
        }
        self.sent = Some(now);
        self.asked_at = Some(now);
        self.changed = false;
        Some(if self.held.is_some() { LeaseCall::Renew } else { LeaseCall::Acquire })
    }

    /// The store answered the lease call in flight: whether this process
    /// holds the lease, and its epoch. A late answer (after the call
    /// timed out) changes nothing.
    pub fn lease_answered(&mut self, now: Instant, holds: bool, epoch: u64) {
        let now = self.at(now);
        let Some(sent) = self.sent else { return };
        if now >= sent + self.config.store_timeout {
            // Past the store timeout: the call failed, whatever it says.
            return self.lease_failed(now);
        }
        self.sent = None;
        self.failures = 0;
        if holds {
            match self.held {
                Some(h) if h.epoch == epoch => {}
                Some(_) => {
                    // Its own grant lapsed in the store and was granted anew:
                    // another process may have delivered in between.
                    self.lose(LostReason::Expired);
                    self.acquired = Some(epoch);
                }
                None => self.acquired = Some(epoch),
            }
            self.held = Some(Held { epoch, until: policy::held_until(&self.config, sent) });
            self.next_call = policy::renew_at(&self.config, sent);
            if self.changed {
                self.next_call = self.next_call.min(policy::carry_at(&self.config, self.asked_at, now));
            }
        } else {
            if self.held.is_some() {
                self.lose(LostReason::Taken);
            }
            self.next_call = now + policy::acquire_every(&self.config);
        }
        self.handle_timeout(now);
    }

    /// The lease call in flight failed (an error, or no answer within the
    /// store timeout): tried again with backoff; a holder goes on until its
    /// lease's stop.
    pub fn lease_failed(&mut self, now: Instant) {
        let now = self.at(now);
        if self.sent.take().is_none() {
            return;
        }
        self.failures = self.failures.saturating_add(1);
        let cap = policy::retry_cap(&self.config, self.held.is_some());
        self.next_call = now + policy::retry_after(&self.config, self.failures, self.seed, cap);
        self.handle_timeout(now);
    }

    /// Applies what is due at `now`: a lease call past its store timeout
    /// fails; a lease past its stop is lost.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.at(now);
        if let Some(sent) = self.sent
            && now >= sent + self.config.store_timeout
        {
            self.lease_failed(now);
        }
        if let Some(h) = self.held
            && now >= policy::stop_sending_at(&self.config, h.until)
        {
            self.lose(LostReason::Expired);
            self.next_call = self.next_call.min(now);
        }
    }

    /// Stops holding: what was read is forgotten, a read out is void, and
    /// no send starts until those it started are over.
    fn lose(&mut self, reason: LostReason) {
        self.quiet_until = policy::sends_over_at(&self.config, self.last);
        self.held = None;
        self.reading = false;
        self.caught_up_at = None;
        if self.acquired.take().is_none() {
            self.lost.get_or_insert(reason);
        }
    }

    /// When something is next due: a lease call, its timeout, the lease's
    /// stop, or a read of a caught-up log. `None` once released.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let call = match self.sent {
            Some(sent) => sent + self.config.store_timeout,
            None => self.next_call,
        };
        let stop = self.held.map(|h| policy::stop_sending_at(&self.config, h.until));
        let read = self.held.and(self.caught_up_at).map(|t| t + self.config.poll_interval);
        let quiet = self.held.and(Some(self.quiet_until)).filter(|&q| q > self.last);
        Some([stop, read, quiet].into_iter().flatten().fold(call, Instant::min))
    }

    /// Gives the lease up (the process is closing): `true` if it held it,
    /// and the store should be told (a release call); no call after this.
    pub fn release(&mut self, now: Instant) -> bool {
        self.at(now);
        self.closed = true;
        self.sent = None;
        let held = self.held;
        if let Some(h) = held {
            self.closing = Some(Closing { until: h.until, renewal: None, failures: 0 });
            self.lose(LostReason::Released);
        }
        held.is_some()
    }

    /// The renewal a process that released a held lease makes as it
    /// closes (it outlasts the sends still out and their removals) is sent
    /// now.
    pub fn close_renewal(&mut self, now: Instant) {
        let now = self.at(now);
        if let Some(c) = &mut self.closing {
            c.renewal = Some(now);
        }
    }

    /// The store answered that renewal within the store timeout: whether
    /// this process still holds the lease (under the epoch it released).
    /// Held: it is its own a lease after the renewal was sent. Not: another
    /// process may hold it, and a failed removal is not tried again.
    pub fn close_renewal_answered(&mut self, holds: bool) {
        let Some(c) = &mut self.closing else { return };
        match c.renewal.take() {
            Some(sent) if holds => c.until = c.until.max(policy::held_until(&self.config, sent)),
            _ if holds => {}
            _ => self.closing = None,
        }
    }

    /// How many events to read now, with `held` events in the dispatcher
    /// and `unremoved` delivered or dead whose removal is not confirmed: a
    /// page, if this process may send, no read is out, it fits
    /// (`policy::reads_page`: what a holder that dies leaves delivered and
    /// not removed is four pages at most), and the log was not found caught
    /// up less than a poll interval ago. Marks the read out.
    pub fn read_due(&mut self, now: Instant, held: u32, unremoved: u32) -> Option<u32> {
        let now = self.at(now);
        let due = self.caught_up_at.is_none_or(|t| now >= t + self.config.poll_interval);
        if self.reading
            || !due
            || !self.may_send(now)
            || !policy::reads_page(held, unremoved, self.page, self.max_messages)
        {
            return None;
        }
        self.reading = true;
        Some(self.page)
    }

    /// The read made under lease `epoch` gave `got` events (fewer than a
    /// page: the end of the log). One made under an earlier grant is void:
    /// `false`, and its events are to be dropped.
    pub fn read_answered(&mut self, now: Instant, epoch: u64, got: u32) -> bool {
        let now = self.at(now);
        if !self.reading || self.epoch() != Some(epoch) {
            return false;
        }
        self.reading = false;
        self.caught_up_at = (got < self.page).then_some(now);
        true
    }

    /// The read made under lease `epoch` failed: tried again a poll
    /// interval later.
    pub fn read_failed(&mut self, now: Instant, epoch: u64) {
        let now = self.at(now);
        if self.reading && self.epoch() == Some(epoch) {
            self.reading = false;
            self.caught_up_at = Some(now);
        }
    }

    /// The holder's breaker changed state: the next renewal, which carries
    /// it for the next holder, comes soon: a poll interval after the last
    /// lease call at the earliest, after the answer to one out (it carried
    /// the state before), and never sooner than the backoff of failed ones.
    pub fn breaker_changed(&mut self, now: Instant) {
        let now = self.at(now);
        if self.held.is_none() {
            return;
        }
        self.changed = true;
        // (While lease calls fail, their backoff stands.)
        if self.sent.is_none() && self.failures == 0 {
            self.next_call = self.next_call.min(policy::carry_at(&self.config, self.asked_at, now));
        }
    }

    /// This process appended to the log: a caught-up holder reads it at once.
    pub fn appended(&mut self) {
        self.caught_up_at = None;
    }

    /// A removal (or dead letter) failed: when to try it again. Closing,
    /// only a few times, while the lease it held leaves room
    /// (`policy::closing_retry`); `None`: no more tries (the events stay in
    /// the log, to be sent again).
    pub fn removal_failed(&mut self, now: Instant) -> Option<Instant> {
        let now = self.at(now);
        if self.closed {
            let c = self.closing.as_mut()?;
            c.failures = c.failures.saturating_add(1);
            let at = now
                + policy::retry_after(&self.config, c.failures, self.seed ^ 1, policy::retry_cap(&self.config, true));
            return policy::closing_retry(&self.config, c.failures, at, c.until).then_some(at);
        }
        self.removal_failures = self.removal_failures.saturating_add(1);
        Some(now + policy::retry_after(&self.config, self.removal_failures, self.seed ^ 1, Duration::from_secs(30)))
    }

    /// A removal succeeded: the next failure backs off from the start.
    pub fn removal_done(&mut self) {
        self.removal_failures = 0;
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests;
