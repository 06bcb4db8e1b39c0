//! The registry's bookkeeping of calls in flight, reconfiguration and its
//! bounds (the conformance suite covers eviction and per-key configs).

use halfopen::{Config, Elapsed, Instant, Metrics, Outcome, Reason, Registry, RegistryError, State};

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

#[test]
fn a_breaker_with_a_call_in_flight_is_never_evicted() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 1).unwrap();
    let permit = r.try_acquire("a", ms(0)).unwrap().decision.unwrap();
    assert!(!r.has_room(ms(1)));
    assert_eq!(r.try_acquire("b", ms(1)).unwrap_err(), RegistryError::Full { capacity: 1 });
    assert_eq!(r.record("a", permit, Outcome::Success, ms(2)), None);
    let a = r.peek("a").unwrap().metrics(ms(2)).counters;
    assert_eq!((a.admitted, a.successes), (1, 1));
    assert!(r.has_room(ms(3)));
    assert!(r.try_acquire("b", ms(3)).unwrap().decision.is_ok());
    assert_eq!(r.evictions(), 1);
    // A report for a name that lost its breaker does not make one.
    let late = halfopen::Permit::from_parts(0, ms(0));
    assert_eq!(r.record("a", late, Outcome::Failure, ms(4)), None);
    assert!(r.peek("a").is_none());
}

#[test]
fn the_name_evicted_last_is_told() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 2).unwrap();
    r.get("a", ms(0)).unwrap();
    r.get("b", ms(1)).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (0, None));
    // The least recently used idle breaker goes: "a", then "b" (a name
    // longer than the inline form too).
    let long = "a name longer than twenty-two bytes";
    r.get(long, ms(2)).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (1, Some("a")));
    r.get("c", ms(3)).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (2, Some("b")));
    r.get("d", ms(4)).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (3, Some(long)));
    // A name already held evicts nothing.
    r.get("d", ms(5)).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (3, Some(long)));
    // A restore keeps the count it restores, and no name.
    let snapshot = r.snapshot(ms(6));
    r.restore(&snapshot, ms(6), Elapsed::Ignored).unwrap();
    assert_eq!((r.evictions(), r.last_evicted()), (3, None));
}

#[test]
fn calls_handed_over_under_a_licence_hold_their_name_until_reported() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 1).unwrap();
    let mut alone = halfopen::Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
    let generation = r.get("a", ms(0)).unwrap().counts(ms(0)).generation;
    // Three calls admitted under the licence, one of them already a success.
    assert_eq!(r.hand_over("a", 3, ms(1), generation, 1, ms(2)), None);
    alone.hand_over(3, ms(1), generation, 1, ms(2));
    assert!(!r.has_room(ms(3)), "two calls out: not evictable");
    assert_eq!(r.try_acquire("b", ms(3)).unwrap_err(), RegistryError::Full { capacity: 1 });
    // The other two succeed: the name is idle again, and counted as alone.
    assert_eq!(r.hand_over("a", 0, ms(4), generation, 2, ms(4)), None);
    alone.hand_over(0, ms(4), generation, 2, ms(4));
    assert_eq!(r.peek("a").unwrap().metrics(ms(4)), alone.metrics(ms(4)));
    assert!(r.has_room(ms(5)));
    // Rejections counted under a licence reach the breaker's meter.
    r.get("a", ms(5)).unwrap().force_open(ms(5), None);
    r.count_rejections("a", 4, ms(6));
    assert_eq!(r.peek("a").unwrap().metrics(ms(6)).counters.rejections, 4);
    // For a name without a breaker, nothing is made.
    assert_eq!(r.hand_over("b", 1, ms(7), 0, 1, ms(7)), None);
    r.count_rejections("b", 1, ms(7));
    assert!(r.peek("b").is_none());
}

#[test]
fn has_room_predicts_the_next_insertion_exactly() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 40).unwrap();
    for i in 0..40 {
        let name = format!("k{i}");
        if i % 3 == 0 {
            r.get(&name, ms(0)).unwrap().force_open(ms(0), None);
        } else {
            let p = r.try_acquire(&name, ms(0)).unwrap().decision.unwrap();
            if i % 2 == 0 {
                r.record(&name, p, Outcome::Success, ms(0));
            } else {
                let _ = p; // never reported: the call stays in flight
            }
        }
    }
    for i in 0..200 {
        let predicted = r.has_room(ms(1));
        let got = r.try_acquire(&format!("new{i}"), ms(1)).map(|a| a.decision.is_ok());
        assert_eq!(predicted, got.is_ok(), "insertion {i}");
    }
}

