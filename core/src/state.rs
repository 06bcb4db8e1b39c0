//! What a caller can observe: the state, the manual mode, and transitions.

use crate::time::Instant;

/// The breaker's state as callers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls pass; outcomes are counted.
    Closed,
    /// Calls are rejected until the open time ends (or a forced open is released).
    Open,
    /// A limited number of probe calls pass to test the upstream.
    HalfOpen,
}

impl State {
    /// `"closed"`, `"open"` or `"half_open"`.
    pub const fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }

    /// The `circuit_state` gauge value: 0 closed, 1 half-open, 2 open.
    pub const fn gauge(self) -> u8 {
        match self {
            State::Closed => 0,
            State::HalfOpen => 1,
            State::Open => 2,
        }
    }

    /// Whether calls pass freely.
    pub const fn is_closed(self) -> bool {
        matches!(self, State::Closed)
    }

    /// Whether calls are rejected.
    pub const fn is_open(self) -> bool {
        matches!(self, State::Open)
    }

    /// Whether probes are being let through.
    pub const fn is_half_open(self) -> bool {
        matches!(self, State::HalfOpen)
    }
}

/// Manual control in force, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The breaker decides by itself.
    Normal,
    /// Held open by [`force_open`](crate::Breaker::force_open); `until` is
    /// `None` when held until [`release`](crate::Breaker::release).
    ForcedOpen {
        /// When the forced period ends (then the breaker goes half-open).
        until: Option<Instant>,
    },
    /// [`disable`](crate::Breaker::disable)d: every call is admitted and
    /// counted, nothing trips, until [`release`](crate::Breaker::release).
    Disabled,
}

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// `consecutive_failures` failures in a row.
    ConsecutiveFailures,
    /// `failure_threshold` failures within the window.
    FailureThreshold,
    /// The failure rate reached `failure_rate_threshold`.
    FailureRate,
    /// The slow-call rate reached `slow_call_rate_threshold`.
    SlowCallRate,
    /// The open time ended: probes may go.
    OpenTimeout,
    /// A half-open probe failed: open again, for longer.
    ProbeFailed,
    /// `half_open_successes` probes succeeded.
    ProbesSucceeded,
    /// [`force_open`](crate::Breaker::force_open) was called.
    ForcedOpen,
    /// A timed forced open ended: probes may go.
    ForcedOpenEnded,
    /// [`release`](crate::Breaker::release) ended a forced open: probes may go.
    Released,
    /// [`force_close`](crate::Breaker::force_close) was called.
    ForcedClose,
    /// [`disable`](crate::Breaker::disable) was called.
    Disabled,
    /// [`reset`](crate::Breaker::reset) was called.
    Reset,
}

impl Reason {
    /// The reason's snake_case name (as in the conformance suite).
    pub const fn name(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::FailureThreshold => "failure_threshold",
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::OpenTimeout => "open_timeout",
            Reason::ProbeFailed => "probe_failed",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::ForcedOpen => "forced_open",
            Reason::ForcedOpenEnded => "forced_open_ended",
            Reason::Released => "released",
            Reason::ForcedClose => "forced_close",
            Reason::Disabled => "disabled",
            Reason::Reset => "reset",
        }
    }
}

/// A change of [`State`], returned by the call that caused or observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When it took effect. For a timed change seen late (an open time that
    /// ended before the call that noticed it) this is when it was due.
    pub at: Instant,
}
