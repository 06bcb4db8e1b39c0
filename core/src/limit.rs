//! How many calls may be in flight at once: none (no limit), a fixed
//! bulkhead, or an adaptive limit — the rules of admission by count, beside
//! the rules of admission by state in [`policy`](crate::policy).
//!
//! A breaker limits how long failures go on; a limit bounds how many calls
//! an upstream gets at once. Without one, a breaker that closes lets a whole
//! backlog through in the same instant, and an upstream that had just
//! recovered falls over again (seed 000's gateway flags an instance after
//! minutes of 429s). The adaptive limit is TCP's congestion control
//! (Reno, without fast retransmit) applied to calls in flight:
//!
//! - it starts at the probe count (`half_open_max_attempts`, within
//!   `min..=max`), when the breaker is new, when it probes and after every
//!   recovery;
//! - it grows only while it is what holds callers back: each step needs a
//!   refusal since the last step, start or cut (TCP's congestion window
//!   validation), so that a quiet spell does not grow it to `max` for the
//!   next burst to find;
//! - *slow start*: below the threshold, each success adds one (the limit
//!   doubles per round trip);
//! - *congestion avoidance*: from the threshold on, `limit` successes add one
//!   (one per round trip);
//! - a failure (a slow call included) halves it, at most once per *loss
//!   window*: the calls in flight at a cut were sent under the limit that was
//!   just cut, so until as many calls holding a slot have been reported
//!   (whatever their outcome) no failure cuts again — TCP's "once per window
//!   of data", counted in reports rather than by when each call began, so
//!   that it needs no clock reading at admission; the threshold becomes the
//!   halved limit, never below `min`.
//!
//! The simulator (`sim/`, `make demo`) chose it over AIMD (Netflix's
//! concurrency-limits defaults: ×0.9 per drop, +1 per success) and over a
//! limit that does not adapt: see `sim/README.md`. The limit moves with the
//! sequence of reports only (never with the calls in flight when a success
//! ends, nor with when a call began), so successes handed over in bulk under
//! a [`Licence`](crate::Licence) move it exactly as the same successes
//! reported one by one.

use crate::config::{ConcurrencyLimit, Config};
use crate::policy;
use crate::time::{Duration, Instant};
use crate::window::{Window, WindowCounts};

/// A breaker's concurrency limit: none (every call admitted by count, no
/// state kept) or the state of its limit. With an allocator that state is
/// behind a pointer, so that a breaker without a limit (the common case:
/// a registry of a million of them) holds 8 bytes for it, not 80; it is
/// allocated once, when the breaker is made. Without one (`no_std` without
/// `alloc`) it is inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limiter(Option<Held>);

#[cfg(feature = "alloc")]
type Held = alloc::boxed::Box<LimitState>;
#[cfg(not(feature = "alloc"))]
type Held = LimitState;

impl AsRef<LimitState> for LimitState {
    fn as_ref(&self) -> &LimitState {
        self
    }
}

impl AsMut<LimitState> for LimitState {
    fn as_mut(&mut self) -> &mut LimitState {
        self
    }
}

impl Limiter {
    /// A new breaker's limit, if `c` has one.
    pub(crate) fn new(c: &Config) -> Self {
        Limiter(c.concurrency_limit.map(|_| Held::from(LimitState::new(c))))
    }

    /// The limit's state (`None`: no limit).
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&LimitState> {
        self.0.as_ref().map(AsRef::as_ref)
    }

    #[inline(always)]
    fn get_mut(&mut self) -> Option<&mut LimitState> {
        self.0.as_mut().map(AsMut::as_mut)
    }

    /// Calls that may be in flight now (`u32::MAX`: no limit).
    #[inline(always)]
    pub(crate) fn limit(&self) -> u32 {
        self.get().map_or(u32::MAX, |l| l.limit)
    }

    /// See [`LimitState::window_cleared`].
    pub(crate) fn window_cleared(&mut self) {
        if let Some(l) = self.get_mut() {
            l.window_cleared();
        }
    }

    /// See [`LimitState::admitted`].
    #[inline(always)]
    pub(crate) fn admitted(&mut self, now: Instant, in_flight: u32) {
        if let Some(l) = self.get_mut() {
            l.admitted(now, in_flight);
        }
    }

    /// See [`LimitState::give_up_pending`].
    #[inline(always)]
    pub(crate) fn give_up_pending(&self) -> bool {
        self.get().is_some_and(LimitState::give_up_pending)
    }

