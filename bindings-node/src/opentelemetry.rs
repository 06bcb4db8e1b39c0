//! The core's OpenTelemetry instruments, for `opentelemetry.js`.

#[cfg(feature = "node")]
use napi_derive::napi;

/// Every instrument as the core's JSON (`halfopen::opentelemetry::write_json`).
#[cfg_attr(feature = "node", napi)]
pub fn opentelemetry_instruments() -> String {
    let mut json = String::new();
    // Writing into a String cannot fail.
    let _ = halfopen::opentelemetry::write_json(&mut json);
    json
}