#[test]
fn reconfiguring_an_open_breaker_closes_it_with_a_transition_and_keeps_its_calls_out() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 1).unwrap();
    let old = r.try_acquire("a", ms(0)).unwrap().decision.unwrap();
    r.get("a", ms(0)).unwrap().force_open(ms(0), None);
    let t = r.configure("a", Config { failure_threshold: Some(1), ..Config::default() }, ms(5)).unwrap().unwrap();
    assert_eq!((t.from, t.to, t.reason, t.at), (State::Open, State::Closed, Reason::Reconfigured, ms(5)));
    // The old call is still out: "a" cannot be evicted for "b".
    assert!(!r.has_room(ms(5)));
    // Its report reaches no breaker: the new one's metrics still add up.
    assert_eq!(r.record("a", old, Outcome::Failure, ms(6)), None);
    let b = r.peek("a").unwrap();
    assert_eq!(b.state(ms(6)), State::Closed);
    assert_eq!(b.metrics(ms(6)).counters, halfopen::Counters::default());
    assert!(r.has_room(ms(6)));
    let saved = r.snapshot(ms(6));
    r.restore(&saved, ms(6), Elapsed::Ignored).expect("the registry restores its own snapshot");
    // A closed breaker is replaced without a transition.
    assert_eq!(r.configure("a", Config::default(), ms(7)).unwrap(), None);
}

#[test]
fn per_name_configurations_are_bounded_by_the_capacity() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 2).unwrap();
    r.configure("a", Config::default(), ms(0)).unwrap();
    r.configure("b", Config::default(), ms(0)).unwrap();
    r.configure("a", Config::partner_webhook(), ms(0)).unwrap();
    assert_eq!(
        r.configure("c", Config::default(), ms(0)).unwrap_err(),
        RegistryError::TooManyConfigured { capacity: 2 }
    );
}

#[test]
fn a_snapshot_with_more_breakers_than_the_capacity_is_refused_before_decoding() {
    let mut big: Registry<Metrics> = Registry::new(Config::default(), 100).unwrap();
    for i in 0..50 {
        big.get(&format!("k{i}"), ms(0)).unwrap();
    }
    let snapshot = big.snapshot(ms(0));
    let (json, bytes) = (snapshot.to_json(), snapshot.to_bytes());
    assert_eq!(halfopen::RegistrySnapshot::count_json(&json), Ok(50));
    assert_eq!(halfopen::RegistrySnapshot::count_bytes(&bytes), Ok(50));
    let mut small: Registry<Metrics> = Registry::new(Config::default(), 10).unwrap();
    let refused = Err(halfopen::SnapshotError::Corrupt("more breakers than the registry's capacity"));
    assert_eq!(small.restore_json(&json, ms(0), Elapsed::Ignored), refused);
    assert_eq!(small.restore_bytes(&bytes, ms(0), Elapsed::Ignored), refused);
    // A snapshot whose entries are garbage is refused by the count only if it is too long.
    let garbage = format!("{{\"version\":1,\"evictions\":0,\"breakers\":[{}]}}", ["1"; 11].join(","));
    assert_eq!(small.restore_json(&garbage, ms(0), Elapsed::Ignored), refused);
    let mut fits: Registry<Metrics> = Registry::new(Config::default(), 50).unwrap();
    assert_eq!(fits.restore_json(&json, ms(0), Elapsed::Ignored), Ok(vec![]));
    assert_eq!(fits.len(), 50);
}

#[test]
fn a_restore_keeps_calls_in_flight_in_flight_and_their_reports_stale() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 2).unwrap();
    r.get("a", ms(0)).unwrap();
    r.get("gone", ms(0)).unwrap();
    let saved = r.snapshot(ms(0));
    // After the snapshot: a call on "a", and one on "gone", which the
    // snapshot below will not hold.
    let on_a = r.try_acquire("a", ms(1)).unwrap().decision.unwrap();
    let on_gone = r.try_acquire("gone", ms(1)).unwrap().decision.unwrap();
    let mut without_gone = saved.clone();
    without_gone.breakers.retain(|(name, _)| name != "gone");
    r.restore(&without_gone, ms(2), Elapsed::Ignored).unwrap();
    // "a" is busy: a new key cannot evict it; its late report reaches no
    // breaker (the restored one's metrics add up), and frees it.
    let on_b = r.try_acquire("b", ms(3)).unwrap().decision.unwrap();
    assert_eq!(r.try_acquire("c", ms(3)).unwrap_err(), RegistryError::Full { capacity: 2 });
    // A refused insertion keeps what it knows of "gone"'s call out.
    assert_eq!(r.try_acquire("gone", ms(3)).unwrap_err(), RegistryError::Full { capacity: 2 });
    assert_eq!(r.record("a", on_a, Outcome::Failure, ms(4)), None);
    let a = r.peek("a").unwrap().metrics(ms(4)).counters;
    assert_eq!((a.admitted, a.failures, a.stale), (0, 0, 0));
    r.record("b", on_b, Outcome::Success, ms(5));
    // A breaker made again for "gone" counts neither the old call, nor its
    // report against its own calls in flight.
    let mine = r.try_acquire("gone", ms(6)).unwrap().decision.unwrap();
    assert_eq!(r.record("gone", on_gone, Outcome::Failure, ms(7)), None);
    let gone = r.peek("gone").unwrap().metrics(ms(7)).counters;
    assert_eq!((gone.admitted, gone.failures, gone.stale), (1, 0, 0));
    // "gone"'s own call keeps it: with "a" busy too, a new key is refused.
    let on_a = r.try_acquire("a", ms(7)).unwrap().decision.unwrap();
    assert!(!r.has_room(ms(7)), "its own call is still out");
    r.record("gone", mine, Outcome::Success, ms(8));
    r.record("a", on_a, Outcome::Success, ms(8));
    assert_eq!(r.peek("gone").unwrap().metrics(ms(8)).counters.successes, 1);
    let saved = r.snapshot(ms(8));
    r.restore(&saved, ms(8), Elapsed::Ignored).expect("the registry restores its own snapshot");
}

