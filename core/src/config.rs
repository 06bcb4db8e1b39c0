//! What a breaker is told to do: trip policies, open time, half-open probing.

use crate::error::{ConfigError, Field, Problem};
use crate::time::Duration;
use crate::window::{MAX_WINDOW_CALLS, TIME_BUCKETS, Window};

/// Most half-open probes that may be in flight at once.
pub const MAX_HALF_OPEN_ATTEMPTS: u16 = 1_000;

/// The open time's cap when `max_open_timeout` is not set and `open_timeout`
/// is shorter (seed 000: doubling "up to 5 minutes").
pub const DEFAULT_MAX_OPEN_TIMEOUT: Duration = Duration::from_secs(300);

/// A breaker's configuration. Build one from [`Config::default`] (seed 000's
/// values) or a preset, change fields, and check it with [`Config::validate`]
/// (the breaker constructors call it).
///
/// Trip policies combine: whichever threshold is reached first opens the
/// breaker. At least one must be set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Open after this many failures within [`window`](Self::window).
    pub failure_threshold: Option<u32>,
    /// The window that windowed policies count over.
    pub window: Window,
    /// Open after this many failures in a row (a success resets the run).
    pub consecutive_failures: Option<u32>,
    /// Open when at least this percentage (0 < p ≤ 100) of the calls in the
    /// window failed, once the window holds [`minimum_calls`](Self::minimum_calls).
    pub failure_rate_threshold: Option<f64>,
    /// Calls the window must hold before a rate threshold is judged.
    pub minimum_calls: u32,
    /// A call that takes longer than this counts as a failure (and as slow).
    pub slow_call_duration: Option<Duration>,
    /// Open when at least this percentage of the calls in the window were
    /// slow, once the window holds `minimum_calls`. Needs `slow_call_duration`.
    pub slow_call_rate_threshold: Option<f64>,
    /// How long the breaker stays open after it first trips.
    pub open_timeout: Duration,
    /// The open time is multiplied by this after each failed half-open trial
    /// (≥ 1; 1 keeps it constant).
    pub backoff_factor: f64,
    /// The open time never grows beyond this. `None` (the default):
    /// [`DEFAULT_MAX_OPEN_TIMEOUT`] (5 min), or `open_timeout` if that is longer.
    pub max_open_timeout: Option<Duration>,
    /// Each open period is shortened by a random fraction of up to this
    /// (0 ≤ j < 1), so that many breakers opened together do not retry together.
    /// Jitter only shortens, so `max_open_timeout` stays a true cap.
    pub jitter: f64,
    /// Seed for the jitter's random sequence (same seed, same sequence).
    pub jitter_seed: u64,
    /// Most probes in flight at once while half-open (N).
    pub half_open_max_attempts: u16,
    /// Successful probes that close the breaker (M ≤ N). `None` (the
    /// default): all N, as in seed 000.
    pub half_open_successes: Option<u16>,
    /// A half-open probe not reported within this time after the latest probe
    /// was admitted is given up on: it stops counting as in flight, and its
    /// late report is ignored as stale (so is every other call in flight
    /// then). With a concurrency limit, the calls in flight are given up the
    /// same way when the limit has refused calls for this long with no call
    /// reported. Set it longer than any call takes: a call given up counts
    /// nothing when it ends.
    pub probe_timeout: Duration,
    /// At most this many calls in flight at once, fixed or adaptive
    /// ([`ConcurrencyLimit`]). `None` (the default, as in seed 000): no limit.
    pub concurrency_limit: Option<ConcurrencyLimit>,
}

impl Default for Config {
    /// Seed 000's breaker: 5 failures in 60 s open it for 30 s, doubling after
    /// each failed trial up to 5 min; 3 half-open probes, 3 successes close it.
    fn default() -> Self {
        Config {
            failure_threshold: Some(5),
            window: Window::Time(Duration::from_secs(60)),
            consecutive_failures: None,
            failure_rate_threshold: None,
            minimum_calls: 10,
            slow_call_duration: None,
            slow_call_rate_threshold: None,
            open_timeout: Duration::from_secs(30),
            backoff_factor: 2.0,
            max_open_timeout: None,
            jitter: 0.0,
            jitter_seed: 0,
            half_open_max_attempts: 3,
            half_open_successes: None,
            probe_timeout: Duration::from_secs(60),
            concurrency_limit: None,
        }
    }
}

