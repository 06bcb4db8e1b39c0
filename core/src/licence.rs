//! What a binding may do without asking the breaker: the one fast path the
//! core grants. A call across a language boundary costs far more than the
//! breaker's own work (about 0.5 µs in Node), so a binding may admit or
//! reject calls on its own — but only under a [`Licence`] the breaker gave,
//! and only in ways that leave the breaker exactly as the plain
//! [`try_acquire`](crate::Breaker::try_acquire) /
//! [`record`](crate::Breaker::record) protocol would.
//!
//! The protocol for a binding:
//! 1. Ask [`Breaker::licence`](crate::Breaker::licence) at a reading `now`
//!    (after an admission or a rejection through the breaker).
//! 2. Under [`Licence::Admit`] (a closed breaker admits every call until its
//!    next transition), admit every call without asking, and count the
//!    admissions with [`admit_licensed`](crate::Breaker::admit_licensed),
//!    giving the reading of the first, before any other call into the
//!    breaker but a batch of successes. Report successes read before `until`
//!    in bulk with [`record_successes`](crate::Breaker::record_successes),
//!    stamped with the latest of their readings, before anything that tells
//!    the breaker a later time (admissions included): every outcome before
//!    `until` falls in the same window bucket, so the batch moves no outcome
//!    to another bucket. A success slower than `slow_after` is a failure:
//!    report it, and any other outcome, at once with
//!    [`record`](crate::Breaker::record) and a
//!    [`Permit::from_parts`](crate::Permit::from_parts) of the licence's
//!    generation, after handing over the batch (order matters: a success
//!    resets the run of consecutive failures).
//!    [`hand_over`](crate::Breaker::hand_over) hands over the admissions and
//!    the batch in one step, in the order this asks. Where no decision
//!    depends on a success's window bucket (`bucket_decides` false), a
//!    binding may learn of `until` late (a timer, instead of a reading per
//!    success) and count a success settled after it in the batch, stamped
//!    with an earlier reading: only the window's metrics can show it.
//! 3. Under [`Licence::Reject`], reject each call read before `until` (or
//!    every call, when `until` is `None`) with the wait `until − reading`
//!    (or "held"), and count them with
//!    [`count_rejections`](crate::Breaker::count_rejections).
//! 4. A licence ends at `until`, or with the next transition: any call that
//!    returns one (a `record`, an admission, a batch), any manual operation,
//!    a restore. Nothing else changes it (a failure that trips nothing
//!    leaves a closed breaker's licence as it was), so a binding asks again
//!    only then.

use crate::time::{Duration, Instant};

/// What a caller may do without asking, from the reading it was asked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Licence {
    /// Admit every call; successes read before `until` may be handed over
    /// in bulk. Permits are of `generation`.
    Admit {
        /// The generation of every permit admitted under this licence.
        generation: u32,
        /// Where the window bucket that holds the reading ends: the end of
        /// the licence to batch successes ([`Instant::MAX`] when time does not
        /// matter to the window, so a binding need not read its clock).
        until: Instant,
        /// A success that took longer than this (from its admission's
        /// reading to its own) is slow, so a failure: report it with
        /// `record`, never in a batch. `None`: no success is slow.
        slow_after: Option<Duration>,
        /// Whether the window bucket a success lands in can change what a
        /// call is told (a rate threshold counts the window's calls, a full
        /// concurrency limit's retry hint divides by them). If not, a binding
        /// that learns of `until` late (a timer) may count a success in the
        /// bucket of an earlier reading of this licence: only the window's
        /// metrics (calls, error rate) can see it, never a decision.
        bucket_decides: bool,
        /// With a concurrency limit, how many more calls may be in flight:
        /// admit while fewer than `room` admitted under this licence are
        /// unreported (a success handed over frees its slot; any other
        /// outcome is reported with `record`, and the licence asked again),
        /// then ask. Successes only ever raise the limit, so a call admitted
        /// within `room` is one the breaker would admit. `None`: no limit.
        room: Option<u32>,
    },
    /// Reject every call read before `until` (open), or every call
    /// (`None`: held open until released).
    Reject {
        /// When the open period ends.
        until: Option<Instant>,
    },
    /// Ask the breaker for every call (half-open, a latency histogram, or
    /// disabled).
    Ask,
}

impl Licence {
    /// Why a call rejected under this licence is refused, in
    /// [`Wait::reason`](crate::Wait::reason)'s words: `"open"` until the open
    /// period ends, `"held"` when held open until released; `None` unless it
    /// is [`Licence::Reject`].
    pub const fn refusal_reason(&self) -> Option<&'static str> {
        match self {
            Licence::Reject { until: Some(_) } => Some("open"),
            Licence::Reject { until: None } => Some("held"),
            Licence::Admit { .. } | Licence::Ask => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Licence;
    use crate::time::Instant;

    #[test]
    fn a_rejecting_licence_says_why_in_the_cores_words() {
        assert_eq!(Licence::Reject { until: Some(Instant::ZERO) }.refusal_reason(), Some("open"));
        assert_eq!(Licence::Reject { until: None }.refusal_reason(), Some("held"));
        assert_eq!(Licence::Ask.refusal_reason(), None);
    }
}
