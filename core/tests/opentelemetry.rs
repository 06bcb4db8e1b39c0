//! The OpenTelemetry table against the Prometheus exposition it mirrors:
//! every series of a full exposition (breakers with latency, a registry, a
//! group, a dispatcher) has exactly one instrument, every instrument has a
//! series, descriptions are the families' help, kinds match the families'
//! types, and the table's JSON is what the bindings parse.

use std::collections::{BTreeMap, BTreeSet};

use halfopen::group::{GroupPhase, GroupReading};
use halfopen::opentelemetry::{INSTRUMENTS, InstrumentKind, instrument_for, write_json};
use halfopen::retention::{RetentionReading, exposition};
use halfopen::{Config, Instant, LatencyHistogram, Metrics, Outcome, Registry};

/// A full exposition: two breakers (one with latency), a registry, a group, a dispatcher.
fn exposition_text() -> String {
    let mut registry: Registry<(Metrics, LatencyHistogram)> = Registry::new(Config::default(), 10).unwrap();
    let ms = Instant::from_millis;
    for name in ["a", "b"] {
        let breaker = registry.get(name, ms(0)).unwrap();
        let permit = breaker.try_acquire(ms(0)).decision.unwrap();
        breaker.record(permit, Outcome::Success, ms(40));
    }
    // One opening, so that the mean time open has a value.
    registry.get("b", ms(50)).unwrap().force_open(ms(50), None);
    registry.get("b", ms(80)).unwrap().force_close(ms(80));
    let mut text = String::new();
    registry.render_prometheus(&mut text, ms(100)).unwrap();
    let group = GroupReading { degraded: true, phase: Some(GroupPhase::Closed) };
    halfopen::group::render_prometheus(&mut text, || std::iter::once(("a", group))).unwrap();
    let reading = RetentionReading { retained: 1, bytes: 2, in_flight: 3, ..Default::default() };
    exposition::render(&mut text, || std::iter::once(("q", reading))).unwrap();
    text
}

/// Every series: `(sample name, extra label)`.
type Series = BTreeSet<(String, Option<String>)>;
/// Each family's help and type.
type Families = BTreeMap<String, (String, String)>;

/// The series of every sample line, and each family's help and type.
fn parse(text: &str) -> (Series, Families) {
    let (mut series, mut families) = (Series::new(), Families::new());
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            families.entry(name.into()).or_default().0 = help.into();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.entry(name.into()).or_default().1 = kind.into();
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            // The names here hold no comma or quote: the extra label follows `",`.
            let extra = line.split_once("\",").map(|(_, rest)| rest.split('=').next().unwrap().to_owned());
            series.insert((name.to_owned(), extra));
        }
    }
    (series, families)
}

#[test]
fn every_series_has_one_instrument_and_every_instrument_a_series() {
    let (series, families) = parse(&exposition_text());
    for (sample, label) in &series {
        let matching =
            INSTRUMENTS.iter().filter(|i| i.sample == sample && i.label.map(|(l, _)| l) == label.as_deref()).count();
        assert_eq!(matching, 1, "{sample} {label:?}");
        assert!(instrument_for(sample, label.as_deref()).is_some());
    }
    for i in INSTRUMENTS {
        assert!(
            series.contains(&(i.sample.to_owned(), i.label.map(|(l, _)| l.to_owned()))),
            "{} reports no series",
            i.name
        );
        if let Some((help, kind)) = families.get(i.sample) {
            assert_eq!(i.description, help, "{}", i.name);
            let expected = match kind.as_str() {
                "counter" => InstrumentKind::Counter,
                "summary" => InstrumentKind::Gauge,
                _ => i.kind,
            };
            assert_eq!(i.kind, expected, "{}", i.name);
            if kind == "gauge" {
                assert_ne!(i.kind, InstrumentKind::Counter, "{}", i.name);
            }
        } else {
            // A summary's `_sum` and `_count`: totals.
            assert!(i.sample.ends_with("_sum") || i.sample.ends_with("_count"), "{}", i.sample);
            assert_eq!(i.kind, InstrumentKind::Counter);
        }
    }
}

#[test]
fn names_follow_opentelemetry_conventions() {
    let names: BTreeSet<_> = INSTRUMENTS.iter().map(|i| i.name).collect();
    assert_eq!(names.len(), INSTRUMENTS.len(), "one row per instrument");
    for i in INSTRUMENTS {
        assert!(i.name.starts_with("circuit."), "{}", i.name);
        assert!(i.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_' || b.is_ascii_digit()));
        assert!(!i.name.ends_with("_total") && !i.name.ends_with("_seconds") && !i.name.ends_with("_bytes"));
        // A name is never also a namespace of another.
        assert!(!names.iter().any(|other| other.starts_with(&format!("{}.", i.name))), "{}", i.name);
        // Seconds where the exposition has seconds, bytes where it has bytes.
        assert_eq!(i.unit == "s", i.sample.contains("_seconds") && !i.sample.ends_with("_count"), "{}", i.name);
        assert_eq!(i.unit == "By", i.sample.ends_with("_bytes"), "{}", i.name);
    }
}

#[test]
fn json_is_the_table() {
    let mut text = String::new();
    write_json(&mut text).unwrap();
    let parsed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed.len(), INSTRUMENTS.len());
    for (json, i) in parsed.iter().zip(INSTRUMENTS) {
        assert_eq!(json["name"], i.name);
        assert_eq!(json["kind"], i.kind.as_str());
        assert_eq!(json["unit"], i.unit);
        assert_eq!(json["description"], i.description);
        assert_eq!(json["sample"], i.sample);
        assert_eq!(json["label"].as_str(), i.label.map(|(l, _)| l));
        assert_eq!(json["attribute"].as_str(), i.label.map(|(_, a)| a));
    }
}
