//! The concurrency limit's invariants over random call sequences (with
//! trips, manual operations, restores and, in half the sequences, calls
//! given up):
//! - the calls the breaker counts in flight are exactly the permits admitted
//!   and not yet reported nor given up, whatever the state changes between
//!   (in flight = admitted − reported − given up; a stale report frees its
//!   slot; a restore gives up every call before it); with give-ups, never
//!   more than those;
//! - a call is admitted only while fewer than the limit are in flight, and
//!   refused for the limit only when that many are (a disabled breaker
//!   admits everything);
//! - an adaptive limit stays within its bounds; every limit refusal has a
//!   hint between 1 µs and a tenth of `open_timeout`;
//! - calls are given up only when that is due: the limit refused a call,
//!   or a probe was admitted, at least `probe_timeout` before (and since the
//!   previous give-up or state change).
//!
//! `HALFOPEN_LIMIT_SEQUENCES` sets the number of sequences (default 3,000).

use halfopen::{
    Breaker, ConcurrencyLimit, Config, Duration, Elapsed, Instant, Metrics, Mode, Outcome, Permit, State, Wait,
};

mod common;
use common::Rng;

fn random_config(rng: &mut Rng) -> Config {
    let limit = if rng.chance(40) {
        ConcurrencyLimit::Fixed(1 + rng.below(6) as u32)
    } else {
        let min = 1 + rng.below(4) as u32;
        ConcurrencyLimit::Adaptive { min, max: min + rng.below(20) as u32 }
    };
    Config {
        failure_threshold: Some(1 + rng.below(8) as u32),
        window: halfopen::Window::Time(Duration::from_millis(100 + rng.below(5_000))),
        open_timeout: Duration::from_millis(1 + rng.below(2_000)),
        // Half the sequences never give a call up, so that the count of
        // calls in flight can be checked exactly.
        probe_timeout: if rng.chance(50) {
            Duration::from_secs(1_000_000)
        } else {
            Duration::from_millis(1 + rng.below(3_000))
        },
        half_open_max_attempts: 1 + rng.below(4) as u16,
        slow_call_duration: rng.chance(30).then(|| Duration::from_millis(1 + rng.below(200))),
        concurrency_limit: Some(limit),
        ..Config::default()
    }
}

