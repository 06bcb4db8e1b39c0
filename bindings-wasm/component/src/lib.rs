//! The halfopen circuit breaker as a WebAssembly component: the core
//! (`halfopen`) behind the WIT interface `halfopen:breaker/breaker` in
//! `wit/breaker.wit`, which is the documented contract. Built for
//! `wasm32-unknown-unknown` and wrapped by `wasm-tools component new`, it
//! imports nothing (no WASI, no clock): time is a parameter everywhere.
//!
//! The crate itself is `no_std` (with `dlmalloc` as the allocator); the
//! core links std, whose `serde_json` writer is the only one that can
//! refuse to grow (a snapshot's JSON too large for the memory is an
//! `out-of-memory` error, not a trap). A panic (none is known: every input
//! is checked) aborts (`panic = "abort"`), which traps: the host sees an
//! error from the call, and this instance must not be used again. This crate translates; the core decides. Permits are resources: `record`
//! takes one by value, so a permit cannot be reported twice, and one dropped
//! unreported is reported as cancelled, so every permit is reported exactly
//! once. The component never calls out, so no call can re-enter it.
#![no_std]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]

extern crate alloc;

mod breaker;
mod convert;
mod dispatcher;
mod permit;
mod registry;

/// The glue wit-bindgen generates (the only `unsafe` code in the crate).
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "halfopen",
    });

    use super::Component;
    export!(Component);
}

use bindings::exports::halfopen::breaker::breaker as wit;

/// The component's exports.
struct Component;

impl wit::Guest for Component {
    type Permit = permit::Held;
    type Breaker = breaker::One;
    type Registry = registry::Many;
    type Dispatcher = dispatcher::Queue;

    fn default_config() -> wit::Config {
        convert::config_out(&halfopen::Config::default())
    }

    fn whatsapp_gateway() -> wit::Config {
        convert::config_out(&halfopen::Config::whatsapp_gateway())
    }

    fn partner_webhook() -> wit::Config {
        convert::config_out(&halfopen::Config::partner_webhook())
    }

    fn sender() -> wit::Config {
        convert::config_out(&halfopen::Config::sender())
    }
}

#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
