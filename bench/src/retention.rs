//! Retention: messages per second through a dispatcher (submitted and
//! delivered at once while closed; retained while open; released after
//! recovery, paced by a concurrency limit of 100), and the memory a retained
//! message costs (the dispatcher's own bookkeeping; the message is a `u64`).

use std::hint::black_box;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant as StdInstant;

use halfopen::retention::{Reported, RetentionConfig, RetentionQueue, Submitted};
use halfopen::{Breaker, ConcurrencyLimit, Config, Instant, Metrics, Outcome};

use crate::alloc_count::LIVE_BYTES;

const MESSAGES: u64 = 1_000_000;
const ROUNDS: usize = 5;

fn dispatcher() -> RetentionQueue<u64> {
    let config = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(100)), ..Config::partner_webhook() };
    RetentionQueue::new(Breaker::with_meter(config, Metrics::default()).unwrap(), RetentionConfig::default()).unwrap()
}

/// Median messages per second of `run` over the rounds.
fn rate(mut run: impl FnMut() -> u64) -> f64 {
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = StdInstant::now();
            let n = run();
            n as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[ROUNDS / 2]
}

pub(crate) fn report() {
    println!("\n### Retention: a dispatcher with seed 001's breaker and a concurrency limit of 100\n");
    println!("| what | messages/s (median of {ROUNDS}) |\n|---|---:|");
    let closed = rate(|| {
        let mut d = dispatcher();
        for i in 0..MESSAGES {
            let now = Instant::from_micros(i);
            let Ok(Submitted::Send(seq)) = d.submit(i, 100, now) else { panic!("closed: sent at once") };
            black_box(d.report(seq, Outcome::Success, now));
        }
        MESSAGES
    });
    println!("| closed: submit, sent at once, delivered | {closed:.0} |");
    let (mut retain_rate, mut release_rate) = (Vec::new(), Vec::new());
    let mut bytes_per_message = 0;
    for _ in 0..ROUNDS {
        let mut d = dispatcher();
        d.breaker_mut().force_open(Instant::ZERO, None);
        let before = LIVE_BYTES.load(Relaxed);
        let start = StdInstant::now();
        for i in 0..MESSAGES {
            black_box(d.submit(i, 100, Instant::from_micros(i)).ok());
        }
        retain_rate.push(MESSAGES as f64 / start.elapsed().as_secs_f64());
        bytes_per_message = (LIVE_BYTES.load(Relaxed) - before) / MESSAGES;
        let now = Instant::from_millis(10_000);
        d.breaker_mut().force_close(now);
        let start = StdInstant::now();
        let mut delivered = 0;
        while d.retained() > 0 {
            let sent: Vec<u64> = std::iter::from_fn(|| d.next(now)).collect();
            for seq in sent {
                if let Some(Reported::Delivered(_)) = d.report(seq, Outcome::Success, now) {
                    delivered += 1;
                }
            }
        }
        assert_eq!(delivered, MESSAGES);
        release_rate.push(MESSAGES as f64 / start.elapsed().as_secs_f64());
    }
    for rates in [&mut retain_rate, &mut release_rate] {
        rates.sort_by(f64::total_cmp);
    }
    println!("| open: submit, retained | {:.0} |", retain_rate[ROUNDS / 2]);
    println!("| recovered: released 100 at a time, delivered | {:.0} |", release_rate[ROUNDS / 2]);
    println!(
        "\nMemory per retained message: {bytes_per_message} bytes (a `u64` message; the dispatcher's queue entry)"
    );
}
