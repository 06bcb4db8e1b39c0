use halfopen_sim::engine::{Fleet, run_fleet};
use halfopen_sim::guard::Strategy;
fn main() {
    for seed in 1..=3 {
        for s in halfopen_sim::scenarios::all() {
            let one = run_fleet(&s, Strategy::HalfopenLimited, seed, Fleet::ONE);
            let cap = s.weak.unwrap_or(s.model).capacity_per_s;
            let bound = one.wasted_calls as f64 * 1.1 + cap;
            for p in [10, 20] {
                let r = run_fleet(
                    &s,
                    Strategy::HalfopenLimited,
                    seed,
                    Fleet { processes: p, group: Some(halfopen_sim::table::group_model()) },
                );
                let d1 = 100.0 * one.delivered as f64 / one.messages as f64;
                let d = 100.0 * r.delivered as f64 / r.messages as f64;
                let ok = r.suspended == 0 && d >= d1 - 0.1 && (r.wasted_calls as f64) <= bound;
                println!(
                    "seed {seed} {:<20} p={p:>2} delivered {d:.2} (one {d1:.2}) wasted {} (bound {bound:.0}) susp {} dur {}s/{}s {}",
                    s.slug,
                    r.wasted_calls,
                    r.suspended,
                    r.duration / 1_000_000,
                    one.duration / 1_000_000,
                    if ok { "ok" } else { "MISS" }
                );
            }
        }
    }
}
