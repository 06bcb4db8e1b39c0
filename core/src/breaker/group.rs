//! What a group member does to its process's breaker (see
//! [`group`](crate::group)): read what it counted, and follow the group's
//! phase. A manual mode set on this breaker (forced open, held, disabled)
//! is this process's own and wins: following the group leaves its phase.

use core::borrow::Borrow;

use super::{Breaker, Tally};
use crate::config::Config;
use crate::limit::Share;
use crate::meter::Meter;
use crate::phase::{Phase, Probes};
use crate::state::{Reason, State, Transitions};
use crate::time::{Duration, Instant};

/// Where a breaker is, as its group member reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// Closed; `by_probes`: its latest close was its own probes' (not a
    /// manual operation's).
    Closed { by_probes: bool },
    /// Open (by itself or following the group) for `left` more, with the
    /// open period the next probe failure grows.
    Open { open_for: Duration, left: Duration },
    /// Probing; `probes_out`: some are in flight.
    HalfOpen { probes_out: bool },
    /// Forced open, held or disabled here.
    Manual,
}

impl<C: Borrow<Config>, M: Meter> Breaker<C, M> {
    /// What it counted while closed (or disabled) since it was made.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Where it is at `now` (an open period that has ended counts as
    /// half-open, as [`state`](Self::state) says).
    pub(crate) fn local(&self, now: Instant) -> Local {
        match self.phase {
            Phase::ForcedOpen { .. } | Phase::HeldOpen | Phase::Disabled => Local::Manual,
            Phase::Closed => Local::Closed { by_probes: self.closed_by_probes },
            Phase::HalfOpen { .. } => Local::HalfOpen { probes_out: self.probes_in_flight > 0 },
            Phase::Open { until } if now.max(self.latest) >= until => Local::HalfOpen { probes_out: false },
            Phase::Open { until } => Local::Open { open_for: self.open_for, left: until - now.max(self.latest) },
        }
    }

    /// Opens as its group did, until `until`, for `open_for` (what the next
    /// probe failure grows); probes then go from `probes`. Already open, it
    /// takes the group's period.
    pub(crate) fn follow_open(
        &mut self,
        now: Instant,
        until: Instant,
        open_for: Duration,
        reason: Reason,
        probes: Probes,
    ) -> Transitions {
        let (observed, from) = self.settle(now);
        self.probes = probes;
        let own = match self.phase {
            Phase::ForcedOpen { .. } | Phase::HeldOpen | Phase::Disabled => None,
            Phase::Open { .. } => {
                self.phase = Phase::Open { until };
                self.open_for = open_for;
                None
            }
            Phase::Closed | Phase::HalfOpen { .. } => {
                self.enter(Phase::Open { until });
                self.open_for = open_for;
                self.change(from, State::Open, reason)
            }
        };
        Transitions::of(observed, own)
    }

    /// Closes as its group did (its probes succeeded); probes go from here.
    pub(crate) fn follow_close(&mut self, now: Instant, reason: Reason) -> Transitions {
        let (observed, from) = self.settle(now);
        self.probes = Probes::HERE;
        let own = match self.phase {
            Phase::Open { .. } | Phase::HalfOpen { .. } => {
                self.close();
                self.change(from, State::Closed, reason)
            }
            _ => None,
        };
        Transitions::of(observed, own)
    }

    /// Probes for its group (this process holds the group's lease): an open
    /// period still running here ends now.
    pub(crate) fn follow_probe(&mut self, now: Instant) -> Transitions {
        let (observed, _) = self.settle(now);
        self.probes = Probes::HERE;
        let own = match self.phase {
            Phase::Open { .. } => {
                self.enter(Phase::HalfOpen { give_up_at: self.latest });
                self.change(State::Open, State::HalfOpen, Reason::OpenTimeout)
            }
            _ => None,
        };
        Transitions::of(observed, own)
    }

    /// Where its probes go from.
    pub(crate) fn set_probes(&mut self, probes: Probes) {
        self.probes = probes;
    }

    /// Its part in its group's limit since the latest exchange (taken), and
    /// its calls in flight now; `None` outside a group's limit.
    pub(crate) fn take_share(&mut self) -> Option<(Share, u32)> {
        Some((self.limiter.take_share()?, self.in_flight))
    }

    /// Whether a failure here asks its group's limit to be cut.
    pub(crate) fn limit_cut_pending(&self) -> bool {
        self.limiter.cut_pending()
    }

    /// Admits within `share` of its group's limit as `seen` (see
    /// `Limiter::follow_group`), from now on.
    pub(crate) fn follow_limit(&mut self, seen: Share, share: u32) {
        self.limiter.follow_group(seen, share, self.in_flight);
    }

    /// Its limit adapts by itself again (from its share).
    pub(crate) fn leave_limit(&mut self) {
        let c = *self.config();
        self.limiter.leave_group(&c);
    }
}
