//! The typed errors: an invalid [`Config`](crate::Config), and a snapshot
//! that cannot be restored.

use core::fmt;

/// A configuration field, by its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the field of the same name
pub enum Field {
    FailureThreshold,
    Window,
    ConsecutiveFailures,
    FailureRateThreshold,
    MinimumCalls,
    SlowCallDuration,
    SlowCallRateThreshold,
    OpenTimeout,
    BackoffFactor,
    MaxOpenTimeout,
    Jitter,
    HalfOpenMaxAttempts,
    HalfOpenSuccesses,
    ProbeTimeout,
    ConcurrencyLimit,
    AdaptiveLimitMin,
    AdaptiveLimitMax,
}

impl Field {
    /// The field's snake_case name, as in [`Config`](crate::Config).
    pub const fn name(self) -> &'static str {
        match self {
            Field::FailureThreshold => "failure_threshold",
            Field::Window => "window",
            Field::ConsecutiveFailures => "consecutive_failures",
            Field::FailureRateThreshold => "failure_rate_threshold",
            Field::MinimumCalls => "minimum_calls",
            Field::SlowCallDuration => "slow_call_duration",
            Field::SlowCallRateThreshold => "slow_call_rate_threshold",
            Field::OpenTimeout => "open_timeout",
            Field::BackoffFactor => "backoff_factor",
            Field::MaxOpenTimeout => "max_open_timeout",
            Field::Jitter => "jitter",
            Field::HalfOpenMaxAttempts => "half_open_max_attempts",
            Field::HalfOpenSuccesses => "half_open_successes",
            Field::ProbeTimeout => "probe_timeout",
            Field::ConcurrencyLimit => "concurrency_limit",
            Field::AdaptiveLimitMin => "adaptive_limit_min",
            Field::AdaptiveLimitMax => "adaptive_limit_max",
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Problem {
    /// No trip policy is set: the breaker could never open.
    NoTripPolicy,
    /// Zero, where zero makes no sense.
    Zero,
    /// Below the smallest allowed value.
    TooSmall,
    /// Above the largest allowed value.
    TooLarge,
    /// NaN or infinite.
    NotFinite,
    /// Outside its allowed range (percentages: 0 < p ≤ 100; jitter: 0 ≤ j < 1).
    OutOfRange,
    /// `failure_threshold` or `minimum_calls` larger than a count window can
    /// ever hold (the breaker could never trip by it).
    ExceedsWindow,
    /// Required by another field that is set.
    Missing,
    /// `max_open_timeout` shorter than `open_timeout`.
    BelowOpenTimeout,
    /// `half_open_successes` larger than `half_open_max_attempts`.
    ExceedsHalfOpenMaxAttempts,
    /// `adaptive_limit_min` larger than `adaptive_limit_max`.
    ExceedsMax,
}

impl Problem {
    /// Every problem, in declaration order.
    pub const ALL: [Problem; 11] = [
        Problem::NoTripPolicy,
        Problem::Zero,
        Problem::TooSmall,
        Problem::TooLarge,
        Problem::NotFinite,
        Problem::OutOfRange,
        Problem::ExceedsWindow,
        Problem::Missing,
        Problem::BelowOpenTimeout,
        Problem::ExceedsHalfOpenMaxAttempts,
        Problem::ExceedsMax,
    ];

    /// A stable snake_case identifier, the one every binding hands its
    /// callers (`problem` on their errors; conformance cases' `problem`).
    /// Bindings word errors from it; [`describe`](Self::describe) is the
    /// core's own wording and may change.
    pub const fn code(self) -> &'static str {
        match self {
            Problem::NoTripPolicy => "no_trip_policy",
            Problem::Zero => "zero",
            Problem::TooSmall => "too_small",
            Problem::TooLarge => "too_large",
            Problem::NotFinite => "not_finite",
            Problem::OutOfRange => "out_of_range",
            Problem::ExceedsWindow => "exceeds_window",
            Problem::Missing => "missing",
            Problem::BelowOpenTimeout => "below_open_timeout",
            Problem::ExceedsHalfOpenMaxAttempts => "exceeds_half_open_max_attempts",
            Problem::ExceedsMax => "exceeds_max",
        }
    }

    /// The problem whose [`code`](Self::code) is `code`.
    pub fn from_code(code: &str) -> Option<Problem> {
        Problem::ALL.into_iter().find(|p| p.code() == code)
    }

    /// A short human description.
    pub const fn describe(self) -> &'static str {
        match self {
            Problem::NoTripPolicy => "no trip policy is set (set at least one threshold)",
            Problem::Zero => "must not be zero",
            Problem::TooSmall => "is too small",
            Problem::TooLarge => "is too large",
            Problem::NotFinite => "must be a finite number",
            Problem::OutOfRange => "is out of range",
            Problem::ExceedsWindow => {
                "exceeds the number of calls the window holds (the breaker could never trip by it)"
            }
            Problem::Missing => "is required by another option that is set",
            Problem::BelowOpenTimeout => "must be at least open_timeout",
            Problem::ExceedsHalfOpenMaxAttempts => "must not exceed half_open_max_attempts",
            Problem::ExceedsMax => "must not exceed adaptive_limit_max",
        }
    }
}

/// An invalid configuration: which field, and what is wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConfigError {
    /// The offending field.
    pub field: Field,
    /// What is wrong with it.
    pub problem: Problem,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.field.name(), self.problem.describe())
    }
}

impl core::error::Error for ConfigError {}

/// Why a snapshot could not be restored.
#[cfg(feature = "snapshot")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// The bytes or text are not a snapshot (truncated, garbled, wrong shape).
    Malformed(alloc::string::String),
    /// Written by a newer format than this build reads.
    NewerVersion {
        /// The snapshot's version.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// Taken with another configuration than the one restoring it.
    ConfigMismatch,
    /// Well-formed, but a field holds a value no breaker can have.
    Corrupt(&'static str),
}

#[cfg(feature = "snapshot")]
impl SnapshotError {
    /// `"malformed"`, `"newer_version"`, `"config_mismatch"` or `"corrupt"`.
    pub const fn kind(&self) -> &'static str {
        match self {
            SnapshotError::Malformed(_) => "malformed",
            SnapshotError::NewerVersion { .. } => "newer_version",
            SnapshotError::ConfigMismatch => "config_mismatch",
            SnapshotError::Corrupt(_) => "corrupt",
        }
    }
}

#[cfg(feature = "snapshot")]
impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Malformed(why) => write!(f, "malformed snapshot: {why}"),
            SnapshotError::NewerVersion { found, supported } => {
                write!(f, "snapshot version {found} is newer than the supported {supported}")
            }
            SnapshotError::ConfigMismatch => f.write_str("snapshot was taken with a different configuration"),
            SnapshotError::Corrupt(what) => write!(f, "corrupt snapshot: {what}"),
        }
    }
}

#[cfg(feature = "snapshot")]
impl core::error::Error for SnapshotError {}

#[cfg(test)]
mod tests {
    use super::Problem;

    #[test]
    fn each_problem_has_its_own_code_and_is_found_by_it() {
        for (i, p) in Problem::ALL.into_iter().enumerate() {
            assert_eq!(Problem::from_code(p.code()), Some(p));
            assert!(p.code().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", p.code());
            assert!(Problem::ALL[..i].iter().all(|q| q.code() != p.code()));
        }
        assert_eq!(Problem::from_code("Zero"), None);
    }
}
