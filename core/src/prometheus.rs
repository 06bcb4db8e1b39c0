//! The Prometheus text exposition format (version 0.0.4) for breakers'
//! [`MetricsReading`]s, written to any [`core::fmt::Write`] without allocating.
//!
//! Names follow seed 000: `circuit_state{name="..."}` (0 closed, 1 half-open,
//! 2 open), `circuit_failures_total`, `circuit_opens_total`, and more under the
//! same prefix. Label values are escaped as the format requires (backslash,
//! double quote, newline), so a hostile breaker name cannot add lines or
//! labels.
//!
//! Values are written exactly, without float formatting: counts as integers,
//! times in seconds as decimals of whole microseconds (`1.5`, `0.000007`),
//! the error ratio rounded to six decimals. (The same text on every target,
//! and no float formatting code in the WebAssembly builds.)

use core::fmt::{self, Write};

use crate::metrics::MetricsReading;
use crate::time::Duration;

/// One metric family: its name, type, help, and how to read its value from
/// a reading `R` (`None`: that one has no sample in the family).
pub(crate) struct Family<R> {
    pub(crate) name: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) help: &'static str,
    pub(crate) value: fn(&R) -> Option<Value>,
}

/// A sample's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// A whole number.
    Count(u64),
    /// Millionths, written as a decimal: seconds from microseconds, ratios.
    Millionths(u64),
}

fn seconds(d: Duration) -> Value {
    Value::Millionths(d.as_micros())
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Millionths(n) => {
                write!(f, "{}", n / 1_000_000)?;
                let (mut fraction, mut digits) = (n % 1_000_000, 6);
                if fraction == 0 {
                    return Ok(());
                }
                while fraction % 10 == 0 {
                    fraction /= 10;
                    digits -= 1;
                }
                write!(f, ".{fraction:0digits$}")
            }
        }
    }
}

const FAMILIES: &[Family<MetricsReading>] = &[
    Family {
        name: "circuit_state",
        kind: "gauge",
        help: "Breaker state: 0 closed, 1 half-open, 2 open.",
        value: |m| Some(Value::Count(m.state.gauge().into())),
    },
    Family {
        name: "circuit_failures_total",
        kind: "counter",
        help: "Calls counted as failures (slow calls included).",
        value: |m| Some(Value::Count(m.counters.failures)),
    },
    Family {
        name: "circuit_opens_total",
        kind: "counter",
        help: "Transitions to open.",
        value: |m| Some(Value::Count(m.counters.opens)),
    },
    Family {
        name: "circuit_calls_admitted_total",
        kind: "counter",
        help: "Calls admitted.",
        value: |m| Some(Value::Count(m.counters.admitted)),
    },
    Family {
        name: "circuit_calls_rejected_total",
        kind: "counter",
        help: "Calls rejected without reaching the upstream.",
        value: |m| Some(Value::Count(m.counters.rejections)),
    },
    Family {
        name: "circuit_successes_total",
        kind: "counter",
        help: "Calls that succeeded in time.",
        value: |m| Some(Value::Count(m.counters.successes)),
    },
    Family {
        name: "circuit_slow_calls_total",
        kind: "counter",
        help: "Calls slower than the slow-call threshold.",
        value: |m| Some(Value::Count(m.counters.slow)),
    },
    Family {
        name: "circuit_ignored_total",
        kind: "counter",
        help: "Calls whose error was ignored.",
        value: |m| Some(Value::Count(m.counters.ignored)),
    },
    Family {
        name: "circuit_cancelled_total",
        kind: "counter",
        help: "Calls the caller gave up on.",
        value: |m| Some(Value::Count(m.counters.cancelled)),
    },
    Family {
        name: "circuit_stale_results_total",
        kind: "counter",
        help: "Results reported after the state period they belonged to.",
        value: |m| Some(Value::Count(m.counters.stale)),
    },
    Family {
        name: "circuit_opens_last_24h",
        kind: "gauge",
        help: "Transitions to open in the last 24 hours (counted per hour).",
        value: |m| Some(Value::Count(m.opens_last_24h.into())),
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
        // A percentage from 0 to 100: its ten-thousandths are millionths of
        // the ratio, rounded half up (no `f64::round` without std).
        value: |m| m.error_rate.map(|p| Value::Millionths((p * 10_000.0 + 0.5) as u64)),
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

fn sample(out: &mut impl Write, name: &str, breaker: &str, extra: Option<(&str, &str)>, value: Value) -> fmt::Result {
    write!(out, "{name}{{name=\"")?;
    escape_label(out, breaker)?;
    out.write_char('"')?;
    if let Some((label, v)) = extra {
        write!(out, ",{label}=\"{v}\"")?;
    }
    writeln!(out, "}} {value}")
}

/// Writes each of `families` for the `(name, reading)` pairs that `items`
/// yields (called once per family, so each family's samples stay together).
pub(crate) fn render_families<'a, R, I>(
    out: &mut impl Write,
    families: &[Family<R>],
    items: impl Fn() -> I,
) -> fmt::Result
where
    I: Iterator<Item = (&'a str, R)>,
{
    for family in families {
        header(out, family.name, family.kind, family.help)?;
        for (name, reading) in items() {
            if let Some(value) = (family.value)(&reading) {
                sample(out, family.name, name, None, value)?;
            }
        }
    }
    Ok(())
}

/// Writes every metric family for the `(name, snapshot)` pairs that
/// `breakers` yields (called once per family, so each family's samples stay
/// together as the format requires).
pub fn render<'a, I>(out: &mut impl Write, breakers: impl Fn() -> I) -> fmt::Result
where
    I: Iterator<Item = (&'a str, MetricsReading)>,
{
    render_families(out, FAMILIES, &breakers)?;
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
        sample(out, "circuit_latency_seconds_count", name, None, Value::Count(l.count))?;
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

    fn check(v: Value, expected: &str) {
        let mut out = Text { buf: [0; 64], len: 0 };
        write!(out, "{v}").unwrap();
        assert_eq!(core::str::from_utf8(&out.buf[..out.len]).unwrap(), expected);
    }

    #[test]
    fn values_are_written_exactly() {
        check(Value::Count(0), "0");
        check(Value::Count(9_007_199_254_740_993), "9007199254740993");
        check(Value::Millionths(0), "0");
        check(Value::Millionths(30_000_000), "30");
        check(Value::Millionths(1_500_000), "1.5");
        check(Value::Millionths(7), "0.000007");
        check(Value::Millionths(86_400_000_123_450), "86400000.12345");
        // Below 10^15 microseconds (31 years) this is what printing the
        // seconds as an `f64` gives.
        for us in [1, 999_999, 123_456_789, 999_999_999_999_999] {
            let mut f64_text = Text { buf: [0; 64], len: 0 };
            write!(f64_text, "{}", us as f64 / 1e6).unwrap();
            check(Value::Millionths(us), core::str::from_utf8(&f64_text.buf[..f64_text.len]).unwrap());
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Text { buf: [0; 64], len: 0 };
        escape_label(&mut out, "a\"b\\c\nd}").unwrap();
        assert_eq!(core::str::from_utf8(&out.buf[..out.len]).unwrap(), r#"a\"b\\c\nd}"#);
    }
}