#[test]
fn a_restore_that_drops_an_open_breaker_says_it_closed() {
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 4).unwrap();
    let empty = r.snapshot(ms(0));
    r.get("a", ms(0)).unwrap().force_open(ms(0), None);
    let changed = r.restore(&empty, ms(1), Elapsed::Ignored).unwrap();
    let (from, to, reason) = (changed[0].1.from, changed[0].1.to, changed[0].1.reason);
    assert_eq!((changed[0].0.as_str(), from, to, reason), ("a", State::Open, State::Closed, Reason::Restored));
}

#[test]
fn a_rate_breaker_with_calls_in_its_window_is_not_idle() {
    let rate = Config {
        failure_threshold: None,
        failure_rate_threshold: Some(50.0),
        window: halfopen::Window::Count(10),
        ..Config::default()
    };
    let mut r: Registry<Metrics> = Registry::new(rate, 1).unwrap();
    for _ in 0..9 {
        let p = r.try_acquire("a", ms(0)).unwrap().decision.unwrap();
        r.record("a", p, Outcome::Success, ms(0));
    }
    // Forgetting "a" would forget the 9 successes its rate counts.
    assert!(!r.has_room(ms(1)));
}

#[test]
fn a_restore_reports_each_state_it_changes() {
    let mut open: Registry<Metrics> = Registry::new(Config::default(), 4).unwrap();
    open.get("a", ms(0)).unwrap().force_open(ms(0), None);
    let saved = open.snapshot(ms(0));
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 4).unwrap();
    r.get("a", ms(0)).unwrap();
    let changed = r.restore(&saved, ms(1), Elapsed::Ignored).unwrap();
    assert_eq!(changed.len(), 1);
    let (name, t) = &changed[0];
    assert_eq!((name.as_str(), t.from, t.to, t.reason), ("a", State::Closed, State::Open, Reason::Restored));
    assert!(r.restore(&saved, ms(2), Elapsed::Ignored).unwrap().is_empty(), "nothing changes the second time");
}

#[test]
fn a_call_admitted_before_a_reconfiguration_is_counted_out_when_generations_wrap() {
    // A breaker restored at generation 2^32 - 2 continues at 2^32 - 1: its
    // permit's generation is the last before the count wraps to 0.
    let mut source: Registry<Metrics> = Registry::new(Config::default(), 1).unwrap();
    source.get("a", ms(0)).unwrap();
    let mut snapshot = source.snapshot(ms(0));
    let mut saved: serde_json::Value = serde_json::from_str(&snapshot.breakers[0].1.to_json()).unwrap();
    saved["generation"] = serde_json::Value::from(u32::MAX - 1);
    snapshot.breakers[0].1 = halfopen::Snapshot::from_json(&saved.to_string()).unwrap();
    let mut r: Registry<Metrics> = Registry::new(Config::default(), 1).unwrap();
    r.restore(&snapshot, ms(0), Elapsed::Ignored).unwrap();
    let permit = r.try_acquire("a", ms(1)).unwrap().decision.unwrap();
    assert_eq!(permit.generation(), u32::MAX);
    // Reconfigured: the new breaker starts at generation 0; the call in
    // flight belongs to the one before.
    r.configure("a", Config::default(), ms(2)).unwrap();
    assert!(!r.has_room(ms(3)), "a call in flight keeps the name");
    r.record("a", permit, Outcome::Success, ms(3));
    assert!(r.has_room(ms(4)), "its report counted it out");
    assert!(r.try_acquire("b", ms(4)).unwrap().decision.is_ok());
}
