//! The native half of the npm package `halfopen-wasm`: the Node package's
//! native half (`halfopen-node` without napi) behind wasm-bindgen, under the
//! same class and method names, so that the same JavaScript half drives it.
//! Objects cross as plain JavaScript objects (serde); times are the
//! caller's milliseconds (`Instant::now()` traps on this target).
//!
//! A Rust panic aborts the call that hit it (wasm has no unwinding): that
//! breaker's state stays borrowed, which is how later calls know it is
//! poisoned. They throw an `Error` saying so (with the panic's message);
//! every other breaker and registry goes on working.
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]

mod breaker;
mod poison;
mod registry;

pub use breaker::NativeBreaker;
pub use registry::NativeRegistry;
