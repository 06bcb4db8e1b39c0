//! Where a breaker is: its phase, with the deadline that belongs to it. The
//! rules that read it are in [`policy`](crate::policy); the breaker moves it.

use crate::state::State;
use crate::time::Instant;

/// Where the breaker is, with the deadline that belongs to it. Each phase
/// change starts a new *generation*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Closed,
    /// Open; half-open from `until` on.
    Open {
        until: Instant,
    },
    /// Probing. If probes are in flight at `give_up_at`, they are given up.
    HalfOpen {
        give_up_at: Instant,
    },
    /// Held open; half-open from `until` on.
    ForcedOpen {
        until: Instant,
    },
    /// Held open until released.
    HeldOpen,
    /// Admits and counts everything; never trips.
    Disabled,
}

impl Phase {
    /// The state as last reported (a timed change that is due but not yet
    /// applied is not counted).
    pub(crate) fn state(self) -> State {
        match self {
            Phase::Closed | Phase::Disabled => State::Closed,
            Phase::Open { .. } | Phase::ForcedOpen { .. } | Phase::HeldOpen => State::Open,
            Phase::HalfOpen { .. } => State::HalfOpen,
        }
    }
}

/// Where a breaker's probes go from once its open period ends. Alone, always
/// here; in a group (see `group`), the process holding the group's probe
/// lease probes, and the others wait for the group's answer: a call meets
/// "probes busy" until the time they await it (when the group's next answer
/// is due). Past it the breaker probes by itself again: a member that stops
/// hearing from its group never holds its process open. Here is therefore
/// an answer awaited until the origin (a time always past): one `Instant`,
/// not an enum with a tag and padding (8 bytes less per breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probes {
    until: Instant,
}

impl Probes {
    /// This process probes (alone, or the group's lease holder).
    pub(crate) const HERE: Probes = Probes { until: Instant::ZERO };

    /// Another process of the group probes, or none yet, until `until`.
    pub(crate) const fn elsewhere(until: Instant) -> Probes {
        Probes { until }
    }

    /// Until when another process's probes are awaited (past: none).
    pub(crate) const fn awaited_until(self) -> Instant {
        self.until
    }
}
