//! The call protocol's values: permits, outcomes, rejections.

use crate::state::{State, Transition};
use crate::time::{Duration, Instant};

/// Leave to make one call, from [`try_acquire`](crate::Breaker::try_acquire).
/// Hand it back to [`record`](crate::Breaker::record) with the outcome; it is
/// deliberately not `Clone`, so it is reported at most once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "report the outcome with Breaker::record, or Outcome::Cancelled"]
pub struct Permit {
    pub(crate) generation: u32,
    pub(crate) issued_at: Instant,
}

impl Permit {
    /// When the permit was issued (the call's start, for slow-call timing).
    pub fn issued_at(&self) -> Instant {
        self.issued_at
    }

    /// The state period the permit belongs to. A report for an older period
    /// than the breaker's current one is stale: it changes nothing.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Rebuilds a permit from its [`generation`](Self::generation) and
    /// [`issued_at`](Self::issued_at), for a binding that hands permits across
    /// a language boundary as plain numbers. Like the original, it must be
    /// reported at most once.
    pub fn from_parts(generation: u32, issued_at: Instant) -> Self {
        Permit { generation, issued_at }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It worked (it still counts as a failure if slower than `slow_call_duration`).
    Success,
    /// It failed in a way that says the upstream is unwell.
    Failure,
    /// It failed in a way that says nothing about the upstream (a validation
    /// error, say): not counted; its slot is freed.
    Ignored,
    /// The caller gave up before an answer: nothing is counted; its slot is freed.
    Cancelled,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 4] = [Outcome::Success, Outcome::Failure, Outcome::Ignored, Outcome::Cancelled];

    /// Its snake_case name: `"success"`, `"failure"`, `"ignored"`, `"cancelled"`.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// A call that was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    /// The state that rejected it: open, half-open (every probe slot taken,
    /// or the concurrency limit full), or closed (the concurrency limit full).
    pub state: State,
    /// What the caller waits for.
    pub wait: Wait,
}

impl Rejection {
    /// The delay after which to try again (see [`Wait::retry_after`]).
    pub fn retry_after(&self) -> Option<Duration> {
        self.wait.retry_after()
    }
}

/// What a refused call waits for; each case holds its own times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Open: the open period ends after `left`; then probes may go. `retry`
    /// is `left`, plus, with a concurrency limit, a spread drawn over the
    /// tenth of `open_timeout` after it, so that the calls refused while
    /// open do not all come back in the same instant.
    UntilHalfOpen {
        /// Until the open period ends.
        left: Duration,
        /// When to try again.
        retry: Duration,
    },
    /// Half-open with every probe slot taken. A slot frees when a probe
    /// reports, so `retry` is a short hint (a tenth of `open_timeout`, no
    /// later than `give_up`); `give_up` is when the probes in flight are
    /// given up if they never report (`probe_timeout` after the latest).
    ProbesBusy {
        /// When to try again.
        retry: Duration,
        /// When slots free at the latest.
        give_up: Duration,
    },
    /// The concurrency limit is full: a slot frees when a call in flight
    /// ends, so `retry` is about one round trip, estimated from the calls
    /// the window counted (a tenth of `open_timeout` before it has any).
    LimitFull {
        /// When to try again.
        retry: Duration,
    },
    /// Held open until [`release`](crate::Breaker::release)d.
    Held,
}

impl Wait {
    /// The delay a caller (a queue) should wait before trying again: each
    /// case's `retry`, or `None` when held open.
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            Wait::UntilHalfOpen { retry, .. } | Wait::ProbesBusy { retry, .. } | Wait::LimitFull { retry } => {
                Some(retry)
            }
            Wait::Held => None,
        }
    }

    /// Why: `"open"`, `"probes_busy"`, `"limit_full"` or `"held"`.
    pub const fn reason(self) -> &'static str {
        match self {
            Wait::UntilHalfOpen { .. } => "open",
            Wait::ProbesBusy { .. } => "probes_busy",
            Wait::LimitFull { .. } => "limit_full",
            Wait::Held => "held",
        }
    }
}

/// What [`try_acquire`](crate::Breaker::try_acquire) decided.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit must be reported"]
pub struct Admission {
    /// A permit, or why not.
    pub decision: Result<Permit, Rejection>,
    /// A timed transition (open → half-open) this call observed, if any.
    pub transition: Option<Transition>,
}
