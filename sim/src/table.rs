//! The Markdown table of a campaign's results, as `make demo` prints it and
//! the README shows it (a test checks the README's tables are these).

use std::fmt::Write;

use halfopen::group::GroupConfig;
use halfopen::{ConcurrencyLimit, Config};

use crate::engine::{Fleet, GroupModel, Report, Scenario, run, run_config, run_fleet};
use crate::guard::Strategy;

/// The sender concurrencies the sensitivity table tries: the one that
/// decides most outcomes (at 300 workers even no breaker does well in
/// Black Friday).
pub const CONCURRENCIES: [usize; 3] = [100, 300, 1_000];

fn duration(us: u64) -> String {
    let s = us / 1_000_000;
    if s >= 3600 { format!("{}h{:02}m", s / 3600, s % 3600 / 60) } else { format!("{}m{:02}s", s / 60, s % 60) }
}

/// One row per strategy.
pub fn render(reports: &[Report]) -> String {
    let mut out = String::new();
    out.push_str(
        "| strategy | delivered | lost | still queued | upstream calls | wasted calls | time suspended | breaker opened | duration |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in reports {
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} ({:.1} %) | {} | {} | {} | {} | {} | {} | {} |",
            r.strategy.name(),
            r.delivered,
            100.0 * f64::from(r.delivered) / f64::from(r.messages),
            r.lost(),
            r.queued(),
            r.upstream_calls,
            r.wasted_calls,
            duration(r.suspended),
            r.opens.map_or_else(|| "–".to_owned(), |n| format!("{n}×")),
            duration(r.duration)
        );
    }
    out
}

/// The limits the variants table compares, beside the headline's adaptive
/// one: a lower adaptive ceiling, and fixed limits (bulkheads) around the
/// campaigns' instance capacities (Black Friday's takes about 140 calls in
/// flight at 2 s each; the newer billing number about 3).
pub const VARIANTS: [(&str, ConcurrencyLimit); 5] = [
    ("adaptive 1–1,000 (the headline)", ConcurrencyLimit::Adaptive { min: 1, max: 1_000 }),
    ("adaptive 1–100", ConcurrencyLimit::Adaptive { min: 1, max: 100 }),
    ("fixed 10", ConcurrencyLimit::Fixed(10)),
    ("fixed 50", ConcurrencyLimit::Fixed(50)),
    ("fixed 200", ConcurrencyLimit::Fixed(200)),
];

/// Every scenario with each limit in [`VARIANTS`] (seed 000's breaker
/// otherwise, 1,000 sends in flight): delivered share, wasted calls, time
/// suspended, duration.
pub fn variants(scenarios: &[Scenario], seed: u64) -> String {
    let mut out = String::from("| campaign |");
    for (name, _) in VARIANTS {
        let _ = write!(out, " {name} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(VARIANTS.len()));
    out.push('\n');
    for scenario in scenarios {
        let _ = write!(out, "| {} |", scenario.slug);
        for (_, limit) in VARIANTS {
            let r = run_config(scenario, Config { concurrency_limit: Some(limit), ..Config::default() }, seed);
            let share = 100.0 * f64::from(r.delivered) / f64::from(r.messages);
            let (wasted, suspended, took) = (r.wasted_calls, duration(r.suspended), duration(r.duration));
            let _ = write!(out, " {share:.1} % · {wasted} wasted · {suspended} · {took} |");
        }
        out.push('\n');
    }
    out
}

/// Every scenario at every concurrency in [`CONCURRENCIES`], every strategy:
/// delivered share, wasted calls, time suspended.
pub fn sensitivity(scenarios: &[Scenario], seed: u64) -> String {
    let mut out = String::from("| campaign | sender concurrency |");
    for s in Strategy::ALL {
        let _ = write!(out, " {} |", s.name());
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---|".repeat(Strategy::ALL.len()));
    out.push('\n');
    for scenario in scenarios {
        for workers in CONCURRENCIES {
            let scenario = Scenario { workers, ..scenario.clone() };
            let _ = write!(out, "| {} | {workers} |", scenario.slug);
            for strategy in Strategy::ALL {
                let r = run(&scenario, strategy, seed);
                let share = 100.0 * f64::from(r.delivered) / f64::from(r.messages);
                let _ = write!(out, " {share:.1} % · {} wasted · {} |", r.wasted_calls, duration(r.suspended));
            }
            out.push('\n');
        }
    }
    out
}

/// The sender process counts the several-processes table tries.
pub const PROCESSES: [usize; 2] = [10, 20];

/// The group mode the demo models: the default group configuration (1 s
/// flush interval, quorum 2), a 1 ms round trip to the store, and one store
/// call in a hundred lost (it fails at the store timeout).
pub fn group_model() -> GroupModel {
    GroupModel { config: GroupConfig::default(), round_trip: 1_000, lost: 0.01 }
}

fn cell(r: &Report) -> String {
    let share = 100.0 * f64::from(r.delivered) / f64::from(r.messages);
    format!("{share:.2} % · {} wasted · {} · {}", r.wasted_calls, duration(r.suspended), duration(r.duration))
}

/// Every scenario with the two halfopen strategies run by one process, and
/// by each count in [`PROCESSES`] with a breaker per process and in group
/// mode ([`group_model`]): delivered share, wasted calls, time suspended,
/// duration.
pub fn fleet(scenarios: &[Scenario], seed: u64) -> String {
    let mut out = String::from("| campaign | strategy | 1 process |");
    for n in PROCESSES {
        let _ = write!(out, " {n} processes, a breaker each | {n} processes, one group |");
    }
    out.push_str("\n|---|---|---|");
    out.push_str(&"---|---|".repeat(PROCESSES.len()));
    out.push('\n');
    for scenario in scenarios {
        for strategy in [Strategy::Halfopen, Strategy::HalfopenLimited] {
            let _ =
                write!(out, "| {} | {} | {} |", scenario.slug, strategy.name(), cell(&run(scenario, strategy, seed)));
            for processes in PROCESSES {
                for group in [None, Some(group_model())] {
                    let r = run_fleet(scenario, strategy, seed, Fleet { processes, group });
                    let _ = write!(out, " {} |", cell(&r));
                }
            }
            out.push('\n');
        }
    }
    out
}
