//! The options object a `CircuitBreaker` is built from, translated into a
//! core [`Config`]. The JavaScript side has checked every option's type;
//! here values that no `Config` can hold (negative, fractional counts,
//! infinite durations) are refused, naming the core field, and the core
//! validates the rest and owns every default (`null`/absent keeps it).

use crate::error::{Error, Result};
use halfopen::{ConcurrencyLimit, Config, ConfigPatch, Duration, Field, Problem, Window};
#[cfg(feature = "node")]
use napi_derive::napi;

use crate::error::{Refusal, config as refused};
use crate::time::micros;

/// Options as numbers (milliseconds for times).
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeOptions {
    /// One of the core's `Config::PRESETS` (default `"whatsapp_gateway"`):
    /// the preset the other options change.
    pub preset: Option<String>,
    /// Policies given as `null` (unset, even when the preset sets them), by
    /// option name: `failureThreshold`, `consecutiveFailures`,
    /// `failureRateThreshold`, `slowCallMs`, `slowCallRateThreshold`,
    /// `concurrencyLimit`.
    pub unset: Option<Vec<String>>,
    pub failure_threshold: Option<f64>,
    pub window_ms: Option<f64>,
    pub window_calls: Option<f64>,
    pub consecutive_failures: Option<f64>,
    pub failure_rate_threshold: Option<f64>,
    pub minimum_calls: Option<f64>,
    pub slow_call_ms: Option<f64>,
    pub slow_call_rate_threshold: Option<f64>,
    pub open_timeout_ms: Option<f64>,
    pub backoff_factor: Option<f64>,
    pub max_open_timeout_ms: Option<f64>,
    pub jitter: Option<f64>,
    pub jitter_seed: Option<f64>,
    pub half_open_max_attempts: Option<f64>,
    pub half_open_successes: Option<f64>,
    pub probe_timeout_ms: Option<f64>,
    pub concurrency_limit: Option<f64>,
    pub adaptive_limit_min: Option<f64>,
    pub adaptive_limit_max: Option<f64>,
}

/// What is wrong with `value` as a whole number from 0 to `max` (`None`:
/// nothing), by the rule every binding uses for a value no configuration
/// can hold: not finite, negative or fractional (out of range), above the
/// type's largest (too large).
pub(crate) fn whole_problem(value: f64, max: f64) -> Option<Problem> {
    if !value.is_finite() {
        Some(Problem::NotFinite)
    } else if value < 0.0 || value.fract() != 0.0 {
        Some(Problem::OutOfRange)
    } else if value > max {
        Some(Problem::TooLarge)
    } else {
        None
    }
}

/// The largest number of milliseconds a duration holds (2^64 − 1 µs).
const MAX_MS: f64 = 18_446_744_073_709_551.0;

/// What is wrong with `value` as a number of milliseconds (`None`: nothing).
pub(crate) fn millis_problem(value: f64) -> Option<Problem> {
    if !value.is_finite() {
        Some(Problem::NotFinite)
    } else if value < 0.0 {
        Some(Problem::OutOfRange)
    } else if value > MAX_MS {
        Some(Problem::TooLarge)
    } else {
        None
    }
}

fn count(value: f64, field: Field) -> Result<u32> {
    match whole_problem(value, f64::from(u32::MAX)) {
        Some(problem) => Err(refused(field.name(), problem, "must be a whole number from 0 to 4294967295")),
        None => Ok(value as u32),
    }
}

fn millis(value: f64, field: Field) -> Result<Duration> {
    match millis_problem(value) {
        Some(problem) => Err(refused(
            field.name(),
            problem,
            "must be a finite, non-negative number of milliseconds, at most 18446744073709551",
        )),
        None => Ok(Duration::from_micros(micros(value).unwrap_or(u64::MAX))),
    }
}

fn small(value: f64, field: Field) -> Result<u16> {
    u16::try_from(count(value, field)?)
        .map_err(|_| refused(field.name(), Problem::TooLarge, Problem::TooLarge.describe()))
}

/// The core's preset called `name`.
fn preset(name: &str) -> Result<Config> {
    Config::preset(name)
        .ok_or_else(|| refused("preset", Problem::OutOfRange, &format!("must be one of {:?}", Config::PRESETS)))
}

impl NativeOptions {
    /// Whether `option` was given as `null`.
    fn unsets(&self, option: &str) -> bool {
        self.unset.iter().flatten().any(|o| o == option)
    }

    /// The configuration these options describe: the core's defaults
    /// changed by them, validated.
    pub(crate) fn config(&self) -> Result<Config> {
        let c = self.patch()?.apply(&Config::default());
        c.validate().map_err(|e| Error::from(Refusal::Config(e)))?;
        Ok(c)
    }

