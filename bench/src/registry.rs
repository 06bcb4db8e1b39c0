//! The registry at scale: memory for 1,000,000 breakers, and the cost of a
//! lookup plus an acquire on a random key among them.

use std::hint::black_box;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant as StdInstant;

use std::collections::HashMap;
use std::sync::Arc;

use halfopen::{Breaker, Config, Instant, Keyed, Metrics, Registry};

use crate::alloc_count::LIVE_BYTES;

const KEYS: usize = 1_000_000;
const LOOKUPS: usize = 2_000_000;
const ROUNDS: usize = 5;

/// Where breakers are looked up by name: the registry, or (the baseline) a
/// plain `HashMap` with no bound and no eviction.
trait Lookup {
    fn build(names: &[String]) -> Self;
    fn lookup(&mut self, name: &str, now: Instant) -> &mut Keyed<()>;
}

impl Lookup for Registry<()> {
    fn build(names: &[String]) -> Self {
        let mut registry = Registry::new(Config::default(), names.len()).unwrap();
        for name in names {
            registry.get(name, Instant::ZERO).unwrap();
        }
        registry
    }
    fn lookup(&mut self, name: &str, now: Instant) -> &mut Keyed<()> {
        self.get(name, now).unwrap()
    }
}

impl Lookup for HashMap<String, Keyed<()>> {
    fn build(names: &[String]) -> Self {
        let config = Arc::new(Config::default());
        names.iter().map(|n| (n.clone(), Breaker::new(config.clone()).unwrap())).collect()
    }
    fn lookup(&mut self, name: &str, _now: Instant) -> &mut Keyed<()> {
        self.get_mut(name).unwrap()
    }
}

/// A registry whose breakers keep metrics (its breakers have another type).
struct Metered(Registry<Metrics>);

/// Builds `T` over `names`; returns it with the heap bytes it holds.
fn measure_build<T>(names: &[String], build: impl FnOnce(&[String]) -> T) -> (T, u64) {
    let before = LIVE_BYTES.load(Relaxed);
    let built = build(names);
    (built, LIVE_BYTES.load(Relaxed) - before + size_of::<T>() as u64)
}

/// Writes `n` in decimal into `digits`, right-aligned, zero-padded.
fn spell(digits: &mut [u8], mut n: usize) {
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Median ns per `get` + `try_acquire` on keys drawn at random: uniformly
/// over all keys, or (`hot`) 90 % of the time from 1 % of them, as traffic
/// concentrated on busy instances is.
fn lookups(mut acquire: impl FnMut(&str, Instant) -> bool, keys: usize, hot: bool) -> f64 {
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let order: Vec<usize> = (0..LOOKUPS)
        .map(|_| {
            let among = if hot && next() % 10 != 0 { keys / 100 } else { keys };
            (next() % among as u64) as usize
        })
        .collect();
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = StdInstant::now();
            for &i in &order {
                // The caller's key is at hand (just parsed from its job), so
                // it is spelled here rather than read from a 1M-entry table.
                let mut key = *b"instance-0000000";
                spell(&mut key[9..], i);
                let key = std::str::from_utf8(&key).unwrap();
                let now = Instant::from_micros(black_box(i as u64));
                black_box(acquire(key, now));
            }
            start.elapsed().as_nanos() as f64 / LOOKUPS as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn print_row(what: &str, keys: usize, bytes: u64, uniform: f64, hot: f64) {
    println!(
        "| {what} | {keys} | {:.1} MB | {:.0} B | {uniform:.0} | {hot:.0} |",
        bytes as f64 / 1e6,
        bytes as f64 / keys as f64
    );
}

fn row<T: Lookup>(what: &str, keys: usize) {
    let names: Vec<String> = (0..keys).map(|i| format!("instance-{i:07}")).collect();
    let (mut map, bytes) = measure_build(&names, T::build);
    drop(names);
    let mut acquire = |key: &str, now| map.lookup(key, now).try_acquire(now).decision.is_ok();
    let uniform = lookups(&mut acquire, keys, false);
    let hot = lookups(&mut acquire, keys, true);
    print_row(what, keys, bytes, uniform, hot);
}

fn metered_row() {
    let names: Vec<String> = (0..KEYS).map(|i| format!("instance-{i:07}")).collect();
    let (mut map, bytes) = measure_build(&names, |names| {
        let mut registry = Registry::<Metrics>::new(Config::default(), names.len()).unwrap();
        for name in names {
            registry.get(name, Instant::ZERO).unwrap();
        }
        Metered(registry)
    });
    drop(names);
    let mut acquire = |key: &str, now| map.0.get(key, now).unwrap().try_acquire(now).decision.is_ok();
    let uniform = lookups(&mut acquire, KEYS, false);
    let hot = lookups(&mut acquire, KEYS, true);
    print_row("`Registry<Metrics>` (the default: metrics per breaker)", KEYS, bytes, uniform, hot);
}

/// Prints the registry table.
pub fn report() {
    println!("\n### Registry (keys like `instance-0000042`)\n");
    println!(
        "| map | breakers | memory | per breaker | ns per lookup + acquire, uniform keys | same, 90 % on 1 % of keys |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    row::<Registry<()>>("`Registry<()>` (no metrics)", KEYS);
    metered_row();
    row::<HashMap<String, Keyed<()>>>("baseline: `std::collections::HashMap<String, Breaker>`, unbounded", KEYS);
    row::<Registry<()>>("`Registry<()>`, small enough for the cache", KEYS / 100);
}
