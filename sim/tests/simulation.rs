//! The simulator's own guarantees: a seed repeats a run exactly; every
//! message ends delivered, lost, or still waiting or in flight (each counted
//! where it is); the tables and pictures the README shows are the ones `make
//! demo` makes; the seed class's port follows the TypeScript's rules; and
//! halfopen does in the Black Friday campaign what it is for.

use halfopen_sim::engine::run;
use halfopen_sim::guard::Strategy;
use halfopen_sim::{scenarios, svg, webhook};

#[test]
fn a_seed_repeats_a_run_exactly() {
    for scenario in scenarios::all() {
        for strategy in Strategy::ALL {
            assert_eq!(run(&scenario, strategy, 7), run(&scenario, strategy, 7), "{} / {strategy:?}", scenario.slug);
        }
    }
    let a = run(&scenarios::black_friday(), Strategy::NoBreaker, 1);
    let b = run(&scenarios::black_friday(), Strategy::NoBreaker, 2);
    assert_ne!(a, b, "another seed draws another run");
}

#[test]
fn every_message_is_delivered_lost_or_still_queued() {
    for seed in 1..=4 {
        for scenario in scenarios::all() {
            for strategy in Strategy::ALL {
                let r = run(&scenario, strategy, seed);
                assert_eq!(
                    r.delivered + r.swallowed + r.gave_up + r.queued(),
                    r.messages,
                    "{} / {strategy:?}",
                    scenario.slug
                );
                assert!(r.wasted_calls <= r.upstream_calls);
                assert!(
                    u64::from(r.delivered) + r.wasted_calls == r.upstream_calls,
                    "every call delivers or is wasted"
                );
            }
        }
    }
    let mut short = scenarios::black_friday();
    short.horizon = 30 * 1_000_000;
    let r = run(&short, Strategy::Halfopen, 1);
    assert!(r.waiting > 0, "a run stopped early leaves messages waiting");
    assert_eq!(r.delivered + r.swallowed + r.gave_up + r.queued(), r.messages);
}

#[test]
fn halfopen_keeps_the_black_friday_instance_out_of_suspension() {
    for seed in 1..=4 {
        let breaker = run(&scenarios::black_friday(), Strategy::Halfopen, seed);
        let none = run(&scenarios::black_friday(), Strategy::NoBreaker, seed);
        assert_eq!(breaker.suspended, 0, "seed {seed}");
        assert!(breaker.delivered * 100 >= breaker.messages * 99, "seed {seed}: {breaker:?}");
        assert!(none.suspended > 0 && none.lost() > breaker.lost(), "seed {seed}");
    }
}

#[test]
fn the_readme_pictures_are_the_ones_make_demo_draws() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sim");
    for scenario in scenarios::all() {
        let reports: Vec<_> = Strategy::ALL.into_iter().map(|s| run(&scenario, s, 1)).collect();
        let committed = std::fs::read_to_string(format!("{dir}/{}.svg", scenario.slug)).expect("picture committed");
        assert!(
            committed == svg::render(&scenario, &reports),
            "docs/sim/{}.svg is stale: run make demo",
            scenario.slug
        );
    }
}

#[test]
fn the_readme_tables_are_the_ones_make_demo_prints() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README");
    for scenario in scenarios::all() {
        let reports: Vec<_> = Strategy::ALL.into_iter().map(|s| run(&scenario, s, 1)).collect();
        let table = halfopen_sim::table::render(&reports);
        assert!(readme.contains(&table), "README.md's table for {} is stale: run make demo\n{table}", scenario.slug);
    }
    let sim_readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("sim/README");
    let sensitivity = halfopen_sim::table::sensitivity(&scenarios::all(), 1);
    assert!(
        sim_readme.contains(&sensitivity),
        "sim/README.md's sensitivity table is stale: run make demo\n{sensitivity}"
    );
    let variants = halfopen_sim::table::variants(&scenarios::all(), 1);
    assert!(sim_readme.contains(&variants), "sim/README.md's variants table is stale: run make demo\n{variants}");
    let fleet = halfopen_sim::table::fleet(&scenarios::all(), 1);
    assert!(readme.contains(&fleet), "README.md's several-processes table is stale: run make demo\n{fleet}");
    let reports: Vec<_> = webhook::Strategy::ALL.into_iter().map(webhook::run).collect();
    let outage = webhook::table(&reports);
    assert!(readme.contains(&outage), "README.md's seed 001 table is stale: run make demo\n{outage}");
}

