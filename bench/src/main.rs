//! `make bench`: halfopen, recloser 1.4 and failsafe 1.3 doing the same work
//! in one run, interleaved round by round so that machine noise hits all of
//! them alike. Prints ns/op medians over the rounds, ratios to recloser,
//! allocations per call, and the memory each breaker takes.
//!
//! Workloads:
//! - closed: admit a call and report a success;
//! - open: reject a call (the breaker has tripped).
//!
//! halfopen is measured three ways: with the caller's clock read per call
//! (`std::time::Instant::now()`, what a typical caller pays; recloser and
//! failsafe read no clock on the closed path and this one on the open path),
//! with a coarse clock read per call (`CLOCK_MONOTONIC_COARSE`), and with `now`
//! taken from a counter (the state machine alone).
//!
//! Note: recloser and failsafe are `Sync` (atomics, a mutex); a halfopen
//! `Breaker` is a plain `&mut` value, and a binding or caller that shares it
//! across threads adds its own lock.

use std::hint::black_box;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use failsafe::CircuitBreaker as _;
use halfopen::{
    Breaker, ConcurrencyLimit, Config, Duration, Instant, LatencyHistogram, Metrics, Outcome, Registry, Window,
};

mod alloc_count;
mod registry;
mod retention;

use alloc_count::{ALLOCATED_BYTES, ALLOCATIONS};

const OPS: u64 = 2_000_000;
const ROUNDS: usize = 9;

/// One contender: a name and a closure that runs `OPS` operations.
struct Contender {
    name: &'static str,
    run: Box<dyn FnMut()>,
    ns: Vec<f64>,
    allocations: u64,
}

impl Contender {
    fn new(name: &'static str, run: impl FnMut() + 'static) -> Self {
        Contender { name, run: Box::new(run), ns: Vec::new(), allocations: 0 }
    }
}

fn clock_now(origin: StdInstant) -> Instant {
    Instant::from_micros(origin.elapsed().as_micros() as u64)
}

/// `CLOCK_MONOTONIC_COARSE`: the kernel's tick-granular monotonic clock
/// (1–4 ms resolution, enough for breakers whose windows are seconds long),
/// read from the vDSO without the timer hardware. A caller can pick it
/// because the breaker takes `now` from outside.
fn coarse_now() -> Instant {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    Instant::from_micros(ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000)
}

/// `OPS` closed-state calls (admit, report a success) on `breaker`, each
/// with a `now` from `clock`.
fn closed_calls(config: Config, mut clock: impl FnMut() -> Instant + 'static) -> impl FnMut() + 'static {
    let mut breaker = Breaker::new(config).unwrap();
    move || {
        for _ in 0..OPS {
            let now = clock();
            let permit = breaker.try_acquire(now).decision.unwrap();
            black_box(breaker.record(permit, Outcome::Success, now).is_some());
        }
    }
}

/// A `now` that advances one microsecond per call, read through `black_box`.
fn counter() -> impl FnMut() -> Instant {
    let mut tick = 0u64;
    move || {
        tick += 1;
        Instant::from_micros(black_box(tick))
    }
}

fn closed_contenders() -> Vec<Contender> {
    let origin = StdInstant::now();
    let seed000 = Config::default();
    let consecutive = Config { failure_threshold: None, consecutive_failures: Some(5), ..Config::default() };
    let fixed = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(100)), ..Config::default() };
    let adaptive = Config { concurrency_limit: Some(ConcurrencyLimit::Adaptive { min: 1, max: 1_000 }), ..seed000 };
    let recloser = recloser::Recloser::custom().build();
    let failsafe = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            5,
            failsafe::backoff::constant(StdDuration::from_secs(30)),
        ))
        .build();
    vec![
        Contender::new(
            "halfopen, seed 000 window, clock read per call",
            closed_calls(seed000, move || clock_now(origin)),
        ),
        Contender::new("halfopen, seed 000 window, coarse clock read per call", closed_calls(seed000, coarse_now)),
        Contender::new(
            "halfopen, consecutive, clock read per call",
            closed_calls(consecutive, move || clock_now(origin)),
        ),
        Contender::new("halfopen, seed 000 window, no clock read", closed_calls(seed000, counter())),
        Contender::new("halfopen, seed 000 window + fixed limit, no clock read", closed_calls(fixed, counter())),
        Contender::new("halfopen, seed 000 window + adaptive limit, no clock read", closed_calls(adaptive, counter())),
        Contender::new("halfopen, consecutive, no clock read", closed_calls(consecutive, counter())),
        Contender::new("recloser 1.4 (count ring)", move || {
            for _ in 0..OPS {
                black_box(recloser.call(|| Ok::<u64, ()>(black_box(1))).ok());
            }
        }),
        Contender::new("failsafe 1.3 (consecutive)", move || {
            for _ in 0..OPS {
                black_box(failsafe.call(|| Ok::<u64, ()>(black_box(1))).ok());
            }
        }),
    ]
}

