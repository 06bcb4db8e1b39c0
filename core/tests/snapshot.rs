//! Snapshots: what restoring refuses (corrupt, truncated, newer, another
//! config) and that a restored breaker behaves identically even under a clock
//! with another origin. (The property test in `model.rs` restores mid-sequence
//! too, and checks every answer against the reference model.)

use halfopen::{
    Breaker, Config, Counts, Duration, Elapsed, Instant, Metrics, Outcome, Registry, RegistrySnapshot,
    SNAPSHOT_VERSION, Snapshot, SnapshotError, Window,
};
use serde_json::Value;

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// A seed-000 breaker with metrics, tripped and reopened once (open for 60 s
/// from t = 40 s), with failures left in its window.
fn tripped() -> Breaker<Config, Metrics> {
    let config = Config { half_open_max_attempts: 1, half_open_successes: Some(1), ..Config::default() };
    let mut b = Breaker::with_meter(config, Metrics::default()).unwrap();
    for t in [0, 1_000, 2_000, 3_000, 4_000] {
        let p = b.try_acquire(ms(t)).decision.unwrap();
        b.record(p, Outcome::Failure, ms(t));
    }
    let p = b.try_acquire(ms(40_000)).decision.unwrap();
    b.record(p, Outcome::Failure, ms(40_000));
    b
}

fn json_with(snapshot: &Snapshot, edit: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(&snapshot.to_json()).unwrap();
    edit(&mut v);
    v.to_string()
}

fn restore_json(text: &str) -> Result<Breaker<Config, Metrics>, SnapshotError> {
    let config = *tripped().config();
    Breaker::restore(config, &Snapshot::from_json(text)?, ms(50_000), Elapsed::Ignored)
}

#[test]
fn a_round_trip_keeps_every_answer() {
    let b = tripped();
    let s = b.snapshot(ms(50_000));
    for restored in [Snapshot::from_json(&s.to_json()).unwrap(), Snapshot::from_bytes(&s.to_bytes()).unwrap()] {
        let r = Breaker::<Config, Metrics>::restore(*b.config(), &restored, ms(50_000), Elapsed::Ignored).unwrap();
        assert_eq!(r.retry_after(ms(50_000)), Some(Duration::from_secs(50)));
        assert_eq!(r.metrics(ms(50_000)), b.metrics(ms(50_000)));
        // A restored breaker starts a new generation (permits issued before
        // the snapshot are stale for it); every count is kept.
        let (was, is) = (b.counts(ms(50_000)), r.counts(ms(50_000)));
        assert_eq!(is.generation, was.generation + 1);
        assert_eq!(Counts { generation: was.generation, ..is }, was);
    }
}

#[test]
fn corrupt_fields_are_refused_with_what_is_wrong() {
    let s = tripped().snapshot(ms(50_000));
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 6] = [
        ("probes outside half-open", |v| v["probes_in_flight"] = 7.into()),
        ("open period", |v| v["open_for_us"] = 1.into()),
        ("deadline", |v| v["deadline_in_us"] = 400_000_000u64.into()),
        ("window bucket counts", |v| v["window"]["time"]["buckets"][0] = serde_json::json!([1, 2, 0])),
        ("window bucket position", |v| v["window"]["time"]["newest_slot"] = 8.into()),
        ("metrics counters", |v| v["metrics"]["counters"]["failures"] = 1_000.into()),
    ];
    for (what, edit) in cases {
        match restore_json(&json_with(&s, edit)) {
            Err(SnapshotError::Corrupt(got)) => assert_eq!(got, what),
            other => panic!("{what}: expected Corrupt, got {:?}", other.map(|_| ())),
        }
    }
    let unknown_phase = json_with(&s, |v| v["phase"] = "exploded".into());
    assert!(matches!(restore_json(&unknown_phase), Err(SnapshotError::Malformed(_))));
    let extra_field = json_with(&s, |v| v["surprise"] = 1.into());
    assert!(matches!(restore_json(&extra_field), Err(SnapshotError::Malformed(_))));
    let wrong_window = json_with(&s, |v| v["window"] = "off".into());
    assert_eq!(restore_json(&wrong_window).map(|_| ()), Err(SnapshotError::Corrupt("window kind")));
}

