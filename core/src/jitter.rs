//! Bounded, seeded jitter for open periods (splitmix64: tiny, fast, and the
//! same sequence on every platform).

use crate::time::Duration;

/// Advances `state` and returns the next value of the sequence.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `period` shortened by a uniformly drawn fraction in `[0, jitter)` of it.
/// With `jitter == 0` the sequence is not advanced.
pub(crate) fn shorten(period: Duration, jitter: f64, state: &mut u64) -> Duration {
    if jitter == 0.0 {
        return period;
    }
    let unit = (next(state) >> 11) as f64 / (1u64 << 53) as f64;
    let cut = (period.as_micros() as f64 * jitter * unit) as u64;
    Duration::from_micros(period.as_micros() - cut.min(period.as_micros().saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_bounds_and_repeats_for_a_seed() {
        let period = Duration::from_secs(30);
        let (mut a, mut b) = (7u64, 7u64);
        for _ in 0..10_000 {
            let d = shorten(period, 0.25, &mut a);
            assert!(d <= period && d.as_micros() >= 22_500_000, "{d:?}");
            assert_eq!(d, shorten(period, 0.25, &mut b));
        }
        let mut untouched = 3;
        assert_eq!(shorten(period, 0.0, &mut untouched), period);
        assert_eq!(untouched, 3);
    }
}
