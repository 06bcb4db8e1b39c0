//! A dispatcher's figures in the Prometheus text format, beside its
//! breaker's (`crate::prometheus`): what it holds, and what became of the
//! messages, dead letters included.

use core::fmt::{self, Write};

use super::RetentionCounters;
use crate::prometheus::{Family, Value, render_families};

/// What a dispatcher holds and did, at one reading (see
/// [`RetentionQueue::reading`](super::RetentionQueue::reading)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionReading {
    /// Messages retained (not in flight).
    pub retained: u64,
    /// Bytes held, retained and in flight.
    pub bytes: u64,
    /// Sends handed out and not yet reported.
    pub in_flight: u64,
    /// What became of the messages.
    pub counters: RetentionCounters,
}

const FAMILIES: &[Family<RetentionReading>] = &[
    Family {
        name: "circuit_retained_messages",
        kind: "gauge",
        help: "Messages held while the breaker refuses (not in flight).",
        value: |r| Some(Value::Count(r.retained)),
    },
    Family {
        name: "circuit_retained_bytes",
        kind: "gauge",
        help: "Bytes held, retained and in flight.",
        value: |r| Some(Value::Count(r.bytes)),
    },
    Family {
        name: "circuit_retention_in_flight",
        kind: "gauge",
        help: "Sends handed out and not yet reported.",
        value: |r| Some(Value::Count(r.in_flight)),
    },
    Family {
        name: "circuit_messages_submitted_total",
        kind: "counter",
        help: "Messages submitted.",
        value: |r| Some(Value::Count(r.counters.submitted)),
    },
    Family {
        name: "circuit_messages_delivered_total",
        kind: "counter",
        help: "Messages delivered.",
        value: |r| Some(Value::Count(r.counters.delivered)),
    },
    Family {
        name: "circuit_messages_refused_total",
        kind: "counter",
        help: "Messages refused because a bound was reached.",
        value: |r| Some(Value::Count(r.counters.refused)),
    },
    Family {
        name: "circuit_messages_dropped_total",
        kind: "counter",
        help: "Retained messages dropped to make room.",
        value: |r| Some(Value::Count(r.counters.dropped)),
    },
    Family {
        name: "circuit_dead_letters_total",
        kind: "counter",
        help: "Messages given up (attempts, age, or refused by the upstream).",
        value: |r| Some(Value::Count(r.counters.dead)),
    },
];

/// Writes every family for the `(name, reading)` pairs that `dispatchers`
/// yields (called once per family, so each family's samples stay together).
pub fn render<'a, I>(out: &mut impl Write, dispatchers: impl Fn() -> I) -> fmt::Result
where
    I: Iterator<Item = (&'a str, RetentionReading)>,
{
    render_families(out, FAMILIES, dispatchers)
}
