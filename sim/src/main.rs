//! `make demo`: runs seed 000's three campaigns with each strategy, prints a
//! table per campaign, and writes a picture per campaign to `docs/sim/`.
//!
//! cargo run --release -p halfopen-sim -- [--seed N] [--out DIR]

use std::io::Write;
use std::time::Instant;

use halfopen_sim::engine::{Report, run};
use halfopen_sim::guard::Strategy;
use halfopen_sim::{scenarios, svg};

fn duration(us: u64) -> String {
    let s = us / 1_000_000;
    if s >= 3600 { format!("{}h{:02}m", s / 3600, s % 3600 / 60) } else { format!("{}m{:02}s", s / 60, s % 60) }
}

fn table(reports: &[Report]) {
    println!(
        "| strategy | delivered | lost | still queued | upstream calls | wasted calls | time suspended | duration |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in reports {
        println!(
            "| {} | {} ({:.1} %) | {} | {} | {} | {} | {} | {} |",
            r.strategy.name(),
            r.delivered,
            100.0 * f64::from(r.delivered) / f64::from(r.messages),
            r.lost(),
            r.queued,
            r.upstream_calls,
            r.wasted_calls,
            duration(r.suspended),
            duration(r.duration)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
    let seed: u64 = value("--seed").map_or(1, |s| s.parse().expect("--seed takes a number"));
    let out = value("--out").map_or("docs/sim", String::as_str).to_owned();
    std::fs::create_dir_all(&out).expect("can create the output folder");
    let started = Instant::now();
    println!("halfopen demo: seed 000's campaigns, simulated (seed {seed}); the model: sim/README.md\n");
    for scenario in scenarios::all() {
        let mut reports = Vec::new();
        for strategy in Strategy::ALL {
            if started.elapsed().as_secs_f64() > 1.0 {
                eprint!("\r  simulating {:<60}", format!("{} / {}", scenario.slug, strategy.name()));
                let _ = std::io::stderr().flush();
            }
            reports.push(run(&scenario, strategy, seed));
        }
        if started.elapsed().as_secs_f64() > 1.0 {
            eprint!("\r{:<80}\r", "");
        }
        println!("### {}\n", scenario.name);
        table(&reports);
        let path = format!("{out}/{}.svg", scenario.slug);
        std::fs::write(&path, svg::render(&scenario, &reports)).expect("can write the picture");
        println!("\npicture: {path}\n");
    }
}
