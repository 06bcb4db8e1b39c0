//! Keyword options, translated into a core [`Config`]. Every core option has
//! its snake_case name; times are seconds (`int` or `float`). Types are
//! checked here (`TypeError` naming the option: a `bool` is not a number, a
//! string is not either); values no configuration can hold (negative,
//! fractional counts, NaN, infinite times) are a `ValueError` naming it; the
//! core validates the rest and owns every default (an absent option keeps
//! it; `None` unsets a policy).

use halfopen::{ConcurrencyLimit, Config, ConfigError, ConfigPatch, Duration, Field, Problem, Window};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::errors::{self, ADAPTIVE, int_problem, option_error, out_of_range, type_name, value_error};

/// The options the core reads, by their Python names.
const CORE: &[&str] = &[
    "preset",
    "failure_threshold",
    "window",
    "window_calls",
    "consecutive_failures",
    "failure_rate_threshold",
    "minimum_calls",
    "slow_call_duration",
    "slow_call_rate_threshold",
    "open_timeout",
    "backoff_factor",
    "max_open_timeout",
    "jitter",
    "jitter_seed",
    "half_open_max_attempts",
    "half_open_successes",
    "probe_timeout",
    "concurrency_limit",
    "adaptive_limit",
];

/// The option of the core's `field` (given `options`, for the window's kind).
fn option_of(field: Field, options: &Bound<'_, PyDict>) -> &'static str {
    match field {
        Field::Window if options.contains("window_calls").unwrap_or(false) => "window_calls",
        Field::AdaptiveLimitMin | Field::AdaptiveLimitMax => "adaptive_limit",
        Field::Window => "window",
        other => other.name(),
    }
}

/// The core's refusal of a configuration built from `options`, as the
/// error naming the option that set the field.
pub(crate) fn config_error(py: Python<'_>, e: ConfigError, options: &Bound<'_, PyDict>) -> PyErr {
    errors::config_error(py, option_of(e.field, options), e.problem)
}

fn is_number(v: &Bound<'_, PyAny>) -> bool {
    !v.is_instance_of::<PyBool>() && (v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
}

/// A whole number that fits a `u32` (the core checks its bounds; beyond a
/// `u32` the error says the option's own).
pub(crate) fn count(py: Python<'_>, option: &str, v: &Bound<'_, PyAny>) -> PyResult<u32> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(option_error(py, true, option, &format!("must be an int, got {}", type_name(v))));
    }
    v.extract::<u32>().map_err(|_| value_error(py, option, int_problem(v), &out_of_range(option)))
}

/// A count the core holds in a `u16` (its bounds are smaller still).
fn small_count(py: Python<'_>, option: &str, v: &Bound<'_, PyAny>) -> PyResult<u16> {
    u16::try_from(count(py, option, v)?).map_err(|_| value_error(py, option, Problem::TooLarge, &out_of_range(option)))
}

/// A real number (an `int` or a `float`, not a `bool`).
fn number(py: Python<'_>, option: &str, v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if !is_number(v) {
        return Err(option_error(py, true, option, &format!("must be a number, got {}", type_name(v))));
    }
    // An int too large for a float is the largest float of its sign: refused
    // as too large (or negative) by what reads it, not as "not finite".
    Ok(crate::time::float_of(v))
}

/// Seconds, as a core duration (to the microsecond).
pub(crate) fn seconds(py: Python<'_>, option: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let s = number(py, option, v)?;
    crate::time::micros(s).map(Duration::from_micros).ok_or_else(|| {
        let (problem, words) = crate::time::seconds_problem(s);
        value_error(py, option, problem, words)
    })
}

/// The configuration `options` describe (every key must be a core option):
/// the core's defaults changed by them, validated.
pub(crate) fn config(py: Python<'_>, options: &Bound<'_, PyDict>) -> PyResult<Config> {
    let c = patch(py, options)?.apply(&Config::default());
    c.validate().map_err(|e| config_error(py, e, options))?;
    Ok(c)
}

