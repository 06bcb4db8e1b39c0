//! The sliding windows that windowed policies count over: a ring of time
//! buckets, or a ring of the last calls' outcomes. Both are fixed-size and O(1)
//! per report.

use crate::time::{Duration, Instant};

/// Buckets a time window is cut into.
pub const TIME_BUCKETS: u32 = 8;
const SLOTS: usize = TIME_BUCKETS as usize;
const _: () = assert!(SLOTS.is_power_of_two());

/// Most calls a count-based window can hold.
pub const MAX_WINDOW_CALLS: u16 = 128;

/// The window over which windowed policies (`failure_threshold`,
/// `failure_rate_threshold`, `slow_call_rate_threshold`) count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Window {
    /// The calls reported within the last span of time. The span is cut into
    /// [`TIME_BUCKETS`] buckets, so an outcome counts for between 7/8 of the
    /// span and the whole span after it is reported.
    Time(Duration),
    /// The last `n` calls reported (1 ..= [`MAX_WINDOW_CALLS`]).
    Count(u16),
}

/// What a window holds right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowCounts {
    /// Calls counted (successes and failures).
    pub calls: u32,
    /// Failures counted (slow calls included).
    pub failures: u32,
    /// Slow calls counted.
    pub slow: u32,
}

/// The counters of one window, time- or count-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WindowState {
    /// No policy counts over a window: nothing to keep.
    Off,
    Time(TimeRing),
    Count(CountRing),
}

impl WindowState {
    /// An empty window of kind `window`, or none if no policy counts over one.
    pub(crate) fn new(window: Window, windowed: bool) -> Self {
        if !windowed {
            return WindowState::Off;
        }
        match window {
            Window::Time(span) => WindowState::Time(TimeRing::new(span)),
            // Validated: 1 ..= MAX_WINDOW_CALLS (128), so it fits a u8.
            Window::Count(n) => WindowState::Count(CountRing::new(n as u8)),
        }
    }

    /// Counts one call; `window` is the configuration the ring was made for.
    #[inline]
    pub(crate) fn record(&mut self, window: Window, now: Instant, failed: bool, slow: bool) {
        match (self, window) {
            (WindowState::Time(ring), Window::Time(span)) => ring.record(span, now, failed, slow),
            (WindowState::Count(ring), _) => ring.record(failed, slow),
            (WindowState::Off, _) | (WindowState::Time(_), Window::Count(_)) => {}
        }
    }

    /// Counts `count` successes (neither failed nor slow) at `now`: as
    /// many [`record`](Self::record)s.
    pub(crate) fn record_successes(&mut self, window: Window, now: Instant, count: u32) {
        match (self, window) {
            (WindowState::Time(ring), Window::Time(span)) => ring.record_successes(span, now, count),
            (WindowState::Count(ring), _) => ring.record_successes(count),
            (WindowState::Off, _) | (WindowState::Time(_), Window::Count(_)) => {}
        }
    }

    pub(crate) fn totals(&self, window: Window, now: Instant) -> WindowCounts {
        match (self, window) {
            (WindowState::Time(ring), Window::Time(span)) => ring.totals(span, now),
            (WindowState::Count(ring), _) => ring.totals(),
            (WindowState::Off, _) | (WindowState::Time(_), Window::Count(_)) => WindowCounts::default(),
        }
    }

    /// Where the bucket that holds `now` ends: until then, an outcome reported
    /// at any time lands in the same bucket as one reported at `now`.
    /// [`Instant::MAX`] when time does not matter to the window.
    pub(crate) fn bucket_end(&self, window: Window, now: Instant) -> Instant {
        match (self, window) {
            (WindowState::Time(ring), Window::Time(span)) => {
                let width = width(span);
                let end = ring.newest_end.saturating_add(ring.ahead(width, now).saturating_mul(width));
                Instant::from_micros(end)
            }
            _ => Instant::MAX,
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            WindowState::Time(ring) => ring.buckets = [Bucket::default(); SLOTS],
            WindowState::Count(ring) => *ring = CountRing::new(ring.capacity),
            WindowState::Off => {}
        }
    }
}

/// Counts in one time bucket: exact up to 2^32 − 1 calls per bucket (over
/// 500 million calls a second in a 60 s window), then they saturate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Bucket {
    calls: u32,
    failures: u32,
    slow: u32,
}

