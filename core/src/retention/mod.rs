//! Retention (seed 001): a [`RetentionQueue`] bound to a breaker holds what
//! could not be sent while the breaker refuses, and releases it in order,
//! paced, once it admits again. Sans-IO like the breaker: the caller sends
//! the messages the dispatcher hands out and reports how each went.
//!
//! **The protocol.** [`submit`](RetentionQueue::submit) a message: it is handed
//! out at once ([`Submitted::Send`]) when nothing is retained and the
//! breaker admits it, else retained (FIFO; a newer message never overtakes
//! a retained one, so order is kept). [`next`](RetentionQueue::next) hands out
//! the oldest retained message when the breaker admits a call (its
//! concurrency limit and the optional [`Rate`] pace the release: never the
//! whole backlog at once). Send what was handed out (read it with
//! [`message`](RetentionQueue::message)) and [`report`](RetentionQueue::report) the
//! outcome: a success is delivered (the message comes back to the caller);
//! a failure goes back to its place in the queue, or to the dead letters
//! after `max_attempts` or `max_age`; an ignored outcome (the upstream
//! refused the message itself) is dead-lettered at once; a cancelled one
//! goes back without counting an attempt. Call `next` until it hands out
//! nothing, after every `submit` and `report`, and again at
//! [`poll_timeout`](RetentionQueue::poll_timeout) (when an open time ends, a
//! rate token comes, or a retained message ages out).
//!
//! **Report every send.** The dispatcher never has more sends out than the
//! breaker allows (its probes while half-open, its concurrency limit),
//! counting its own sends not yet reported — also those the breaker gave up
//! on after `probe_timeout` — so order and the limit hold; a send never
//! reported holds its place. Give sends a timeout shorter than the
//! breaker's `probe_timeout`, as for any call.
//!
//! **Half-open.** With [`Probe::Oldest`] (the default) the oldest retained
//! message is the probe as soon as the breaker admits one: no new traffic
//! is needed. [`Probe::NewMessage`] is seed 001's rule: retained messages
//! wait, and a new message probes (ahead of them) until a probe has
//! succeeded; the rest of the probes the breaker needs are the retained
//! ones, oldest first, and new messages wait behind them again.
//!
//! **Order.** Messages are first sent in submission order. With more than
//! one send in flight, a message that fails goes back before every
//! retained message submitted after it, but those already in flight are
//! not called back: one in flight at a time (a concurrency limit of 1)
//! keeps delivery in submission order too.
//!
//! **Nothing is lost silently.** A bound reached refuses the new message
//! (handed back) or, with [`Overflow::DropOldest`], drops the oldest
//! retained ones as [`Event::Dropped`]; a message given up is an
//! [`Event::Dead`]. Every message submitted is, at any time, exactly one
//! of: refused, retained, in flight, delivered, dropped, dead (counted in
//! [`RetentionCounters`]).

mod config;
pub mod exposition;
mod in_flight;
mod policy;
mod rate;
#[cfg(feature = "snapshot")]
mod saved;

use alloc::collections::VecDeque;
use core::borrow::Borrow;

pub use config::{
    CLOCK_FAILURE_RETRY, DEFAULT_SEND_TIMEOUT, Overflow, Probe, Rate, RetentionConfig, RetentionError, RetentionField,
};
pub use exposition::RetentionReading;
pub use policy::MAX_SEQ;
#[cfg(feature = "snapshot")]
pub use saved::RetentionSnapshot;

use crate::breaker::Breaker;
use crate::config::Config;
use crate::meter::Meter;
use crate::permit::{Outcome, Permit};
use crate::state::{State, Transition};
use crate::time::{Duration, Instant};
use in_flight::InFlight;
use policy::Fate;
use rate::TokenBucket;

/// A message the dispatcher holds: retained or in flight.
#[derive(Debug)]
struct Held<M> {
    seq: u64,
    message: M,
    bytes: u64,
    attempts: u32,
    /// When it ages out (`max_age` after its submission).
    expires: Option<Instant>,
}

impl<M> Held<M> {
    fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|at| now >= at)
    }
}

/// What [`submit`](RetentionQueue::submit) did with a message (its sequence
/// number, which names it from then on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Send it now, then [`report`](RetentionQueue::report) it.
    Send(u64),
    /// Held until the breaker admits it.
    Retained(u64),
}

/// A message refused because a bound was reached (handed back).
#[derive(Debug, PartialEq, Eq)]
pub struct Overflowed<M> {
    /// The message.
    pub message: M,
}

/// Why a message was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadReason {
    /// It failed `max_attempts` times.
    Attempts,
    /// It was older than `max_age`.
    Age,
    /// The upstream refused it (an ignored outcome): retrying cannot help.
    Refused,
}

