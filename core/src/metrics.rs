//! Per-breaker metrics in fixed memory: counters, opens in the last 24 hours,
//! time spent in each state, and (with the read) the upstream error rate and
//! latency quantiles. Kept through the [`Meter`] hook; read with
//! [`Breaker::metrics`](crate::Breaker::metrics).

use crate::histogram::{LatencyHistogram, LatencySummary};
use crate::meter::{Meter, Report};
use crate::permit::Outcome;
use crate::state::{State, Transition};
use crate::time::{Duration, Instant};

const HOUR_MICROS: u64 = 3_600_000_000;
const HOURS: usize = 24;

/// The largest value a counter, or a time in microseconds, takes in a
/// snapshot (2^53 − 1, so that it survives a JavaScript number); larger ones
/// are refused as corrupt. Live counters saturate at `u64::MAX`; times are
/// saved as at most this (285 years).
pub const MAX_SAVED_COUNTER: u64 = (1 << 53) - 1;

/// Monotonic counters since the breaker was made.
///
/// Every admitted call ends in exactly one of `successes`, `failures`,
/// `ignored`, `cancelled` or `stale` once reported, so
/// `admitted = successes + failures + ignored + cancelled + stale + in flight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Calls admitted.
    pub admitted: u64,
    /// Calls reported as successes and not slow.
    pub successes: u64,
    /// Calls counted as failures (slow successes included).
    pub failures: u64,
    /// Calls slower than `slow_call_duration` (also in `failures`).
    pub slow: u64,
    /// Calls rejected.
    pub rejections: u64,
    /// Calls reported as [`Outcome::Ignored`].
    pub ignored: u64,
    /// Calls reported as [`Outcome::Cancelled`].
    pub cancelled: u64,
    /// Reports from an earlier state period (they changed nothing).
    pub stale: u64,
    /// Transitions to open.
    pub opens: u64,
}

/// The meter most breakers want: [`Counters`], opens per hour for the last
/// day, and time in each state. 168 bytes, no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    counters: Counters,
    /// Opens per hour, a ring indexed by hour number.
    opens_by_hour: [u16; HOURS],
    /// Hour number (since the clock's origin) of the newest ring slot.
    newest_hour: u32,
    /// Time spent in closed, half-open, open (µs), up to `since`.
    time_in: [u64; 3],
    /// The state as of the last transition, and since when.
    state: State,
    since: Option<Instant>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            counters: Counters::default(),
            opens_by_hour: [0; HOURS],
            newest_hour: 0,
            time_in: [0; 3],
            state: State::Closed,
            since: None,
        }
    }
}

/// Everything measured about one breaker at one moment (what
/// [`Breaker::metrics`](crate::Breaker::metrics) reads): a plain value, cheap
/// to read, for bindings to turn into objects and dicts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricsReading {
    /// The state now.
    pub state: State,
    /// The counters.
    pub counters: Counters,
    /// Transitions to open in the last 24 hours (counted per hour, so the
    /// oldest hour may be partly outside the 24 hours).
    pub opens_last_24h: u32,
    /// Time spent closed since the breaker was first used.
    pub time_closed: Duration,
    /// Time spent open.
    pub time_open: Duration,
    /// Time spent half-open.
    pub time_half_open: Duration,
    /// Time open divided by the number of opens (`None` before the first).
    /// If it is high, the upstream has a serious problem (seed 000).
    pub mean_time_open: Option<Duration>,
    /// Percentage of the calls in the trip window that failed (`None` without
    /// a window or with an empty one).
    pub error_rate: Option<f64>,
    /// Latency of the admitted calls, if a [`LatencyHistogram`] is kept.
    pub latency: Option<LatencySummary>,
}

fn slot(state: State) -> usize {
    match state {
        State::Closed => 0,
        State::HalfOpen => 1,
        State::Open => 2,
    }
}

impl Metrics {
    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Opens in the 24 hours up to `now`.
    pub fn opens_last_24h(&self, now: Instant) -> u32 {
        let current = hour(now);
        (0..HOURS as u32)
            .filter_map(|age| current.checked_sub(age))
            .filter(|&h| h <= self.newest_hour && self.newest_hour - h < HOURS as u32)
            .map(|h| u32::from(self.opens_by_hour[h as usize % HOURS]))
            .sum()
    }

