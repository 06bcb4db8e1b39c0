//! One breaker for a group of processes (several workers sending through
//! one upstream), sans-IO: each process keeps deciding locally, with no
//! store call on the call path, and exchanges with a shared store (Redis,
//! in the bindings) in the background, at most once per flush interval.
//!
//! **The exchange.** A [`Member`] says when ([`Member::next_exchange`]) and
//! what to send ([`Member::request`]): its breaker's running totals (the
//! store counts their growth since it last heard from the member, so a
//! request sent twice counts once), its run of failures, and at most one
//! [`Proposal`]. The store applies it atomically and answers
//! ([`Answer`]); [`Member::apply`] makes the breaker follow the group. A
//! store that fails or is late ([`Member::failed`]) leaves the process
//! deciding alone ([`GroupEvent::Degraded`]) until it answers again.
//!
//! **The store** holds counters, a fenced register and a lease, nothing
//! more: `MemoryStore` (feature `alloc`) is the reference of what it does, which every
//! store (the bindings' Lua script, `group::redis`) does the same way. Every
//! breaker rule is here, in `group/policy.rs` and the breaker's own
//! `policy.rs`.
//!
//! **What the group decides.**
//! - *Trip*: the breaker's trip rule on the merged view: the window counts
//!   of every process, in buckets of the store's clock (a process's counts
//!   land in the bucket of the exchange that carried them: up to one flush
//!   interval late), and the group's run of failures; and a quorum:
//!   failures from at least [`GroupConfig::quorum`] distinct live processes
//!   within the window (all of them, if fewer are live). A process that
//!   trips alone opens alone.
//! - *The group's run of consecutive failures* (seed 001's "5 consecutive
//!   failures"): the failures every process reported since the latest
//!   exchange that reported a success; that exchange sets the run to its
//!   process's own failures after its last success. Within one flush
//!   interval the order of different processes' calls is not known: a
//!   success anywhere in it resets the run.
//! - *Open*: every process follows the register's open period, on the
//!   store's clock (each process keeps the offset to its own, so processes
//!   whose clocks differ by minutes still agree).
//! - *One probe round*: when the open period ends, the first process to ask
//!   takes the lease (the register's epoch fences every change: a proposal
//!   made at an older epoch changes nothing); it alone probes, up to
//!   `half_open_max_attempts` calls for the group. Its probes' outcome
//!   closes the group or opens it again for longer; a lease holder that goes
//!   silent loses the lease when it expires, and another process takes over.
//! - *Concurrency limit* (an adaptive limit): one for the group, a fenced
//!   register with a counter of steps in the store; each process admits
//!   within its share (`group/policy.rs`, `share`), its successes add the
//!   steps its own limit would, a failure asks at once for a halving (one
//!   per loss window, fenced), and the closing exchange restarts it at the
//!   probe count. A fixed limit stays each process's own bulkhead.
//! - *Outage*: a process that cannot reach the store decides alone (it
//!   still trips, probes and closes by itself: never "closed and cannot
//!   trip"), retries with backoff and jitter, and on its first answer adopts
//!   what the group did meanwhile.

mod config;
mod exposition;
#[cfg(feature = "alloc")]
mod keyed;
#[cfg(all(test, feature = "alloc"))]
mod keyed_tests;
mod member;
mod own_time;
mod policy;
mod protocol;
#[cfg(feature = "alloc")]
pub mod redis;
#[cfg(feature = "alloc")]
mod store;
#[cfg(all(test, feature = "alloc"))]
mod tests;

pub use crate::breaker::Tally;
pub use config::{GroupConfig, GroupConfigError, GroupField, MAX_FLUSH_INTERVAL, MAX_GROUP_PERIOD, MIN_FLUSH_INTERVAL};
pub use exposition::{GroupReading, render as render_prometheus};
#[cfg(feature = "alloc")]
pub use keyed::{KeyedMembers, NAMES_PER_CALL};
pub use member::{GroupEvent, Member};
pub use protocol::{
    ANY_EPOCH, Answer, GroupLimit, GroupPhase, LimitReport, MAX_PERIOD_US, Proposal, Proposed, Register, Request,
};
#[cfg(feature = "alloc")]
pub use store::MemoryStore;