/// Something the caller must hear of, in order (read with
/// [`poll_event`](RetentionQueue::poll_event)).
#[derive(Debug, PartialEq)]
pub enum Event<M> {
    /// The breaker changed state.
    Transition(Transition),
    /// A message was given up: the dead letter.
    Dead {
        /// Its sequence number.
        seq: u64,
        /// The message.
        message: M,
        /// Why.
        reason: DeadReason,
        /// How many times it was sent.
        attempts: u32,
    },
    /// A retained message was dropped to make room ([`Overflow::DropOldest`]).
    Dropped {
        /// Its sequence number.
        seq: u64,
        /// The message.
        message: M,
    },
}

/// How a report ended for its message.
#[derive(Debug, PartialEq, Eq)]
pub enum Reported<M> {
    /// Delivered: the message is the caller's again.
    Delivered(M),
    /// Back in the queue, at its place.
    Retained,
    /// Given up (an [`Event::Dead`] holds it).
    Dead,
}

/// Monotonic counts of what became of the messages submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionCounters {
    /// Messages submitted.
    pub submitted: u64,
    /// Refused at submission (a bound reached).
    pub refused: u64,
    /// Sends handed out (first ones and retries).
    pub sent: u64,
    /// Delivered.
    pub delivered: u64,
    /// Sends that failed.
    pub failed: u64,
    /// Given up.
    pub dead: u64,
    /// Dropped to make room.
    pub dropped: u64,
}

/// The former name of [`RetentionQueue`] (the bindings call their sending
/// drivers `Dispatcher`; this is the queue they drive).
#[deprecated(since = "0.1.0", note = "renamed RetentionQueue")]
pub type Dispatcher<M, C = Config, Mt = crate::Metrics> = RetentionQueue<M, C, Mt>;

/// A breaker with a queue of what it could not send (see the module).
pub struct RetentionQueue<M, C: Borrow<Config> = Config, Mt: Meter = crate::Metrics> {
    breaker: Breaker<C, Mt>,
    config: RetentionConfig,
    /// Waiting to be sent, in submission order.
    retained: VecDeque<Held<M>>,
    /// Handed out and not yet reported, by sequence number.
    sending: InFlight<M>,
    events: VecDeque<Event<M>>,
    bucket: Option<TokenBucket>,
    /// Bytes held, retained and in flight.
    bytes: u64,
    next_seq: u64,
    /// The latest time seen (time never goes backwards here either).
    latest: Instant,
    /// With [`Probe::NewMessage`]: a new message came while half-open but
    /// could not be held, so the oldest retained one may probe instead.
    probe_owed: bool,
    counters: RetentionCounters,
}

impl<M, C: Borrow<Config>, Mt: Meter> RetentionQueue<M, C, Mt> {
    /// A dispatcher in front of `breaker`. It needs a release rate or a
    /// breaker with a concurrency limit: something must pace the release.
    pub fn new(breaker: Breaker<C, Mt>, config: RetentionConfig) -> Result<Self, RetentionError> {
        config.validate(breaker.config().concurrency_limit.is_some())?;
        Ok(RetentionQueue {
            bucket: config.release_rate.map(|rate| TokenBucket::new(rate, Instant::ZERO)),
            breaker,
            config,
            retained: VecDeque::new(),
            sending: InFlight::new(),
            events: VecDeque::new(),
            bytes: 0,
            next_seq: 0,
            latest: Instant::ZERO,
            probe_owed: false,
            counters: RetentionCounters::default(),
        })
    }

    /// The breaker (to read it).
    pub fn breaker(&self) -> &Breaker<C, Mt> {
        &self.breaker
    }

    /// The breaker, to operate it by hand (force it open from a throttle
    /// webhook, say): the transitions come back from those calls. Call
    /// [`next`](Self::next) after (a released breaker may admit at once;
    /// [`poll_timeout`](Self::poll_timeout) then says so too).
    pub fn breaker_mut(&mut self) -> &mut Breaker<C, Mt> {
        &mut self.breaker
    }

    /// Holds the breaker open for `duration`, or until
    /// [`release`](Self::release) (a throttle webhook, say); its transition
    /// comes as an [`Event::Transition`].
    pub fn force_open(&mut self, now: Instant, duration: Option<Duration>) {
        let now = self.advance(now);
        self.events.extend(self.breaker.force_open(now, duration).into_iter().map(Event::Transition));
    }

    /// Holds the breaker open for at least `duration` (the partner's
    /// `Retry-After`), never shortening an open period in force: see
    /// [`Breaker::force_open_at_least`](crate::Breaker::force_open_at_least).
    pub fn force_open_at_least(&mut self, now: Instant, duration: Duration) {
        let now = self.advance(now);
        self.events.extend(self.breaker.force_open_at_least(now, duration).into_iter().map(Event::Transition));
    }

