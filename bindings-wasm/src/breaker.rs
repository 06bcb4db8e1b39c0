//! `NativeBreaker` for wasm: `halfopen_node::NativeBreaker` behind a cell
//! (see `poison`), with the napi class's method names.

use std::cell::RefCell;

use halfopen_node::NativeBreaker as Inner;
use wasm_bindgen::prelude::*;

use crate::flat;
use crate::options::options_of;
use crate::poison::{keep_panics, open, thrown};

/// One core breaker, driven with numbers (milliseconds on the caller's clock).
#[wasm_bindgen]
pub struct NativeBreaker(RefCell<Inner>);

#[wasm_bindgen]
impl NativeBreaker {
    /// Bytes of one native breaker, for the memory benchmark.
    pub fn bytes() -> u32 {
        Inner::bytes()
    }

    /// A breaker from flattened options (see `options`).
    #[wasm_bindgen(constructor)]
    pub fn new(
        preset: Option<String>,
        values: &[f64],
        given: u32,
        unset: u32,
        latency_histogram: bool,
    ) -> Result<NativeBreaker, JsError> {
        keep_panics();
        let options = options_of(preset, values, given, unset)?;
        let inner = Inner::new(options, latency_histogram).map_err(thrown)?;
        Ok(NativeBreaker(RefCell::new(inner)))
    }

    pub fn acquire(&self, now_ms: f64) -> Result<f64, JsError> {
        Ok(open(&self.0)?.acquire(now_ms))
    }

    #[wasm_bindgen(js_name = refusalReason)]
    pub fn refusal_reason(&self) -> Result<String, JsError> {
        Ok(open(&self.0)?.refusal_reason())
    }

    pub fn record(&self, generation: u32, issued_at_ms: f64, outcome_code: u32, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.record(generation, issued_at_ms, outcome_code, now_ms))
    }

    /// The licence, flat (see `flat::licence`).
    pub fn licence(&self, now_ms: f64) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.licence(now_ms);
        Ok(flat::licence(&value))
    }

    #[wasm_bindgen(js_name = handOver)]
    pub fn hand_over(
        &self,
        admitted: u32,
        first_ms: f64,
        generation: u32,
        successes: u32,
        at_ms: f64,
    ) -> Result<bool, JsError> {
        Ok(open(&self.0)?.hand_over(admitted, first_ms, generation, successes, at_ms))
    }

    #[wasm_bindgen(js_name = countRejections)]
    pub fn count_rejections(&self, count: u32, now_ms: f64) -> Result<(), JsError> {
        open(&self.0)?.count_rejections(count, now_ms);
        Ok(())
    }

    /// The transitions, flat (see `flat::transitions`).
    #[wasm_bindgen(js_name = takeTransitions)]
    pub fn take_transitions(&self) -> Result<Vec<JsValue>, JsError> {
        let value = open(&self.0)?.take_transitions();
        Ok(flat::transitions(value))
    }

    #[wasm_bindgen(js_name = retryAfter)]
    pub fn retry_after(&self, now_ms: f64) -> Result<f64, JsError> {
        Ok(open(&self.0)?.retry_after(now_ms))
    }

    pub fn mode(&self, now_ms: f64) -> Result<String, JsError> {
        Ok(open(&self.0)?.mode(now_ms))
    }

    #[wasm_bindgen(js_name = forceOpen)]
    pub fn force_open(&self, now_ms: f64, for_ms: Option<f64>) -> Result<bool, JsError> {
        Ok(open(&self.0)?.force_open(now_ms, for_ms))
    }

    #[wasm_bindgen(js_name = forceOpenAtLeast)]
    pub fn force_open_at_least(&self, now_ms: f64, for_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.force_open_at_least(now_ms, for_ms))
    }

    #[wasm_bindgen(js_name = forceClose)]
    pub fn force_close(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.force_close(now_ms))
    }

    pub fn disable(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.disable(now_ms))
    }

    pub fn release(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.release(now_ms))
    }

    pub fn reset(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.reset(now_ms))
    }

    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&self, now_ms: f64) -> Result<bool, JsError> {
        Ok(open(&self.0)?.handle_timeout(now_ms))
    }

    /// When the breaker next changes by itself, or `null` (as napi says none).
    #[wasm_bindgen(js_name = pollTimeoutMs)]
    pub fn poll_timeout_ms(&self) -> Result<JsValue, JsError> {
        Ok(open(&self.0)?.poll_timeout_ms().map_or(JsValue::NULL, JsValue::from))
    }

    /// The metrics, flat (see `flat::metrics`).
    pub fn metrics(&self, now_ms: f64) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.metrics(now_ms);
        Ok(flat::metrics(&value))
    }

    pub fn prometheus(&self, name: String, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.prometheus(name, now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = maxNameBytes)]
    pub fn max_name_bytes(&self) -> Result<u32, JsError> {
        Ok(open(&self.0)?.max_name_bytes())
    }

    #[wasm_bindgen(js_name = snapshotJson)]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.snapshot_json(now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = snapshotBytes)]
    pub fn snapshot_bytes(&self, now_ms: f64) -> Result<Vec<u8>, JsError> {
        open(&self.0)?.snapshot_bytes(now_ms).map_err(thrown)
    }

    pub fn restore(
        &self,
        json: Option<String>,
        bytes: Option<Vec<u8>>,
        now_ms: f64,
        counted: bool,
    ) -> Result<(), JsError> {
        open(&self.0)?.restore(json, bytes, now_ms, counted).map_err(thrown)
    }

    /// For tests only: panics inside this breaker, which poisons it.
    #[wasm_bindgen(js_name = __panicForTests)]
    pub fn panic_for_tests(&self) -> Result<(), JsError> {
        let _held = open(&self.0)?;
        panic!("provoked by a test");
    }
}