fn open_contenders() -> Vec<Contender> {
    let origin = StdInstant::now();
    let hour = StdDuration::from_secs(3600);
    let hour_open = Duration::from_secs(3600);
    let config = Config { open_timeout: hour_open, max_open_timeout: Some(hour_open), ..Config::default() };
    let mut halfopen = Breaker::new(config).unwrap();
    for _ in 0..5 {
        let now = clock_now(origin);
        let permit = halfopen.try_acquire(now).decision.unwrap();
        halfopen.record(permit, Outcome::Failure, now);
    }
    let mut halfopen_counter = halfopen.clone();
    let mut halfopen_coarse = halfopen.clone();
    let recloser = recloser::Recloser::custom().closed_len(2).error_rate(0.5).open_wait(hour).build();
    for _ in 0..4 {
        let _ = recloser.call(|| Err::<(), ()>(()));
    }
    let failsafe = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(1, failsafe::backoff::constant(hour)))
        .build();
    let _ = failsafe.call(|| Err::<(), ()>(()));
    assert!(recloser.call(|| Ok::<(), ()>(())).is_err(), "recloser must be open");
    assert!(!failsafe.is_call_permitted(), "failsafe must be open");
    let mut tick = 1_000_000u64;
    vec![
        Contender::new("halfopen, clock read per call", move || {
            for _ in 0..OPS {
                black_box(halfopen.try_acquire(clock_now(origin)).decision.is_err());
            }
        }),
        Contender::new("halfopen, coarse clock read per call", move || {
            for _ in 0..OPS {
                black_box(halfopen_coarse.try_acquire(coarse_now()).decision.is_err());
            }
        }),
        Contender::new("halfopen, no clock read", move || {
            for _ in 0..OPS {
                tick += 1;
                black_box(halfopen_counter.try_acquire(Instant::from_micros(black_box(tick))).decision.is_err());
            }
        }),
        Contender::new("recloser 1.4", move || {
            for _ in 0..OPS {
                black_box(recloser.call(|| Ok::<u64, ()>(black_box(1))).is_err());
            }
        }),
        Contender::new("failsafe 1.3", move || {
            for _ in 0..OPS {
                black_box(failsafe.call(|| Ok::<u64, ()>(black_box(1))).is_err());
            }
        }),
    ]
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(title: &str, mut contenders: Vec<Contender>) {
    for _ in 0..ROUNDS {
        for c in contenders.iter_mut() {
            let before = ALLOCATIONS.load(Relaxed);
            let start = StdInstant::now();
            (c.run)();
            let elapsed = start.elapsed();
            c.allocations += ALLOCATIONS.load(Relaxed) - before;
            c.ns.push(elapsed.as_nanos() as f64 / OPS as f64);
        }
    }
    let reference = contenders.iter().find(|c| c.name.starts_with("recloser")).map(|c| median(&c.ns)).unwrap();
    println!("\n### {title}\n");
    println!(
        "| contender | ns/op (median of {ROUNDS}) | min–max | × recloser | allocations in {} calls |",
        OPS * ROUNDS as u64
    );
    println!("|---|---:|---:|---:|---:|");
    for c in &contenders {
        let (lo, hi) = c.ns.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        println!(
            "| {} | {:.1} | {:.1}–{:.1} | {:.2} | {} |",
            c.name,
            median(&c.ns),
            lo,
            hi,
            median(&c.ns) / reference,
            c.allocations
        );
    }
}

/// Heap bytes allocated while `build` runs (and kept by what it returns).
fn heap_bytes<T>(build: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATED_BYTES.load(Relaxed);
    let value = build();
    (value, ALLOCATED_BYTES.load(Relaxed) - before)
}

