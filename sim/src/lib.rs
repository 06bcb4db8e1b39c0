//! `make demo`: seed 000's campaigns, and seed 001's partner outage, simulated. A deterministic
//! discrete-event simulator drives the real halfopen core (through its public
//! API, on the injected clock) and, for comparison, no breaker and seed 000's
//! own class, against a gateway modelled from the seed's story.

pub mod engine;
pub mod gateway;
pub mod guard;
pub mod rng;
pub mod scenarios;
pub mod svg;
pub mod table;
pub mod webhook;