/// The changes `options` make to a configuration (the core's rule,
/// `ConfigPatch`: a registry's name is configured with its own onto the
/// registry's). `None` unsets what may be unset.
pub(crate) fn patch(py: Python<'_>, options: &Bound<'_, PyDict>) -> PyResult<ConfigPatch> {
    for key in options.keys() {
        let key: String = key.extract()?;
        if !CORE.contains(&key.as_str()) {
            return Err(option_error(py, true, &key, "is not an option"));
        }
    }
    let preset = match options.get_item("preset")? {
        None => None,
        Some(p) => match p.extract::<String>() {
            Ok(name) => Some(Config::preset(&name).ok_or_else(|| {
                value_error(py, "preset", Problem::OutOfRange, &format!("must be one of {:?}", Config::PRESETS))
            })?),
            Err(_) => return Err(option_error(py, true, "preset", &format!("must be a str, got {}", type_name(&p)))),
        },
    };
    let mut p = ConfigPatch { preset, ..ConfigPatch::default() };
    if options.contains("window")? && options.contains("window_calls")? {
        return Err(option_error(py, true, "window_calls", "and window exclude each other"));
    }
    if options.contains("concurrency_limit")? && options.contains("adaptive_limit")? {
        return Err(option_error(py, true, "concurrency_limit", "and adaptive_limit exclude each other"));
    }
    for (key, v) in options.iter() {
        let key: String = key.extract()?;
        let key = key.as_str();
        let none = v.is_none();
        match key {
            "preset" => {}
            "failure_threshold" => p.failure_threshold = Some((!none).then(|| count(py, key, &v)).transpose()?),
            "consecutive_failures" => p.consecutive_failures = Some((!none).then(|| count(py, key, &v)).transpose()?),
            "failure_rate_threshold" => {
                p.failure_rate_threshold = Some((!none).then(|| number(py, key, &v)).transpose()?)
            }
            "slow_call_duration" => p.slow_call_duration = Some((!none).then(|| seconds(py, key, &v)).transpose()?),
            "slow_call_rate_threshold" => {
                p.slow_call_rate_threshold = Some((!none).then(|| number(py, key, &v)).transpose()?)
            }
            "concurrency_limit" => {
                p.concurrency_limit =
                    Some((!none).then(|| count(py, key, &v).map(ConcurrencyLimit::Fixed)).transpose()?)
            }
            "adaptive_limit" => p.concurrency_limit = Some((!none).then(|| adaptive(py, &v)).transpose()?),
            // `None`: the core's default (5 min or `open_timeout`; all N probes).
            "max_open_timeout" if none => p.max_open_timeout = Some(None),
            "half_open_successes" if none => p.half_open_successes = Some(None),
            _ if none => return Err(option_error(py, true, key, "cannot be None")),
            "window" => p.window = Some(Window::Time(seconds(py, key, &v)?)),
            "window_calls" => p.window = Some(Window::Count(small_count(py, key, &v)?)),
            "minimum_calls" => p.minimum_calls = Some(count(py, key, &v)?),
            "open_timeout" => p.open_timeout = Some(seconds(py, key, &v)?),
            "backoff_factor" => p.backoff_factor = Some(number(py, key, &v)?),
            "max_open_timeout" => p.max_open_timeout = Some(Some(seconds(py, key, &v)?)),
            "jitter" => p.jitter = Some(number(py, key, &v)?),
            "jitter_seed" => {
                if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
                    return Err(option_error(py, true, key, &format!("must be an int, got {}", type_name(&v))));
                }
                p.jitter_seed = Some(
                    v.extract::<u64>()
                        .map_err(|_| value_error(py, key, int_problem(&v), "must be from 0 to 2**64 - 1"))?,
                )
            }
            "half_open_max_attempts" => p.half_open_max_attempts = Some(small_count(py, key, &v)?),
            "half_open_successes" => p.half_open_successes = Some(Some(small_count(py, key, &v)?)),
            "probe_timeout" => p.probe_timeout = Some(seconds(py, key, &v)?),
            _ => unreachable!("checked against CORE above"),
        }
    }
    Ok(p)
}

/// `adaptive_limit=(min, max)`.
fn adaptive(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<ConcurrencyLimit> {
    let pair = v.cast::<PyTuple>().ok().filter(|t| t.len() == 2).ok_or_else(|| {
        option_error(py, true, "adaptive_limit", &format!("must be a (min, max) tuple, got {}", type_name(v)))
    })?;
    let part = |i: usize| -> PyResult<u32> {
        let v = pair.get_item(i)?;
        if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
            let problem = format!("must be a (min, max) tuple of ints, got {} in it", type_name(&v));
            return Err(option_error(py, true, "adaptive_limit", &problem));
        }
        v.extract::<u32>().map_err(|_| value_error(py, "adaptive_limit", Problem::OutOfRange, ADAPTIVE))
    };
    Ok(ConcurrencyLimit::Adaptive { min: part(0)?, max: part(1)? })
}

/// A breaker's name: a non-empty `str` of valid Unicode (no lone surrogate).
pub(crate) fn name_of(py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<String> {
    let Ok(text) = name.cast::<PyString>() else {
        return Err(option_error(py, true, "name", &format!("must be a str, got {}", type_name(name))));
    };
    let text =
        text.to_str().map_err(|_| option_error(py, false, "name", "must be valid Unicode (a lone surrogate)"))?;
    if text.is_empty() {
        return Err(option_error(py, false, "name", "must not be empty"));
    }
    // The core's bound (MAX_NAME_BYTES), for breakers and queues as for registries.
    if let Err(e) = halfopen::check_name(text) {
        return Err(value_error(py, "name", Problem::TooLarge, &format!("refused: {e}")));
    }
    Ok(text.to_owned())
}
