//! Prints the Prometheus text exposition of a small registry: four breakers
//! (one open, one half-open, two closed, one with a hostile name that tries to
//! inject a sample), each with metrics and a latency histogram; then a
//! retention dispatcher's figures (one message retained, one in flight, one
//! dead letter).
//!
//! `make test` pipes this into `tests/check_prometheus.py`, which parses it
//! with the `prometheus_client` package's parser.

use halfopen::retention::{RetentionConfig, RetentionQueue, exposition};
use halfopen::{Breaker, ConcurrencyLimit, Config, Instant, LatencyHistogram, Metrics, Outcome, Registry};

/// Names the check expects, in order of first use.
const NAMES: [&str; 4] =
    ["instance-1", "instance-2", "evil\"} 1\ncircuit_state{name=\"injected", "back\\slash ünïcode"];

fn main() {
    let mut registry: Registry<(Metrics, LatencyHistogram)> =
        Registry::new(Config::default(), 100).expect("valid config and capacity");
    let ms = Instant::from_millis;
    for (i, name) in NAMES.iter().enumerate() {
        let breaker = registry.get(name, ms(0)).expect("room for four");
        for call in 0..20u64 {
            let permit = breaker.try_acquire(ms(call * 100)).decision.expect("closed");
            let outcome = if i < 2 && call >= 15 { Outcome::Failure } else { Outcome::Success };
            breaker.record(permit, outcome, ms(call * 100 + 40 + call));
        }
    }
    // Both instances tripped (5 failures). A throttle webhook holds
    // instance-1 open; instance-2, 30 s later, has a probe in flight.
    registry.get(NAMES[0], ms(20_000)).expect("held").force_open(ms(20_000), None);
    let probing = registry.get(NAMES[1], ms(40_000)).expect("held");
    let _probe = probing.try_acquire(ms(40_000)).decision.expect("half-open admits a probe");
    let mut text = String::new();
    registry.render_prometheus(&mut text, ms(40_000)).expect("writing to a String cannot fail");
    // A partner's dispatcher (one send at a time): the first message is
    // refused by the partner (a dead letter), the second is out, the third
    // waits.
    let breaker = Config { concurrency_limit: Some(ConcurrencyLimit::Fixed(1)), ..Config::partner_webhook() };
    let breaker = Breaker::with_meter(breaker, Metrics::default()).expect("valid");
    let mut partner: RetentionQueue<&str> = RetentionQueue::new(breaker, RetentionConfig::default()).expect("paced");
    for (message, bytes) in [("first", 100), ("second", 50), ("third", 25)] {
        partner.submit(message, bytes, ms(0)).expect("unbounded");
    }
    partner.report(0, Outcome::Ignored, ms(1)).expect("the first was sent");
    partner.next(ms(2)).expect("the second goes");
    let reading = partner.reading();
    exposition::render(&mut text, || std::iter::once(("partner-a", reading))).expect("writing to a String cannot fail");
    print!("{text}");
}
