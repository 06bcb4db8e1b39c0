//! The Prometheus families as OpenTelemetry instruments: one table, read by
//! every binding's OpenTelemetry integration, so that each runtime reports
//! the same instruments, names, units and attributes.
//!
//! Each row maps one series of the Prometheus exposition (a sample name, and
//! the label beside `name` if it has one) to an instrument. Names follow
//! OpenTelemetry's conventions: dotted, lower case, no unit and no `_total`
//! in the name, the unit declared in UCUM (`s`, `By`, `1`, `{call}`). The
//! breaker's name is the attribute `circuit.name` (the exposition's label
//! `name`); a second label becomes an attribute of its own (`state` is
//! `circuit.state`, `quantile` stays `quantile`). Values are the
//! exposition's: the same reading, the same rounding.
//!
//! What is additive across breakers or processes (messages held, breakers
//! held) is an up-down counter; what is not (a state, a mean, a ratio, a
//! quantile) is a gauge; totals since the start are counters. The latency
//! summary has no OpenTelemetry instrument of its own (an observable
//! histogram does not exist): its quantiles are a gauge with a `quantile`
//! attribute, its sum and count two counters.

use core::fmt::{self, Write};

/// How an instrument's values are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstrumentKind {
    /// The value now, not additive (an observable gauge).
    Gauge,
    /// A total since the start, only going up (an observable counter).
    Counter,
    /// The value now, additive (an observable up-down counter).
    UpDownCounter,
}

impl InstrumentKind {
    /// Its name in the table's JSON: `gauge`, `counter`, `updowncounter`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstrumentKind::Gauge => "gauge",
            InstrumentKind::Counter => "counter",
            InstrumentKind::UpDownCounter => "updowncounter",
        }
    }
}

/// One instrument, and the series of the Prometheus exposition it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instrument {
    /// The instrument's name (`circuit.failures`).
    pub name: &'static str,
    /// What kind of instrument it is.
    pub kind: InstrumentKind,
    /// Its unit, UCUM (`s`, `By`, `1`, or an annotation such as `{call}`).
    pub unit: &'static str,
    /// Its description (the exposition's `# HELP`).
    pub description: &'static str,
    /// The exposition's sample name it reports (`circuit_failures_total`).
    pub sample: &'static str,
    /// The exposition's label beside `name`, and the attribute it becomes.
    pub label: Option<(&'static str, &'static str)>,
}

/// The attribute that holds the breaker's (or dispatcher's) name: the
/// exposition's label `name`. Unlabelled series (a registry's own) have none.
pub const NAME_ATTRIBUTE: &str = "circuit.name";

const fn row(
    name: &'static str,
    kind: InstrumentKind,
    unit: &'static str,
    sample: &'static str,
    description: &'static str,
) -> Instrument {
    Instrument { name, kind, unit, description, sample, label: None }
}

use InstrumentKind::{Counter, Gauge, UpDownCounter};