/// Seed 001's outage with halfopen's retention: nothing lost, in order, the
/// partner spared while down, the backlog drained without reopening; and
/// the seed's release-at-once reopens on the same partner.
#[test]
fn retention_drains_the_backlog_in_order_without_reopening() {
    let halfopen = webhook::run(webhook::Strategy::Halfopen);
    assert_eq!((halfopen.delivered, halfopen.lost, halfopen.waiting), (12_000, 0, 0));
    assert_eq!((halfopen.out_of_order, halfopen.reopened), (0, 0));
    assert!(halfopen.calls_while_down <= 5 + 24, "one probe per 10 s open period at most");
    let flood = webhook::run(webhook::Strategy::SeedRetention);
    assert!(flood.reopened > 0, "releasing everything at once reopens the breaker");
    let none = webhook::run(webhook::Strategy::NoBreaker);
    assert!(none.lost > 4_000 && none.calls_while_down > 4_000);
}

#[test]
fn the_seed_class_port_follows_the_typescript_rules() {
    use halfopen_sim::guard::Guard;
    let second = 1_000_000u64;
    // Seed 000: 5 failures in 60 s open it for 30 s; 3 attempts while
    // half-open, 3 successes close it; a half-open failure doubles the open
    // time (to at most 5 min).
    let mut g = Guard::new(Strategy::SeedClassRequeued);
    for i in 0..4 {
        assert!(matches!(g.admit(i * second, 0.0), halfopen_sim::guard::Admit::Go(_)));
        g.report(None, false, i * second);
    }
    assert_eq!(g.state(5 * second), Some(0), "4 failures keep it closed");
    assert!(matches!(g.admit(65 * second, 0.0), halfopen_sim::guard::Admit::Go(_)));
    g.report(None, false, 65 * second);
    assert_eq!(g.state(65 * second), Some(0), "failures older than 60 s no longer count");
    for t in 66..70 {
        g.report(None, false, t * second);
    }
    assert_eq!(g.state(70 * second), Some(2), "5 failures within 60 s open it");
    match g.admit(80 * second, 0.0) {
        halfopen_sim::guard::Admit::Wait { retry_after, uses_attempt } => {
            assert_eq!((retry_after, uses_attempt), (19 * second, false), "requeued until the 30 s end");
        }
        halfopen_sim::guard::Admit::Go(_) => panic!("admitted while open"),
    }
    assert_eq!(g.state(99 * second), Some(1), "half-open after 30 s");
    for _ in 0..3 {
        assert!(matches!(g.admit(99 * second, 0.0), halfopen_sim::guard::Admit::Go(_)));
    }
    assert!(matches!(g.admit(99 * second, 0.0), halfopen_sim::guard::Admit::Wait { .. }), "3 attempts at most");
    g.report(None, false, 100 * second);
    assert_eq!(g.state(100 * second), Some(2), "a half-open failure reopens");
    assert_eq!(g.state(159 * second), Some(2), "for twice as long (60 s)");
    assert_eq!(g.state(160 * second), Some(1));
    for _ in 0..3 {
        assert!(matches!(g.admit(160 * second, 0.0), halfopen_sim::guard::Admit::Go(_)));
        g.report(None, true, 160 * second);
    }
    assert_eq!(g.state(160 * second), Some(0), "3 successes close it");
    // Its own worker: a rejection uses an attempt.
    let mut own = Guard::new(Strategy::SeedClass);
    for _ in 0..5 {
        let _ = own.admit(0, 0.0);
        own.report(None, false, 0);
    }
    assert!(matches!(own.admit(second, 0.0), halfopen_sim::guard::Admit::Wait { uses_attempt: true, .. }));
}