    /// See [`LimitState::reported`].
    #[inline(always)]
    pub(crate) fn reported(&mut self) {
        if let Some(l) = self.get_mut() {
            l.reported();
        }
    }

    /// See [`LimitState::refused`].
    pub(crate) fn refused(&mut self, c: &Config, now: Instant) {
        if let Some(l) = self.get_mut() {
            l.refused(c, now);
        }
    }

    /// See [`LimitState::gives_up`].
    pub(crate) fn gives_up(&self, c: &Config, in_flight: u32, now: Instant) -> bool {
        self.get().is_some_and(|l| l.gives_up(c, in_flight, now))
    }

    /// See [`LimitState::give_up_at`].
    pub(crate) fn give_up_at(&self, c: &Config) -> Option<Instant> {
        self.get()?.give_up_at(c)
    }

    /// See [`LimitState::restart`].
    pub(crate) fn restart(&mut self, c: &Config) {
        if let Some(l) = self.get_mut() {
            l.restart(c);
        }
    }

    /// See [`LimitState::follow_group`] (nothing to follow without a limit).
    pub(crate) fn follow_group(&mut self, seen: Share, share: u32, in_flight: u32) {
        if let Some(l) = self.get_mut() {
            l.follow_group(seen, share, in_flight);
        }
    }

    /// See [`LimitState::take_share`].
    pub(crate) fn take_share(&mut self) -> Option<Share> {
        self.get_mut()?.take_share()
    }

    /// See [`LimitState::cut_pending`].
    pub(crate) fn cut_pending(&self) -> bool {
        self.get().is_some_and(LimitState::cut_pending)
    }

    /// See [`LimitState::leave_group`].
    pub(crate) fn leave_group(&mut self, c: &Config) {
        if let Some(l) = self.get_mut() {
            l.leave_group(c);
        }
    }

    /// Whether a call may go while `in_flight` are out.
    #[inline(always)]
    pub(crate) fn admits(&self, in_flight: u32) -> bool {
        self.get().is_none_or(|l| l.admits(in_flight))
    }

    /// See [`LimitState::forget_in_flight`].
    pub(crate) fn forget_in_flight(&mut self) {
        if let Some(l) = self.get_mut() {
            l.forget_in_flight();
        }
    }

    /// See [`LimitState::ended`].
    pub(crate) fn ended(&mut self) {
        if let Some(l) = self.get_mut() {
            l.ended();
        }
    }

    /// See [`LimitState::succeeded`].
    #[inline(always)]
    pub(crate) fn succeeded(&mut self, c: &Config) {
        if let Some(l) = self.get_mut() {
            l.succeeded(c);
        }
    }

    /// See [`LimitState::succeeded_many`].
    pub(crate) fn succeeded_many(&mut self, c: &Config, count: u32) {
        if let Some(l) = self.get_mut() {
            l.succeeded_many(c, count);
        }
    }

    /// See [`LimitState::failed`].
    pub(crate) fn failed(&mut self, c: &Config, in_flight: u32) {
        if let Some(l) = self.get_mut() {
            l.failed(c, in_flight);
        }
    }
}

/// The limit in force and what adapts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LimitState {
    /// Calls that may be in flight now (`u32::MAX`: no limit).
    pub(crate) limit: u32,
    /// Below it each success adds one; from it on, `limit` successes add one.
    threshold: u32,
    /// Successes toward the next step above the threshold.
    credit: u32,
    /// Reports still to come before a failure may cut again (the calls in
    /// flight at the latest cut).
    recovering: u32,
    /// When the window began counting, in µs on the caller's clock (before
    /// its origin for a breaker restored early in a new process): the first
    /// admission after it was cleared (or made); `i64::MAX` before it (the
    /// round-trip estimate's span).
    counting_since: i64,
    /// The first refusal for the limit since the latest report;
    /// [`Instant::MAX`]: none (when a full limit gives its calls up).
    refused_since: Instant,
    /// Whether the limit has refused a call since it last grew, started or
    /// was cut (only then does it grow).
    pressed: bool,
    /// In a group (see [`Share`]): `limit` is this process's share of it.
    share: Option<Share>,
}

