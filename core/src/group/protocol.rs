//! What crosses between a process and the group's store: a [`Request`]
//! (the process's running totals, its run of failures, and at most one
//! [`Proposal`]) and an [`Answer`] (the store's clock, the group's
//! [`Register`], the merged window, the group's run, who is live, who
//! failed). Times in them are the store's clock, in µs.

use crate::breaker::Tally;
use crate::state::Reason;
use crate::window::WindowCounts;

/// The group's phase, on the store's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPhase {
    /// Every process decides by itself; the group trips on the merged window.
    Closed,
    /// Open until `until_us`; `open_for_us` is what the next probe failure
    /// grows, `reason` why the group opened.
    Open {
        /// When the open period ends (then one process probes).
        until_us: u64,
        /// The open period before jitter.
        open_for_us: u64,
        /// Why the group opened.
        reason: Reason,
    },
    /// Process `lease` probes for the group until `lease_until_us` at the
    /// latest; every other process waits.
    HalfOpen {
        /// The member holding the probe lease.
        lease: u64,
        /// When the lease ends (another process may take over).
        lease_until_us: u64,
        /// The open period before jitter.
        open_for_us: u64,
        /// Why the group opened.
        reason: Reason,
    },
}

impl GroupPhase {
    /// Its snake_case name (`closed`, `open`, `half_open`: the store's and
    /// the bindings' word for it).
    pub fn name(&self) -> &'static str {
        match self {
            GroupPhase::Closed => "closed",
            GroupPhase::Open { .. } => "open",
            GroupPhase::HalfOpen { .. } => "half_open",
        }
    }

    /// Its gauge, as a breaker state's (`circuit_group_state`): 0 closed,
    /// 1 half-open, 2 open.
    pub fn gauge(&self) -> u8 {
        match self {
            GroupPhase::Closed => 0,
            GroupPhase::HalfOpen { .. } => 1,
            GroupPhase::Open { .. } => 2,
        }
    }
}

/// The group's fenced register: its phase, and the epoch every change
/// increments. A proposal made at another epoch changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    /// Incremented by every change of phase.
    pub epoch: u64,
    /// The phase.
    pub phase: GroupPhase,
    /// Closed: why, if it was ever open (a probe round's success, an
    /// operator's force-close or reset).
    pub closed_by: Option<Reason>,
}

impl Default for Register {
    fn default() -> Self {
        Register { epoch: 0, phase: GroupPhase::Closed, closed_by: None }
    }
}

/// The longest period a request carries (2^45 µs, about a year): the
/// store's time plus it stays below 2^53, which a Lua script's numbers hold
/// exactly.
pub const MAX_PERIOD_US: u64 = 1 << 45;

/// The epoch of a proposal that applies whatever the register's (an
/// operator's force-open: it wins over every process's own proposals).
pub const ANY_EPOCH: u64 = u64::MAX;

/// A change of the group's phase a process asks for, applied only if the
/// register is still at `epoch` (or `epoch` is [`ANY_EPOCH`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The epoch the process saw.
    pub epoch: u64,
    /// The phase it asks for.
    pub to: Proposed,
}

/// A phase a process proposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proposed {
    /// Open for `for_us` from the store's now (jitter drawn), growing
    /// `open_for_us` next, because of `reason`.
    Open {
        /// This open period's length.
        for_us: u64,
        /// The open period before jitter.
        open_for_us: u64,
        /// Why.
        reason: Reason,
    },
    /// The proposer probes, for `lease_us` at most (the open period and
    /// the reason carried over from the open phase).
    HalfOpen {
        /// The lease's length.
        lease_us: u64,
        /// The open period before jitter.
        open_for_us: u64,
        /// Why the group opened.
        reason: Reason,
    },
    /// Closed because of `reason` (the proposer's probes succeeded, or an
    /// operator force-closed or reset the group). The store forgets the
    /// merged window and the run.
    Closed {
        /// Why.
        reason: Reason,
    },
}

/// The group's concurrency limit (an adaptive limit shared by the group),
/// as the store keeps it: a fenced register (`epoch`: every cut or
/// restart increments it) with a counter of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupLimit {
    /// Incremented by every [`LimitReport::set`] applied (0: never set).
    pub epoch: u64,
    /// Calls the group may have in flight (0: never set).
    pub limit: u32,
    /// Below it each success is a step; from it on, a step per `limit`.
    pub threshold: u32,
}

/// What a process with an adaptive limit sends of it at an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitReport {
    /// The group limit's epoch the process saw.
    pub epoch: u64,
    /// Steps its successes earned since its last exchange: added to the
    /// group's limit if it is still at `epoch`.
    pub steps: u32,
    /// A new limit (a cut, a restart, the first limit) and its threshold,
    /// applied (incrementing the epoch) if the limit is still at `epoch`.
    pub set: Option<(u32, u32)>,
    /// Whether the process has calls to make (it then takes a share).
    pub active: bool,
    /// Its most calls in flight within a member TTL (the group grows its
    /// limit only when its members' fill it).
    pub busy: u32,
}

/// What a process sends at an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The process's member id (random per process).
    pub member: u64,
    /// Its breaker's running totals: the store counts the difference from
    /// the totals it last recorded for this member, so a request sent
    /// twice counts once, and a member it does not know yet counts nothing
    /// (its totals are the baseline).
    pub tally: Tally,
    /// Its breaker's run of failures (since its own last success).
    pub consecutive: u32,
    /// The width of a merged window bucket (`0`: no time window merged).
    pub bucket_us: u64,
    /// The window's span (failures older than it leave the count of
    /// failing processes).
    pub window_us: u64,
    /// How long a silent member stays live.
    pub member_ttl_us: u64,
    /// A change of the group's phase, if the process asks for one.
    pub proposal: Option<Proposal>,
    /// Its part in the group's concurrency limit (none without an adaptive limit).
    pub limit: Option<LimitReport>,
    /// The store's time after which the process has given the request up
    /// (counted it failed): arriving later (queued by a client while the
    /// store was down, retried by a driver), it changes nothing. `0`: none
    /// (before the process knows the store's clock).
    pub deadline_us: u64,
}

/// What the store answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// The store's clock when it answered, µs.
    pub now_us: u64,
    /// The register after the request's proposal (applied or not).
    pub register: Register,
    /// The merged window: the last [`TIME_BUCKETS`](crate::TIME_BUCKETS)
    /// buckets, the current one included.
    pub totals: WindowCounts,
    /// The group's run of failures (see the module [`group`](crate::group)).
    pub run: u32,
    /// Members heard from within the member TTL, this one included.
    pub live: u32,
    /// Live members with a failure within the window.
    pub failing: u32,
    /// The group's concurrency limit, after the request's report.
    pub limit: GroupLimit,
    /// Live members with calls to make (this one included if it has).
    pub active: u32,
    /// This member's place among them, by member id (`None`: it has none).
    pub rank: Option<u32>,
    /// The live members' most calls in flight, as each last reported.
    pub busy: u32,
}
