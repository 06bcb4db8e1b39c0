//! Bounded, seeded jitter for open periods (and the draws that spread retry hints). The fraction for an open period
//! comes from splitmix64's output for the state `seed + (generation + 1) × γ`
//! (its `generation`-th draw from `seed`), so it needs no state of its own: the
//! same seed and history give the same periods on every platform.

use crate::time::Duration;

/// splitmix64's output for `state` (its golden-ratio increment already added).
fn mix(state: u64) -> u64 {
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `generation`-th draw from `seed`: uniform over `u64`.
pub(crate) fn draw(seed: u64, generation: u32) -> u64 {
    mix(seed.wrapping_add((u64::from(generation) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// `period` shortened by a uniformly drawn fraction in `[0, jitter)` of it,
/// drawn for the open period that starts generation `generation`.
pub(crate) fn shorten(period: Duration, jitter: f64, seed: u64, generation: u32) -> Duration {
    if jitter == 0.0 {
        return period;
    }
    let unit = (draw(seed, generation) >> 11) as f64 / (1u64 << 53) as f64;
    let cut = (period.as_micros() as f64 * jitter * unit) as u64;
    Duration::from_micros(period.as_micros() - cut.min(period.as_micros().saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_bounds_and_repeats_for_a_seed() {
        let period = Duration::from_secs(30);
        let mut draws = [Duration::ZERO; 10_000];
        for (generation, slot) in (0..).zip(draws.iter_mut()) {
            let d = shorten(period, 0.25, 7, generation);
            assert!(d <= period && d.as_micros() >= 22_500_000, "{d:?}");
            assert_eq!(d, shorten(period, 0.25, 7, generation));
            *slot = d;
        }
        draws.sort_unstable();
        let distinct = 1 + draws.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(distinct > 9_000, "draws repeat: {distinct}");
        assert_eq!(shorten(period, 0.0, 7, 3), period);
    }
}