/// An adaptive limit shared by a group of processes (issue 23): the group
/// has one limit, this process admits within its share of it, and its
/// successes and failures adapt the group's limit by the same rules as a
/// process's own (a step per success below the threshold, a step per
/// group-limit successes above it; a failure halves it, once per loss
/// window), through its member's exchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Share {
    /// The group's limit and threshold, as last answered, and its epoch
    /// (every cut or restart increments it; steps earned at another epoch
    /// are not added).
    pub(crate) group: u32,
    pub(crate) threshold: u32,
    pub(crate) epoch: u64,
    /// Steps earned since the latest exchange.
    pub(crate) steps: u32,
    /// A failure asks the group's limit to be halved (until an answer at a
    /// later epoch shows the group's limit changed).
    pub(crate) cut: bool,
    /// A call was admitted or refused for the limit since the latest
    /// exchange (the process has demand: it takes a share).
    pub(crate) wanted: bool,
    /// Whether the group's calls in flight filled its limit at the latest
    /// exchange: a refusal here is then the group's (else the other
    /// processes' shares have room, and the shares move instead).
    pub(crate) full: bool,
    /// The most calls in flight since the latest exchange.
    pub(crate) peak: u32,
    /// When the share lapses if no exchange renews it (the process's
    /// exchanges stopped without failing: a loop that ended, a thread that
    /// died): from then on, the first refusal makes the limit its own.
    pub(crate) expires: Instant,
}

/// `now` in µs as a signed number (times beyond 2^63 µs, 292,000 years,
/// read as that).
fn signed(now: Instant) -> i64 {
    i64::try_from(now.as_micros()).unwrap_or(i64::MAX - 1)
}

/// The adaptive bounds, if the limit adapts.
fn adaptive(c: &Config) -> Option<(u32, u32)> {
    match c.concurrency_limit {
        Some(ConcurrencyLimit::Adaptive { min, max }) => Some((min, max)),
        _ => None,
    }
}

impl LimitState {
    /// A new breaker's limit.
    pub(crate) fn new(c: &Config) -> Self {
        let mut limiter = LimitState {
            limit: u32::MAX,
            threshold: u32::MAX,
            credit: 0,
            recovering: 0,
            counting_since: i64::MAX,
            refused_since: Instant::MAX,
            pressed: false,
            share: None,
        };
        limiter.restart(c);
        limiter
    }

    /// The window was cleared: it counts again from the next admission.
    pub(crate) fn window_cleared(&mut self) {
        self.counting_since = i64::MAX;
    }

    /// A call was admitted at `now` (the first of a batch, for a binding),
    /// `in_flight` calls out with it.
    #[inline(always)]
    pub(crate) fn admitted(&mut self, now: Instant, in_flight: u32) {
        self.counting_since = self.counting_since.min(signed(now));
        if let Some(share) = self.share.as_mut() {
            share.wanted = true;
            share.peak = share.peak.max(in_flight);
        }
    }

    /// Whether the calls in flight may be given up if nothing is reported
    /// (the limit has refused a call since the latest report).
    #[inline(always)]
    pub(crate) fn give_up_pending(&self) -> bool {
        self.refused_since != Instant::MAX
    }

    /// How long the window has counted at `now` (zero before it began).
    fn counted_for(&self, now: Instant) -> Duration {
        let span = i128::from(signed(now)) - i128::from(self.counting_since);
        Duration::from_micros(u64::try_from(span.max(0)).unwrap_or(u64::MAX))
    }

    /// A call holding a slot was reported, or a new state period began:
    /// the time to give up starts again with the next refusal.
    #[inline(always)]
    pub(crate) fn reported(&mut self) {
        self.refused_since = Instant::MAX;
    }

    /// A call was refused for the limit at `now` (a share of a group's
    /// limit that lapsed gives way to the process's own limit here).
    pub(crate) fn refused(&mut self, c: &Config, now: Instant) {
        self.refused_since = self.refused_since.min(now);
        self.pressed = true;
        if let Some(share) = self.share.as_mut() {
            share.wanted = true;
            if now >= share.expires {
                self.leave_group(c);
            }
        }
    }

    /// Whether the calls in flight are given up at `now`: the limit is full
    /// and has refused calls for `probe_timeout` with no call reported.
    /// (Refusals and reports, unlike admissions, are never batched by a
    /// binding, so the breaker knows when each happened.)
    pub(crate) fn gives_up(&self, c: &Config, in_flight: u32, now: Instant) -> bool {
        in_flight > 0 && !self.admits(in_flight) && self.give_up_at(c).is_some_and(|at| now >= at)
    }