#[test]
fn a_newer_version_is_reported_as_such() {
    let s = tripped().snapshot(ms(50_000));
    let newer = json_with(&s, |v| v["version"] = (SNAPSHOT_VERSION + 1).into());
    let found = SNAPSHOT_VERSION + 1;
    assert_eq!(Snapshot::from_json(&newer), Err(SnapshotError::NewerVersion { found, supported: SNAPSHOT_VERSION }));
    let mut bytes = s.to_bytes();
    bytes[0] = 9;
    assert_eq!(
        Snapshot::from_bytes(&bytes),
        Err(SnapshotError::NewerVersion { found: 9, supported: SNAPSHOT_VERSION })
    );
    let mut direct = s.clone();
    direct.version = SNAPSHOT_VERSION + 2;
    let restored = Breaker::<Config, Metrics>::restore(*tripped().config(), &direct, ms(0), Elapsed::Ignored);
    assert!(matches!(restored, Err(SnapshotError::NewerVersion { found, .. }) if found == SNAPSHOT_VERSION + 2));
}

#[test]
fn a_format_2_snapshot_is_written_without_taken_at_and_refused_with_it() {
    let s = tripped().snapshot(ms(50_000));
    let mut v2 = s.clone();
    v2.version = 2;
    // Written as format 2 holds it: no `taken_at_us`, in either encoding.
    assert!(!v2.to_json().contains("taken_at_us"));
    // Less the option tag and the varint of 50,000,000 µs (4 bytes).
    assert_eq!(v2.to_bytes().len() + 5, s.to_bytes().len());
    let read = Snapshot::from_json(&v2.to_json()).expect("format 2 JSON is read");
    assert_eq!(Snapshot::from_bytes(&v2.to_bytes()), Ok(read.clone()));
    assert_eq!(read.to_json(), v2.to_json());
    // A format 2 snapshot that holds a time it was taken at is not one
    // (`null`, no time, reads as format 2 holds it).
    let json = json_with(&v2, |v| v["taken_at_us"] = 9_000.into());
    assert!(matches!(Snapshot::from_json(&json), Err(SnapshotError::Malformed(why)) if why.contains("taken_at_us")));
    // A format 3 snapshot may leave it out (it is optional), and is written back with it.
    let json = json_with(&s, |v| {
        v.as_object_mut().expect("an object").remove("taken_at_us");
    });
    let without = Snapshot::from_json(&json).expect("read without taken_at");
    assert!(without.to_json().contains(r#""taken_at_us":null"#));
}

#[test]
fn a_format_1_compact_snapshot_is_refused_as_malformed_but_its_json_restores() {
    let s = tripped().snapshot(ms(50_000));
    let mut v1 = s.clone();
    v1.version = 1;
    // Format 1 had no `limit` field: its JSON restores; its compact form
    // cannot be told apart from a garbled one, and is refused.
    let json = json_with(&v1, |v| {
        v.as_object_mut().expect("an object").remove("limit");
    });
    let restored = Snapshot::from_json(&json).expect("format 1 JSON is read");
    assert!(Breaker::<Config, Metrics>::restore(*tripped().config(), &restored, ms(0), Elapsed::Ignored).is_ok());
    let bytes = v1.to_bytes();
    match Snapshot::from_bytes(&bytes) {
        Err(SnapshotError::Malformed(why)) => assert!(why.contains("version 1"), "{why}"),
        other => panic!("expected malformed, got {other:?}"),
    }
    let mut older = s.clone();
    older.version = 0;
    assert_eq!(
        Breaker::<Config, Metrics>::restore(*tripped().config(), &older, ms(0), Elapsed::Ignored).map(|_| ()),
        Err(SnapshotError::Corrupt("version"))
    );
}

#[test]
fn a_limit_restored_on_a_clock_with_another_origin_gives_the_same_hints() {
    use halfopen::ConcurrencyLimit;
    let config = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(2)), ..Config::default() };
    let mut b = Breaker::with_meter(config, Metrics::default()).unwrap();
    // 2 calls a second for 40 s, then the limit full.
    for i in 0..80 {
        let p = b.try_acquire(ms(50_000 + i * 500)).decision.unwrap();
        b.record(p, Outcome::Success, ms(50_000 + i * 500 + 10));
    }
    let at = ms(90_000);
    let _ = (b.try_acquire(at).decision.unwrap(), b.try_acquire(at).decision.unwrap());
    let snapshot = b.snapshot(at);
    let continued = b.try_acquire(at).decision.unwrap_err().retry_after();
    // A new process whose clock starts at zero, a second after it.
    let mut restored = Breaker::<Config, Metrics>::restore(config, &snapshot, ms(1_000), Elapsed::Ignored).unwrap();
    let _ = (restored.try_acquire(ms(1_000)).decision.unwrap(), restored.try_acquire(ms(1_000)).decision.unwrap());
    assert_eq!(restored.try_acquire(ms(1_000)).decision.unwrap_err().retry_after(), continued);
}

