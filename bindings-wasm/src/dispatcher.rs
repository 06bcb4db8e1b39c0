//! `NativeDispatcher` for wasm: `halfopen_node::NativeDispatcher` behind a
//! cell (see `poison`), with the napi class's method names. The retention
//! options come in flat (see [`retention_of`]).

use std::cell::RefCell;

use halfopen_node::{NativeDispatcher as Inner, NativeRetention};
use wasm_bindgen::prelude::*;

use crate::flat;
use crate::options::options_of;
use crate::poison::{keep_panics, open, thrown};

/// A breaker with a queue of what it could not send, driven with numbers.
#[wasm_bindgen]
pub struct NativeDispatcher(RefCell<Inner>);

/// The retention options from `values` (maxMessages, maxBytes, maxAttempts,
/// maxAgeMs, releasePerSecond, releaseBurst; bit `i` of `given`: `values[i]`
/// is set), `overflow` and `probe`.
fn retention_of(
    values: &[f64],
    given: u32,
    overflow: Option<String>,
    probe: Option<String>,
) -> Result<NativeRetention, JsError> {
    if values.len() != 6 {
        return Err(JsError::new("halfopen-wasm: retention options must be flattened by js/native.js"));
    }
    let value = |i: usize| (given & (1 << i) != 0).then_some(values[i]);
    Ok(NativeRetention {
        max_messages: value(0),
        max_bytes: value(1),
        overflow,
        probe,
        max_attempts: value(2),
        max_age_ms: value(3),
        release_per_second: value(4),
        release_burst: value(5),
    })
}

#[wasm_bindgen]
impl NativeDispatcher {
    /// A dispatcher from flattened options (see `options` and `retention_of`).
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        preset: Option<String>,
        values: &[f64],
        given: u32,
        unset: u32,
        latency_histogram: bool,
        retention: &[f64],
        retention_given: u32,
        overflow: Option<String>,
        probe: Option<String>,
    ) -> Result<NativeDispatcher, JsError> {
        keep_panics();
        let options = options_of(preset, values, given, unset)?;
        let retention = retention_of(retention, retention_given, overflow, probe)?;
        let inner = Inner::new(options, latency_histogram, retention).map_err(thrown)?;
        Ok(NativeDispatcher(RefCell::new(inner)))
    }

    /// Replaces this dispatcher's state with a snapshot's (the addon's `load`).
    pub fn load(
        &self,
        json: Option<String>,
        bytes: Option<Vec<u8>>,
        held: Vec<f64>,
        now_ms: f64,
        counted: bool,
    ) -> Result<(), JsError> {
        open(&self.0)?.load(json, bytes, held, now_ms, counted).map_err(thrown)
    }

    /// The addon's code (see `halfopen_node::NativeDispatcher::submit`).
    pub fn submit(&self, bytes: f64, now_ms: f64) -> Result<f64, JsError> {
        Ok(open(&self.0)?.submit(bytes, now_ms))
    }

    pub fn next(&self, now_ms: f64) -> Result<Vec<f64>, JsError> {
        Ok(open(&self.0)?.next(now_ms))
    }

    pub fn report(&self, seq: f64, outcome_code: u32, now_ms: f64) -> Result<u32, JsError> {
        Ok(open(&self.0)?.report(seq, outcome_code, now_ms))
    }

    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.handle_timeout(now_ms))
    }

    #[wasm_bindgen(js_name = pollTimeoutMs)]
    pub fn poll_timeout_ms(&self) -> Result<JsValue, JsError> {
        Ok(open(&self.0)?.poll_timeout_ms().map_or(JsValue::NULL, JsValue::from))
    }

    /// The events, flat (see `flat::events`).
    #[wasm_bindgen(js_name = takeEvents)]
    pub fn take_events(&self) -> Result<Vec<JsValue>, JsError> {
        let value = open(&self.0)?.take_events();
        Ok(flat::events(value))
    }

    #[wasm_bindgen(js_name = forceOpen)]
    pub fn force_open(&self, now_ms: f64, for_ms: Option<f64>) -> Result<bool, JsError> {
        Ok(open(&self.0)?.force_open(now_ms, for_ms))
    }

    #[wasm_bindgen(js_name = forceOpenAtLeast)]
    pub fn force_open_at_least(&self, now_ms: f64, for_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.force_open_at_least(now_ms, for_ms))
    }

    pub fn release(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.release(now_ms))
    }

    pub fn state(&self, now_ms: f64) -> Result<String, JsError> {
        Ok(open(&self.0)?.state(now_ms))
    }

    /// The stats, flat (see `flat::stats`).
    pub fn stats(&self) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.stats();
        Ok(flat::stats(&value))
    }

    /// The breaker's metrics, flat (see `flat::metrics`).
    pub fn metrics(&self, now_ms: f64) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.metrics(now_ms);
        Ok(flat::metrics(&value))
    }

    pub fn prometheus(&self, name: String, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.prometheus(name, now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = snapshotJson)]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.snapshot_json(now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = snapshotBytes)]
    pub fn snapshot_bytes(&self, now_ms: f64) -> Result<Vec<u8>, JsError> {
        open(&self.0)?.snapshot_bytes(now_ms).map_err(thrown)
    }

    pub fn held(&self) -> Result<Vec<f64>, JsError> {
        Ok(open(&self.0)?.held())
    }

    #[wasm_bindgen(js_name = maxNameBytes)]
    pub fn max_name_bytes(&self) -> Result<u32, JsError> {
        Ok(open(&self.0)?.max_name_bytes())
    }

    #[wasm_bindgen(js_name = defaultSendTimeoutMs)]
    pub fn default_send_timeout_ms(&self) -> Result<f64, JsError> {
        Ok(open(&self.0)?.default_send_timeout_ms())
    }

    #[wasm_bindgen(js_name = clockFailureRetryMs)]
    pub fn clock_failure_retry_ms(&self) -> Result<f64, JsError> {
        Ok(open(&self.0)?.clock_failure_retry_ms())
    }
}