fn run_sequence(seed: u64, steps: usize, refusals: &mut u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let config = random_config(&mut rng);
    let mut b = Breaker::with_meter(config, Metrics::default()).expect("valid config");
    let mut outstanding: Vec<Permit> = Vec::new();
    // Permits from before a restore: the restored breaker holds no slot for them.
    let mut dropped: Vec<Permit> = Vec::new();
    let exact = config.probe_timeout == Duration::from_secs(1_000_000);
    let mut now = Instant::ZERO;
    let ctx = |step: usize, what: &str| format!("seed {seed} step {step}: {what} ({config:?})");
    // Since the latest give-up or state change: the first refusal for the
    // limit, and the latest probe admitted (what may make a give-up due).
    let mut refused_at: Option<Instant> = None;
    let mut probe_at: Option<Instant> = None;
    for step in 0..steps {
        now = now + Duration::from_micros(if rng.chance(30) { 0 } else { rng.below(400_000) });
        let before = b.counts(now);
        // What may make a give-up due in this step (before the step changes it).
        let due_by = [refused_at, probe_at];
        let mut admitted_now = false;
        let reset = |changed: bool, refused_at: &mut Option<Instant>, probe_at: &mut Option<Instant>| {
            if changed {
                *refused_at = None;
                *probe_at = None;
            }
        };
        match rng.below(100) {
            0..50 => {
                let admission = b.try_acquire(now);
                reset(admission.transition.is_some(), &mut refused_at, &mut probe_at);
                let disabled = b.mode(now) == Mode::Disabled;
                // The counts as the admission saw them (a due timed change applied).
                let seen = if admission.transition.is_some() { None } else { Some(before) };
                match admission.decision {
                    Ok(permit) => {
                        if let Some(seen) = seen
                            && !disabled
                        {
                            let limit = seen.concurrency_limit.expect("a limit is set");
                            assert!(seen.in_flight < limit, "{}", ctx(step, "admitted over the limit"));
                        }
                        if b.state(now) == State::HalfOpen {
                            probe_at = Some(now);
                        }
                        admitted_now = true;
                        outstanding.push(permit);
                    }
                    Err(rejection) => {
                        if let Wait::LimitFull { retry } = rejection.wait {
                            *refusals += 1;
                            refused_at.get_or_insert(now);
                            assert!(!disabled, "{}", ctx(step, "a disabled breaker refused"));
                            let counts = b.counts(now);
                            assert!(
                                counts.in_flight >= counts.concurrency_limit.unwrap(),
                                "{}",
                                ctx(step, "refused with room")
                            );
                            let ceiling = Duration::from_micros((config.open_timeout.as_micros() / 10).max(1));
                            assert!(retry.as_micros() >= 1 && retry <= ceiling, "{}", ctx(step, "hint"));
                        }
                    }
                }
            }
            50..88 if !outstanding.is_empty() => {
                let permit = outstanding.swap_remove(rng.below(outstanding.len() as u64) as usize);
                let outcome = [
                    Outcome::Success,
                    Outcome::Success,
                    Outcome::Success,
                    Outcome::Failure,
                    Outcome::Ignored,
                    Outcome::Cancelled,
                ][rng.below(6) as usize];
                let transition = b.record(permit, outcome, now);
                reset(transition.is_some(), &mut refused_at, &mut probe_at);
            }
            88..90 if !dropped.is_empty() => {
                let permit = dropped.swap_remove(rng.below(dropped.len() as u64) as usize);
                let in_flight = b.counts(now).in_flight;
                let transition = b.record(permit, Outcome::Success, now);
                reset(transition.is_some(), &mut refused_at, &mut probe_at);
                if exact {
                    assert_eq!(b.counts(now).in_flight, in_flight, "{}", ctx(step, "a dropped permit freed a slot"));
                }
            }
            90..95 => {
                let d = rng.chance(50).then(|| Duration::from_millis(1 + rng.below(500)));
                let _ = match rng.below(5) {
                    0 => b.force_open(now, d),
                    1 => b.force_close(now),
                    2 => b.disable(now),
                    3 => b.release(now),
                    _ => b.reset(now),
                };
                // An operation that started a new state period (not `release`
                // of nothing) starts the give-up's time again.
                reset(b.counts(now).generation != before.generation, &mut refused_at, &mut probe_at);
            }
            95..97 => {
                let snapshot = b.snapshot(now);
                b = Breaker::restore(config, &snapshot, now, Elapsed::Ignored).expect("a snapshot restores");
                dropped.append(&mut outstanding);
                reset(true, &mut refused_at, &mut probe_at);
            }
            _ => {
                let transition = b.handle_timeout(now);
                reset(transition.is_some(), &mut refused_at, &mut probe_at);
            }
        }
        let counts = b.counts(now);
        let held = outstanding.len() as u32;
        if exact {
            assert_eq!(counts.in_flight, held, "{}", ctx(step, "in flight"));
        } else if counts.in_flight < held {
            // Calls were given up (or are due to be, in this read): it must be due.
            let due = |at: Option<Instant>| at.is_some_and(|t| now >= t + config.probe_timeout);
            assert!(due_by.into_iter().any(due), "{}", ctx(step, "calls given up before it was due"));
            // Only a call admitted in this step, after the give-up, still holds a slot.
            let keep = if admitted_now && counts.in_flight == 1 { outstanding.pop() } else { None };
            assert_eq!(counts.in_flight, u32::from(keep.is_some()), "{}", ctx(step, "a give-up frees every slot"));
            dropped.append(&mut outstanding);
            refused_at = None;
            // A probe admitted after the give-up starts its own time.
            if keep.is_none() {
                probe_at = None;
            }
            outstanding.extend(keep);
        }
        let limit = counts.concurrency_limit.expect("a limit is set");
        match config.concurrency_limit {
            Some(ConcurrencyLimit::Fixed(n)) => assert_eq!(limit, n),
            Some(ConcurrencyLimit::Adaptive { min, max }) => {
                assert!((min..=max).contains(&limit), "{}", ctx(step, "adaptive limit out of bounds"));
            }
            None => unreachable!(),
        }
    }
}

#[test]
fn the_limit_counts_every_slot_and_never_admits_over_it() {
    let sequences: u64 = std::env::var("HALFOPEN_LIMIT_SEQUENCES").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000);
    let mut refusals = 0;
    for seed in 0..sequences {
        run_sequence(seed, 150, &mut refusals);
    }
    println!("limit: {sequences} sequences; {refusals} refusals for the limit");
    assert!(refusals > sequences, "the sequences must reach the limit: {refusals} refusals");
}