#[test]
fn another_configuration_is_refused() {
    let s = tripped().snapshot(ms(50_000));
    let other = Config { open_timeout: Duration::from_secs(31), ..*tripped().config() };
    assert_eq!(
        Breaker::<Config, Metrics>::restore(other, &s, ms(0), Elapsed::Ignored).map(|_| ()),
        Err(SnapshotError::ConfigMismatch)
    );
}

#[test]
fn truncated_and_garbled_input_never_panics() {
    let s = tripped().snapshot(ms(50_000));
    let bytes = s.to_bytes();
    for len in 0..bytes.len() {
        assert!(Snapshot::from_bytes(&bytes[..len]).is_err(), "a {len}-byte prefix was accepted");
    }
    let text = s.to_json();
    for len in 0..text.len() {
        if text.is_char_boundary(len) {
            assert!(Snapshot::from_json(&text[..len]).is_err(), "a {len}-char prefix was accepted");
        }
    }
    // Every single-byte change either fails to decode, fails to restore, or
    // restores a breaker that answers without panicking.
    let config = *tripped().config();
    for i in 0..bytes.len() {
        for flip in [1u8, 0x80, 0xff] {
            let mut garbled = bytes.clone();
            garbled[i] ^= flip;
            if let Ok(decoded) = Snapshot::from_bytes(&garbled)
                && let Ok(mut b) = Breaker::<Config, Metrics>::restore(config, &decoded, ms(0), Elapsed::Ignored)
            {
                let admission = b.try_acquire(ms(1));
                if let Ok(p) = admission.decision {
                    b.record(p, Outcome::Failure, ms(2));
                }
                let _ = b.metrics(ms(3));
            }
        }
    }
}

/// Random edits of a snapshot's JSON text (characters deleted, inserted,
/// ranges repeated): decoding either fails with an error or gives a
/// snapshot; restoring that either fails or gives a breaker that answers.
/// Never a panic.
#[test]
fn randomly_edited_json_never_panics() {
    let text = tripped().snapshot(ms(50_000)).to_json();
    let alphabet: Vec<char> = "{}[]\",:0123456789-+.eEtrufalsn \\u\u{e9}".chars().collect();
    let config = *tripped().config();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |n: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % n
    };
    let (mut decoded, mut restored) = (0, 0);
    for _ in 0..20_000 {
        let mut chars: Vec<char> = text.chars().collect();
        for _ in 0..1 + random(3) {
            let at = random(chars.len());
            match random(3) {
                0 => {
                    chars.remove(at);
                }
                1 => chars.insert(at, alphabet[random(alphabet.len())]),
                _ => {
                    let end = (at + random(40)).min(chars.len());
                    let copy: Vec<char> = chars[at..end].to_vec();
                    chars.splice(at..at, copy);
                }
            }
        }
        let edited: String = chars.into_iter().collect();
        if let Ok(s) = Snapshot::from_json(&edited) {
            decoded += 1;
            if let Ok(mut b) = Breaker::<Config, Metrics>::restore(config, &s, ms(0), Elapsed::Ignored) {
                restored += 1;
                let _ = b.try_acquire(ms(1));
                let _ = b.metrics(ms(2));
            }
        }
        let _ = RegistrySnapshot::count_json(&edited);
    }
    // Some edits keep a snapshot (spaces, digits), most do not.
    assert!(decoded > 0 && decoded < 20_000, "{decoded} decoded");
    assert!(restored <= decoded);
}