    /// When a full limit gives up its calls if nothing is reported.
    pub(crate) fn give_up_at(&self, c: &Config) -> Option<Instant> {
        (self.refused_since != Instant::MAX).then(|| policy::probe_give_up_at(c, self.refused_since))
    }

    /// After a recovery (or a reset), and when probing begins: the starting
    /// limit, slow start anew.
    pub(crate) fn restart(&mut self, c: &Config) {
        self.credit = 0;
        self.recovering = 0;
        self.refused_since = Instant::MAX;
        self.pressed = false;
        match c.concurrency_limit {
            None => self.limit = u32::MAX,
            Some(ConcurrencyLimit::Fixed(n)) => self.limit = n,
            Some(ConcurrencyLimit::Adaptive { min, max }) => {
                self.limit = u32::from(c.half_open_max_attempts).clamp(min, max);
                self.threshold = max;
                if let Some(share) = self.share.as_mut() {
                    // The group restarts its limit when it closes (the
                    // closing exchange says so; a follower's share is set
                    // from the answer that closed it).
                    share.steps = 0;
                    share.cut = false;
                }
            }
        }
    }

    /// In a group, at an exchange: the group's limit as `seen` (its limit,
    /// threshold, epoch, whether full, when it lapses; nothing counted yet)
    /// and this process's `share` of it, `in_flight` calls out. A group
    /// limit that went down (a cut anywhere) opens a loss window here: the
    /// calls out were sent under the larger share.
    pub(crate) fn follow_group(&mut self, seen: Share, share: u32, in_flight: u32) {
        let fresh = Share { steps: 0, cut: false, wanted: false, peak: 0, ..seen };
        match self.share.as_mut() {
            Some(s) if s.epoch == seen.epoch => {
                s.group = seen.group;
                s.threshold = seen.threshold;
                s.full = seen.full;
                s.expires = seen.expires;
            }
            Some(s) => {
                if seen.group < s.group {
                    self.recovering = in_flight;
                    self.credit = 0;
                }
                *s = Share { wanted: s.wanted, peak: s.peak, ..fresh };
            }
            None => self.share = Some(fresh),
        }
        self.limit = share;
        self.threshold = seen.threshold;
    }

    /// What this process asks of the group's limit at an exchange: its
    /// steps since the last (taken), whether it asks for a cut (kept until
    /// the group's limit changes), whether it had demand (taken). `None`
    /// outside a group.
    pub(crate) fn take_share(&mut self) -> Option<Share> {
        let share = self.share.as_mut()?;
        let taken = *share;
        share.steps = 0;
        share.wanted = false;
        share.peak = 0;
        Some(taken)
    }

    /// Whether a failure asks the group's limit to be cut.
    pub(crate) fn cut_pending(&self) -> bool {
        self.share.is_some_and(|s| s.cut)
    }

    /// Out of the group (the store failed, or the process left): the limit
    /// adapts by this process alone again, from its share (at least `min`).
    pub(crate) fn leave_group(&mut self, c: &Config) {
        if self.share.take().is_some()
            && let Some((min, max)) = adaptive(c)
        {
            self.limit = self.limit.clamp(min, max);
            self.threshold = self.threshold.clamp(min, max);
        }
    }

    /// Whether a call may go while `in_flight` are out.
    #[inline(always)]
    pub(crate) fn admits(&self, in_flight: u32) -> bool {
        in_flight < self.limit
    }

    /// The calls in flight were given up: none of their reports will count.
    pub(crate) fn forget_in_flight(&mut self) {
        self.recovering = 0;
    }

    /// A call holding a slot ended without a verdict (ignored, cancelled,
    /// or stale).
    pub(crate) fn ended(&mut self) {
        self.recovering = self.recovering.saturating_sub(1);
    }

    /// A success was counted: the adaptive limit grows, if it has refused a
    /// call since it last grew.
    #[inline(always)]
    pub(crate) fn succeeded(&mut self, c: &Config) {
        if let Some((_, max)) = adaptive(c) {
            self.recovering = self.recovering.saturating_sub(1);
            if self.pressed {
                match self.share.as_mut() {
                    Some(share) => {
                        if grow_group(share, &mut self.credit, max) {
                            self.pressed = false;
                        }
                    }
                    None => self.grow(max),
                }
            }
        }
    }

