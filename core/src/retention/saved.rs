//! A dispatcher's state in a snapshot: its breaker's, the bookkeeping of
//! every message it holds (not the messages: the caller keeps them, in
//! memory or in a store, and hands them back by sequence number on
//! restore), its counters and its rate's tokens. Times are relative to the
//! snapshot, as the breaker's are.
//!
//! A message in flight when the snapshot was taken is restored as retained:
//! its outcome is unknown to the snapshot, so it is sent again. To deliver
//! nothing twice across a restart, let the sends in flight end (and report
//! them) before taking the snapshot.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::borrow::Borrow;

use super::rate::TokenBucket;
use super::{Held, RetentionConfig, RetentionCounters, RetentionQueue};
use crate::breaker::{Breaker, Snapshot};
use crate::config::Config;
use crate::error::SnapshotError;
use crate::meter::Meter;
use crate::metrics::{MAX_SAVED_COUNTER, Persist};
use crate::snapshot::{Elapsed, SNAPSHOT_VERSION, Saved};
use crate::time::{Duration, Instant};

/// A dispatcher's state (see the module); encode it with `to_json` /
/// `to_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSnapshot {
    /// [`SNAPSHOT_VERSION`](crate::SNAPSHOT_VERSION) when written.
    pub version: u32,
    breaker: Snapshot,
    next_seq: u64,
    /// Every message held, in submission order.
    messages: Vec<SavedMessage>,
    /// submitted, refused, sent, delivered, failed, dead, dropped.
    counters: [u64; 7],
    probe_owed: bool,
    /// The rate's tokens, in millionths (none without a rate).
    tokens: Option<u64>,
}

/// A message's bookkeeping, saved as a tuple (sequence number, bytes,
/// attempts, time until it ages out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(from = "MessageTuple", into = "MessageTuple")]
struct SavedMessage {
    seq: u64,
    bytes: u64,
    attempts: u32,
    /// Time until it ages out (none without `max_age`).
    expires_in_us: Option<u64>,
}

type MessageTuple = (u64, u64, u32, Option<u64>);

impl From<MessageTuple> for SavedMessage {
    fn from((seq, bytes, attempts, expires_in_us): MessageTuple) -> Self {
        SavedMessage { seq, bytes, attempts, expires_in_us }
    }
}

impl From<SavedMessage> for MessageTuple {
    fn from(m: SavedMessage) -> Self {
        (m.seq, m.bytes, m.attempts, m.expires_in_us)
    }
}

impl Saved for RetentionSnapshot {
    fn settle(&mut self) -> Result<(), SnapshotError> {
        self.breaker.settle()
    }
}

crate::snapshot::encodings!(RetentionSnapshot);

impl RetentionCounters {
    fn save(&self) -> [u64; 7] {
        let RetentionCounters { submitted, refused, sent, delivered, failed, dead, dropped } = *self;
        [submitted, refused, sent, delivered, failed, dead, dropped]
    }

    fn load([submitted, refused, sent, delivered, failed, dead, dropped]: [u64; 7]) -> Self {
        RetentionCounters { submitted, refused, sent, delivered, failed, dead, dropped }
    }
}

impl<M, C: Borrow<Config>, Mt: Meter + Persist> RetentionQueue<M, C, Mt> {
    /// Its state at `now` (the messages in flight counted as retained).
    pub fn snapshot(&self, now: Instant) -> RetentionSnapshot {
        let now = now.max(self.latest);
        let saved = |h: &Held<M>| SavedMessage {
            seq: h.seq,
            bytes: h.bytes,
            attempts: h.attempts,
            expires_in_us: h.expires.map(|at| (at - now).as_micros().min(MAX_SAVED_COUNTER)),
        };
        let mut messages: Vec<SavedMessage> = self.retained.iter().chain(self.sending.held()).map(saved).collect();
        messages.sort_unstable_by_key(|m| m.seq);
        RetentionSnapshot {
            version: SNAPSHOT_VERSION,
            breaker: self.breaker.snapshot(now),
            next_seq: self.next_seq,
            messages,
            counters: self.counters.save(),
            probe_owed: self.probe_owed,
            tokens: self.bucket.as_ref().map(|b| b.tokens(now)),
        }
    }