    /// The changes these options make to a configuration (the core's rule,
    /// `ConfigPatch`: a registry's name is configured with its own onto the
    /// registry's).
    pub(crate) fn patch(&self) -> Result<ConfigPatch> {
        let mut p = ConfigPatch { preset: self.preset.as_deref().map(preset).transpose()?, ..ConfigPatch::default() };
        for option in self.unset.iter().flatten() {
            match option.as_str() {
                "failureThreshold" => p.failure_threshold = Some(None),
                "consecutiveFailures" => p.consecutive_failures = Some(None),
                "failureRateThreshold" => p.failure_rate_threshold = Some(None),
                "slowCallMs" => p.slow_call_duration = Some(None),
                "slowCallRateThreshold" => p.slow_call_rate_threshold = Some(None),
                "concurrencyLimit" => p.concurrency_limit = Some(None),
                other => return Err(refused(other, Problem::OutOfRange, "cannot be null")),
            }
        }
        if let Some(v) = self.failure_threshold {
            p.failure_threshold = Some(Some(count(v, Field::FailureThreshold)?));
        }
        if let Some(v) = self.window_ms {
            p.window = Some(Window::Time(millis(v, Field::Window)?));
        }
        if let Some(v) = self.window_calls {
            p.window = Some(Window::Count(small(v, Field::Window)?));
        }
        if let Some(v) = self.consecutive_failures {
            p.consecutive_failures = Some(Some(count(v, Field::ConsecutiveFailures)?));
        }
        if let Some(v) = self.failure_rate_threshold {
            p.failure_rate_threshold = Some(Some(v));
        }
        if let Some(v) = self.minimum_calls {
            p.minimum_calls = Some(count(v, Field::MinimumCalls)?);
        }
        if let Some(v) = self.slow_call_ms {
            p.slow_call_duration = Some(Some(millis(v, Field::SlowCallDuration)?));
        }
        if let Some(v) = self.slow_call_rate_threshold {
            p.slow_call_rate_threshold = Some(Some(v));
        }
        if let Some(v) = self.open_timeout_ms {
            p.open_timeout = Some(millis(v, Field::OpenTimeout)?);
        }
        p.backoff_factor = self.backoff_factor;
        if let Some(v) = self.max_open_timeout_ms {
            p.max_open_timeout = Some(Some(millis(v, Field::MaxOpenTimeout)?));
        }
        p.jitter = self.jitter;
        if let Some(v) = self.jitter_seed {
            if let Some(problem) = whole_problem(v, 9_007_199_254_740_991.0) {
                return Err(refused("jitter_seed", problem, "must be a whole number from 0 to 2^53 - 1"));
            }
            p.jitter_seed = Some(v as u64);
        }
        if let Some(v) = self.half_open_max_attempts {
            p.half_open_max_attempts = Some(small(v, Field::HalfOpenMaxAttempts)?);
        }
        if let Some(v) = self.half_open_successes {
            p.half_open_successes = Some(Some(small(v, Field::HalfOpenSuccesses)?));
        }
        if let Some(v) = self.probe_timeout_ms {
            p.probe_timeout = Some(millis(v, Field::ProbeTimeout)?);
        }
        if let Some(v) = self.concurrency_limit {
            p.concurrency_limit = Some(Some(ConcurrencyLimit::Fixed(count(v, Field::ConcurrencyLimit)?)));
        }
        let missing = |field: Field| refused(field.name(), Problem::Missing, Problem::Missing.describe());
        match (self.adaptive_limit_min, self.adaptive_limit_max) {
            (None, None) => {}
            (Some(_), None) => return Err(missing(Field::AdaptiveLimitMax)),
            (None, Some(_)) => return Err(missing(Field::AdaptiveLimitMin)),
            // A fixed limit, or `null` (no limit), beside an adaptive one.
            (Some(_), Some(_)) if self.concurrency_limit.is_some() || self.unsets("concurrencyLimit") => {
                return Err(refused(
                    Field::ConcurrencyLimit.name(),
                    Problem::OutOfRange,
                    "excludes adaptive_limit_min and adaptive_limit_max",
                ));
            }
            (Some(min), Some(max)) => {
                let (min, max) = (count(min, Field::AdaptiveLimitMin)?, count(max, Field::AdaptiveLimitMax)?);
                p.concurrency_limit = Some(Some(ConcurrencyLimit::Adaptive { min, max }));
            }
        }
        Ok(p)
    }
}
