//! What a breaker tells its meter: the hook through which [`Metrics`] and
//! [`LatencyHistogram`] are kept, without the state machine knowing them.
//!
//! [`Metrics`]: crate::Metrics
//! [`LatencyHistogram`]: crate::LatencyHistogram

use crate::permit::Outcome;
use crate::state::Transition;
use crate::time::{Duration, Instant};

/// A reported call, as the breaker judged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// What the caller reported.
    pub outcome: Outcome,
    /// From admission to report.
    pub latency: Duration,
    /// Slower than `slow_call_duration` (then counted as a failure).
    pub slow: bool,
    /// From an earlier state period: it changed nothing.
    pub stale: bool,
}

/// Receives what a [`Breaker`](crate::Breaker) does, as it does it. Every
/// method has an empty default; `()` measures nothing at no cost, a pair
/// `(A, B)` feeds both, and `Option<M>` feeds `M` when it is there.
pub trait Meter {
    /// A call was admitted at `now`.
    fn admitted(&mut self, now: Instant) {
        let _ = now;
    }
    /// `count` calls were admitted at `now` (a binding's licensed batch).
    fn admitted_many(&mut self, now: Instant, count: u32) {
        for _ in 0..count {
            self.admitted(now);
        }
    }
    /// A call was rejected at `now`.
    fn rejected(&mut self, now: Instant) {
        let _ = now;
    }
    /// A call was reported.
    fn reported(&mut self, report: Report) {
        let _ = report;
    }
    /// `count` calls were reported alike (a binding's batch of successes).
    fn reported_many(&mut self, report: Report, count: u32) {
        for _ in 0..count {
            self.reported(report);
        }
    }
    /// The state changed.
    fn transitioned(&mut self, transition: &Transition) {
        let _ = transition;
    }
    /// Whether it measures each call's latency (then a binding may not
    /// admit calls without asking: see [`Licence`](crate::Licence)).
    fn measures_latency(&self) -> bool {
        false
    }
}

impl Meter for () {}

/// A meter that may be switched off (`None`).
impl<M: Meter> Meter for Option<M> {
    fn admitted(&mut self, now: Instant) {
        if let Some(m) = self {
            m.admitted(now);
        }
    }
    fn admitted_many(&mut self, now: Instant, count: u32) {
        if let Some(m) = self {
            m.admitted_many(now, count);
        }
    }
    fn rejected(&mut self, now: Instant) {
        if let Some(m) = self {
            m.rejected(now);
        }
    }
    fn reported(&mut self, report: Report) {
        if let Some(m) = self {
            m.reported(report);
        }
    }
    fn reported_many(&mut self, report: Report, count: u32) {
        if let Some(m) = self {
            m.reported_many(report, count);
        }
    }
    fn transitioned(&mut self, transition: &Transition) {
        if let Some(m) = self {
            m.transitioned(transition);
        }
    }
    fn measures_latency(&self) -> bool {
        self.as_ref().is_some_and(M::measures_latency)
    }
}

/// A boxed meter (a large one, kept off the breaker's own memory).
#[cfg(feature = "alloc")]
impl<M: Meter + ?Sized> Meter for alloc::boxed::Box<M> {
    fn admitted(&mut self, now: Instant) {
        (**self).admitted(now);
    }
    fn admitted_many(&mut self, now: Instant, count: u32) {
        (**self).admitted_many(now, count);
    }
    fn rejected(&mut self, now: Instant) {
        (**self).rejected(now);
    }
    fn reported(&mut self, report: Report) {
        (**self).reported(report);
    }
    fn reported_many(&mut self, report: Report, count: u32) {
        (**self).reported_many(report, count);
    }
    fn transitioned(&mut self, transition: &Transition) {
        (**self).transitioned(transition);
    }
    fn measures_latency(&self) -> bool {
        (**self).measures_latency()
    }
}

impl<A: Meter, B: Meter> Meter for (A, B) {
    fn admitted(&mut self, now: Instant) {
        self.0.admitted(now);
        self.1.admitted(now);
    }
    fn admitted_many(&mut self, now: Instant, count: u32) {
        self.0.admitted_many(now, count);
        self.1.admitted_many(now, count);
    }
    fn rejected(&mut self, now: Instant) {
        self.0.rejected(now);
        self.1.rejected(now);
    }
    fn reported(&mut self, report: Report) {
        self.0.reported(report);
        self.1.reported(report);
    }
    fn reported_many(&mut self, report: Report, count: u32) {
        self.0.reported_many(report, count);
        self.1.reported_many(report, count);
    }
    fn transitioned(&mut self, transition: &Transition) {
        self.0.transitioned(transition);
        self.1.transitioned(transition);
    }
    fn measures_latency(&self) -> bool {
        self.0.measures_latency() || self.1.measures_latency()
    }
}