impl Config {
    /// Seed 000 (WhatsApp gateway): the same as [`Config::default`].
    pub fn whatsapp_gateway() -> Self {
        Config::default()
    }

    /// The presets' names, as the bindings and the conformance suite spell
    /// them ([`Config::preset`]).
    pub const PRESETS: [&'static str; 3] = ["whatsapp_gateway", "partner_webhook", "sender"];

    /// The preset called `name` (one of [`Config::PRESETS`]), if there is one.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "whatsapp_gateway" => Some(Config::whatsapp_gateway()),
            "partner_webhook" => Some(Config::partner_webhook()),
            "sender" => Some(Config::sender()),
            _ => None,
        }
    }

    /// For message senders (what the README's first examples use): seed
    /// 000's rules with an adaptive concurrency limit from 1 to 1,000, which
    /// starts at the probe count and grows while callers wait, and halves on
    /// failures and slow calls, so that a gateway that throttles under load
    /// is sent what it takes instead of a burst it refuses. `make demo`:
    /// seed 000's defaults deliver 80.4 % in Billing SaaS and 64.2 % of the
    /// order confirmations, this preset everything.
    pub fn sender() -> Self {
        Config { concurrency_limit: Some(ConcurrencyLimit::Adaptive { min: 1, max: 1_000 }), ..Config::default() }
    }

    /// Seed 001 (partner webhooks): a call slower than 10 s fails; 5
    /// consecutive failures open it for 10 s, a constant period; the next call
    /// is the single probe, and its success closes the breaker.
    pub fn partner_webhook() -> Self {
        Config {
            failure_threshold: None,
            consecutive_failures: Some(5),
            slow_call_duration: Some(Duration::from_secs(10)),
            open_timeout: Duration::from_secs(10),
            backoff_factor: 1.0,
            max_open_timeout: Some(Duration::from_secs(10)),
            half_open_max_attempts: 1,
            ..Config::default()
        }
    }

    /// The open time's cap in force: `max_open_timeout`, or its default.
    pub fn open_timeout_cap(&self) -> Duration {
        self.max_open_timeout.unwrap_or(DEFAULT_MAX_OPEN_TIMEOUT.max(self.open_timeout))
    }

    /// Successful probes that close the breaker: `half_open_successes`, or N.
    pub fn successes_to_close(&self) -> u16 {
        self.half_open_successes.unwrap_or(self.half_open_max_attempts)
    }

    /// Whether a policy counts over the window (else none is kept).
    pub fn windowed(&self) -> bool {
        self.failure_threshold.is_some()
            || self.failure_rate_threshold.is_some()
            || self.slow_call_rate_threshold.is_some()
    }

    /// A stable fingerprint of every field's value in force (53 bits, so it
    /// survives a JavaScript number): configurations that behave the same
    /// (a default left unset, or set to its value) have equal fingerprints. Used
    /// by snapshots to recognise their configuration, and by bindings to share
    /// one `Config` among breakers built from the same options.
    pub fn fingerprint(&self) -> u64 {
        fingerprint(self)
    }

    /// Checks every field; the error names the first field that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, problem| Err(ConfigError { field, problem });
        if self.failure_threshold.is_none()
            && self.consecutive_failures.is_none()
            && self.failure_rate_threshold.is_none()
            && self.slow_call_rate_threshold.is_none()
        {
            return err(Field::FailureThreshold, Problem::NoTripPolicy);
        }
        if self.failure_threshold == Some(0) {
            return err(Field::FailureThreshold, Problem::Zero);
        }
        match self.window {
            Window::Time(d) if d.as_micros() < u64::from(TIME_BUCKETS) => {
                return err(Field::Window, Problem::TooSmall);
            }
            Window::Count(0) => return err(Field::Window, Problem::Zero),
            Window::Count(n) if n > MAX_WINDOW_CALLS => return err(Field::Window, Problem::TooLarge),
            _ => {}
        }
        // A count window holding fewer calls than the threshold never trips
        // by it: refused when it is the only policy (the breaker could never
        // open). Beside another policy, an unreachable default threshold
        // (5, with `window_calls: 4` for a rate) is left alone.
        if let (Window::Count(n), Some(threshold)) = (self.window, self.failure_threshold)
            && threshold > u32::from(n)
            && self.consecutive_failures.is_none()
            && self.failure_rate_threshold.is_none()
            && self.slow_call_rate_threshold.is_none()
        {
            return err(Field::FailureThreshold, Problem::ExceedsWindow);
        }
        if self.consecutive_failures == Some(0) {
            return err(Field::ConsecutiveFailures, Problem::Zero);
        }
        check_percent(self.failure_rate_threshold, Field::FailureRateThreshold)?;
        check_percent(self.slow_call_rate_threshold, Field::SlowCallRateThreshold)?;
        if self.minimum_calls == 0 {
            return err(Field::MinimumCalls, Problem::Zero);
        }
        let rates = self.failure_rate_threshold.is_some() || self.slow_call_rate_threshold.is_some();
        if let Window::Count(n) = self.window
            && rates
            && self.minimum_calls > u32::from(n)
        {
            return err(Field::MinimumCalls, Problem::ExceedsWindow);
        }
        if self.slow_call_duration == Some(Duration::ZERO) {
            return err(Field::SlowCallDuration, Problem::Zero);
        }
        if self.slow_call_rate_threshold.is_some() && self.slow_call_duration.is_none() {
            return err(Field::SlowCallDuration, Problem::Missing);
        }
        if self.open_timeout.is_zero() {
            return err(Field::OpenTimeout, Problem::Zero);
        }
        if !self.backoff_factor.is_finite() {
            return err(Field::BackoffFactor, Problem::NotFinite);
        }
        if self.backoff_factor < 1.0 {
            return err(Field::BackoffFactor, Problem::TooSmall);
        }
        if self.open_timeout_cap() < self.open_timeout {
            return err(Field::MaxOpenTimeout, Problem::BelowOpenTimeout);
        }
        if !self.jitter.is_finite() {
            return err(Field::Jitter, Problem::NotFinite);
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return err(Field::Jitter, Problem::OutOfRange);
        }
        if self.half_open_max_attempts == 0 {
            return err(Field::HalfOpenMaxAttempts, Problem::Zero);
        }
        if self.half_open_max_attempts > MAX_HALF_OPEN_ATTEMPTS {
            return err(Field::HalfOpenMaxAttempts, Problem::TooLarge);
        }
        if self.half_open_successes == Some(0) {
            return err(Field::HalfOpenSuccesses, Problem::Zero);
        }
        if self.successes_to_close() > self.half_open_max_attempts {
            return err(Field::HalfOpenSuccesses, Problem::ExceedsHalfOpenMaxAttempts);
        }
        if self.probe_timeout.is_zero() {
            return err(Field::ProbeTimeout, Problem::Zero);
        }
        self.concurrency_limit.map_or(Ok(()), ConcurrencyLimit::validate)
    }
}

