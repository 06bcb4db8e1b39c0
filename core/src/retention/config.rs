//! How a [`RetentionQueue`](super::RetentionQueue) retains: its bounds, what to do
//! when they are reached, which message probes, when a message is given up,
//! and how fast a backlog is released.

use core::fmt;

use crate::error::Problem;
use crate::time::Duration;

/// How long a driver that runs the sends (the bindings' `Dispatcher`s) lets
/// one send take before it aborts it and reports a failure, unless told
/// otherwise: seed 001's 10 s. A send that never settles would otherwise
/// hold its place, and every message behind it, for ever.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// When a driver whose clock failed (a user's clock that throws) looks again
/// at what is due: a second. Its timer cannot be set from a reading it does
/// not have; the queue's own state is untouched.
pub const CLOCK_FAILURE_RETRY: Duration = Duration::from_secs(1);

/// What to do with a message that would exceed a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Refuse it: [`submit`](super::RetentionQueue::submit) hands it back.
    #[default]
    Reject,
    /// Drop the oldest retained messages to make room (each is counted and
    /// reported as an [`Event::Dropped`](super::Event::Dropped)); if
    /// dropping every retained message would not make room, drop none and
    /// refuse it.
    DropOldest,
}

/// Which message probes a half-open breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Probe {
    /// The oldest retained message, as soon as the breaker admits a probe:
    /// order is kept and no new message is needed.
    #[default]
    Oldest,
    /// Seed 001's rule: retained messages wait while half-open; a newly
    /// submitted message is the probe (it goes before the retained ones).
    /// A new message refused because a bound is full lets the oldest
    /// retained one probe in its place: a full queue cannot wait forever.
    /// Once a probe has succeeded, the rest of the probes the breaker needs
    /// are the retained messages, oldest first.
    NewMessage,
}

/// A release rate: at most `per_second` sends a second, in bursts of at most
/// `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Sends per second (≥ 1).
    pub per_second: u32,
    /// Sends at once after a quiet spell (≥ 1).
    pub burst: u32,
}

/// A dispatcher's configuration. The default holds any number of messages,
/// refuses nothing, probes with the oldest, never gives a message up and
/// has no rate (the breaker's concurrency limit paces the release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionConfig {
    /// At most this many messages held (retained and in flight).
    pub max_messages: Option<u32>,
    /// At most this many bytes held, as the caller sizes its messages.
    pub max_bytes: Option<u64>,
    /// What to do beyond a bound.
    pub overflow: Overflow,
    /// Which message probes.
    pub probe: Probe,
    /// A message that failed this many times is dead-lettered.
    pub max_attempts: Option<u32>,
    /// A message this long after its submission is dead-lettered when it
    /// would be sent or when it fails.
    pub max_age: Option<Duration>,
    /// At most this many sends a second (every send, first ones included).
    pub release_rate: Option<Rate>,
}

/// A field of [`RetentionConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetentionField {
    /// `max_messages`.
    MaxMessages,
    /// `max_bytes`.
    MaxBytes,
    /// `max_attempts`.
    MaxAttempts,
    /// `max_age`.
    MaxAge,
    /// `release_rate`, or its absence when the breaker has no concurrency
    /// limit either.
    ReleaseRate,
}

impl RetentionField {
    /// The field's snake_case name.
    pub const fn name(self) -> &'static str {
        match self {
            RetentionField::MaxMessages => "max_messages",
            RetentionField::MaxBytes => "max_bytes",
            RetentionField::MaxAttempts => "max_attempts",
            RetentionField::MaxAge => "max_age",
            RetentionField::ReleaseRate => "release_rate",
        }
    }
}

/// An invalid retention configuration: which field, and what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetentionError {
    /// The offending field.
    pub field: RetentionField,
    /// What is wrong with it.
    pub problem: Problem,
}

impl fmt::Display for RetentionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.field, self.problem) {
            (RetentionField::ReleaseRate, Problem::Missing) => f.write_str(
                "invalid release_rate: a dispatcher needs a release rate or its breaker a concurrency limit, \
                 or a recovered upstream would get the whole backlog at once",
            ),
            (field, problem) => write!(f, "invalid {}: {}", field.name(), problem.describe()),
        }
    }
}

impl core::error::Error for RetentionError {}

impl RetentionConfig {
    /// Checks every field (`limited`: whether the breaker has a concurrency
    /// limit, which paces the release if there is no rate).
    pub fn validate(&self, limited: bool) -> Result<(), RetentionError> {
        let zero = |field| Err(RetentionError { field, problem: Problem::Zero });
        if self.max_messages == Some(0) {
            return zero(RetentionField::MaxMessages);
        }
        if self.max_bytes == Some(0) {
            return zero(RetentionField::MaxBytes);
        }
        if self.max_attempts == Some(0) {
            return zero(RetentionField::MaxAttempts);
        }
        if self.max_age == Some(Duration::ZERO) {
            return zero(RetentionField::MaxAge);
        }
        match self.release_rate {
            Some(rate) if rate.per_second == 0 || rate.burst == 0 => zero(RetentionField::ReleaseRate),
            None if !limited => Err(RetentionError { field: RetentionField::ReleaseRate, problem: Problem::Missing }),
            _ => Ok(()),
        }
    }
}
