//! `NativeRegistry` for wasm: `halfopen_node::NativeRegistry` behind a cell
//! (see `poison`), with the napi class's method names.

use std::cell::RefCell;

use halfopen_node::NativeRegistry as Inner;
use wasm_bindgen::prelude::*;

use crate::flat;
use crate::options::options_of;
use crate::poison::{keep_panics, open, thrown};

/// One breaker per name, bounded, driven with names and numbers.
#[wasm_bindgen]
pub struct NativeRegistry(RefCell<Inner>);

/// The most breakers a registry holds in the module: about 400 bytes each,
/// so that a full one fits a 32-bit memory (4 GiB) with room to grow its
/// table, rather than running out of memory, which would poison it and
/// leave the module's other objects without memory.
/// (An integer: formatting an `f64` into the message would add 16 KB of
/// float formatting to the module.)
const MAX_CAPACITY: u32 = 1 << 20;

#[wasm_bindgen]
impl NativeRegistry {
    /// A registry from flattened options (see `options`).
    #[wasm_bindgen(constructor)]
    pub fn new(
        preset: Option<String>,
        values: &[f64],
        given: u32,
        unset: u32,
        capacity: Option<f64>,
    ) -> Result<NativeRegistry, JsError> {
        keep_panics();
        // Any capacity this module cannot hold, 0 and fractions included:
        // the message gives this module's bounds, not the addon's. (None:
        // the core's default, which it can.)
        if let Some(capacity) = capacity
            && !(capacity >= 1.0 && capacity <= f64::from(MAX_CAPACITY) && capacity.fract() == 0.0)
        {
            // The translation's structured error, as `capacity` is refused
            // in the Node package (a RangeError naming it).
            return Err(JsError::new(&format!(
                r#"{{"kind":"capacity","message":"registry capacity must be between 1 and {MAX_CAPACITY} in halfopen-wasm (a 32-bit memory)"}}"#
            )));
        }
        let options = options_of(preset, values, given, unset)?;
        let inner = Inner::new(options, capacity).map_err(thrown)?;
        Ok(NativeRegistry(RefCell::new(inner)))
    }

    pub fn configure(
        &self,
        name: String,
        preset: Option<String>,
        values: &[f64],
        given: u32,
        unset: u32,
        now_ms: f64,
    ) -> Result<bool, JsError> {
        let options = options_of(preset, values, given, unset)?;
        open(&self.0)?.configure(name, options, now_ms).map_err(thrown)
    }

    pub fn acquire(&self, name: String, now_ms: f64) -> Result<f64, JsError> {
        Ok(open(&self.0)?.acquire(name, now_ms))
    }

    pub fn record(
        &self,
        name: String,
        generation: u32,
        issued_at_ms: f64,
        outcome_code: u32,
        now_ms: f64,
    ) -> Result<bool, JsError> {
        Ok(open(&self.0)?.record(name, generation, issued_at_ms, outcome_code, now_ms))
    }

    #[wasm_bindgen(js_name = handOver)]
    pub fn hand_over(
        &self,
        name: String,
        admitted: u32,
        first_ms: f64,
        generation: u32,
        successes: u32,
        at_ms: f64,
    ) -> Result<bool, JsError> {
        Ok(open(&self.0)?.hand_over(name, admitted, first_ms, generation, successes, at_ms))
    }

    #[wasm_bindgen(js_name = countRejections)]
    pub fn count_rejections(&self, name: String, count: u32, now_ms: f64) -> Result<(), JsError> {
        open(&self.0)?.count_rejections(name, count, now_ms);
        Ok(())
    }

    pub fn manual(&self, name: String, op: String, now_ms: f64, for_ms: Option<f64>) -> Result<bool, JsError> {
        open(&self.0)?.manual(name, op, now_ms, for_ms).map_err(thrown)
    }

    /// The transitions, flat (see `flat::transitions`).
    #[wasm_bindgen(js_name = takeTransitions)]
    pub fn take_transitions(&self) -> Result<Vec<JsValue>, JsError> {
        let value = open(&self.0)?.take_transitions();
        Ok(flat::transitions(value))
    }

    /// The licence of `name`'s breaker, flat (empty: no breaker).
    pub fn licence(&self, name: String, now_ms: f64) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.licence(name, now_ms);
        Ok(value.as_ref().map_or_else(Vec::new, flat::licence))
    }

    #[wasm_bindgen(js_name = retryAfter)]
    pub fn retry_after(&self, name: String, now_ms: f64) -> Result<f64, JsError> {
        Ok(open(&self.0)?.retry_after(name, now_ms))
    }

    pub fn mode(&self, name: String, now_ms: f64) -> Result<String, JsError> {
        Ok(open(&self.0)?.mode(name, now_ms))
    }

    /// The metrics of `name`'s breaker, flat (empty: no breaker).
    pub fn metrics(&self, name: String, now_ms: f64) -> Result<Vec<f64>, JsError> {
        let value = open(&self.0)?.metrics(name, now_ms);
        Ok(value.as_ref().map_or_else(Vec::new, flat::metrics))
    }

    pub fn names(&self) -> Result<Vec<String>, JsError> {
        open(&self.0)?.names().map_err(thrown)
    }

    pub fn has(&self, name: String) -> Result<bool, JsError> {
        Ok(open(&self.0)?.has(name))
    }

    #[wasm_bindgen(getter)]
    pub fn size(&self) -> Result<u32, JsError> {
        Ok(open(&self.0)?.size())
    }

    #[wasm_bindgen(getter)]
    pub fn evictions(&self) -> Result<f64, JsError> {
        Ok(open(&self.0)?.evictions())
    }

    #[wasm_bindgen(getter, js_name = lastEvicted)]
    pub fn last_evicted(&self) -> Result<Option<String>, JsError> {
        Ok(open(&self.0)?.last_evicted())
    }

    pub fn prometheus(&self, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.prometheus(now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = maxNameBytes)]
    pub fn max_name_bytes(&self) -> Result<u32, JsError> {
        Ok(open(&self.0)?.max_name_bytes())
    }

    #[wasm_bindgen(js_name = snapshotJson)]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String, JsError> {
        open(&self.0)?.snapshot_json(now_ms).map_err(thrown)
    }

    #[wasm_bindgen(js_name = restoreJson)]
    pub fn restore_json(&self, json: String, now_ms: f64, counted: bool) -> Result<bool, JsError> {
        open(&self.0)?.restore_json(json, now_ms, counted).map_err(thrown)
    }
}
