//! The group's Prometheus families, beside each grouped breaker's own
//! (`prometheus.rs`): whether the breaker decides alone because its
//! group's store failed, and the group's state as last answered.

use core::fmt::Write;

use super::protocol::GroupPhase;
use crate::prometheus::{Family, Value, render_families};

/// What the exposition shows of one breaker's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupReading {
    /// It decides alone: its store failed or was late.
    pub degraded: bool,
    /// The group's phase as last answered (none before an answer, and
    /// since the store failed).
    pub phase: Option<GroupPhase>,
}

const FAMILIES: &[Family<GroupReading>] = &[
    Family {
        name: "circuit_group_degraded",
        kind: "gauge",
        help: "1 while the breaker decides alone because its group's store failed or was late, else 0.",
        value: |g| Some(Value::Count(g.degraded.into())),
    },
    Family {
        name: "circuit_group_state",
        kind: "gauge",
        help: "The group's state as its store last answered: 0 closed, 1 half-open, 2 open.",
        value: |g| g.phase.map(|p| Value::Count(p.gauge().into())),
    },
];

/// Writes the group families for the `(name, reading)` pairs `groups`
/// yields (called once per family). Nothing for no group.
pub fn render<'a, I>(out: &mut impl Write, groups: impl Fn() -> I) -> core::fmt::Result
where
    I: Iterator<Item = (&'a str, GroupReading)>,
{
    if groups().next().is_none() {
        return Ok(());
    }
    render_families(out, FAMILIES, groups)
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use alloc::string::String;

    use super::*;

    #[test]
    fn a_grouped_breaker_shows_whether_it_is_alone_and_the_group_s_state() {
        let mut out = String::new();
        let readings = [
            ("a", GroupReading { degraded: false, phase: Some(GroupPhase::Closed) }),
            ("b\"", GroupReading { degraded: true, phase: None }),
        ];
        render(&mut out, || readings.iter().copied()).unwrap();
        assert_eq!(
            out,
            "# HELP circuit_group_degraded 1 while the breaker decides alone because its group's store failed or \
             was late, else 0.\n# TYPE circuit_group_degraded gauge\ncircuit_group_degraded{name=\"a\"} 0\n\
             circuit_group_degraded{name=\"b\\\"\"} 1\n# HELP circuit_group_state The group's state as its store \
             last answered: 0 closed, 1 half-open, 2 open.\n# TYPE circuit_group_state gauge\n\
             circuit_group_state{name=\"a\"} 0\n"
        );
        let mut none = String::new();
        render(&mut none, core::iter::empty).unwrap();
        assert!(none.is_empty(), "no group, no family");
    }
}
