//! # halfopen
//!
//! A circuit breaker as a sans-IO state machine: **fully deterministic**. It
//! never reads a clock, performs no I/O, starts no threads and allocates
//! nothing on the call path (with the `alloc` feature, a breaker with a
//! concurrency limit allocates its limit's state, 80 bytes, once when it is
//! made, so that one without a limit holds 8 bytes for it, not 80); every
//! method that depends on time takes `now` as its first argument after
//! `self`. The same inputs always give the same outputs, which
//! is what lets one core serve Node, Python and WebAssembly bindings and be
//! specified by a data-only conformance suite (`tests/conformance/`).
//!
//! ## The call protocol
//! 1. [`Breaker::try_acquire`] gives a [`Permit`], or a [`Rejection`] that says
//!    when to retry.
//! 2. The caller makes the call and reports [`Breaker::record`] with an
//!    [`Outcome`]. The return value is the [`Transition`] it caused, if any, so
//!    a binding raises events without callbacks into the core.
//!
//! A permit belongs to the state period (generation) it was issued in: a late
//! report from an earlier period changes nothing.
//!
//! ```
//! use halfopen::{Breaker, Config, Instant, Outcome, State};
//!
//! let mut breaker = Breaker::new(Config::default()).unwrap();
//! for second in 0..5 {
//!     let now = Instant::from_millis(second * 1_000);
//!     let permit = breaker.try_acquire(now).decision.unwrap();
//!     breaker.record(permit, Outcome::Failure, now);
//! }
//! assert_eq!(breaker.state(Instant::from_millis(5_000)), State::Open);
//! let rejection = breaker.try_acquire(Instant::from_millis(5_000)).decision.unwrap_err();
//! assert_eq!(rejection.retry_after().unwrap().as_millis(), 29_000);
//! ```
//!
//! A binding for which every call into the breaker is expensive may act on
//! its own under a [`Licence`] the breaker grants (admit freely until the
//! window's bucket ends; reject until the open time ends), with outcomes
//! handed over in bulk so that the breaker ends up exactly where the plain
//! protocol would leave it.
//!
//! Every rule the breaker decides by (what a call meets in each phase, what
//! a report says of the upstream, trip policies, slow calls, probes, backoff
//! and jitter, what ends an open period, the licence, what a registry may
//! forget) is a pure function in one module, `policy`, unit-tested there;
//! `breaker` applies them. Retention's rules (how many sends may be out,
//! seed 001's probe rule, what a report does with a message, the bounds)
//! are in `retention::policy`; how the optional [`ConcurrencyLimit`] (how
//! many calls may be in flight at once, fixed or adaptive) moves is in
//! `limit`. Modules form no cycle (`tests/check_module_cycles.py`, in
//! `make test`).
//!
//! ## Time
//! See [`time`]: microseconds as `u64` from any origin; time never goes
//! backwards for the breaker.
//!
//! ## Beyond one breaker
//! - [`Metrics`] (and the opt-in [`LatencyHistogram`]) through the [`Meter`]
//!   hook: [`Breaker::with_meter`], read with [`Breaker::metrics`].
//! - `Registry` (feature `alloc`): one breaker per key, bounded.
//! - [`prometheus`]: the text exposition format.
//! - `retention` (feature `alloc`): a `RetentionQueue`
//!   that holds what a breaker refuses and releases it in order, paced
//!   (seed 001).
//! - [`outbox`]: retention across processes: one durable log per partner
//!   in a store, one deliverer at a time under a fenced lease (the lease
//!   and paging rules; `outbox::redis` for the Redis layout, feature
//!   `alloc`).
//! - `Snapshot` and `RegistrySnapshot` (feature `snapshot`): versioned state,
//!   JSON or compact.
//! - `TryString` / `try_render` (feature `alloc`): outputs whose size the
//!   caller does not bound, with running out of memory an `OutOfMemory`
//!   error instead of an abort.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod breaker;
mod config;
mod error;
#[cfg(feature = "alloc")]
mod fallible;
pub mod group;
mod histogram;
mod jitter;
mod licence;
mod limit;
mod meter;
mod metrics;
pub mod opentelemetry;
pub mod outbox;
mod patch;
mod permit;
mod phase;
mod policy;
pub mod prometheus;
#[cfg(feature = "alloc")]
mod registry;
#[cfg(feature = "alloc")]
pub mod retention;
#[cfg(feature = "std")]
mod shared;
#[cfg(feature = "snapshot")]
mod snapshot;
mod state;
pub mod time;
mod window;

pub use breaker::Breaker;
#[cfg(feature = "snapshot")]
pub use breaker::Snapshot;
pub use config::{ConcurrencyLimit, Config, DEFAULT_MAX_OPEN_TIMEOUT, MAX_CONCURRENCY_LIMIT, MAX_HALF_OPEN_ATTEMPTS};
#[cfg(feature = "snapshot")]
pub use error::SnapshotError;
pub use error::{ConfigError, Field, Problem};
#[cfg(feature = "alloc")]
pub use fallible::{OutOfMemory, TryString, try_collect, try_render, try_to_string};
pub use histogram::{LatencyHistogram, LatencySummary};
pub use licence::Licence;
pub use meter::{Meter, Report};
pub use metrics::{Counters, MAX_SAVED_COUNTER, Metrics, MetricsReading, ReadMetrics};
#[cfg(feature = "snapshot")]
pub use metrics::{Persist, SavedMetrics};
pub use patch::ConfigPatch;
pub use permit::{Admission, Outcome, Permit, Rejection, Wait};
#[cfg(feature = "snapshot")]
pub use registry::RegistrySnapshot;
#[cfg(feature = "alloc")]
pub use registry::{DEFAULT_CAPACITY, EVICTION_SAMPLE, Keyed, MAX_NAME_BYTES, Registry, RegistryError, check_name};
#[cfg(feature = "std")]
pub use shared::shared_config;
#[cfg(feature = "snapshot")]
pub use snapshot::{Elapsed, SNAPSHOT_VERSION};
pub use state::{Counts, Mode, Reason, State, Transition, Transitions};
pub use time::{Duration, Instant};
pub use window::{MAX_WINDOW_CALLS, TIME_BUCKETS, Window, WindowCounts};
