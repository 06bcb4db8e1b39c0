//! A fixed-size log-linear latency histogram (HDR-style), in microseconds.
//!
//! Values below 32 µs have a bucket each. Above, each power of two is cut
//! into 32 equal buckets, up to 2^36 µs (19 hours; longer values share the
//! last bucket, and the exact maximum is kept apart). A quantile is reported as
//! the middle of its bucket, so its relative error is at most 1/64 (1.6 %).
//! Size: 1,024 `u32` counts plus three `u64`s: 4,120 bytes, no allocation.
//! That is why it is opt-in: pair it with [`Metrics`](crate::Metrics) as the
//! meter `(Metrics, LatencyHistogram)`.

use crate::meter::{Meter, Report};
use crate::permit::Outcome;
use crate::time::Duration;

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = 1024;

/// Latency of the calls reported as success or failure (stale, ignored and
/// cancelled calls are not counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: [u32; BUCKETS],
    count: u64,
    sum_micros: u64,
    max_micros: u64,
}

/// Quantiles read from a [`LatencyHistogram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencySummary {
    /// Calls measured.
    pub count: u64,
    /// Sum of their latencies.
    pub sum: Duration,
    /// Median.
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The largest latency seen (exact).
    pub max: Duration,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: [0; BUCKETS], count: 0, sum_micros: 0, max_micros: 0 }
    }
}

fn index(micros: u64) -> usize {
    if micros < SUB {
        return micros as usize;
    }
    let octave = 63 - micros.leading_zeros(); // ≥ SUB_BITS
    let sub = (micros >> (octave - SUB_BITS)) - SUB;
    let i = SUB + u64::from(octave - SUB_BITS) * SUB + sub;
    (i as usize).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in microseconds.
fn middle(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = (i - SUB) / SUB;
    let low = (SUB + (i - SUB) % SUB) << shift;
    low + (1 << shift) / 2
}

impl LatencyHistogram {
    /// Counts one latency.
    pub fn record(&mut self, latency: Duration) {
        let micros = latency.as_micros();
        let slot = &mut self.counts[index(micros)];
        *slot = slot.saturating_add(1);
        self.count += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
        self.max_micros = self.max_micros.max(micros);
    }

    /// The latency below which a fraction `q` (0 ≤ q ≤ 1) of the calls fall;
    /// `None` before the first call.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let [value] = self.quantiles([q])?;
        Some(value)
    }

    /// Several quantiles in one pass over the buckets; `qs` must be ascending.
    fn quantiles<const N: usize>(&self, qs: [f64; N]) -> Option<[Duration; N]> {
        if self.count == 0 {
            return None;
        }
        let ranks = qs.map(|q| {
            // ceil(q × count), without float rounding functions (no_std).
            let exact = q.clamp(0.0, 1.0) * self.count as f64;
            let floor = exact as u64;
            (floor + u64::from((floor as f64) < exact)).clamp(1, self.count)
        });
        let mut values = [Duration::from_micros(self.max_micros); N];
        let (mut seen, mut next) = (0u64, 0usize);
        for (i, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            while next < N && seen >= ranks[next] {
                values[next] = Duration::from_micros(middle(i).min(self.max_micros));
                next += 1;
            }
            if next == N {
                break;
            }
        }
        Some(values)
    }

    /// Count, sum, p50, p95, p99 and max; `None` before the first call.
    pub fn summary(&self) -> Option<LatencySummary> {
        let [p50, p95, p99] = self.quantiles([0.50, 0.95, 0.99])?;
        Some(LatencySummary {
            count: self.count,
            sum: Duration::from_micros(self.sum_micros),
            p50,
            p95,
            p99,
            max: Duration::from_micros(self.max_micros),
        })
    }
}

impl Meter for LatencyHistogram {
    fn reported(&mut self, report: Report) {
        if !report.stale && matches!(report.outcome, Outcome::Success | Outcome::Failure) {
            self.record(report.latency);
        }
    }
    fn measures_latency(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_within_the_error_bound() {
        let mut v = 1u64;
        while v < 1 << 36 {
            let m = middle(index(v));
            assert!(m.abs_diff(v) as f64 <= v as f64 / 64.0 + 0.5, "{v} -> {m}");
            v = v * 17 / 16 + 1;
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert!(index((1 << 36) - 1) == BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_uniform_spread() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.summary(), None);
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.summary().unwrap();
        let near = |d: Duration, ms: f64| (d.as_micros() as f64 / 1000.0 - ms).abs() <= ms / 64.0 + 0.001;
        assert!(near(s.p50, 500.0) && near(s.p95, 950.0) && near(s.p99, 990.0), "{s:?}");
        assert_eq!(s.max, Duration::from_millis(1000));
        assert_eq!(s.count, 1000);
        assert_eq!(s.sum, Duration::from_millis(500_500));
    }
}