/// Issue 9's targets for the adaptive limit at the headline concurrency
/// (1,000 sends in flight), on several seeds: never suspended; Black Friday
/// ≥ 99 % delivered with ≥ 95 % fewer wasted calls than no breaker; Billing
/// ≥ 99.1 % (seed 000's figure); order confirmations ≥ 99 %; the slow
/// upstream 100 %; and never worse than seed 000's class with the same
/// queue integration.
#[test]
fn the_adaptive_limit_meets_its_targets() {
    let share = |r: &halfopen_sim::engine::Report| f64::from(r.delivered) * 100.0 / f64::from(r.messages);
    for seed in 1..=3 {
        for scenario in scenarios::all() {
            let limited = run(&scenario, Strategy::HalfopenLimited, seed);
            let seed_class = run(&scenario, Strategy::SeedClassRequeued, seed);
            let ctx = format!("{} seed {seed}", scenario.slug);
            assert_eq!(limited.suspended, 0, "{ctx}");
            assert!(limited.delivered >= seed_class.delivered, "{ctx}: {limited:?}");
            assert!(limited.wasted_calls <= seed_class.wasted_calls, "{ctx}: {limited:?}");
            let floor = match scenario.slug {
                "black-friday" => {
                    let none = run(&scenario, Strategy::NoBreaker, seed);
                    assert!(limited.wasted_calls * 20 <= none.wasted_calls, "{ctx}: {limited:?} vs {none:?}");
                    99.0
                }
                "billing-saas" => 99.1,
                "order-confirmations" => 99.0,
                _ => 100.0,
            };
            assert!(share(&limited) >= floor, "{ctx}: {:.2} % < {floor} %", share(&limited));
        }
    }
}

/// Issue 23's targets for the group mode with the adaptive limit, at 10
/// and 20 sender processes, on seeds 1–3: never suspended; delivered within
/// 0.1 percentage point of one process; wasted calls at most one process's
/// + 10 % + one flush interval (1 s) at the instance's capacity.
#[test]
fn the_group_mode_meets_its_targets() {
    use halfopen_sim::engine::{Fleet, run_fleet};
    let share = |r: &halfopen_sim::engine::Report| f64::from(r.delivered) * 100.0 / f64::from(r.messages);
    for seed in 1..=3 {
        for scenario in scenarios::all() {
            let one = run(&scenario, Strategy::HalfopenLimited, seed);
            let capacity = scenario.weak.unwrap_or(scenario.model).capacity_per_s;
            let bound = one.wasted_calls as f64 * 1.1 + capacity;
            for processes in halfopen_sim::table::PROCESSES {
                let group = Some(halfopen_sim::table::group_model());
                let r = run_fleet(&scenario, Strategy::HalfopenLimited, seed, Fleet { processes, group });
                let ctx = format!("{} seed {seed}, {processes} processes", scenario.slug);
                assert_eq!(r.suspended, 0, "{ctx}");
                assert!(share(&r) >= share(&one) - 0.1, "{ctx}: {:.2} % against {:.2} %", share(&r), share(&one));
                assert!(r.wasted_calls as f64 <= bound, "{ctx}: {} wasted, bound {bound:.0}", r.wasted_calls);
            }
        }
    }
}

/// At every sender concurrency of the sensitivity table (seed 1): never
/// suspended, and no worse than no breaker or seed 000's class (same
/// integration) on delivered messages or wasted calls, within 1 % of the
/// campaign's messages.
#[test]
fn the_adaptive_limit_is_never_worse_at_any_concurrency() {
    use halfopen_sim::engine::Scenario;
    for base in scenarios::all() {
        for workers in halfopen_sim::table::CONCURRENCIES {
            let scenario = Scenario { workers, ..base.clone() };
            let limited = run(&scenario, Strategy::HalfopenLimited, 1);
            let ctx = format!("{} at {workers}", scenario.slug);
            assert_eq!(limited.suspended, 0, "{ctx}");
            let slack = u64::from(scenario.messages / 100);
            for other in [Strategy::NoBreaker, Strategy::SeedClassRequeued] {
                let r = run(&scenario, other, 1);
                assert!(
                    u64::from(limited.delivered) + slack >= u64::from(r.delivered),
                    "{ctx}: delivered vs {other:?}"
                );
                assert!(limited.wasted_calls <= r.wasted_calls + slack, "{ctx}: wasted vs {other:?}");
            }
        }
    }
}