fn check_percent(value: Option<f64>, field: Field) -> Result<(), ConfigError> {
    let problem = match value {
        None => return Ok(()),
        Some(p) if !p.is_finite() => Problem::NotFinite,
        Some(p) if p <= 0.0 || p > 100.0 => Problem::OutOfRange,
        Some(_) => return Ok(()),
    };
    Err(ConfigError { field, problem })
}

/// A stable fingerprint of every field's value in force in `config`: FNV-1a cut to 53 bits, so
/// that the JSON form survives JavaScript numbers (`JSON.parse` in a binding).
fn fingerprint(c: &Config) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut feed = |v: u64| {
        for byte in v.to_le_bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let opt = |v: Option<u64>| v.map_or(u64::MAX, |v| v.wrapping_add(1));
    feed(opt(c.failure_threshold.map(u64::from)));
    match c.window {
        Window::Time(d) => feed(d.as_micros() << 1),
        Window::Count(n) => feed((u64::from(n) << 1) | 1),
    }
    feed(opt(c.consecutive_failures.map(u64::from)));
    feed(opt(c.failure_rate_threshold.map(f64::to_bits)));
    feed(u64::from(c.minimum_calls));
    feed(opt(c.slow_call_duration.map(|d| d.as_micros())));
    feed(opt(c.slow_call_rate_threshold.map(f64::to_bits)));
    feed(c.open_timeout.as_micros());
    feed(c.backoff_factor.to_bits());
    feed(c.open_timeout_cap().as_micros());
    feed(c.jitter.to_bits());
    feed(c.jitter_seed);
    feed(u64::from(c.half_open_max_attempts));
    feed(u64::from(c.successes_to_close()));
    feed(c.probe_timeout.as_micros());
    // Only when set, so that every fingerprint from before the limit existed holds.
    match c.concurrency_limit {
        None => {}
        Some(ConcurrencyLimit::Fixed(n)) => feed(u64::from(n) << 1),
        Some(ConcurrencyLimit::Adaptive { min, max }) => feed((u64::from(min) << 33) | (u64::from(max) << 1) | 1),
    }
    hash & ((1 << 53) - 1)
}