    /// The dispatcher `snapshot` describes, with the configurations it was
    /// taken with, at `now`; `message` gives back each message by sequence
    /// number (a message it cannot give is a corrupt snapshot: it would be
    /// lost). The breaker is restored as [`Breaker::restore`] does, and
    /// with [`Elapsed::Counted`] the messages' ages and the rate's tokens
    /// count the time since the snapshot too.
    pub fn restore(
        config: C,
        retention: RetentionConfig,
        snapshot: &RetentionSnapshot,
        now: Instant,
        elapsed: Elapsed,
        mut message: impl FnMut(u64) -> Option<M>,
    ) -> Result<Self, SnapshotError> {
        let s = snapshot;
        crate::snapshot::check_version(s.version)?;
        let breaker = Breaker::restore(config, &s.breaker, now, elapsed)?;
        // The messages' ages and the rate's tokens resume where the breaker
        // does; the latest time seen is `now`.
        let latest = now;
        let now = s.breaker.resume_at(now, elapsed);
        let mut d = RetentionQueue::new(breaker, retention).map_err(|_| SnapshotError::ConfigMismatch)?;
        let corrupt = |what| Err(SnapshotError::Corrupt(what));
        let counters = RetentionCounters::load(s.counters);
        if s.counters.iter().any(|&n| n > MAX_SAVED_COUNTER) || s.next_seq > super::MAX_SEQ {
            return corrupt("retention counter out of range");
        }
        let c = counters;
        let placed = c
            .refused
            .checked_add(c.delivered)
            .and_then(|n| n.checked_add(c.dead))
            .and_then(|n| n.checked_add(c.dropped));
        // Every message accepted got a sequence number; each is in one place.
        let accepted = c.submitted.checked_sub(c.refused);
        if placed.and_then(|n| n.checked_add(s.messages.len() as u64)) != Some(c.submitted)
            || accepted != Some(s.next_seq)
        {
            return corrupt("retention counters");
        }
        if !s.messages.windows(2).all(|w| w[0].seq < w[1].seq) || s.messages.last().is_some_and(|m| m.seq >= s.next_seq)
        {
            return corrupt("retained message order");
        }
        if retention.max_messages.is_some_and(|max| s.messages.len() > max as usize) {
            return corrupt("more retained messages than max_messages");
        }
        let mut bytes = 0u64;
        let mut retained = VecDeque::with_capacity(s.messages.len().min(1 << 16));
        for m in &s.messages {
            let expires = match (m.expires_in_us, retention.max_age) {
                (Some(us), Some(age)) if Duration::from_micros(us) <= age => Some(now + Duration::from_micros(us)),
                (None, None) => None,
                _ => return corrupt("retained message age"),
            };
            if retention.max_attempts.is_some_and(|max| m.attempts >= max) {
                return corrupt("retained message attempts");
            }
            bytes = match bytes.checked_add(m.bytes) {
                Some(b) if b <= MAX_SAVED_COUNTER && retention.max_bytes.is_none_or(|max| b <= max) => b,
                _ => return corrupt("retained bytes"),
            };
            let Some(msg) = message(m.seq) else { return corrupt("a retained message is missing") };
            retained.push_back(Held { seq: m.seq, message: msg, bytes: m.bytes, attempts: m.attempts, expires });
        }
        d.bucket = match (retention.release_rate, s.tokens) {
            (Some(rate), Some(tokens)) if tokens <= TokenBucket::full(rate) => {
                Some(TokenBucket::with(rate, tokens, now))
            }
            (None, None) => None,
            _ => return corrupt("release rate tokens"),
        };
        d.retained = retained;
        d.bytes = bytes;
        d.next_seq = s.next_seq;
        d.counters = counters;
        d.probe_owed = s.probe_owed;
        d.latest = latest;
        Ok(d)
    }
}
