use halfopen_sim::engine::{Fleet, run_fleet};
use halfopen_sim::guard::Strategy;
fn main() {
    let s = halfopen_sim::scenarios::slow_upstream();
    for seed in [1, 2] {
        for lost in [0.0, 0.01] {
            for flush_ms in [1000u64, 250] {
                let mut m = halfopen_sim::table::group_model();
                m.lost = lost;
                m.config.flush_interval = halfopen::Duration::from_millis(flush_ms);
                let r = run_fleet(&s, Strategy::HalfopenLimited, seed, Fleet { processes: 10, group: Some(m) });
                let opens = r.opens.unwrap() / 10;
                let busy: Vec<u32> = r.timeline.iter().skip(290).take(40).map(|x| x.failures).collect();
                println!(
                    "seed {seed} lost {lost} flush {flush_ms} wasted {} opens/proc {opens} fails 290..330 {:?}",
                    r.wasted_calls, busy
                );
            }
        }
    }
}