    /// `count` successes were counted: as many [`succeeded`](Self::succeeded)s
    /// (nothing to do without an adaptive limit).
    pub(crate) fn succeeded_many(&mut self, c: &Config, count: u32) {
        if adaptive(c).is_some() {
            for _ in 0..count {
                self.succeeded(c);
            }
        }
    }

    /// One success's growth: one step below the threshold, a credit above
    /// it (a step per `limit` credits). A step needs a refusal before the next.
    fn grow(&mut self, max: u32) {
        if self.limit < self.threshold {
            self.limit += 1;
            self.pressed = false;
        } else {
            self.credit += 1;
            if self.credit >= self.limit {
                self.credit = 0;
                self.limit += 1;
                self.pressed = false;
            }
        }
        self.limit = self.limit.min(max);
    }

    /// A failure (or slow call) was counted, `in_flight` calls still out:
    /// the adaptive limit is halved, once per loss window.
    pub(crate) fn failed(&mut self, c: &Config, in_flight: u32) {
        let Some((min, _)) = adaptive(c) else { return };
        if self.recovering > 0 {
            self.recovering -= 1;
            return;
        }
        if let Some(share) = self.share.as_mut() {
            // The group's limit is halved at the next exchange; this
            // process's share at once (down to none: others may have one).
            share.cut = true;
            share.steps = 0;
            self.limit /= 2;
            self.credit = 0;
            self.recovering = in_flight;
            self.pressed = false;
            return;
        }
        self.threshold = (self.limit / 2).max(min);
        self.limit = self.threshold;
        self.credit = 0;
        self.recovering = in_flight;
        self.pressed = false;
    }

    /// When a caller refused because the limit is full should try again:
    /// about one round trip, by Little's law from what the window counted
    /// (`in_flight` calls out, `counted` calls ended over the time the window
    /// covers: since it began counting, at most its length). Never more than
    /// the probes' hint (a tenth of `open_timeout`), which is also the hint
    /// when the window counts no time, covers none yet, or counted nothing;
    /// never more than `give_up` either (when the calls would be given up);
    /// at least 1 µs.
    pub(crate) fn retry_hint(
        &self,
        c: &Config,
        in_flight: u32,
        counted: WindowCounts,
        now: Instant,
        give_up: Duration,
    ) -> Duration {
        let ceiling = policy::probe_retry_hint(c, give_up);
        let Window::Time(length) = c.window else { return ceiling };
        let span = self.counted_for(now).min(length);
        if counted.calls == 0 || span.is_zero() {
            return ceiling;
        }
        let round_trip = u128::from(span.as_micros()) * u128::from(in_flight.max(1)) / u128::from(counted.calls);
        let round_trip = u64::try_from(round_trip).unwrap_or(u64::MAX);
        Duration::from_micros(round_trip.max(1)).min(ceiling)
    }
}

/// The spread added to an open rejection's hint at `now` with a limit
/// (none without): uniform over the tenth of `open_timeout` after the
/// deadline, drawn from the seed and the moment, so that a backlog
/// refused while open does not come back in one instant.
pub(crate) fn spread(c: &Config, generation: u32, now: Instant) -> Duration {
    if c.concurrency_limit.is_none() {
        return Duration::ZERO;
    }
    let width = (c.open_timeout.as_micros() / 10).max(1);
    let draw = crate::jitter::draw(c.jitter_seed ^ now.as_micros(), generation);
    Duration::from_micros(draw % width)
}

/// One success's growth of a group's limit, counted in `share` (`credit`:
/// successes toward the next step above the threshold): whether it made a
/// step (a step needs a refusal before the next).
fn grow_group(share: &mut Share, credit: &mut u32, max: u32) -> bool {
    let limit = share.group.saturating_add(share.steps);
    if limit >= max || !share.full {
        return false;
    }
    if limit < share.threshold {
        share.steps += 1;
        return true;
    }
    *credit += 1;
    if *credit >= limit {
        *credit = 0;
        share.steps += 1;
        return true;
    }
    false
}

#[cfg(feature = "snapshot")]
mod saved {
    use super::*;
    use crate::error::SnapshotError;