    /// Time in each state up to `now` (closed, half-open, open). `pending` is
    /// a timed change not yet reported: when it was due, and to which state.
    pub(crate) fn times(&self, now: Instant, pending: Option<(Instant, State)>) -> [Duration; 3] {
        let mut time = self.time_in;
        if let Some(since) = self.since {
            match pending {
                Some((due, to)) if due < now => {
                    time[slot(self.state)] = time[slot(self.state)].saturating_add((due - since).as_micros());
                    time[slot(to)] = time[slot(to)].saturating_add((now - due).as_micros());
                }
                _ => time[slot(self.state)] = time[slot(self.state)].saturating_add((now - since).as_micros()),
            }
        }
        time.map(Duration::from_micros)
    }

    fn touch(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }
}

/// Counts one more, saturating.
#[inline]
fn bump(counter: &mut u64) {
    add(counter, 1);
}

/// Counts `count` more, saturating.
#[inline]
fn add(counter: &mut u64, count: u32) {
    *counter = counter.saturating_add(u64::from(count));
}

fn hour(t: Instant) -> u32 {
    u32::try_from(t.as_micros() / HOUR_MICROS).unwrap_or(u32::MAX)
}

impl Meter for Metrics {
    fn admitted(&mut self, now: Instant) {
        self.touch(now);
        bump(&mut self.counters.admitted);
    }

    fn admitted_many(&mut self, now: Instant, count: u32) {
        if count > 0 {
            self.touch(now);
            add(&mut self.counters.admitted, count);
        }
    }

    fn rejected(&mut self, now: Instant) {
        self.touch(now);
        bump(&mut self.counters.rejections);
    }

    fn reported(&mut self, report: Report) {
        self.reported_many(report, 1);
    }

    fn reported_many(&mut self, report: Report, count: u32) {
        let c = &mut self.counters;
        add(
            match report.outcome {
                _ if report.stale => &mut c.stale,
                Outcome::Ignored => &mut c.ignored,
                Outcome::Cancelled => &mut c.cancelled,
                Outcome::Success if !report.slow => &mut c.successes,
                Outcome::Success | Outcome::Failure => &mut c.failures,
            },
            count,
        );
        if report.slow {
            add(&mut c.slow, count);
        }
    }

    fn transitioned(&mut self, t: &Transition) {
        let since = *self.since.get_or_insert(t.at);
        let spent = &mut self.time_in[slot(t.from)];
        *spent = spent.saturating_add((t.at - since).as_micros());
        self.since = Some(t.at.max(since));
        self.state = t.to;
        if t.to.is_open() {
            bump(&mut self.counters.opens);
            let h = hour(t.at);
            if h > self.newest_hour {
                for cleared in (self.newest_hour + 1..=h).take(HOURS) {
                    self.opens_by_hour[cleared as usize % HOURS] = 0;
                }
                self.newest_hour = h;
            }
            let count = &mut self.opens_by_hour[self.newest_hour as usize % HOURS];
            *count = count.saturating_add(1);
        }
    }
}

/// Meters that [`Breaker::metrics`](crate::Breaker::metrics) can read.
pub trait ReadMetrics {
    /// The metrics kept.
    fn metrics(&self) -> &Metrics;
    /// The latency histogram kept, if any.
    fn latency(&self) -> Option<&LatencyHistogram> {
        None
    }
}

impl ReadMetrics for Metrics {
    fn metrics(&self) -> &Metrics {
        self
    }
}

impl ReadMetrics for (Metrics, LatencyHistogram) {
    fn metrics(&self) -> &Metrics {
        &self.0
    }
    fn latency(&self) -> Option<&LatencyHistogram> {
        Some(&self.1)
    }
}

impl ReadMetrics for (Metrics, Option<LatencyHistogram>) {
    fn metrics(&self) -> &Metrics {
        &self.0
    }
    fn latency(&self) -> Option<&LatencyHistogram> {
        self.1.as_ref()
    }
}

/// What [`Metrics`] keeps, with time relative to the snapshot it is part of
/// (opaque: read it through a restored breaker).
#[cfg(feature = "snapshot")]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedMetrics {
    counters: SavedCounters,
    /// Opens per hour, the newest hour first.
    opens_by_hour: [u16; HOURS],
    /// Time in closed, half-open, open, up to the snapshot.
    time_in_us: [u64; 3],
    /// The state as of the last transition: 0 closed, 1 half-open, 2 open.
    state: u8,
    /// Whether the breaker had been used.
    used: bool,
}

/// [`Counters`], field by field, in a snapshot.
#[cfg(feature = "snapshot")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedCounters {
    admitted: u64,
    successes: u64,
    failures: u64,
    slow: u64,
    rejections: u64,
    ignored: u64,
    cancelled: u64,
    stale: u64,
    opens: u64,
}

