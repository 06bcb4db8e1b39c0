//! The reference store: what every group store does with a request, in
//! memory (the bindings' Lua script does the same on Redis, and the
//! conformance cases check both). It is counters, a fenced register and a
//! lease; it decides nothing about breakers.

use alloc::collections::{BTreeMap, BTreeSet};

use super::protocol::{ANY_EPOCH, Answer, GroupLimit, GroupPhase, Proposed, Register, Request};
use crate::breaker::Tally;
use crate::window::{TIME_BUCKETS, WindowCounts};

/// A group's store in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    register: Register,
    /// Window counts by bucket (the store's time over the bucket width).
    buckets: BTreeMap<u64, Tally>,
    /// Each member's running totals, as last received.
    totals: BTreeMap<u64, Tally>,
    /// Each member's latest exchange.
    seen: BTreeMap<u64, u64>,
    /// Each member's latest exchange that carried failures.
    failed: BTreeMap<u64, u64>,
    run: u64,
    limit: GroupLimit,
    /// Members whose latest exchange said they have calls to make.
    active: BTreeSet<u64>,
    /// Each member's calls in flight, as last reported.
    busy: BTreeMap<u64, u32>,
}

impl MemoryStore {
    /// An empty store: the group closed at epoch 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The register.
    pub fn register(&self) -> Register {
        self.register
    }

    /// The group's concurrency limit.
    pub fn limit(&self) -> GroupLimit {
        self.limit
    }

    /// Applies `request` at the store's `now_us`, atomically, and answers.
    pub fn exchange(&mut self, request: &Request, now_us: u64) -> Answer {
        let r = request;
        // Given up by its process before it arrived: it changes nothing.
        if r.deadline_us != 0 && now_us > r.deadline_us {
            return self.answer(r, now_us);
        }
        // Members silent for longer than their TTL leave.
        let since = now_us.saturating_sub(r.member_ttl_us);
        let gone: alloc::vec::Vec<u64> = self.seen.iter().filter(|&(_, &at)| at < since).map(|(&m, _)| m).collect();
        for m in gone {
            self.seen.remove(&m);
            self.failed.remove(&m);
            self.totals.remove(&m);
            self.active.remove(&m);
            self.busy.remove(&m);
        }
        self.seen.insert(r.member, now_us);
        // Growth of the running totals since last received; a member not
        // known yet (or whose totals went back) counts nothing this time.
        let grown = match self.totals.insert(r.member, r.tally) {
            Some(t) if r.tally.calls >= t.calls && r.tally.failures >= t.failures && r.tally.slow >= t.slow => Tally {
                calls: r.tally.calls - t.calls,
                failures: r.tally.failures - t.failures,
                slow: r.tally.slow - t.slow,
                rejected: 0,
            },
            _ => Tally::default(),
        };
        let bucket = now_us.checked_div(r.bucket_us);
        if let Some(b) = bucket.filter(|_| grown.calls > 0) {
            let counts = self.buckets.entry(b).or_default();
            counts.calls += grown.calls;
            counts.failures += grown.failures;
            counts.slow += grown.slow;
        }
        if grown.failures > 0 {
            self.failed.insert(r.member, now_us);
        }
        self.run = match grown.calls > grown.failures {
            true => u64::from(r.consecutive),
            false => self.run.saturating_add(grown.failures),
        };
        if let Some(p) = r.proposal.filter(|p| p.epoch == self.register.epoch || p.epoch == ANY_EPOCH) {
            let phase = match p.to {
                Proposed::Open { for_us, open_for_us, reason } => {
                    GroupPhase::Open { until_us: now_us.saturating_add(for_us), open_for_us, reason }
                }
                Proposed::HalfOpen { lease_us, open_for_us, reason } => GroupPhase::HalfOpen {
                    lease: r.member,
                    lease_until_us: now_us.saturating_add(lease_us),
                    open_for_us,
                    reason,
                },
                Proposed::Closed { .. } => {
                    self.buckets.clear();
                    self.failed.clear();
                    self.run = 0;
                    GroupPhase::Closed
                }
            };
            let closed_by = match p.to {
                Proposed::Closed { reason } => Some(reason),
                _ => None,
            };
            self.register = Register { epoch: self.register.epoch + 1, phase, closed_by };
        }
        // The group's limit: a fenced register with a counter of steps.
        if let Some(l) = r.limit {
            if l.epoch == self.limit.epoch {
                match l.set {
                    Some((limit, threshold)) => {
                        self.limit = GroupLimit { epoch: self.limit.epoch + 1, limit, threshold };
                    }
                    None => self.limit.limit = self.limit.limit.saturating_add(l.steps),
                }
            }
            match l.active {
                true => self.active.insert(r.member),
                false => self.active.remove(&r.member),
            };
            self.busy.insert(r.member, l.busy);
        } else {
            self.active.remove(&r.member);
            self.busy.remove(&r.member);
        }
        if let Some(b) = bucket {
            let oldest = b.saturating_sub(u64::from(TIME_BUCKETS) - 1);
            self.buckets.retain(|&id, _| id >= oldest);
        }
        self.answer(r, now_us)
    }

    /// The answer to `r` at `now_us`, from the state as it is.
    fn answer(&self, r: &Request, now_us: u64) -> Answer {
        let mut totals = Tally::default();
        if let Some(b) = now_us.checked_div(r.bucket_us) {
            let oldest = b.saturating_sub(u64::from(TIME_BUCKETS) - 1);
            for counts in self.buckets.range(oldest..).map(|(_, c)| c) {
                totals.calls += counts.calls;
                totals.failures += counts.failures;
                totals.slow += counts.slow;
            }
        }
        let recent = now_us.saturating_sub(r.window_us);
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Answer {
            now_us,
            register: self.register,
            totals: WindowCounts {
                calls: narrow(totals.calls),
                failures: narrow(totals.failures),
                slow: narrow(totals.slow),
            },
            run: narrow(self.run),
            live: narrow(self.seen.len() as u64),
            failing: narrow(self.failed.values().filter(|&&at| at >= recent).count() as u64),
            limit: self.limit,
            active: narrow(self.active.len() as u64),
            rank: self.active.contains(&r.member).then(|| narrow(self.active.range(..r.member).count() as u64)),
            busy: narrow(self.busy.values().map(|&b| u64::from(b)).sum()),
        }
    }
}