/// A ring of [`TIME_BUCKETS`] buckets, each `span / TIME_BUCKETS` wide. The
/// first bucket starts at the clock's origin; each next one where the last
/// ended. (Boundaries follow from `newest_end`, never from absolute time, so
/// a restored snapshot keeps them relative to its new clock.) A report that
/// falls in the newest bucket (the common case) costs one comparison; only
/// moving to a new bucket divides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimeRing {
    buckets: [Bucket; SLOTS],
    /// Where the newest bucket ends (exclusive), in microseconds.
    newest_end: u64,
    /// The newest bucket's slot in `buckets`.
    newest_slot: Slot,
}

impl TimeRing {
    fn new(span: Duration) -> Self {
        TimeRing { buckets: [Bucket::default(); SLOTS], newest_end: width(span), newest_slot: Slot::S0 }
    }

    /// How many buckets `now` is past the newest one (0: inside it).
    fn ahead(&self, width: u64, now: Instant) -> u64 {
        match now.as_micros().checked_sub(self.newest_end) {
            None => 0,
            Some(past) => past / width + 1,
        }
    }

    #[inline]
    fn advance(&mut self, span: Duration, now: Instant) {
        if now.as_micros() >= self.newest_end {
            self.rotate(span, now);
        }
    }

    /// Moves to the bucket holding `now`, clearing the buckets passed.
    #[cold]
    fn rotate(&mut self, span: Duration, now: Instant) {
        let width = width(span);
        let ahead = self.ahead(width, now);
        for step in 1..=ahead.min(u64::from(TIME_BUCKETS)) {
            self.buckets[slot(self.newest_slot.number() + step)] = Bucket::default();
        }
        self.newest_slot = Slot::of(self.newest_slot.number() + ahead);
        self.newest_end = self.newest_end.saturating_add(ahead.saturating_mul(width));
    }

    #[inline]
    fn record(&mut self, span: Duration, now: Instant, failed: bool, slow: bool) {
        self.advance(span, now);
        // The mask keeps the index provably in bounds (SLOTS is a power of two).
        let bucket = &mut self.buckets[self.newest_slot as usize];
        bucket.calls = bucket.calls.saturating_add(1);
        bucket.failures = bucket.failures.saturating_add(u32::from(failed));
        bucket.slow = bucket.slow.saturating_add(u32::from(slow));
    }

    fn record_successes(&mut self, span: Duration, now: Instant, count: u32) {
        self.advance(span, now);
        let bucket = &mut self.buckets[self.newest_slot as usize];
        bucket.calls = bucket.calls.saturating_add(count);
    }

    fn totals(&self, span: Duration, now: Instant) -> WindowCounts {
        let ahead = self.ahead(width(span), now);
        let mut totals = WindowCounts::default();
        // The bucket `age` steps before the newest is `age + ahead` before now's.
        for age in 0..u64::from(TIME_BUCKETS).saturating_sub(ahead) {
            let bucket = self.buckets[slot(self.newest_slot.number() + u64::from(TIME_BUCKETS) - age)];
            totals.calls = totals.calls.saturating_add(bucket.calls);
            totals.failures = totals.failures.saturating_add(bucket.failures);
            totals.slow = totals.slow.saturating_add(bucket.slow);
        }
        totals
    }
}

/// Bucket width in microseconds (≥ 1).
fn width(span: Duration) -> u64 {
    (span.as_micros() / u64::from(TIME_BUCKETS)).max(1)
}

fn slot(bucket_number: u64) -> usize {
    (bucket_number % u64::from(TIME_BUCKETS)) as usize
}

/// A slot of a time ring. An enum rather than a `u8`: its unused values
/// are the niche that tells a window's kinds apart, so a [`WindowState`]
/// takes no tag byte of its own (8 bytes less per breaker), and an index
/// by it is always in bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Slot {
    S0,
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
}

const _: () = assert!(SLOTS == 8);

impl Slot {
    /// The slot of bucket number `n` (counting from any bucket in slot 0).
    fn of(n: u64) -> Slot {
        match slot(n) {
            0 => Slot::S0,
            1 => Slot::S1,
            2 => Slot::S2,
            3 => Slot::S3,
            4 => Slot::S4,
            5 => Slot::S5,
            6 => Slot::S6,
            _ => Slot::S7,
        }
    }

    /// Its number, 0 to 7.
    fn number(self) -> u64 {
        self as u64
    }
}

/// The outcomes of the last calls, one bit each (up to 128 calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountRing {
    failed: [u64; 2],
    slow: [u64; 2],
    /// Calls held (≤ the configured length).
    len: u8,
    /// Where the next outcome goes.
    next: u8,
    /// Calls the ring holds when full (1 ..= 128).
    capacity: u8,
}

