//! The simulator's own guarantees: a seed repeats a run exactly; every
//! message ends delivered, lost or still queued; the pictures the README shows
//! are the ones `make demo` draws; and halfopen does in the Black Friday
//! campaign what it is for.

use halfopen_sim::engine::run;
use halfopen_sim::guard::Strategy;
use halfopen_sim::{scenarios, svg};

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
                    r.delivered + r.swallowed + r.gave_up + r.queued,
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
    assert!(r.queued > 0, "a run stopped early leaves messages queued");
    assert_eq!(r.delivered + r.swallowed + r.gave_up + r.queued, r.messages);
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