/// Meters whose state a [`Snapshot`](crate::Snapshot) can carry: `()`
/// carries nothing; [`Metrics`] its counters, opens and times (with or
/// without a latency histogram, which is not saved).
#[cfg(feature = "snapshot")]
pub trait Persist: Sized {
    /// The state to save at `now`, if any.
    fn save(&self, now: Instant) -> Option<SavedMetrics>;
    /// The meter to restore at `now` from what was saved (fresh if nothing was).
    fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, crate::SnapshotError>;
}

#[cfg(feature = "snapshot")]
mod saved {
    use super::*;
    use crate::error::SnapshotError;

    impl From<Counters> for SavedCounters {
        fn from(c: Counters) -> Self {
            let Counters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens } = c;
            SavedCounters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens }
        }
    }

    impl From<SavedCounters> for Counters {
        fn from(c: SavedCounters) -> Self {
            let SavedCounters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens } = c;
            Counters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens }
        }
    }

    impl Metrics {
        /// What the metrics hold at `now`, times relative to `now`.
        fn save(&self, now: Instant) -> SavedMetrics {
            let time_in = self.times(now, None).map(|d| d.as_micros());
            let current = hour(now);
            let opens_by_hour = core::array::from_fn(|age| {
                let h = current.checked_sub(age as u32);
                match h {
                    Some(h) if h <= self.newest_hour && self.newest_hour - h < HOURS as u32 => {
                        self.opens_by_hour[h as usize % HOURS]
                    }
                    _ => 0,
                }
            });
            SavedMetrics {
                counters: self.counters.into(),
                opens_by_hour,
                // Within what a snapshot holds, as the counters are.
                time_in_us: time_in.map(|us| us.min(MAX_SAVED_COUNTER)),
                state: self.state.gauge(),
                used: self.since.is_some(),
            }
        }

        /// The metrics `saved` describes, at `now`.
        fn load(saved: &SavedMetrics, now: Instant) -> Result<Self, SnapshotError> {
            let corrupt = |what| Err(SnapshotError::Corrupt(what));
            let state = match saved.state {
                0 => State::Closed,
                1 => State::HalfOpen,
                2 => State::Open,
                _ => return corrupt("metrics state"),
            };
            let counters: Counters = saved.counters.into();
            let c = counters;
            let all =
                [c.admitted, c.successes, c.failures, c.slow, c.rejections, c.ignored, c.cancelled, c.stale, c.opens];
            if all.iter().chain(&saved.time_in_us).any(|&n| n > MAX_SAVED_COUNTER) {
                return corrupt("metrics counter out of range");
            }
            let reported = c.successes + c.failures + c.ignored + c.cancelled + c.stale;
            if reported > c.admitted || c.slow > c.failures {
                return corrupt("metrics counters");
            }
            let current = hour(now);
            let mut opens_by_hour = [0; HOURS];
            for (age, &n) in saved.opens_by_hour.iter().enumerate() {
                if let Some(h) = current.checked_sub(age as u32) {
                    opens_by_hour[h as usize % HOURS] = n;
                }
            }
            Ok(Metrics {
                counters,
                opens_by_hour,
                newest_hour: current,
                time_in: saved.time_in_us,
                state,
                since: saved.used.then_some(now),
            })
        }
    }

    impl Persist for () {
        fn save(&self, _: Instant) -> Option<SavedMetrics> {
            None
        }
        fn load(_: Option<&SavedMetrics>, _: Instant) -> Result<Self, SnapshotError> {
            Ok(())
        }
    }

    impl Persist for Metrics {
        fn save(&self, now: Instant) -> Option<SavedMetrics> {
            Some(Metrics::save(self, now))
        }
        fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, SnapshotError> {
            saved.map_or(Ok(Metrics::default()), |s| Metrics::load(s, now))
        }
    }

    impl<H: Default> Persist for (Metrics, H) {
        fn save(&self, now: Instant) -> Option<SavedMetrics> {
            Some(self.0.save(now))
        }
        fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, SnapshotError> {
            Ok((<Metrics as Persist>::load(saved, now)?, H::default()))
        }
    }
}

/// The histogram boxed: a breaker that may keep one costs a pointer, not 4 KB.
#[cfg(feature = "alloc")]
impl ReadMetrics for (Metrics, Option<alloc::boxed::Box<LatencyHistogram>>) {
    fn metrics(&self) -> &Metrics {
        &self.0
    }
    fn latency(&self) -> Option<&LatencyHistogram> {
        self.1.as_deref()
    }
}
