//! The native half of the npm package `halfopen`: core breakers driven with
//! plain numbers. Every decision is the core's; this crate translates options,
//! times (milliseconds on the caller's clock) and results. The JavaScript
//! half (`index.js`, `lib/`) is the drop-in `CircuitBreaker` class.
#![deny(clippy::unwrap_used)]

mod breaker;
mod error;
mod options;
mod registry;
mod time;
