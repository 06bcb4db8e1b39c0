//! `make demo`: runs seed 000's four campaigns with each strategy, prints a
//! table per campaign, and writes a picture per campaign to `docs/sim/`.
//!
//! cargo run --release -p halfopen-sim -- [--seed N] [--out DIR]

use std::io::Write;
use std::time::Instant;

use halfopen_sim::engine::run;
use halfopen_sim::guard::Strategy;
use halfopen_sim::{scenarios, svg, table, webhook};

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
        print!("{}", table::render(&reports));
        let path = format!("{out}/{}.svg", scenario.slug);
        std::fs::write(&path, svg::render(&scenario, &reports)).expect("can write the picture");
        println!("\npicture: {path}\n");
    }
    println!("### Sensitivity: the sender's concurrency (delivered · wasted calls · time suspended)\n");
    print!("{}", table::sensitivity(&scenarios::all(), seed));
    println!("\n### Variants of the limit (delivered · wasted calls · time suspended · duration)\n");
    print!("{}", table::variants(&scenarios::all(), seed));
    println!("\n### Several sender processes (delivered · wasted calls · time suspended · duration)\n");
    print!("{}", table::fleet(&scenarios::all(), seed));
    println!("\n### Seed 001: a partner's webhook endpoint down for four minutes (12,000 events)\n");
    let reports: Vec<webhook::Report> = webhook::Strategy::ALL.into_iter().map(webhook::run).collect();
    print!("{}", webhook::table(&reports));
}