#[test]
fn a_restored_breaker_behaves_identically_under_a_clock_with_another_origin() {
    let configs = [
        Config::default(),
        Config {
            failure_threshold: None,
            window: Window::Count(10),
            failure_rate_threshold: Some(50.0),
            ..Config::default()
        },
        // (Jitter is drawn per generation, and a restore starts one, so a
        // jittered breaker's later open periods differ from the original's;
        // the property test in model.rs checks them after restores.)
        Config::partner_webhook(),
    ];
    for config in configs {
        let mut original = Breaker::with_meter(config, Metrics::default()).unwrap();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut random = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut t = 5_000_000_000u64; // µs, the original process's clock
        let step = |b: &mut Breaker<Config, Metrics>, t: u64, fail: bool| {
            let now = Instant::from_micros(t);
            let admission = b.try_acquire(now);
            let decision =
                admission.decision.map(|p| b.record(p, if fail { Outcome::Failure } else { Outcome::Success }, now));
            (
                admission.transition.map(|x| (x.from, x.to, x.reason)),
                decision.map(|x| x.map(|x| (x.from, x.to, x.reason))).map_err(|r| r.retry_after()),
            )
        };
        for _ in 0..200 {
            t += random(3_000_000);
            let _ = step(&mut original, t, random(3) == 0);
        }
        // The new process's clock started 4.9 ks later: its `now` is smaller.
        let shift = 4_900_000_000u64;
        let mut restored = Breaker::<Config, Metrics>::restore(
            config,
            &original.snapshot(Instant::from_micros(t)),
            Instant::from_micros(t - shift),
            Elapsed::Ignored,
        )
        .unwrap();
        for _ in 0..2_000 {
            t += random(3_000_000);
            let fail = random(3) == 0;
            assert_eq!(step(&mut original, t, fail), step(&mut restored, t - shift, fail));
            let (a, b) = (original.counts(Instant::from_micros(t)), restored.counts(Instant::from_micros(t - shift)));
            assert_eq!(
                (a.window, a.consecutive_failures, a.probes_in_flight),
                (b.window, b.consecutive_failures, b.probes_in_flight)
            );
        }
        let (a, b) = (original.metrics(Instant::from_micros(t)), restored.metrics(Instant::from_micros(t - shift)));
        assert_eq!(
            (a.counters, a.time_open, a.time_closed, a.state),
            (b.counters, b.time_open, b.time_closed, b.state)
        );
    }
}

#[test]
fn a_registry_round_trip_keeps_breakers_and_recency() {
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 3).unwrap();
    for name in ["a", "b", "c"] {
        let b = registry.get(name, ms(0)).unwrap();
        let p = b.try_acquire(ms(0)).decision.unwrap();
        b.record(p, Outcome::Success, ms(0));
    }
    registry.get("a", ms(1)).unwrap(); // "b" is now the least recently used
    let saved = RegistrySnapshot::from_bytes(&registry.snapshot(ms(2)).to_bytes()).unwrap();
    let mut restored: Registry<Metrics> = Registry::new(Config::default(), 3).unwrap();
    restored.restore(&saved, ms(2), Elapsed::Ignored).unwrap();
    assert_eq!(restored.len(), 3);
    assert_eq!(restored.peek("c").unwrap().metrics(ms(2)).counters.successes, 1);
    restored.get("d", ms(3)).unwrap();
    assert!(restored.peek("b").is_none() && restored.peek("a").is_some() && restored.peek("c").is_some());

    let mut twice = saved.clone();
    twice.breakers.push(twice.breakers[0].clone());
    let mut bigger: Registry<Metrics> = Registry::new(Config::default(), 10).unwrap();
    assert_eq!(bigger.restore(&twice, ms(0), Elapsed::Ignored), Err(SnapshotError::Corrupt("a name appears twice")));
    assert!(bigger.is_empty(), "a failed restore leaves the registry as it was");
    let mut small: Registry<Metrics> = Registry::new(Config::default(), 2).unwrap();
    assert!(matches!(small.restore(&saved, ms(0), Elapsed::Ignored), Err(SnapshotError::Corrupt(_))));
}

