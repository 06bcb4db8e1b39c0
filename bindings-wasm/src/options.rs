//! The options object, which `js/native.js` passes flattened: the preset,
//! the numbers in [`OPTIONS`]' order, and two bit sets over that order (which
//! were given, which were `null`). No object is read from inside the module.

use halfopen_node::NativeOptions;
use wasm_bindgen::prelude::*;

/// The numeric options, in the order `js/native.js` flattens them (their
/// JavaScript names, which `unset` also uses).
pub(crate) const OPTIONS: [&str; 19] = [
    "failureThreshold",
    "windowMs",
    "windowCalls",
    "consecutiveFailures",
    "failureRateThreshold",
    "minimumCalls",
    "slowCallMs",
    "slowCallRateThreshold",
    "openTimeoutMs",
    "backoffFactor",
    "maxOpenTimeoutMs",
    "jitter",
    "jitterSeed",
    "halfOpenMaxAttempts",
    "halfOpenSuccesses",
    "probeTimeoutMs",
    "concurrencyLimit",
    "adaptiveLimitMin",
    "adaptiveLimitMax",
];

/// The options `values` (bit `i` of `given`: `values[i]` is set) and
/// `unset` (bit `i`: option `i` was `null`) describe.
pub(crate) fn options_of(
    preset: Option<String>,
    values: &[f64],
    given: u32,
    unset: u32,
) -> Result<NativeOptions, JsError> {
    if values.len() != OPTIONS.len() {
        return Err(JsError::new("halfopen-wasm: options must be flattened by js/native.js"));
    }
    let value = |i: usize| (given & (1 << i) != 0).then_some(values[i]);
    let nulls: Vec<String> = (0..OPTIONS.len()).filter(|i| unset & (1 << i) != 0).map(|i| OPTIONS[i].into()).collect();
    Ok(NativeOptions {
        preset,
        unset: Some(nulls),
        failure_threshold: value(0),
        window_ms: value(1),
        window_calls: value(2),
        consecutive_failures: value(3),
        failure_rate_threshold: value(4),
        minimum_calls: value(5),
        slow_call_ms: value(6),
        slow_call_rate_threshold: value(7),
        open_timeout_ms: value(8),
        backoff_factor: value(9),
        max_open_timeout_ms: value(10),
        jitter: value(11),
        jitter_seed: value(12),
        half_open_max_attempts: value(13),
        half_open_successes: value(14),
        probe_timeout_ms: value(15),
        concurrency_limit: value(16),
        adaptive_limit_min: value(17),
        adaptive_limit_max: value(18),
    })
}

/// The numeric options' names, comma-separated in their flattened order, for
/// `js/native.js` (so that the order is written down once, here).
#[wasm_bindgen(js_name = optionOrder)]
pub fn option_order() -> String {
    OPTIONS.join(",")
}
