//! Fixtures: the snapshot encodings of a few breakers and a registry, byte
//! for byte; they must never change within a format. `encodings.txt` is
//! format 3 (with `taken_at_us`); `encodings-v2.txt` is the same breakers in
//! format 2, first written by serde_json and postcard before the encodings
//! were written by hand: still read, and written back byte for byte.

use halfopen::{
    Breaker, ConcurrencyLimit, Config, Elapsed, Instant, Metrics, Outcome, Registry, RegistrySnapshot, Snapshot, Window,
};

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn drive(b: &mut Breaker<Config, Metrics>, steps: &[(u64, Outcome)]) {
    for &(t, outcome) in steps {
        if let Ok(p) = b.try_acquire(ms(t)).decision {
            b.record(p, outcome, ms(t + 7));
        }
    }
}

/// The configurations of [`breakers`], in order.
fn configs() -> [Config; 3] {
    let counted = Config {
        window: Window::Count(20),
        failure_rate_threshold: Some(0.5),
        minimum_calls: 4,
        concurrency_limit: Some(ConcurrencyLimit::Adaptive { min: 2, max: 40 }),
        ..Config::default()
    };
    [Config::default(), counted, Config { half_open_max_attempts: 2, ..Config::default() }]
}

/// A tripped seed-000 breaker; a count-window breaker with an adaptive
/// limit; one half-open without metrics.
fn breakers() -> Vec<Snapshot> {
    let f = Outcome::Failure;
    let s = Outcome::Success;
    let [seed, counted, probes] = configs();
    let mut tripped = Breaker::with_meter(seed, Metrics::default()).unwrap();
    drive(&mut tripped, &[(0, f), (1_000, f), (2_000, s), (3_000, f), (4_000, f), (5_000, f), (6_000, f)]);
    let mut limited = Breaker::with_meter(counted, Metrics::default()).unwrap();
    drive(&mut limited, &[(0, s), (10, f), (20, s), (30, Outcome::Ignored), (40, f), (50, s)]);
    let mut plain = Breaker::new(probes).unwrap();
    for t in 0..5 {
        let p = plain.try_acquire(ms(t)).decision.unwrap();
        plain.record(p, f, ms(t));
    }
    let _probe = plain.try_acquire(ms(40_000)).decision.unwrap();
    vec![tripped.snapshot(ms(9_000)), limited.snapshot(ms(100)), plain.snapshot(ms(40_001))]
}

fn registry() -> RegistrySnapshot {
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 8).unwrap();
    for name in ["plain", "quote\" back\\slash", "line\nfeed\u{1}\u{7f}", "é ☃ 😀"] {
        let b = registry.get(name, ms(0)).unwrap();
        let p = b.try_acquire(ms(0)).decision.unwrap();
        b.record(p, Outcome::Failure, ms(3));
    }
    registry.snapshot(ms(10))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fixture lines: the JSON and the compact bytes (hex) of each, in order.
fn fixtures() -> Vec<(String, Vec<u8>)> {
    parse(include_str!("fixtures/encodings.txt"))
}

fn parse(text: &str) -> Vec<(String, Vec<u8>)> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(2)
        .map(|pair| {
            let json = pair[0].strip_prefix("JSON ").unwrap().to_string();
            let hex = pair[1].strip_prefix("BYTES ").unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (json, bytes)
        })
        .collect()
}

#[test]
fn breakers_encode_and_decode_exactly_as_the_fixtures() {
    let fixtures = fixtures();
    for (i, s) in breakers().into_iter().enumerate() {
        let (json, bytes) = &fixtures[i];
        assert_eq!(&s.to_json(), json, "breaker {i} in JSON");
        assert_eq!(&s.to_bytes(), bytes, "breaker {i} in bytes ({})", hex(&s.to_bytes()));
        assert_eq!(Snapshot::from_json(json).unwrap(), s);
        assert_eq!(Snapshot::from_bytes(bytes).unwrap(), s);
    }
}

#[test]
fn a_registry_encodes_and_decodes_exactly_as_the_fixture() {
    let (json, bytes) = &fixtures()[3];
    let r = registry();
    assert_eq!(&r.to_json(), json);
    assert_eq!(&r.to_bytes(), bytes, "{}", hex(&r.to_bytes()));
    assert_eq!(RegistrySnapshot::from_json(json).unwrap(), r);
    assert_eq!(RegistrySnapshot::from_bytes(bytes).unwrap(), r);
    assert_eq!(RegistrySnapshot::count_json(json), Ok(4));
    assert_eq!(RegistrySnapshot::count_bytes(bytes), Ok(4));
}

#[test]
fn format_2_fixtures_are_read_and_written_back_byte_for_byte() {
    let v2 = parse(include_str!("fixtures/encodings-v2.txt"));
    for (i, s) in breakers().into_iter().enumerate() {
        let (json, bytes) = &v2[i];
        let from_json = Snapshot::from_json(json).unwrap();
        assert_eq!(Snapshot::from_bytes(bytes).unwrap(), from_json, "breaker {i}");
        assert_eq!(from_json.version, 2);
        assert_eq!(&from_json.to_json(), json, "breaker {i} in JSON");
        assert_eq!(&from_json.to_bytes(), bytes, "breaker {i} in bytes");
        // The same state as format 3 holds, less the time it was taken at.
        // Without taken_at a restore counting the time between counts none.
        let now = Instant::from_millis(50_000);
        let config = configs()[i];
        let metered = |s: &Snapshot, elapsed| Breaker::<Config, Metrics>::restore(config, s, now, elapsed);
        let plain = |s: &Snapshot, elapsed| Breaker::<Config>::restore(config, s, now, elapsed);
        let (old, new) = if i == 2 {
            (
                plain(&from_json, Elapsed::Counted).unwrap().snapshot(now),
                plain(&s, Elapsed::Ignored).unwrap().snapshot(now),
            )
        } else {
            (
                metered(&from_json, Elapsed::Counted).unwrap().snapshot(now),
                metered(&s, Elapsed::Ignored).unwrap().snapshot(now),
            )
        };
        assert_eq!(old, new, "breaker {i} restored");
    }
    let (json, bytes) = &v2[3];
    let r = RegistrySnapshot::from_json(json).unwrap();
    assert_eq!(RegistrySnapshot::from_bytes(bytes).unwrap(), r);
    assert_eq!((&r.to_json(), &r.to_bytes()), (json, bytes));
}
