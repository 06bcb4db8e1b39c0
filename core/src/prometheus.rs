//! The Prometheus text exposition format (version 0.0.4) for breakers'
//! [`MetricsReading`]s, written to any [`core::fmt::Write`] without allocating.
//!
//! Names follow seed 000: `circuit_state{name="..."}` (0 closed, 1 half-open,
//! 2 open), `circuit_failures_total`, `circuit_opens_total`, and more under the
//! same prefix. Label values are escaped as the format requires (backslash,
//! double quote, newline), so a hostile breaker name cannot add lines or
//! labels.

use core::fmt::{self, Write};

use crate::metrics::MetricsReading;
use crate::time::Duration;

/// One metric family: its name, type, help, and how to read its value
/// (`None`: this breaker has no sample in the family).
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&MetricsReading) -> Option<f64>,
}

fn seconds(d: Duration) -> f64 {
    d.as_micros() as f64 / 1e6
}

const FAMILIES: &[Family] = &[
    Family {
        name: "circuit_state",
        kind: "gauge",
        help: "Breaker state: 0 closed, 1 half-open, 2 open.",
        value: |m| Some(f64::from(m.state.gauge())),
    },
    Family {
        name: "circuit_failures_total",
        kind: "counter",
        help: "Calls counted as failures (slow calls included).",
        value: |m| Some(m.counters.failures as f64),
    },
    Family {
        name: "circuit_opens_total",
        kind: "counter",
        help: "Transitions to open.",
        value: |m| Some(m.counters.opens as f64),
    },
    Family {
        name: "circuit_calls_admitted_total",
        kind: "counter",
        help: "Calls admitted.",
        value: |m| Some(m.counters.admitted as f64),
    },
    Family {
        name: "circuit_calls_rejected_total",
        kind: "counter",
        help: "Calls rejected without reaching the upstream.",
        value: |m| Some(m.counters.rejections as f64),
    },
    Family {
        name: "circuit_successes_total",
        kind: "counter",
        help: "Calls that succeeded in time.",
        value: |m| Some(m.counters.successes as f64),
    },
    Family {
        name: "circuit_slow_calls_total",
        kind: "counter",
        help: "Calls slower than the slow-call threshold.",
        value: |m| Some(m.counters.slow as f64),
    },
    Family {
        name: "circuit_ignored_total",
        kind: "counter",
        help: "Calls whose error was ignored.",
        value: |m| Some(m.counters.ignored as f64),
    },
    Family {
        name: "circuit_cancelled_total",
        kind: "counter",
        help: "Calls the caller gave up on.",
        value: |m| Some(m.counters.cancelled as f64),
    },
    Family {
        name: "circuit_stale_results_total",
        kind: "counter",
        help: "Results reported after the state period they belonged to.",
        value: |m| Some(m.counters.stale as f64),
    },
    Family {
        name: "circuit_opens_last_24h",
        kind: "gauge",
        help: "Transitions to open in the last 24 hours (counted per hour).",
        value: |m| Some(f64::from(m.opens_last_24h)),
    },
    Family {
        name: "circuit_open_mean_seconds",
        kind: "gauge",
        help: "Mean time spent open per opening.",
        value: |m| m.mean_time_open.map(seconds),
    },
    Family {
        name: "circuit_upstream_error_ratio",
        kind: "gauge",
        help: "Share of the calls in the trip window that failed (0 to 1).",
        value: |m| m.error_rate.map(|p| p / 100.0),
    },
];

/// Writes `value` escaped for a label value: `\` as `\\`, `"` as `\"`,
/// newline as `\n`.
fn escape_label(out: &mut impl Write, value: &str) -> fmt::Result {
    for c in value.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '"' => out.write_str("\\\"")?,
            '\n' => out.write_str("\\n")?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

fn header(out: &mut impl Write, name: &str, kind: &str, help: &str) -> fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

fn sample(out: &mut impl Write, name: &str, breaker: &str, extra: Option<(&str, &str)>, value: f64) -> fmt::Result {
    write!(out, "{name}{{name=\"")?;
    escape_label(out, breaker)?;
    out.write_char('"')?;
    if let Some((label, v)) = extra {
        write!(out, ",{label}=\"{v}\"")?;
    }
    writeln!(out, "}} {value}")
}

/// Writes every metric family for the `(name, snapshot)` pairs that
/// `breakers` yields (called once per family, so each family's samples stay
/// together as the format requires).
pub fn render<'a, I>(out: &mut impl Write, breakers: impl Fn() -> I) -> fmt::Result
where
    I: Iterator<Item = (&'a str, MetricsReading)>,
{
    for family in FAMILIES {
        header(out, family.name, family.kind, family.help)?;
        for (name, m) in breakers() {
            if let Some(value) = (family.value)(&m) {
                sample(out, family.name, name, None, value)?;
            }
        }
    }
    header(out, "circuit_state_seconds_total", "counter", "Time spent in each state since first use.")?;
    for (name, m) in breakers() {
        for (state, time) in [("closed", m.time_closed), ("half_open", m.time_half_open), ("open", m.time_open)] {
            sample(out, "circuit_state_seconds_total", name, Some(("state", state)), seconds(time))?;
        }
    }
    header(out, "circuit_latency_seconds", "summary", "Latency of admitted calls (quantiles within 1.6 %).")?;
    for (name, m) in breakers() {
        let Some(l) = m.latency else { continue };
        for (q, d) in [("0.5", l.p50), ("0.95", l.p95), ("0.99", l.p99), ("1", l.max)] {
            sample(out, "circuit_latency_seconds", name, Some(("quantile", q)), seconds(d))?;
        }
        sample(out, "circuit_latency_seconds_sum", name, None, seconds(l.sum))?;
        sample(out, "circuit_latency_seconds_count", name, None, l.count as f64)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Text {
        buf: [u8; 64],
        len: usize,
    }

    impl Write for Text {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.buf.get_mut(self.len..end).ok_or(fmt::Error)?.copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Text { buf: [0; 64], len: 0 };
        escape_label(&mut out, "a\"b\\c\nd}").unwrap();
        assert_eq!(core::str::from_utf8(&out.buf[..out.len]).unwrap(), r#"a\"b\\c\nd}"#);
    }
}
