//! Changes to a configuration, field by field: what a binding builds from
//! the options a user gives, applied onto [`Config::default`] for a breaker
//! and onto a registry's own configuration for one of its names
//! ([`Registry::configure_from`](crate::Registry::configure_from)). One rule
//! for every binding:
//!
//! - a field given replaces the base's, whole: a window of either kind
//!   replaces the window; a limit, fixed or adaptive (or none) replaces the
//!   limit;
//! - a field given as `Some(None)` unsets it (a policy, the open time's cap,
//!   the successes that close it, the limit);
//! - a preset given starts from that preset instead of the base;
//! - the result is validated as a whole where it is used (a breaker's or a
//!   registry's constructor, [`Registry::configure`](crate::Registry::configure)),
//!   as every `Config` is.

use crate::config::{ConcurrencyLimit, Config};
use crate::time::Duration;
use crate::window::Window;

/// Changes to a [`Config`]: `None` leaves a field as the base has it. Fields
/// the base may lack are `Option<Option<_>>`: `Some(None)` unsets them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[allow(missing_docs)] // each field is the `Config` field of its name
pub struct ConfigPatch {
    /// Start from this instead of the base (a preset, such as
    /// [`Config::partner_webhook`]).
    pub preset: Option<Config>,
    pub failure_threshold: Option<Option<u32>>,
    pub window: Option<Window>,
    pub consecutive_failures: Option<Option<u32>>,
    pub failure_rate_threshold: Option<Option<f64>>,
    pub minimum_calls: Option<u32>,
    pub slow_call_duration: Option<Option<Duration>>,
    pub slow_call_rate_threshold: Option<Option<f64>>,
    pub open_timeout: Option<Duration>,
    pub backoff_factor: Option<f64>,
    pub max_open_timeout: Option<Option<Duration>>,
    pub jitter: Option<f64>,
    pub jitter_seed: Option<u64>,
    pub half_open_max_attempts: Option<u16>,
    pub half_open_successes: Option<Option<u16>>,
    pub probe_timeout: Option<Duration>,
    pub concurrency_limit: Option<Option<ConcurrencyLimit>>,
}

impl ConfigPatch {
    /// `base` (or the preset) with these changes (not yet validated).
    pub fn apply(&self, base: &Config) -> Config {
        let mut c = self.preset.unwrap_or(*base);
        fn set<T: Copy>(field: &mut T, change: Option<T>) {
            if let Some(value) = change {
                *field = value;
            }
        }
        set(&mut c.failure_threshold, self.failure_threshold);
        set(&mut c.window, self.window);
        set(&mut c.consecutive_failures, self.consecutive_failures);
        set(&mut c.failure_rate_threshold, self.failure_rate_threshold);
        set(&mut c.minimum_calls, self.minimum_calls);
        set(&mut c.slow_call_duration, self.slow_call_duration);
        set(&mut c.slow_call_rate_threshold, self.slow_call_rate_threshold);
        set(&mut c.open_timeout, self.open_timeout);
        set(&mut c.backoff_factor, self.backoff_factor);
        set(&mut c.max_open_timeout, self.max_open_timeout);
        set(&mut c.jitter, self.jitter);
        set(&mut c.jitter_seed, self.jitter_seed);
        set(&mut c.half_open_max_attempts, self.half_open_max_attempts);
        set(&mut c.half_open_successes, self.half_open_successes);
        set(&mut c.probe_timeout, self.probe_timeout);
        set(&mut c.concurrency_limit, self.concurrency_limit);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Field, Problem};

    #[test]
    fn given_fields_replace_the_bases_and_the_rest_stay() {
        let base = Config {
            failure_threshold: Some(1),
            concurrency_limit: Some(ConcurrencyLimit::Fixed(4)),
            ..Config::default()
        };
        let patch = ConfigPatch { window: Some(Window::Count(10)), ..ConfigPatch::default() };
        let c = patch.apply(&base);
        assert_eq!((c.failure_threshold, c.window), (Some(1), Window::Count(10)));
        assert_eq!(c.concurrency_limit, Some(ConcurrencyLimit::Fixed(4)));
        let unset = ConfigPatch { concurrency_limit: Some(None), ..ConfigPatch::default() };
        assert_eq!(unset.apply(&base).concurrency_limit, None);
    }

    #[test]
    fn a_preset_starts_afresh() {
        let base = Config { failure_threshold: Some(1), ..Config::default() };
        let patch = ConfigPatch { preset: Some(Config::partner_webhook()), ..ConfigPatch::default() };
        assert_eq!(patch.apply(&base), Config::partner_webhook());
        let none = ConfigPatch { failure_threshold: Some(None), ..ConfigPatch::default() };
        let err = none.apply(&Config::default()).validate().unwrap_err();
        assert_eq!((err.field, err.problem), (Field::FailureThreshold, Problem::NoTripPolicy));
    }
}