fn sizes() {
    println!("\n### Memory per breaker\n");
    println!("| breaker | size_of (bytes) | heap bytes at construction |");
    println!("|---|---:|---:|");
    let shared = Config::default();
    let policies: [(&str, Config); 4] = [
        ("halfopen, consecutive failures", Config { failure_threshold: None, consecutive_failures: Some(5), ..shared }),
        (
            "halfopen, count window + failure rate",
            Config {
                failure_threshold: None,
                window: Window::Count(100),
                failure_rate_threshold: Some(50.0),
                ..shared
            },
        ),
        ("halfopen, time window (seed 000)", shared),
        (
            "halfopen, every policy at once",
            Config {
                consecutive_failures: Some(5),
                failure_rate_threshold: Some(50.0),
                slow_call_duration: Some(Duration::from_secs(10)),
                slow_call_rate_threshold: Some(50.0),
                ..shared
            },
        ),
    ];
    for (name, config) in &policies {
        let (b, heap) = heap_bytes(|| Breaker::new(config).unwrap());
        println!("| {name}, shared `&Config` | {} | {heap} |", size_of_val(&b));
        let (b, heap) = heap_bytes(|| Breaker::new(*config).unwrap());
        println!("| {name}, own `Config` | {} | {heap} |", size_of_val(&b));
    }
    // A limit's state is behind a pointer, made with the breaker.
    let limited = Config { concurrency_limit: Some(ConcurrencyLimit::Adaptive { min: 1, max: 100 }), ..shared };
    let (b, heap) = heap_bytes(|| Breaker::new(&limited).unwrap());
    println!("| halfopen, seed 000 + adaptive limit, shared `&Config` | {} | {heap} |", size_of_val(&b));
    let (b, heap) = heap_bytes(|| Breaker::with_meter(&shared, Metrics::default()).unwrap());
    println!("| halfopen, seed 000, shared config, with `Metrics` | {} | {heap} |", size_of_val(&b));
    let meter = (Metrics::default(), LatencyHistogram::default());
    let (b, heap) = heap_bytes(|| Breaker::with_meter(&shared, meter).unwrap());
    println!(
        "| halfopen, seed 000, shared config, with `Metrics` + `LatencyHistogram` | {} | {heap} |",
        size_of_val(&b)
    );
    let (r, heap) = heap_bytes(|| recloser::Recloser::custom().build());
    println!("| recloser 1.4, default (closed_len 100) | {} | {heap} |", size_of_val(&r));
    let (f, heap) = heap_bytes(|| failsafe::Config::new().build());
    println!("| failsafe 1.3, default | {} | {heap} |", size_of_val(&f));
    snapshot_sizes(&policies);
}

/// Bytes of a breaker's snapshot, JSON and compact, for each policy: new, and
/// after 5 failures (open, counts in its window).
fn snapshot_sizes(policies: &[(&str, Config)]) {
    println!("\n### Snapshot size (bytes, with `Metrics`)\n");
    println!("| breaker | JSON, new | compact, new | JSON, tripped | compact, tripped |");
    println!("|---|---:|---:|---:|---:|");
    for (name, config) in policies {
        let mut b = Breaker::with_meter(config, Metrics::default()).unwrap();
        let now = Instant::from_millis(3_600_000);
        let fresh = b.snapshot(now);
        for _ in 0..5 {
            let permit = b.try_acquire(now).decision.unwrap();
            b.record(permit, Outcome::Failure, now);
        }
        let tripped = b.snapshot(now);
        println!(
            "| {name} | {} | {} | {} | {} |",
            fresh.to_json().len(),
            fresh.to_bytes().len(),
            tripped.to_json().len(),
            tripped.to_bytes().len()
        );
    }
    let mut registry: Registry<Metrics> = Registry::new(Config::default(), 1_000).unwrap();
    for i in 0..1_000 {
        let b = registry.get(&format!("instance-{i:04}"), Instant::ZERO).unwrap();
        let permit = b.try_acquire(Instant::ZERO).decision.unwrap();
        b.record(permit, if i % 10 == 0 { Outcome::Failure } else { Outcome::Success }, Instant::ZERO);
    }
    let saved = registry.snapshot(Instant::from_millis(1_000));
    println!("| registry of 1,000 breakers (seed 000) | {} | {} | | |", saved.to_json().len(), saved.to_bytes().len());
}

fn main() {
    // `-- retention`: that part alone.
    if std::env::args().any(|a| a == "retention") {
        retention::report();
        return;
    }
    // `-- registry`: that table alone.
    if std::env::args().any(|a| a == "registry") {
        registry::report();
        return;
    }
    println!("halfopen bench: {OPS} ops per round, {ROUNDS} rounds, contenders interleaved in each round");
    measure("Closed state: acquire + record a success", closed_contenders());
    measure("Open state: reject a call", open_contenders());
    registry::report();
    retention::report();
    sizes();
}
