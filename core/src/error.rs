//! The typed error for an invalid [`Config`](crate::Config).

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
    /// `minimum_calls` larger than a count window can ever hold.
    ExceedsWindow,
    /// Required by another field that is set.
    Missing,
    /// `max_open_timeout` shorter than `open_timeout`.
    BelowOpenTimeout,
    /// `half_open_successes` larger than `half_open_max_attempts`.
    ExceedsHalfOpenMaxAttempts,
}

impl Problem {
    /// A short human description.
    pub const fn describe(self) -> &'static str {
        match self {
            Problem::NoTripPolicy => "no trip policy is set (set at least one threshold)",
            Problem::Zero => "must not be zero",
            Problem::TooSmall => "is too small",
            Problem::TooLarge => "is too large",
            Problem::NotFinite => "must be a finite number",
            Problem::OutOfRange => "is out of range",
            Problem::ExceedsWindow => "exceeds the number of calls the window holds",
            Problem::Missing => "is required by another option that is set",
            Problem::BelowOpenTimeout => "must be at least open_timeout",
            Problem::ExceedsHalfOpenMaxAttempts => "must not exceed half_open_max_attempts",
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
