//! One picture per scenario: calls reaching the upstream per second and the
//! share of them that failed, for each strategy, over the breaker's state
//! bands and the instance's suspension.

use std::fmt::Write;

use crate::engine::{Report, Scenario};
use crate::guard::Strategy;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const PLOT_TOP: f64 = 40.0;
const PLOT_HEIGHT: f64 = 200.0;
const BAND_HEIGHT: f64 = 14.0;

fn color(s: Strategy) -> &'static str {
    match s {
        Strategy::NoBreaker => "#d62728",
        Strategy::SeedClass => "#ff7f0e",
        Strategy::SeedClassRequeued => "#2ca02c",
        Strategy::Halfopen => "#1f77b4",
        Strategy::HalfopenLimited => "#9467bd",
    }
}

/// The picture, as SVG text. The x axis covers the longest run (to its last
/// resolved message), at most the horizon.
pub fn render(scenario: &Scenario, reports: &[Report]) -> String {
    let seconds = reports.iter().map(|r| (r.duration / 1_000_000) as usize + 1).max().unwrap_or(1).max(10);
    // Calls per second, averaged over buckets so the lines stay readable.
    let bucket = (seconds / 240).max(1);
    let points = seconds.div_ceil(bucket);
    let series: Vec<Vec<(f64, f64)>> = reports
        .iter()
        .map(|r| {
            (0..points)
                .map(|p| {
                    let slice = r.timeline.iter().skip(p * bucket).take(bucket);
                    let (calls, failures) = slice.fold((0u32, 0u32), |(c, f), s| (c + s.calls, f + s.failures));
                    // Failures are counted when answered, calls when sent: cap the share at 1.
                    let share = if calls > 0 { (f64::from(failures) / f64::from(calls)).min(1.0) } else { 0.0 };
                    (f64::from(calls) / bucket as f64, share)
                })
                .collect()
        })
        .collect();
    let peak = series.iter().flatten().map(|p| p.0).fold(1.0, f64::max);
    let x = |i: usize| LEFT + (WIDTH - LEFT - RIGHT) * i as f64 / points.max(2) as f64;
    let y = |v: f64| PLOT_TOP + PLOT_HEIGHT * (1.0 - v / peak);
    let bands_top = PLOT_TOP + PLOT_HEIGHT + 30.0;
    let height = bands_top + (BAND_HEIGHT + 6.0) * (reports.len() * 2) as f64 + 40.0;

    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(w, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(w, r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#, scenario.name);
    let _ = writeln!(
        w,
        r#"<text x="{LEFT}" y="{}" fill="dimgray">upstream calls per second (solid) and share that failed, 0–100 % of the same scale (dotted)</text>"#,
        PLOT_TOP - 6.0
    );
    let _ =
        writeln!(w, r#"<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="darkgray"/>"#, y(0.0), WIDTH - RIGHT, y(0.0));
    let _ = writeln!(w, r#"<text x="{}" y="{}" text-anchor="end">{peak:.0}/s</text>"#, LEFT - 6.0, y(peak) + 4.0);
    let _ = writeln!(w, r#"<text x="{}" y="{}" text-anchor="end">0</text>"#, LEFT - 6.0, y(0.0) + 4.0);
    let minutes = seconds as f64 / 60.0;
    let step = [1.0, 5.0, 10.0, 30.0, 60.0, 120.0].into_iter().find(|s| minutes / s <= 10.0).unwrap_or(240.0);
    let mut m = 0.0;
    while m <= minutes {
        let px = x((m * 60.0 / bucket as f64) as usize);
        let _ = writeln!(
            w,
            r#"<text x="{px:.1}" y="{}" text-anchor="middle" fill="dimgray">{m:.0} min</text>"#,
            y(0.0) + 16.0
        );
        m += step;
    }
    for (r, s) in reports.iter().zip(&series) {
        let line = |f: &dyn Fn(&(f64, f64)) -> f64| {
            s.iter().enumerate().map(|(i, p)| format!("{:.1},{:.1}", x(i), y(f(p)))).collect::<Vec<_>>().join(" ")
        };
        let _ = writeln!(
            w,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            color(r.strategy),
            line(&|p| p.0)
        );
        let _ = writeln!(
            w,
            r#"<polyline fill="none" stroke="{}" stroke-width="1" stroke-dasharray="2,3" points="{}"/>"#,
            color(r.strategy),
            line(&|p| p.1 * peak)
        );
    }
    // Bands: breaker state and suspension, per strategy.
    let mut row = bands_top;
    for r in reports {
        for (what, cell) in [("breaker", 0usize), ("instance", 1)] {
            if cell == 0 && r.strategy == Strategy::NoBreaker {
                continue;
            }
            let _ = writeln!(
                w,
                r#"<text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"#,
                LEFT - 6.0,
                row + 11.0,
                what
            );
            for p in 0..points {
                let slice: Vec<_> = r.timeline.iter().skip(p * bucket).take(bucket).collect();
                let fill = if cell == 0 {
                    match slice.iter().filter_map(|s| s.state).max() {
                        Some(2) => "#d62728",
                        Some(1) => "#f2b134",
                        _ => "#7fbf7f",
                    }
                } else if slice.iter().any(|s| s.suspended) {
                    "#222"
                } else {
                    "#e8e8e8"
                };
                let _ = writeln!(
                    w,
                    r#"<rect x="{:.1}" y="{row:.1}" width="{:.1}" height="{BAND_HEIGHT}" fill="{fill}"/>"#,
                    x(p),
                    x(p + 1) - x(p) + 0.3
                );
            }
            let _ = writeln!(
                w,
                r#"<text x="{}" y="{:.1}" font-size="10" text-anchor="end" fill="{}">{}</text>"#,
                WIDTH - RIGHT - 4.0,
                row + 11.0,
                color(r.strategy),
                r.strategy.name()
            );
            row += BAND_HEIGHT + 6.0;
        }
    }
    let _ = writeln!(
        w,
        r#"<text x="{LEFT}" y="{:.1}" font-size="11" fill="dimgray">breaker: green closed, amber half-open, red open · instance: black = suspended by the gateway</text>"#,
        row + 16.0
    );
    let _ = writeln!(w, "</svg>");
    out
}
