//! What a caller can observe: the state, the manual mode, and transitions.

use crate::time::Instant;
use crate::window::WindowCounts;

/// Counters a caller (or a conformance test) can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Failures in a row since the last success.
    pub consecutive_failures: u32,
    /// What the window holds now.
    pub window: WindowCounts,
    /// Calls admitted and not yet reported nor given up, whatever the state
    /// did since (a stale report still frees its call's slot).
    pub in_flight: u32,
    /// The concurrency limit in force, if one is configured.
    pub concurrency_limit: Option<u32>,
    /// Half-open probes of the current period admitted and not yet reported
    /// or given up (0 unless half-open; calls from before it count in
    /// `in_flight` only).
    pub probes_in_flight: u16,
    /// Successful probes in the current half-open period.
    pub probe_successes: u16,
    /// The current state period; permits from earlier ones are stale.
    pub generation: u32,
}

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
    /// A registry replaced the breaker with one of a new configuration
    /// (`Registry::configure`, feature `alloc`).
    Reconfigured,
    /// A registry's restore replaced the breaker (`Registry::restore`).
    Restored,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; 15] = [
        Reason::ConsecutiveFailures,
        Reason::FailureThreshold,
        Reason::FailureRate,
        Reason::SlowCallRate,
        Reason::OpenTimeout,
        Reason::ProbeFailed,
        Reason::ProbesSucceeded,
        Reason::ForcedOpen,
        Reason::ForcedOpenEnded,
        Reason::Released,
        Reason::ForcedClose,
        Reason::Disabled,
        Reason::Reset,
        Reason::Reconfigured,
        Reason::Restored,
    ];

    /// The reason named `name` (its [`name`](Self::name)), if any.
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.name() == name)
    }

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
            Reason::Reconfigured => "reconfigured",
            Reason::Restored => "restored",
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

/// The transitions one manual operation made, oldest first: a timed change
/// that was due (an open period that ended unnoticed), then the operation's
/// own. Together with every other transition a breaker returns they form one
/// unbroken chain (each `from` is the previous `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transitions([Option<Transition>; 2]);

impl Transitions {
    pub(crate) fn of(observed: Option<Transition>, own: Option<Transition>) -> Self {
        match observed {
            Some(_) => Transitions([observed, own]),
            None => Transitions([own, None]),
        }
    }

    /// The latest, if any.
    pub fn last(&self) -> Option<Transition> {
        self.0[1].or(self.0[0])
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0[0].is_none()
    }

    /// Each, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = Transition> + '_ {
        self.0.iter().flatten().copied()
    }
}

impl IntoIterator for Transitions {
    type Item = Transition;
    type IntoIter = core::iter::Flatten<core::array::IntoIter<Option<Transition>, 2>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().flatten()
    }
}
