//! How an outbox's deliverer holds its lease and reads its log: the lease's
//! length, the page size, how often a caught-up log is read again, how long
//! a store call may take. Validated against the dispatcher's send timeout
//! and bound, which the lease and the pages must fit.

use core::fmt;

use crate::error::Problem;
use crate::time::Duration;

/// An outbox option, by its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the field of the same name
pub enum OutboxField {
    Lease,
    Page,
    PollInterval,
    StoreTimeout,
    SendTimeout,
}

impl OutboxField {
    /// The field's snake_case name, as in [`OutboxConfig`].
    pub const fn name(self) -> &'static str {
        match self {
            OutboxField::Lease => "lease",
            OutboxField::Page => "page",
            OutboxField::PollInterval => "poll_interval",
            OutboxField::StoreTimeout => "store_timeout",
            OutboxField::SendTimeout => "send_timeout",
        }
    }
}

/// An invalid [`OutboxConfig`]: which field, and what is wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxConfigError {
    /// The field.
    pub field: OutboxField,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for OutboxConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field.name(), self.problem.describe())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for OutboxConfigError {}

/// The longest lease, poll interval and store timeout (an hour).
pub const MAX_OUTBOX_PERIOD: Duration = Duration::from_secs(3_600);

/// The shortest poll interval (10 ms): more often hammers the store.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The shortest store timeout (1 ms): no store call answers sooner.
pub const MIN_STORE_TIMEOUT: Duration = Duration::from_millis(1);

/// The largest page (10,000 events read in one store call).
pub const MAX_PAGE: u32 = 10_000;

/// At most this many events are handed to the dispatcher, or sends
/// started, in one turn of the host's event loop: a page of hundreds never
/// holds the loop for long (a host waits for its next turn in between).
pub const TURN_EVENTS: u32 = 64;

/// The default page: a turn's events ([`TURN_EVENTS`]), or the
/// dispatcher's bound if lower. A client parses a read's reply in one turn
/// of the host's loop: redis-py without hiredis takes ~50 µs an entry, so a
/// page of 500 held Python's loop ~25 ms; 64 reads cost the same per event.
pub const DEFAULT_PAGE: u32 = TURN_EVENTS;

/// How an outbox's processes share its log and its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxConfig {
    /// How long one send may take before the dispatcher fails it (its
    /// `timeout`; a send that ignores its abort is failed after as long
    /// again). An outbox needs one: the lease must outlast every send.
    pub send_timeout: Duration,
    /// How long the deliverer's lease lasts unless renewed: another process
    /// takes the delivery over at most this long (and one retry) after the
    /// holder died. `None`: the shortest that fits ([`OutboxConfig::lease`]).
    pub lease: Option<Duration>,
    /// How many events one read takes from the log. `None`:
    /// [`DEFAULT_PAGE`], or `max_messages` if lower.
    pub page: Option<u32>,
    /// How often a deliverer that read the whole log reads it again (events
    /// other processes submitted are seen this late at most). Default 250 ms.
    pub poll_interval: Duration,
    /// How long a store call may take before it counts as failed.
    /// Default 1 s.
    pub store_timeout: Duration,
}

impl OutboxConfig {
    /// The defaults, for sends of at most `send_timeout`.
    pub const fn new(send_timeout: Duration) -> Self {
        OutboxConfig {
            send_timeout,
            lease: None,
            page: None,
            poll_interval: Duration::from_millis(250),
            store_timeout: Duration::from_secs(1),
        }
    }

    /// The first invalid field, for a dispatcher that holds at most
    /// `max_messages` (`None`: no bound).
    pub fn validate(&self, max_messages: Option<u32>) -> Result<(), OutboxConfigError> {
        let wrong = |field, problem| Err(OutboxConfigError { field, problem });
        let periods = [
            (OutboxField::SendTimeout, Some(self.send_timeout)),
            (OutboxField::StoreTimeout, Some(self.store_timeout)),
            (OutboxField::PollInterval, Some(self.poll_interval)),
            (OutboxField::Lease, self.lease),
        ];
        for (field, value) in periods {
            match value {
                Some(v) if v.is_zero() => return wrong(field, Problem::Zero),
                Some(v) if v > MAX_OUTBOX_PERIOD => return wrong(field, Problem::TooLarge),
                _ => {}
            }
        }
        if self.poll_interval < MIN_POLL_INTERVAL {
            return wrong(OutboxField::PollInterval, Problem::TooSmall);
        }
        if self.store_timeout < MIN_STORE_TIMEOUT {
            return wrong(OutboxField::StoreTimeout, Problem::TooSmall);
        }
        if self.lease.is_some_and(|l| l < super::policy::shortest_lease(self)) {
            return wrong(OutboxField::Lease, Problem::TooSmall);
        }
        // A derived lease past the longest period: the send timeout is to blame.
        if self.lease.is_none() && super::policy::shortest_lease(self) > MAX_OUTBOX_PERIOD {
            return wrong(OutboxField::SendTimeout, Problem::TooLarge);
        }
        match self.page {
            Some(0) => return wrong(OutboxField::Page, Problem::Zero),
            Some(p) if p > MAX_PAGE || max_messages.is_some_and(|m| p > m) => {
                return wrong(OutboxField::Page, Problem::TooLarge);
            }
            _ => {}
        }
        Ok(())
    }

    /// The lease's length: the given one, or the shortest that fits.
    pub fn lease(&self) -> Duration {
        self.lease.unwrap_or_else(|| super::policy::shortest_lease(self))
    }

    /// The page size, for a dispatcher that holds at most `max_messages`.
    pub fn page(&self, max_messages: Option<u32>) -> u32 {
        self.page.unwrap_or(DEFAULT_PAGE.min(max_messages.unwrap_or(u32::MAX)).max(1))
    }
}
