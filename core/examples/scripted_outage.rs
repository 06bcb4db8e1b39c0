//! `make demo`: a sender pushes 10 messages a second through seed 000's
//! breaker to an upstream that follows a fixed script (healthy, rate-limited,
//! down, recovering, healthy). Time is simulated: the breaker gets `now` from
//! the script, so five simulated minutes run in milliseconds, and every run
//! prints the same thing.
//!
//! Each transition is printed with its time and reason; at the end, what the
//! breaker saved compared with sending everything anyway.

use halfopen::{Breaker, Config, Instant, Outcome, Transition, Window};

/// How the upstream answers a call that starts at `t_ms`.
struct Phase {
    until_ms: u64,
    what: &'static str,
    /// One call in `fail_every` fails (1: all fail; 0: none fail).
    fail_every: u64,
    /// Time the upstream takes to answer.
    latency_ms: u64,
}

const SCRIPT: &[Phase] = &[
    Phase { until_ms: 60_000, what: "healthy", fail_every: 0, latency_ms: 200 },
    Phase { until_ms: 75_000, what: "rate-limiting: 429 on one call in three", fail_every: 3, latency_ms: 400 },
    Phase { until_ms: 150_000, what: "down: every call fails", fail_every: 1, latency_ms: 2_000 },
    Phase { until_ms: 200_000, what: "recovering: one call in two fails", fail_every: 2, latency_ms: 800 },
    Phase { until_ms: 300_000, what: "healthy again", fail_every: 0, latency_ms: 200 },
];

const SEND_EVERY_MS: u64 = 100;

fn phase_at(t_ms: u64) -> &'static Phase {
    SCRIPT.iter().find(|p| t_ms < p.until_ms).unwrap_or(&SCRIPT[SCRIPT.len() - 1])
}

fn show(t: Transition) {
    println!(
        "  t={:>7.1}s  {:<9} -> {:<9} ({})",
        t.at.as_millis() as f64 / 1000.0,
        t.from.name(),
        t.to.name(),
        t.reason.name()
    );
}

fn main() {
    let config = Config::whatsapp_gateway();
    let mut breaker = Breaker::new(config).expect("the preset is valid");
    let Window::Time(window) = config.window else { unreachable!("seed 000 counts over time") };
    println!(
        "halfopen demo: seed 000's breaker ({} failures in {} s open it for {} s, doubling to {} s; {} probes)",
        config.failure_threshold.unwrap_or_default(),
        window.as_millis() / 1000,
        config.open_timeout.as_millis() / 1000,
        config.open_timeout_cap().as_millis() / 1000,
        config.half_open_max_attempts,
    );
    println!("a sender offers a message every {SEND_EVERY_MS} ms to an upstream that follows this script:");
    let mut from = 0;
    for p in SCRIPT {
        println!("  {:>3}-{:<3} s  {}", from / 1000, p.until_ms / 1000, p.what);
        from = p.until_ms;
    }
    println!("\ntransitions:");

    // Calls in flight: (answer time, permit, outcome).
    let mut in_flight = Vec::new();
    let (mut offered, mut sent, mut failed, mut held_back, mut failed_without) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let end = SCRIPT[SCRIPT.len() - 1].until_ms;
    for t_ms in (0..end).step_by(SEND_EVERY_MS as usize) {
        // Deliver the answers due by now, in time order.
        in_flight.sort_by_key(|(at, _, _)| *at);
        while in_flight.first().is_some_and(|(at, _, _)| *at <= t_ms) {
            let (at, permit, outcome) = in_flight.remove(0);
            breaker.record(permit, outcome, Instant::from_millis(at)).into_iter().for_each(show);
        }
        offered += 1;
        let phase = phase_at(t_ms);
        let fails = phase.fail_every != 0 && offered % phase.fail_every == 0;
        failed_without += u64::from(fails);
        let admission = breaker.try_acquire(Instant::from_millis(t_ms));
        admission.transition.into_iter().for_each(show);
        match admission.decision {
            Ok(permit) => {
                sent += 1;
                failed += u64::from(fails);
                let outcome = if fails { Outcome::Failure } else { Outcome::Success };
                in_flight.push((t_ms + phase.latency_ms, permit, outcome));
            }
            Err(_) => held_back += 1,
        }
    }
    let now = Instant::from_millis(end);
    println!("\nafter {} simulated seconds, the breaker is {}:", end / 1000, breaker.state(now).name());
    println!("  messages offered                         {offered:>6}");
    println!("  sent to the upstream                     {sent:>6}");
    println!("  of which failed                          {failed:>6}");
    println!("  held back while open (to retry later)    {held_back:>6}");
    println!("  failed calls without a breaker           {failed_without:>6}");
    println!(
        "  failed calls the breaker spared the sick upstream: {} ({:.0} %)",
        failed_without - failed,
        100.0 * (failed_without - failed) as f64 / failed_without as f64
    );
}