    /// A limit's state in a snapshot: the adaptive limit reached, and how
    /// long the window had counted (at most its length; `None`: not yet).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct SavedLimit {
        pub(crate) limit: u32,
        pub(crate) threshold: u32,
        pub(crate) credit: u32,
        pub(crate) pressed: bool,
        pub(crate) counting_for_us: Option<u64>,
    }

    impl Limiter {
        pub(crate) fn save(&self, c: &Config, now: Instant) -> Option<SavedLimit> {
            self.get()?.save(c, now)
        }

        /// The limiter `saved` describes at `now` (see [`LimitState::load`]).
        pub(crate) fn load(c: &Config, saved: Option<&SavedLimit>, now: Instant) -> Result<Self, SnapshotError> {
            let state = LimitState::load(c, saved, now)?;
            Ok(Limiter(c.concurrency_limit.map(|_| Held::from(state))))
        }
    }

    impl LimitState {
        fn save(&self, c: &Config, now: Instant) -> Option<SavedLimit> {
            let counting_for = match c.window {
                Window::Time(length) if self.counting_since != i64::MAX => {
                    Some(self.counted_for(now).min(length).as_micros())
                }
                _ => None,
            };
            let (limit, threshold, credit, pressed) = match c.concurrency_limit? {
                ConcurrencyLimit::Fixed(n) => (n, n, 0, false),
                ConcurrencyLimit::Adaptive { .. } => (self.limit, self.threshold, self.credit, self.pressed),
            };
            Some(SavedLimit { limit, threshold, credit, pressed, counting_for_us: counting_for })
        }

        /// The limiter `saved` describes at `now`. Calls issued before `now`
        /// are stale for the restored breaker and hold no slot, so no loss
        /// window is open.
        fn load(c: &Config, saved: Option<&SavedLimit>, now: Instant) -> Result<Self, SnapshotError> {
            let corrupt = Err(SnapshotError::Corrupt("concurrency limit"));
            let mut limiter = LimitState::new(c);
            let Some(limit) = c.concurrency_limit else {
                return if saved.is_none() { Ok(limiter) } else { corrupt };
            };
            let Some(s) = saved else { return corrupt };
            let (min, max) = match limit {
                ConcurrencyLimit::Fixed(n) => (n, n),
                ConcurrencyLimit::Adaptive { min, max } => (min, max),
            };
            let in_bounds = |n: u32| (min..=max).contains(&n);
            if !in_bounds(s.limit) || !in_bounds(s.threshold) || s.credit > s.limit {
                return corrupt;
            }
            if let Some(us) = s.counting_for_us {
                let counting_for = Duration::from_micros(us);
                match c.window {
                    Window::Time(length) if counting_for <= length => {
                        let since = i128::from(signed(now)) - i128::from(us);
                        limiter.counting_since = i64::try_from(since).unwrap_or(i64::MIN);
                    }
                    _ => return corrupt,
                }
            }
            limiter.limit = s.limit;
            limiter.threshold = s.threshold;
            limiter.credit = s.credit;
            limiter.pressed = s.pressed;
            Ok(limiter)
        }
    }
}

#[cfg(feature = "snapshot")]
pub(crate) use saved::SavedLimit;

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive_config(min: u32, max: u32) -> Config {
        Config { concurrency_limit: Some(ConcurrencyLimit::Adaptive { min, max }), ..Config::default() }
    }

    #[test]
    fn slow_start_doubles_then_one_per_round_trip() {
        let c = adaptive_config(1, 100);
        let mut l = LimitState::new(&c);
        assert_eq!(l.limit, 3);
        l.succeeded(&c);
        assert_eq!(l.limit, 3, "no growth before the limit has refused a call");
        for _ in 0..3 {
            l.refused(&c, Instant::ZERO);
            l.succeeded(&c);
        }
        assert_eq!(l.limit, 6);
        l.succeeded(&c);
        assert_eq!(l.limit, 6, "a step needs a refusal before it");
        // Cut with 2 calls still in flight: their reports do not cut again.
        l.failed(&c, 2);
        assert_eq!((l.limit, l.threshold), (3, 3));
        l.failed(&c, 1);
        l.ended();
        assert_eq!(l.limit, 3);
        l.refused(&c, Instant::ZERO);
        for _ in 0..3 {
            l.succeeded(&c);
        }
        assert_eq!(l.limit, 4);
        l.failed(&c, 0);
        l.failed(&c, 0);
        assert_eq!(l.limit, 1, "cut twice, never below min");
    }
}
