//! The native half of the npm package `halfopen-wasm`: the Node package's
//! native half (`halfopen-node` without napi) behind wasm-bindgen, under the
//! same class and method names (`js/native.js` completes them), so that the
//! same JavaScript half drives it. Options come in flattened (`options`) and
//! objects go out as flat values (`flat`, whose field names `flatFields()`
//! hands JavaScript), which `js/native.js` builds back into the addon's
//! objects: no serialization framework and no float formatting in the
//! module, which keeps it small; `js-sys` builds the few objects made once
//! (the field names, the wire codes). Times are the caller's
//! milliseconds (`Instant::now()` traps on this target). The module never
//! calls back into JavaScript that calls it.
//!
//! A call that does not return (a Rust panic aborts it: wasm has no
//! unwinding; or the JavaScript stack runs out inside it) leaves its
//! object's state borrowed, which is how later calls know it is poisoned:
//! they throw an `Error` saying so. `js/native.js` puts the module's stack
//! pointer back, so every other breaker and registry goes on working.
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]

mod breaker;
mod dispatcher;
mod flat;
mod options;
mod poison;
mod registry;
mod wire;

pub use breaker::NativeBreaker;

/// The core's OpenTelemetry instruments as JSON (the Node package's `opentelemetry.js` reads them).
#[wasm_bindgen::prelude::wasm_bindgen(js_name = opentelemetryInstruments)]
pub fn opentelemetry_instruments() -> String {
    halfopen_node::opentelemetry_instruments()
}

pub use dispatcher::NativeDispatcher;
pub use registry::NativeRegistry;