/// Every instrument, in the exposition's order: a breaker's, a registry's,
/// a grouped breaker's group, a dispatcher's retention.
pub const INSTRUMENTS: &[Instrument] = &[
    row("circuit.state", Gauge, "{state}", "circuit_state", "Breaker state: 0 closed, 1 half-open, 2 open."),
    row(
        "circuit.failures",
        Counter,
        "{call}",
        "circuit_failures_total",
        "Calls counted as failures (slow calls included).",
    ),
    row("circuit.opens", Counter, "{open}", "circuit_opens_total", "Transitions to open."),
    row("circuit.calls.admitted", Counter, "{call}", "circuit_calls_admitted_total", "Calls admitted."),
    row(
        "circuit.calls.rejected",
        Counter,
        "{call}",
        "circuit_calls_rejected_total",
        "Calls rejected without reaching the upstream.",
    ),
    row("circuit.successes", Counter, "{call}", "circuit_successes_total", "Calls that succeeded in time."),
    row(
        "circuit.slow_calls",
        Counter,
        "{call}",
        "circuit_slow_calls_total",
        "Calls slower than the slow-call threshold.",
    ),
    row("circuit.ignored", Counter, "{call}", "circuit_ignored_total", "Calls whose error was ignored."),
    row("circuit.cancelled", Counter, "{call}", "circuit_cancelled_total", "Calls the caller gave up on."),
    row(
        "circuit.stale_results",
        Counter,
        "{call}",
        "circuit_stale_results_total",
        "Results reported after the state period they belonged to.",
    ),
    row(
        "circuit.opens_last_24h",
        Gauge,
        "{open}",
        "circuit_opens_last_24h",
        "Transitions to open in the last 24 hours (counted per hour).",
    ),
    row("circuit.mean_open_time", Gauge, "s", "circuit_open_mean_seconds", "Mean time spent open per opening."),
    row(
        "circuit.upstream.error_ratio",
        Gauge,
        "1",
        "circuit_upstream_error_ratio",
        "Share of the calls in the trip window that failed (0 to 1).",
    ),
    Instrument {
        label: Some(("state", "circuit.state")),
        ..row(
            "circuit.time_in_state",
            Counter,
            "s",
            "circuit_state_seconds_total",
            "Time spent in each state since first use.",
        )
    },
    Instrument {
        label: Some(("quantile", "quantile")),
        ..row(
            "circuit.latency",
            Gauge,
            "s",
            "circuit_latency_seconds",
            "Latency of admitted calls (quantiles within 1.6 %).",
        )
    },
    row("circuit.latency_sum", Counter, "s", "circuit_latency_seconds_sum", "Latency of admitted calls, summed."),
    row("circuit.latency_count", Counter, "{call}", "circuit_latency_seconds_count", "Admitted calls timed."),
    row(
        "circuit.registry.breakers",
        UpDownCounter,
        "{breaker}",
        "circuit_registry_breakers",
        "Breakers held by the registry.",
    ),
    row(
        "circuit.registry.evictions",
        Counter,
        "{breaker}",
        "circuit_registry_evictions_total",
        "Idle breakers evicted to make room.",
    ),
    row(
        "circuit.group.degraded",
        Gauge,
        "1",
        "circuit_group_degraded",
        "1 while the breaker decides alone because its group's store failed or was late, else 0.",
    ),
    row(
        "circuit.group.state",
        Gauge,
        "{state}",
        "circuit_group_state",
        "The group's state as its store last answered: 0 closed, 1 half-open, 2 open.",
    ),
    row(
        "circuit.retention.retained",
        UpDownCounter,
        "{message}",
        "circuit_retained_messages",
        "Messages held while the breaker refuses (not in flight).",
    ),
    row("circuit.retention.size", UpDownCounter, "By", "circuit_retained_bytes", "Bytes held, retained and in flight."),
    row(
        "circuit.retention.in_flight",
        UpDownCounter,
        "{message}",
        "circuit_retention_in_flight",
        "Sends handed out and not yet reported.",
    ),
    row("circuit.retention.submitted", Counter, "{message}", "circuit_messages_submitted_total", "Messages submitted."),
    row("circuit.retention.delivered", Counter, "{message}", "circuit_messages_delivered_total", "Messages delivered."),
    row(
        "circuit.retention.refused",
        Counter,
        "{message}",
        "circuit_messages_refused_total",
        "Messages refused because a bound was reached.",
    ),
    row(
        "circuit.retention.dropped",
        Counter,
        "{message}",
        "circuit_messages_dropped_total",
        "Retained messages dropped to make room.",
    ),
    row(
        "circuit.retention.dead_letters",
        Counter,
        "{message}",
        "circuit_dead_letters_total",
        "Messages given up (attempts, age, or refused by the upstream).",
    ),
];

/// The instrument that reports the exposition's series `sample` with the
/// extra label `label` (`None` for a series labelled by `name` alone, or
/// unlabelled).
pub fn instrument_for(sample: &str, label: Option<&str>) -> Option<&'static Instrument> {
    INSTRUMENTS.iter().find(|i| i.sample == sample && i.label.map(|(l, _)| l) == label)
}

/// Writes [`INSTRUMENTS`] as a JSON array of objects (`name`, `kind`,
/// `unit`, `description`, `sample`, `label`, `attribute`; the last two
/// `null` without a second label), for the bindings' JavaScript and Python
/// halves. (No string in the table needs escaping: a test checks it.)
pub fn write_json(out: &mut impl Write) -> fmt::Result {
    out.write_char('[')?;
    for (i, instrument) in INSTRUMENTS.iter().enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        let Instrument { name, kind, unit, description, sample, label } = instrument;
        write!(
            out,
            "{{\"name\":\"{name}\",\"kind\":\"{}\",\"unit\":\"{unit}\",\"description\":\"{description}\",\"sample\":\"{sample}\",",
            kind.as_str()
        )?;
        match label {
            Some((label, attribute)) => write!(out, "\"label\":\"{label}\",\"attribute\":\"{attribute}\"}}")?,
            None => out.write_str("\"label\":null,\"attribute\":null}")?,
        }
    }
    out.write_char(']')
}