/// The largest limit a configuration may set.
pub const MAX_CONCURRENCY_LIMIT: u32 = 1_000_000;

/// A limit on the calls in flight at once, counted over every call admitted
/// and not yet reported — across state changes: a call admitted before the
/// breaker opened, or before a manual operation, holds its slot until it is
/// reported (its report is then stale, but frees the slot). A call over the
/// limit is refused with [`Wait::LimitFull`](crate::Wait::LimitFull). A
/// disabled breaker admits every call, whatever the limit.
///
/// Calls whose permits are lost would hold their slots for ever; so, like
/// half-open probes, the calls in flight are given up (their slots freed,
/// their late reports stale) when the limit has refused calls for
/// `probe_timeout` and no call was reported meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrencyLimit {
    /// Never more than this many (a bulkhead).
    Fixed(u32),
    /// Adapted to what the upstream takes, within `min..=max` (how it
    /// moves: the crate's `limit` module).
    Adaptive {
        /// The limit is never cut below this.
        min: u32,
        /// The limit never grows beyond this.
        max: u32,
    },
}

impl ConcurrencyLimit {
    /// Checks the bounds: at least 1, at most [`MAX_CONCURRENCY_LIMIT`],
    /// `min ≤ max`.
    pub(crate) fn validate(self) -> Result<(), ConfigError> {
        let err = |field, problem| Err(ConfigError { field, problem });
        let (min, max) = match self {
            ConcurrencyLimit::Fixed(n) => {
                return match n {
                    0 => err(Field::ConcurrencyLimit, Problem::Zero),
                    n if n > MAX_CONCURRENCY_LIMIT => err(Field::ConcurrencyLimit, Problem::TooLarge),
                    _ => Ok(()),
                };
            }
            ConcurrencyLimit::Adaptive { min, max } => (min, max),
        };
        match () {
            () if min == 0 => err(Field::AdaptiveLimitMin, Problem::Zero),
            () if max == 0 => err(Field::AdaptiveLimitMax, Problem::Zero),
            () if max > MAX_CONCURRENCY_LIMIT => err(Field::AdaptiveLimitMax, Problem::TooLarge),
            () if min > max => err(Field::AdaptiveLimitMin, Problem::ExceedsMax),
            () => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_named_and_the_senders_is_seed_000s_with_the_adaptive_limit() {
        for name in Config::PRESETS {
            assert!(Config::preset(name).is_some_and(|c| c.validate().is_ok()), "{name}");
        }
        assert_eq!(Config::preset("fast"), None);
        let sender = Config::preset("sender").unwrap();
        assert_eq!(sender.concurrency_limit, Some(ConcurrencyLimit::Adaptive { min: 1, max: 1_000 }));
        assert_eq!(Config { concurrency_limit: None, ..sender }, Config::default());
    }

    #[test]
    fn concurrency_limit_bounds_are_checked() {
        let bad = |l: ConcurrencyLimit| l.validate().unwrap_err();
        assert_eq!(bad(ConcurrencyLimit::Fixed(0)).field, Field::ConcurrencyLimit);
        assert_eq!(bad(ConcurrencyLimit::Adaptive { min: 5, max: 4 }).problem, Problem::ExceedsMax);
        assert_eq!(
            bad(ConcurrencyLimit::Adaptive { min: 1, max: MAX_CONCURRENCY_LIMIT + 1 }).problem,
            Problem::TooLarge
        );
        assert!(ConcurrencyLimit::Adaptive { min: 1, max: 1 }.validate().is_ok());
    }
}