#[test]
fn a_permit_issued_before_loading_an_older_snapshot_stays_stale() {
    let mut b = tripped();
    let old = b.snapshot(ms(40_000));
    // Later: half-open, then closed again, many generations on.
    for t in [101_000u64, 102_000, 103_000] {
        if let Ok(p) = b.try_acquire(ms(t)).decision {
            b.record(p, Outcome::Success, ms(t));
        }
    }
    let permit = b.try_acquire(ms(104_000)).decision.unwrap();
    let fresh = Breaker::<Config, Metrics>::restore(*b.config(), &old, ms(104_000), Elapsed::Ignored).unwrap();
    assert!(fresh.counts(ms(104_000)).generation <= permit.generation(), "restored alone, the permit could count");
    let loaded = fresh.metrics(ms(104_000)).counters;
    b.load(&old, ms(104_000), Elapsed::Ignored).unwrap();
    assert!(b.counts(ms(104_000)).generation > permit.generation(), "generations continue past the permit's");
    b.record(permit, Outcome::Failure, ms(104_001));
    let after = b.metrics(ms(104_001)).counters;
    assert_eq!(after.stale, loaded.stale + 1, "the old permit is stale");
    assert_eq!(after.failures, loaded.failures, "its failure counted nowhere");
    // A failed load changes nothing.
    let mut garbled = old.clone();
    garbled.version = 99;
    let counts = b.counts(ms(104_002));
    assert!(b.load(&garbled, ms(104_002), Elapsed::Ignored).is_err());
    assert_eq!(b.counts(ms(104_002)), counts);
}

#[test]
fn an_object_with_very_many_fields_is_refused_quickly() {
    let mut text = String::from("{");
    for i in 0..200_000 {
        text += &format!("\"k{i}\":0,");
    }
    text += "\"version\":2}";
    assert!(matches!(Snapshot::from_json(&text), Err(SnapshotError::Malformed(_))));
    assert!(matches!(RegistrySnapshot::count_json(&text), Err(SnapshotError::Malformed(_))));
}

