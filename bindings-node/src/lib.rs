//! The native half of the npm package `halfopen`: core breakers driven with
//! plain numbers. Every decision is the core's; this crate translates options,
//! times (milliseconds on the caller's clock) and results. The JavaScript
//! half (`index.js`, `lib/`) is the drop-in `CircuitBreaker` class.
//!
//! With the `node` feature (the default) it is the napi-rs addon; without
//! it, the same types and methods are plain Rust, which the wasm binding
//! (`bindings-wasm`) exposes under the same names, so that one JavaScript
//! half serves both packages.
#![deny(clippy::unwrap_used)]

mod breaker;
mod dispatcher;
mod error;
mod group;
mod opentelemetry;
mod options;
#[cfg(feature = "node")]
mod outbox;
mod registry;
mod registry_group;
mod time;
mod wire;

pub use breaker::{NativeBreaker, NativeLicence, NativeMetrics, NativeTransition};
pub use dispatcher::{NativeDispatchEvent, NativeDispatcher, NativeRetention, NativeRetentionStats};
#[cfg(not(feature = "node"))]
pub use error::PlainError;
pub use group::{NativeGroupOptions, group_keys, group_script};
pub use opentelemetry::opentelemetry_instruments;
pub use options::NativeOptions;
#[cfg(feature = "node")]
pub use outbox::{NativeOutbox, outbox_dead_script, outbox_fields, outbox_keys, outbox_lease_script};
pub use registry::NativeRegistry;
pub use wire::{WireCodes, wire_codes};