    /// Ends a [`force_open`](Self::force_open); its transition comes as an
    /// [`Event::Transition`]. Call [`next`](Self::next) after.
    pub fn release(&mut self, now: Instant) {
        let now = self.advance(now);
        self.events.extend(self.breaker.release(now).into_iter().map(Event::Transition));
    }

    /// The sequence numbers of the messages held: retained (in queue order),
    /// then in flight (by sequence number). A store keeps these.
    pub fn held(&self) -> impl Iterator<Item = u64> + '_ {
        self.retained.iter().map(|h| h.seq).chain(self.sending.held().map(|h| h.seq))
    }

    /// The configuration.
    pub fn config(&self) -> &RetentionConfig {
        &self.config
    }

    /// What became of the messages so far.
    pub fn counters(&self) -> RetentionCounters {
        self.counters
    }

    /// What it holds and did, for metrics (see [`exposition`]).
    pub fn reading(&self) -> RetentionReading {
        RetentionReading {
            retained: self.retained.len() as u64,
            bytes: self.bytes,
            in_flight: self.sending.len() as u64,
            counters: self.counters,
        }
    }

    /// Messages retained (not in flight).
    pub fn retained(&self) -> usize {
        self.retained.len()
    }

    /// Messages handed out and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.sending.len()
    }

    /// Bytes held, retained and in flight.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The message in flight as `seq`.
    pub fn message(&self, seq: u64) -> Option<&M> {
        self.sending.get(seq).map(|held| &held.message)
    }

    /// Whether [`poll_event`](Self::poll_event) has something (a binding
    /// asks for events only then).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next thing the caller must hear of, oldest first.
    pub fn poll_event(&mut self) -> Option<Event<M>> {
        self.events.pop_front()
    }

    /// Submits `message` (`bytes` long, as the caller counts) at `now`.
    pub fn submit(&mut self, message: M, bytes: u64, now: Instant) -> Result<Submitted, Overflowed<M>> {
        let now = self.advance(now);
        self.counters.submitted += 1;
        if !policy::seq_available(self.next_seq) || !self.make_room(bytes) {
            self.counters.refused += 1;
            self.probe_owed |= self.new_message_probes(now);
            return Err(Overflowed { message });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += bytes;
        let expires = self.config.max_age.map(|age| now + age);
        let held = Held { seq, message, bytes, attempts: 0, expires };
        let probes = self.new_message_probes(now);
        if (self.retained.is_empty() || probes)
            && self.room(now)
            && let Some(permit) = self.admit(now)
        {
            self.counters.sent += 1;
            self.sending.insert(held, permit);
            return Ok(Submitted::Send(seq));
        }
        // A new message came while half-open: if it cannot probe now, the
        // oldest retained one probes when it can (no message waits forever).
        self.probe_owed |= probes;
        self.retained.push_back(held);
        Ok(Submitted::Retained(seq))
    }

    /// Hands out the oldest retained message if it may be sent at `now`.
    pub fn next(&mut self, now: Instant) -> Option<u64> {
        let now = self.advance(now);
        // Timed changes first (an open time that ended), so that the
        // breaker's next timeout is a time to come.
        if let Some(t) = self.breaker.handle_timeout(now) {
            self.events.push_back(Event::Transition(t));
        }
        self.expire(now);
        self.probe_owed &= self.breaker.state(now) == State::HalfOpen;
        if !self.ready(now) {
            return None;
        }
        let permit = self.admit(now)?;
        let held = self.retained.pop_front()?;
        self.probe_owed = false;
        self.counters.sent += 1;
        let seq = held.seq;
        self.sending.insert(held, permit);
        Some(seq)
    }

    /// Reports how the send of `seq` went; `None` if `seq` is not in flight
    /// (reported already, or never handed out).
    pub fn report(&mut self, seq: u64, outcome: Outcome, now: Instant) -> Option<Reported<M>> {
        let (mut held, permit) = self.sending.remove(seq)?;
        let now = self.advance(now);
        if let Some(t) = self.breaker.record(permit, outcome, now) {
            self.events.push_back(Event::Transition(t));
        }
        if outcome == Outcome::Failure {
            self.counters.failed += 1;
        }
        match policy::fate(&self.config, outcome, held.attempts, held.expired(now)) {
            Fate::Delivered => {
                self.bytes -= held.bytes;
                self.counters.delivered += 1;
                return Some(Reported::Delivered(held.message));
            }
            Fate::Dead(reason) => {
                held.attempts = held.attempts.saturating_add(1);
                self.bury(held, reason);
                return Some(Reported::Dead);
            }
            Fate::Retained { attempt } => {
                if attempt {
                    held.attempts = held.attempts.saturating_add(1);
                }
            }
        }
        // Back to its place: before every message submitted after it.
        let at = self.retained.partition_point(|h| h.seq < held.seq);
        self.retained.insert(at, held);
        Some(Reported::Retained)
    }

    /// When [`next`](Self::next) may hand out something it cannot now, or a
    /// retained message ages out (`None`: not by time). Call `next` then;
    /// after it, this is a time to come (unless something is due at once).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let head = self.retained.front()?;
        // Something can go at once (after the breaker was operated by hand).
        if self.ready(self.latest) {
            return Some(self.latest);
        }
        let mut at = self.breaker.poll_timeout();
        let mut earliest = |t: Instant| at = Some(at.map_or(t, |a| a.min(t)));
        // The rate only says when, if it is what holds the release back.
        if let Some(bucket) = &self.bucket
            && let token = bucket.next_token(self.latest)
            && token > self.latest
        {
            earliest(token);
        }
        if let Some(expires) = head.expires {
            earliest(expires);
        }
        at
    }

    /// Applies what is due at `now`: the breaker's timed change, and
    /// retained messages aged out.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        if let Some(t) = self.breaker.handle_timeout(now) {
            self.events.push_back(Event::Transition(t));
        }
        self.expire(now);
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.latest = self.latest.max(now);
        self.latest
    }

    /// Whether the dispatcher's own sends leave room for one more: no more
    /// than the breaker allows at once (its probes while half-open, its
    /// concurrency limit otherwise), counting every send not yet reported —
    /// also those the breaker gave up on, or admitted before a `disable`.
    fn room(&self, now: Instant) -> bool {
        let limit = self.breaker.counts(now).concurrency_limit;
        let probes = self.breaker.config().half_open_max_attempts;
        let cap = policy::send_cap(self.breaker.state(now), probes, limit);
        cap.is_none_or(|cap| self.sending.len() < cap as usize)
    }

    /// Whether [`next`](Self::next) would hand out the oldest retained
    /// message at `now` (asks nothing that counts: the dispatcher asks again
    /// and again while it waits).
    fn ready(&self, now: Instant) -> bool {
        if self.retained.is_empty() || !self.room(now) {
            return false;
        }
        let state = self.breaker.state(now);
        if policy::retained_wait(self.config.probe, state, self.probe_owed, self.breaker.probe_successes()) {
            return false;
        }
        self.bucket.as_ref().is_none_or(|b| b.ready_at(now)) && self.breaker.check(now).is_ok()
    }

    /// Whether a new message probes ahead of the retained ones at `now`
    /// (seed 001's rule): half-open, before any probe has succeeded.
    fn new_message_probes(&self, now: Instant) -> bool {
        policy::new_message_probes(self.config.probe, self.breaker.state(now), self.breaker.probe_successes())
    }

    /// A permit at `now`, within the rate (the breaker's transition, if it
    /// observed one, is queued).
    fn admit(&mut self, now: Instant) -> Option<Permit> {
        if self.bucket.as_mut().is_some_and(|bucket| !bucket.ready(now)) {
            return None;
        }
        let admission = self.breaker.try_acquire(now);
        if let Some(t) = admission.transition {
            self.events.push_back(Event::Transition(t));
        }
        let permit = admission.decision.ok()?;
        if let Some(bucket) = &mut self.bucket {
            bucket.spend();
        }
        Some(permit)
    }

    /// Whether a message of `bytes` fits, after dropping the oldest retained
    /// messages if the configuration says so — only if dropping them makes
    /// room. The bytes held never pass 2^53 − 1 (what a snapshot holds).
    fn make_room(&mut self, bytes: u64) -> bool {
        let fits = |count: usize, held: u64| policy::fits(&self.config, count, held, bytes);
        if fits(self.retained.len() + self.sending.len(), self.bytes) {
            return true;
        }
        // What is left once every retained message is dropped: the sends.
        let in_flight: u64 = self.sending.held().map(|h| h.bytes).sum();
        if !policy::drops_for_room(&self.config, fits(self.sending.len(), in_flight)) {
            return false;
        }
        while !fits(self.retained.len() + self.sending.len(), self.bytes) {
            let Some(oldest) = self.retained.pop_front() else { return false };
            self.bytes -= oldest.bytes;
            self.counters.dropped += 1;
            self.events.push_back(Event::Dropped { seq: oldest.seq, message: oldest.message });
        }
        true
    }

    /// Dead-letters the retained messages aged out at `now` (the oldest
    /// first: the queue is in submission order).
    fn expire(&mut self, now: Instant) {
        while self.retained.front().is_some_and(|h| h.expired(now)) {
            if let Some(held) = self.retained.pop_front() {
                self.bury(held, DeadReason::Age);
            }
        }
    }

    fn bury(&mut self, held: Held<M>, reason: DeadReason) {
        self.bytes -= held.bytes;
        self.counters.dead += 1;
        let Held { seq, message, attempts, .. } = held;
        self.events.push_back(Event::Dead { seq, message, reason, attempts });
    }
}