#[test]
fn a_newer_registry_snapshot_is_reported_as_such_before_its_breakers_are_counted() {
    let found = SNAPSHOT_VERSION + 1;
    let newer = SnapshotError::NewerVersion { found, supported: SNAPSHOT_VERSION };
    assert_eq!(RegistrySnapshot::count_json(&format!(r#"{{"version":{found},"whatever":[]}}"#)), Err(newer.clone()));
    assert_eq!(RegistrySnapshot::count_bytes(&[found as u8]), Err(newer));
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 2).unwrap();
    let many = format!(r#"{{"version":{found},"breakers":[{}]}}"#, vec!["0"; 50].join(","));
    assert!(matches!(registry.restore_json(&many, ms(0), Elapsed::Ignored), Err(SnapshotError::NewerVersion { .. })));
}

#[test]
fn times_beyond_what_json_numbers_hold_are_saved_within_them_and_refused_when_forged() {
    let mut b = tripped();
    let _ = b.force_open(ms(50_000), Some(Duration::from_micros(u64::MAX / 2)));
    let s = b.snapshot(ms(50_000));
    let saved: Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(saved["deadline_in_us"], Value::from(halfopen::MAX_SAVED_COUNTER));
    let back = Breaker::<Config, Metrics>::restore(
        *b.config(),
        &Snapshot::from_json(&s.to_json()).unwrap(),
        ms(0),
        Elapsed::Ignored,
    );
    assert!(back.is_ok(), "a saved snapshot restores");
    let forged = json_with(&s, |v| v["deadline_in_us"] = Value::from(1u64 << 60));
    assert_eq!(restore_json(&forged).map(|_| ()), Err(SnapshotError::Corrupt("deadline")));
    let forged = json_with(&s, |v| v["metrics"]["time_in_us"][0] = Value::from(u64::MAX));
    assert!(matches!(restore_json(&forged), Err(SnapshotError::Corrupt(_))));
}

#[test]
fn a_breaker_at_the_end_of_time_saves_and_restores() {
    let end = Instant::from_micros(u64::MAX);
    let mut b = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
    let permit = b.try_acquire(end).decision.unwrap();
    b.record(permit, Outcome::Failure, end);
    let saved = b.snapshot(end);
    for decoded in [Snapshot::from_json(&saved.to_json()), Snapshot::from_bytes(&saved.to_bytes())] {
        let restored =
            Breaker::<Config, Metrics>::restore(*b.config(), &decoded.unwrap(), ms(0), Elapsed::Ignored).unwrap();
        assert_eq!(restored.counts(ms(0)).window.failures, 1);
    }
}

#[test]
fn a_counted_restore_keeps_now_as_the_latest_time_an_earlier_reading_counts_as_now() {
    // Tripped at 0, open 30 s; saved at 1 s; restored on the same clock at 100 s.
    let mut b = Breaker::new(Config::default()).unwrap();
    for _ in 0..5 {
        let p = b.try_acquire(ms(0)).decision.unwrap();
        b.record(p, Outcome::Failure, ms(0));
    }
    let saved = b.snapshot(ms(1_000));
    let mut restored = Breaker::<Config>::restore(Config::default(), &saved, ms(100_000), Elapsed::Counted).unwrap();
    assert_eq!(restored.state(ms(100_000)), halfopen::State::HalfOpen);
    // A reading from before the restore's `now` (a wall clock stepped back) is `now`: still half-open, admitted.
    assert_eq!(restored.state(ms(1_500)), halfopen::State::HalfOpen);
    assert!(restored.try_acquire(ms(1_500)).decision.is_ok());
}

/// A registry whose two breakers each saw a failure.
fn two_breakers() -> RegistrySnapshot {
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 10).unwrap();
    for name in ["a", "b"] {
        let b = registry.get(name, ms(0)).unwrap();
        let p = b.try_acquire(ms(0)).decision.unwrap();
        b.record(p, Outcome::Failure, ms(0));
    }
    registry.snapshot(ms(10))
}

#[test]
fn a_breaker_inside_a_registry_is_read_by_its_own_version_in_the_compact_form() {
    // A breaker of format 2 (read from stored JSON, say) inside a registry of
    // format 3, and breakers of format 3 inside a registry marked format 2:
    // each breaker's layout follows its own version, both ways.
    let mut older_breaker = two_breakers();
    older_breaker.breakers[0].1.version = 2;
    older_breaker.breakers[0].1 = Snapshot::from_json(&older_breaker.breakers[0].1.to_json()).unwrap();
    let mut older_registry = two_breakers();
    older_registry.version = 2;
    for r in [older_breaker, older_registry] {
        assert_eq!(RegistrySnapshot::from_bytes(&r.to_bytes()), Ok(r.clone()));
        assert_eq!(RegistrySnapshot::from_json(&r.to_json()), Ok(r.clone()));
        let mut restored: Registry<Metrics> = Registry::new(Config::default(), 10).unwrap();
        assert!(restored.restore_bytes(&r.to_bytes(), ms(20), Elapsed::Ignored).is_ok());
        assert_eq!(restored.peek("b").unwrap().counts(ms(20)).consecutive_failures, 1);
    }
}

#[test]
fn a_newer_breaker_inside_a_registry_is_reported_as_such() {
    let mut r = two_breakers();
    r.breakers[1].1.version = SNAPSHOT_VERSION + 1;
    let newer = SnapshotError::NewerVersion { found: SNAPSHOT_VERSION + 1, supported: SNAPSHOT_VERSION };
    assert_eq!(RegistrySnapshot::from_json(&r.to_json()), Err(newer.clone()));
    // Its compact layout is unknown to this build: malformed.
    assert!(matches!(RegistrySnapshot::from_bytes(&r.to_bytes()), Err(SnapshotError::Malformed(_))));
}

#[test]
fn a_format_1_compact_registry_is_refused_before_its_breakers_are_counted() {
    let mut r = two_breakers();
    r.version = 1;
    assert!(
        matches!(RegistrySnapshot::count_bytes(&r.to_bytes()), Err(SnapshotError::Malformed(why)) if why.contains("version 1"))
    );
    assert_eq!(RegistrySnapshot::count_json(&r.to_json()), Ok(2));
}
