//! Prints the Prometheus text exposition of a small registry: four breakers
//! (one open, one half-open, two closed, one with a hostile name that tries to
//! inject a sample), each with metrics and a latency histogram.
//!
//! `make test` pipes this into `tests/check_prometheus.py`, which parses it
//! with the `prometheus_client` package's parser.

use halfopen::{Config, Instant, LatencyHistogram, Metrics, Outcome, Registry};

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
    print!("{text}");
}