impl CountRing {
    fn new(capacity: u8) -> Self {
        CountRing { failed: [0; 2], slow: [0; 2], len: 0, next: 0, capacity }
    }

    fn record(&mut self, failed: bool, slow: bool) {
        let i = usize::from(self.next);
        set_bit(&mut self.failed, i, failed);
        set_bit(&mut self.slow, i, slow);
        self.next = (self.next + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
    }

    /// `count` successes: past a full ring's worth, only where the next
    /// outcome goes still moves.
    fn record_successes(&mut self, count: u32) {
        let capacity = u32::from(self.capacity);
        for _ in 0..count.min(capacity) {
            self.record(false, false);
        }
        let rest = count.saturating_sub(capacity) % capacity;
        // `rest` < capacity ≤ 128, so the sum fits a u32 and the result a u8.
        self.next = ((u32::from(self.next) + rest) % capacity) as u8;
    }

    fn totals(&self) -> WindowCounts {
        let count = |bits: &[u64; 2]| bits[0].count_ones() + bits[1].count_ones();
        WindowCounts { calls: u32::from(self.len), failures: count(&self.failed), slow: count(&self.slow) }
    }
}

fn set_bit(bits: &mut [u64; 2], i: usize, value: bool) {
    let mask = 1u64 << (i % 64);
    if value {
        bits[i / 64] |= mask;
    } else {
        bits[i / 64] &= !mask;
    }
}

/// A window's counters, with time relative to the snapshot (its saved form).
#[cfg(feature = "snapshot")]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum SavedWindow {
    #[default]
    Off,
    Time {
        /// Calls, failures, slow calls per bucket, by slot.
        buckets: [[u32; 3]; SLOTS],
        newest_slot: u8,
        /// Time until the newest bucket ends.
        newest_end_in_us: u64,
    },
    Count {
        failed: [u64; 2],
        slow: [u64; 2],
        len: u8,
        next: u8,
    },
}

#[cfg(feature = "snapshot")]
mod saved {
    use super::*;
    use crate::error::SnapshotError;

    impl WindowState {
        /// The window as of `now`, times relative to `now`.
        pub(crate) fn save(&self, window: Window, now: Instant) -> SavedWindow {
            match (self, window) {
                (WindowState::Time(ring), Window::Time(span)) => {
                    let mut ring = ring.clone();
                    ring.advance(span, now);
                    SavedWindow::Time {
                        buckets: ring.buckets.map(|b| [b.calls, b.failures, b.slow]),
                        newest_slot: ring.newest_slot as u8,
                        // At least 1: at the end of time (`u64::MAX` µs) the
                        // bucket's end saturates to `now`.
                        newest_end_in_us: (ring.newest_end - now.as_micros()).max(1),
                    }
                }
                (WindowState::Count(ring), _) => {
                    SavedWindow::Count { failed: ring.failed, slow: ring.slow, len: ring.len, next: ring.next }
                }
                (WindowState::Off, _) | (WindowState::Time(_), Window::Count(_)) => SavedWindow::Off,
            }
        }

