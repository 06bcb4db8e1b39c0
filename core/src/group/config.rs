//! How a group exchanges: the flush interval, the quorum, the lease, how
//! long a silent member stays live, how long a store call may take.

use core::fmt;

use crate::config::Config;
use crate::error::Problem;
use crate::time::Duration;

/// A group option, by its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the field of the same name
pub enum GroupField {
    FlushInterval,
    Quorum,
    Lease,
    MemberTtl,
    StoreTimeout,
}

impl GroupField {
    /// The field's snake_case name, as in [`GroupConfig`].
    pub const fn name(self) -> &'static str {
        match self {
            GroupField::FlushInterval => "flush_interval",
            GroupField::Quorum => "quorum",
            GroupField::Lease => "lease",
            GroupField::MemberTtl => "member_ttl",
            GroupField::StoreTimeout => "store_timeout",
        }
    }
}

/// An invalid [`GroupConfig`]: which field, and what is wrong with it (the
/// breaker's [`Problem`]s, with their codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfigError {
    /// The field.
    pub field: GroupField,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for GroupConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field.name(), self.problem.describe())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for GroupConfigError {}

/// The longest flush interval (an hour): a group that exchanges more rarely
/// is not one.
pub const MAX_FLUSH_INTERVAL: Duration = Duration::from_secs(3_600);

/// The shortest flush interval (10 ms): more often hammers the store.
pub const MIN_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

/// The longest lease and member TTL (a day).
pub const MAX_GROUP_PERIOD: Duration = Duration::from_secs(86_400);

/// How a group breaker's processes exchange with their store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    /// How often each process exchanges with the store: at most one store
    /// call per interval, besides the exchanges a transition asks for at
    /// once. Default 1 s.
    pub flush_interval: Duration,
    /// How many distinct live processes must have seen failures within the
    /// window for the group to open (fewer if fewer are live); otherwise
    /// only the processes that trip by themselves open. Default 2.
    pub quorum: u32,
    /// How long a process's probe lease lasts; another process may take
    /// over the probes after it. `None`: the breaker's `probe_timeout` plus
    /// one flush interval.
    pub lease: Option<Duration>,
    /// How long a process that stopped exchanging still counts as live.
    /// `None`: three flush intervals.
    pub member_ttl: Option<Duration>,
    /// How long a store call may take before it counts as failed (the
    /// process goes on alone), at most the flush interval. `None`: 250 ms,
    /// or the flush interval if shorter.
    pub store_timeout: Option<Duration>,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            flush_interval: Duration::from_secs(1),
            quorum: 2,
            lease: None,
            member_ttl: None,
            store_timeout: None,
        }
    }
}

impl GroupConfig {
    /// The first invalid field, for breakers configured by `breaker`.
    pub fn validate(&self, breaker: &Config) -> Result<(), GroupConfigError> {
        let wrong = |field, problem| Err(GroupConfigError { field, problem });
        if self.flush_interval.is_zero() {
            return wrong(GroupField::FlushInterval, Problem::Zero);
        }
        if self.flush_interval > MAX_FLUSH_INTERVAL {
            return wrong(GroupField::FlushInterval, Problem::TooLarge);
        }
        if self.flush_interval < MIN_FLUSH_INTERVAL {
            return wrong(GroupField::FlushInterval, Problem::TooSmall);
        }
        if self.quorum == 0 {
            return wrong(GroupField::Quorum, Problem::Zero);
        }
        if self.store_timeout.is_some_and(|t| t.is_zero()) {
            return wrong(GroupField::StoreTimeout, Problem::Zero);
        }
        if self.store_timeout.is_some_and(|t| t > self.flush_interval) {
            return wrong(GroupField::StoreTimeout, Problem::TooLarge);
        }
        if self.lease.is_some_and(|l| l > MAX_GROUP_PERIOD) {
            return wrong(GroupField::Lease, Problem::TooLarge);
        }
        if self.member_ttl.is_some_and(|t| t > MAX_GROUP_PERIOD) {
            return wrong(GroupField::MemberTtl, Problem::TooLarge);
        }
        // A lease shorter than the probes' own timeout would let a second
        // process probe while the first one's probes are still out.
        if self.lease.is_some_and(|l| l < breaker.probe_timeout) {
            return wrong(GroupField::Lease, Problem::TooSmall);
        }
        if self.member_ttl.is_some_and(|t| t < self.flush_interval) {
            return wrong(GroupField::MemberTtl, Problem::TooSmall);
        }
        Ok(())
    }

    /// The probe lease's length for breakers configured by `breaker` (a
    /// derived one at most a day).
    pub fn lease_for(&self, breaker: &Config) -> Duration {
        let derived = breaker.probe_timeout.as_micros().saturating_add(self.flush_interval.as_micros());
        self.lease.unwrap_or(Duration::from_micros(derived).min(MAX_GROUP_PERIOD))
    }

    /// How long a store call may take.
    pub fn store_timeout(&self) -> Duration {
        self.store_timeout.unwrap_or(Duration::from_millis(250).min(self.flush_interval))
    }

    /// How long a silent process stays live.
    pub fn member_ttl(&self) -> Duration {
        self.member_ttl.unwrap_or(Duration::from_micros(self.flush_interval.as_micros().saturating_mul(3)))
    }
}