        /// The window `saved` describes, for a breaker whose window is
        /// `window` (`windowed`: whether a policy counts over it), at `now`.
        pub(crate) fn load(
            window: Window,
            windowed: bool,
            saved: &SavedWindow,
            now: Instant,
        ) -> Result<Self, SnapshotError> {
            let corrupt = |what| Err(SnapshotError::Corrupt(what));
            match (WindowState::new(window, windowed), saved, window) {
                (WindowState::Off, SavedWindow::Off, _) => Ok(WindowState::Off),
                (
                    WindowState::Time(_),
                    SavedWindow::Time { buckets, newest_slot, newest_end_in_us },
                    Window::Time(span),
                ) => {
                    let sane = |[calls, failures, slow]: [u32; 3]| slow <= failures && failures <= calls;
                    if !buckets.iter().all(|b| sane(*b)) {
                        return corrupt("window bucket counts");
                    }
                    if usize::from(*newest_slot) >= SLOTS || *newest_end_in_us == 0 || *newest_end_in_us > width(span) {
                        return corrupt("window bucket position");
                    }
                    Ok(WindowState::Time(TimeRing {
                        buckets: buckets.map(|[calls, failures, slow]| Bucket { calls, failures, slow }),
                        newest_slot: Slot::of(u64::from(*newest_slot)),
                        newest_end: now.as_micros().saturating_add(*newest_end_in_us),
                    }))
                }
                (WindowState::Count(empty), SavedWindow::Count { failed, slow, len, next }, _) => {
                    let capacity = empty.capacity;
                    let beyond = |bits: &[u64; 2]| {
                        (usize::from(capacity)..usize::from(MAX_WINDOW_CALLS))
                            .any(|i| bits[i / 64] & (1 << (i % 64)) != 0)
                    };
                    let slow_not_failed = (slow[0] & !failed[0]) | (slow[1] & !failed[1]) != 0;
                    if *len > capacity || *next >= capacity || beyond(failed) || beyond(slow) || slow_not_failed {
                        return corrupt("count window");
                    }
                    if *len < capacity && *next != *len {
                        return corrupt("count window position");
                    }
                    Ok(WindowState::Count(CountRing { failed: *failed, slow: *slow, len: *len, next: *next, capacity }))
                }
                _ => corrupt("window kind"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn successes_at_once_leave_a_ring_as_one_by_one() {
        let span = Duration::from_millis(8_000);
        for capacity in [1u8, 3, 64, 128] {
            for count in [0u32, 1, 2, u32::from(capacity) - 1, u32::from(capacity), u32::from(capacity) + 5, 1_000] {
                // A ring with failures in it, its next slot not at the start.
                let mut one = CountRing::new(capacity);
                for i in 0..u32::from(capacity) + 2 {
                    one.record(i % 3 == 0, i % 5 == 0);
                }
                let mut many = one.clone();
                for _ in 0..count {
                    one.record(false, false);
                }
                many.record_successes(count);
                assert_eq!(many, one, "capacity {capacity}, {count} successes");
            }
        }
        let mut one = TimeRing::new(span);
        one.record(span, ms(0), true, false);
        let mut many = one.clone();
        for _ in 0..300 {
            one.record(span, ms(9_500), false, false);
        }
        many.record_successes(span, ms(9_500), 300);
        assert_eq!(many, one);
    }

    #[test]
    fn time_ring_forgets_buckets_older_than_the_span() {
        let span = Duration::from_millis(8_000);
        let mut ring = TimeRing::new(span);
        ring.record(span, ms(0), true, false);
        ring.record(span, ms(3_500), true, true);
        assert_eq!(ring.totals(span, ms(7_999)), WindowCounts { calls: 2, failures: 2, slow: 1 });
        assert_eq!(ring.totals(span, ms(8_000)).failures, 1);
        assert_eq!(ring.totals(span, ms(10_999)).failures, 1);
        assert_eq!(ring.totals(span, ms(11_000)), WindowCounts::default());
        ring.record(span, ms(9_000_000_000), false, false);
        assert_eq!(ring.totals(span, ms(9_000_000_000)), WindowCounts { calls: 1, failures: 0, slow: 0 });
        ring.record(span, Instant::MAX, true, false);
        assert_eq!(ring.totals(span, Instant::MAX).failures, 1);
    }

    #[test]
    fn time_ring_counts_exactly_beyond_u16() {
        let span = Duration::from_secs(8);
        let mut ring = TimeRing::new(span);
        for i in 0..70_000u32 {
            ring.record(span, ms(0), i % 2 == 0, false);
        }
        assert_eq!(ring.totals(span, ms(0)), WindowCounts { calls: 70_000, failures: 35_000, slow: 0 });
    }

    #[test]
    fn bucket_end_is_where_the_bucket_holding_now_ends() {
        let window = Window::Time(Duration::from_millis(8_000));
        let mut state = WindowState::new(window, true);
        assert_eq!(state.bucket_end(window, ms(0)), ms(1_000));
        assert_eq!(state.bucket_end(window, ms(999)), ms(1_000));
        assert_eq!(state.bucket_end(window, ms(1_000)), ms(2_000));
        state.record(window, ms(5_500), true, false);
        assert_eq!(state.bucket_end(window, ms(5_500)), ms(6_000));
        assert_eq!(state.bucket_end(window, ms(17_250)), ms(18_000));
        let count = Window::Count(5);
        assert_eq!(WindowState::new(count, true).bucket_end(count, ms(3)), Instant::MAX);
    }

    #[test]
    fn count_ring_holds_the_last_n_outcomes() {
        let mut ring = CountRing::new(128);
        for i in 0..130 {
            ring.record(i < 3, i == 0);
        }
        assert_eq!(ring.totals(), WindowCounts { calls: 128, failures: 1, slow: 0 });
        let mut ring = CountRing::new(3);
        ring.record(true, false);
        ring.record(false, false);
        assert_eq!(ring.totals(), WindowCounts { calls: 2, failures: 1, slow: 0 });
        ring.record(false, false);
        ring.record(false, false);
        assert_eq!(ring.totals(), WindowCounts { calls: 3, failures: 0, slow: 0 });
    }
}
