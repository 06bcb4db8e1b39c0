//! The state machine.

use core::borrow::Borrow;

use crate::config::Config;
use crate::error::ConfigError;
use crate::histogram::LatencyHistogram;
use crate::jitter;
use crate::meter::{Meter, Report};
use crate::metrics::{MetricsSnapshot, ReadMetrics};
use crate::permit::{Admission, Outcome, Permit, Rejection};
use crate::policy;
use crate::state::{Mode, Reason, State, Transition};
use crate::time::{Duration, Instant};
use crate::window::{Totals, WindowState};

/// Where the breaker is. Each phase change starts a new *generation*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    /// Open until `deadline`.
    Open,
    /// Probing; `deadline` is when the in-flight probes are given up.
    HalfOpen,
    /// Held open until `deadline`.
    ForcedOpen,
    /// Held open until released.
    HeldOpen,
    /// Admits and counts everything; never trips.
    Disabled,
}

/// Counters a caller (or a conformance test) can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Failures in a row since the last success.
    pub consecutive_failures: u32,
    /// What the window holds now.
    pub window: Totals,
    /// Half-open probes admitted and not yet reported or given up.
    pub probes_in_flight: u16,
    /// Successful probes in the current half-open period.
    pub probe_successes: u16,
    /// The current state period; permits from earlier ones are stale.
    pub generation: u32,
}

/// A circuit breaker for one upstream.
///
/// `C` is how the breaker holds its [`Config`]: by value (the default), or
/// shared, as `&Config` or `Arc<Config>`, when many breakers use one.
/// `M` is what it measures with: nothing (`()`, the default, costs nothing),
/// or [`Metrics`](crate::Metrics); see [`Breaker::with_meter`].
///
/// Every method takes `now` from the caller; see [`crate::time`] for what a
/// `now` earlier than one already seen means (time stands still).
#[derive(Debug, Clone)]
pub struct Breaker<C = Config, M = ()> {
    config: C,
    meter: M,
    window: WindowState,
    /// The latest `now` seen.
    latest: Instant,
    /// Open / ForcedOpen: when it ends. HalfOpen: when in-flight probes are given up.
    deadline: Instant,
    /// The open period the next probe failure multiplies (before jitter).
    open_for: Duration,
    generation: u32,
    consecutive: u32,
    probes_in_flight: u16,
    probe_successes: u16,
    phase: Phase,
}

impl<C: Borrow<Config>> Breaker<C> {
    /// A closed breaker that measures nothing, or the first invalid field of `config`.
    pub fn new(config: C) -> Result<Self, ConfigError> {
        Self::with_meter(config, ())
    }
}

impl<C: Borrow<Config>, M: Meter> Breaker<C, M> {
    /// A closed breaker that reports what happens to `meter` (for example
    /// [`Metrics::default()`](crate::Metrics)), or the first invalid field of `config`.
    pub fn with_meter(config: C, meter: M) -> Result<Self, ConfigError> {
        let c = config.borrow();
        c.validate()?;
        Ok(Breaker {
            window: WindowState::new(c),
            latest: Instant::ZERO,
            deadline: Instant::ZERO,
            open_for: c.open_timeout,
            generation: 0,
            consecutive: 0,
            probes_in_flight: 0,
            probe_successes: 0,
            phase: Phase::Closed,
            config,
            meter,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        self.config.borrow()
    }

    /// The meter.
    pub fn meter(&self) -> &M {
        &self.meter
    }

    /// The meter, to change (switch an `Option` meter on, say).
    pub fn meter_mut(&mut self) -> &mut M {
        &mut self.meter
    }

    /// Asks to make a call. Admitted calls get a [`Permit`] that must be
    /// reported with [`record`](Self::record).
    #[inline(always)]
    pub fn try_acquire(&mut self, now: Instant) -> Admission {
        self.latest = self.latest.max(now);
        match self.phase {
            Phase::Closed => {
                self.meter.admitted(self.latest);
                Admission { decision: Ok(self.permit(self.latest)), transition: None }
            }
            Phase::Open if self.latest < self.deadline => {
                self.meter.rejected(self.latest);
                let retry_after = Some(self.deadline - self.latest);
                Admission { decision: Err(Rejection { state: State::Open, retry_after }), transition: None }
            }
            _ => self.try_acquire_any(now),
        }
    }

    /// [`try_acquire`](Self::try_acquire), every case.
    #[inline(never)]
    fn try_acquire_any(&mut self, now: Instant) -> Admission {
        let transition = self.advance(now);
        let transition = self.emit(transition);
        let now = self.latest;
        let decision = match self.phase {
            Phase::Closed | Phase::Disabled => Ok(self.permit(now)),
            Phase::HalfOpen if self.probes_in_flight < self.config().half_open_max_attempts => {
                self.probes_in_flight += 1;
                self.deadline = now + self.config().probe_timeout;
                Ok(self.permit(now))
            }
            _ => Err(self.rejection(now)),
        };
        match decision {
            Ok(_) => self.meter.admitted(now),
            Err(_) => self.meter.rejected(now),
        }
        Admission { decision, transition }
    }

    /// Reports how a permitted call ended. Returns the transition this caused
    /// (or a timed one it observed). A permit from an earlier state period is
    /// stale: its report changes nothing.
    #[inline(always)]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        // The hot path, kept small enough to inline: a success in the closed
        // state (which has no timed changes) that is not slow.
        if self.phase == Phase::Closed && outcome == Outcome::Success && permit.generation == self.generation {
            let now = self.latest.max(now);
            let c = self.config.borrow();
            let latency = now - permit.issued_at;
            if c.slow_call_duration.is_none_or(|limit| latency <= limit) {
                self.latest = now;
                self.consecutive = 0;
                let window = c.window;
                self.window.record(window, now, false, false);
                self.meter.reported(Report { outcome, latency, slow: false, stale: false });
                return None;
            }
        }
        let transition = self.record_any(permit, outcome, now);
        self.emit(transition)
    }

    /// [`record`](Self::record), every case.
    #[inline(never)]
    fn record_any(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        let observed = self.advance(now);
        let now = self.latest;
        let latency = now - permit.issued_at;
        let stale = permit.generation != self.generation;
        let counted = !stale && matches!(outcome, Outcome::Success | Outcome::Failure);
        let slow = counted && self.config().slow_call_duration.is_some_and(|limit| latency > limit);
        self.meter.reported(Report { outcome, latency, slow, stale });
        if stale {
            return observed;
        }
        let failed = match outcome {
            Outcome::Success => slow,
            Outcome::Failure => true,
            Outcome::Ignored | Outcome::Cancelled => {
                if self.phase == Phase::HalfOpen {
                    self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
                }
                return None;
            }
        };
        match self.phase {
            Phase::Closed | Phase::Disabled => self.count_closed(now, failed, slow),
            Phase::HalfOpen => self.count_probe(now, failed),
            // No permit of the current generation exists while open.
            Phase::Open | Phase::ForcedOpen | Phase::HeldOpen => None,
        }
    }

    /// Whether a caller may admit calls on its own and hand their outcomes over
    /// later with [`record_batch`](Self::record_batch): true while closed, in no
    /// manual mode, with no slow-call threshold. (Then every
    /// [`try_acquire`](Self::try_acquire) admits, and nothing changes until a
    /// report or a manual call, which the caller makes through the breaker.)
    pub fn admits_freely(&self) -> bool {
        self.phase == Phase::Closed && self.config().slow_call_duration.is_none()
    }

    /// Reports `count` calls with the same `outcome`, admitted without asking
    /// while [`admits_freely`](Self::admits_freely) held in `generation`, as if
    /// each had been acquired and reported at `now` (their latency is not
    /// measured). Calls from a generation that has passed are stale.
    pub fn record_batch(&mut self, generation: u32, outcome: Outcome, count: u32, now: Instant) -> Option<Transition> {
        let mut transition = None;
        for _ in 0..count {
            self.meter.admitted(self.latest.max(now));
            let reported = self.record(Permit { generation, issued_at: now }, outcome, now);
            transition = transition.or(reported);
        }
        transition
    }

    /// Counts `count` calls rejected without asking, while the caller knew the
    /// breaker was open (from an earlier [`Rejection`]); only the meter sees them.
    pub fn count_rejections(&mut self, count: u32, now: Instant) {
        self.latest = self.latest.max(now);
        for _ in 0..count {
            self.meter.rejected(self.latest);
        }
    }

    /// Applies any timed change due by `now` (open time ending). Call it when
    /// [`poll_timeout`](Self::poll_timeout) says, to learn of transitions
    /// without waiting for the next call.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Transition> {
        let transition = self.advance(now);
        self.emit(transition)
    }

    /// When the breaker next changes by itself (open time ends, in-flight
    /// probes are given up), if it will.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Open => Some(self.deadline),
            Phase::ForcedOpen => Some(self.deadline),
            Phase::HalfOpen if self.probes_in_flight > 0 => Some(self.deadline),
            _ => None,
        }
    }

    /// The state at `now`, counting elapsed time; changes nothing.
    pub fn state(&self, now: Instant) -> State {
        self.view(now).0
    }

    /// Whether a call would be admitted at `now`; consumes nothing.
    pub fn check(&self, now: Instant) -> Result<(), Rejection> {
        match self.retry_after(now) {
            Some(Duration::ZERO) => Ok(()),
            retry_after => Err(Rejection { state: self.state(now), retry_after }),
        }
    }

    /// How long from `now` until a call may be admitted: zero if it would be
    /// now, `None` if held open until released. Changes nothing.
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        let now = now.max(self.latest);
        let (state, probes_in_flight) = self.view(now);
        match state {
            State::Closed => Some(Duration::ZERO),
            State::HalfOpen if probes_in_flight < self.config().half_open_max_attempts => Some(Duration::ZERO),
            _ if self.phase == Phase::HeldOpen => None,
            _ => Some(self.deadline - now),
        }
    }

    /// The manual control in force at `now`.
    pub fn mode(&self, now: Instant) -> Mode {
        match self.phase {
            Phase::HeldOpen => Mode::ForcedOpen { until: None },
            Phase::ForcedOpen if now.max(self.latest) < self.deadline => {
                Mode::ForcedOpen { until: Some(self.deadline) }
            }
            Phase::Disabled => Mode::Disabled,
            _ => Mode::Normal,
        }
    }

    /// The counters at `now`; changes nothing.
    pub fn counts(&self, now: Instant) -> Counts {
        let now = now.max(self.latest);
        let (state, probes_in_flight) = self.view(now);
        let fresh_half_open = state.is_half_open() && self.phase != Phase::HalfOpen;
        Counts {
            consecutive_failures: self.consecutive,
            window: self.window.totals(self.config().window, now),
            probes_in_flight,
            probe_successes: if fresh_half_open { 0 } else { self.probe_successes },
            generation: self.generation,
        }
    }

    /// Everything measured at `now`; changes nothing.
    pub fn metrics(&self, now: Instant) -> MetricsSnapshot
    where
        M: ReadMetrics,
    {
        let now = now.max(self.latest);
        let metrics = self.meter.metrics();
        let pending = match self.phase {
            Phase::Open | Phase::ForcedOpen if self.deadline <= now => Some((self.deadline, State::HalfOpen)),
            _ => None,
        };
        let [time_closed, time_half_open, time_open] = metrics.times(now, pending);
        let counters = *metrics.counters();
        let window = self.window.totals(self.config().window, now);
        MetricsSnapshot {
            state: self.state(now),
            counters,
            opens_last_24h: metrics.opens_last_24h(now),
            time_closed,
            time_open,
            time_half_open,
            mean_time_open: (counters.opens > 0).then(|| Duration::from_micros(time_open.as_micros() / counters.opens)),
            error_rate: (window.calls > 0).then(|| f64::from(window.failures) * 100.0 / f64::from(window.calls)),
            latency: self.meter.latency().and_then(LatencyHistogram::summary),
        }
    }

    /// Holds the breaker open: for `duration`, then half-open; or, with
    /// `None`, until [`release`](Self::release). Seed 000's throttle webhook.
    pub fn force_open(&mut self, now: Instant, duration: Option<Duration>) -> Option<Transition> {
        let from = self.clamp(now);
        match duration {
            Some(d) => {
                self.enter(Phase::ForcedOpen);
                self.deadline = self.latest + d;
            }
            None => self.enter(Phase::HeldOpen),
        }
        self.change(from, State::Open, Reason::ForcedOpen)
    }

    /// Closes the breaker now and forgets the failures counted and the backoff
    /// reached. Ends any manual mode.
    pub fn force_close(&mut self, now: Instant) -> Option<Transition> {
        let from = self.clamp(now);
        self.close();
        self.change(from, State::Closed, Reason::ForcedClose)
    }

    /// Admits every call and keeps counting outcomes, but never trips, until
    /// [`release`](Self::release).
    pub fn disable(&mut self, now: Instant) -> Option<Transition> {
        let from = self.clamp(now);
        if from != State::Closed {
            self.close();
        }
        self.enter(Phase::Disabled);
        self.change(from, State::Closed, Reason::Disabled)
    }

    /// Ends [`force_open`](Self::force_open) (the breaker goes half-open and
    /// probes) or [`disable`](Self::disable) (it judges again from the next
    /// report, on the outcomes counted meanwhile). Otherwise does nothing.
    pub fn release(&mut self, now: Instant) -> Option<Transition> {
        let observed = self.advance(now);
        match self.phase {
            Phase::ForcedOpen | Phase::HeldOpen => {
                self.enter(Phase::HalfOpen);
                self.change(State::Open, State::HalfOpen, Reason::Released)
            }
            Phase::Disabled => {
                self.enter(Phase::Closed);
                self.emit(observed)
            }
            _ => self.emit(observed),
        }
    }

    /// Back to a new breaker's state: closed, nothing counted, no backoff, no
    /// manual mode. (What the meter measured is kept.)
    pub fn reset(&mut self, now: Instant) -> Option<Transition> {
        let from = self.clamp(now);
        self.close();
        self.change(from, State::Closed, Reason::Reset)
    }

    #[inline]
    fn permit(&self, now: Instant) -> Permit {
        Permit { generation: self.generation, issued_at: now }
    }

    fn rejection(&self, now: Instant) -> Rejection {
        let retry_after = (self.phase != Phase::HeldOpen).then(|| self.deadline - now);
        let state = if self.phase == Phase::HalfOpen { State::HalfOpen } else { State::Open };
        Rejection { state, retry_after }
    }

    /// Takes `now` as the latest time (never earlier than one seen) and
    /// returns the state as last reported: a timed change that is due but not
    /// yet reported is not applied, so that the transitions a breaker returns
    /// always form one unbroken chain (each `from` is the previous `to`).
    fn clamp(&mut self, now: Instant) -> State {
        self.latest = self.latest.max(now);
        match self.phase {
            Phase::Closed | Phase::Disabled => State::Closed,
            Phase::Open | Phase::ForcedOpen | Phase::HeldOpen => State::Open,
            Phase::HalfOpen => State::HalfOpen,
        }
    }

    /// The state and probes in flight at `now`, with timed changes applied
    /// in the view only.
    fn view(&self, now: Instant) -> (State, u16) {
        let now = now.max(self.latest);
        match self.phase {
            Phase::Closed | Phase::Disabled => (State::Closed, 0),
            Phase::Open | Phase::ForcedOpen if now >= self.deadline => (State::HalfOpen, 0),
            Phase::Open | Phase::ForcedOpen | Phase::HeldOpen => (State::Open, 0),
            Phase::HalfOpen if now >= self.deadline => (State::HalfOpen, 0),
            Phase::HalfOpen => (State::HalfOpen, self.probes_in_flight),
        }
    }

    /// Moves the clock to `now` and applies the timed changes due.
    fn advance(&mut self, now: Instant) -> Option<Transition> {
        self.latest = self.latest.max(now);
        if self.latest < self.deadline {
            return None;
        }
        match self.phase {
            Phase::Open | Phase::ForcedOpen => {
                let (at, forced) = (self.deadline, self.phase == Phase::ForcedOpen);
                let reason = if forced { Reason::ForcedOpenEnded } else { Reason::OpenTimeout };
                self.enter(Phase::HalfOpen);
                Some(Transition { from: State::Open, to: State::HalfOpen, reason, at })
            }
            Phase::HalfOpen if self.probes_in_flight > 0 => {
                // Every in-flight probe was admitted at least `probe_timeout`
                // ago: give them up; their late reports will be stale.
                self.probes_in_flight = 0;
                self.generation = self.generation.wrapping_add(1);
                None
            }
            _ => None,
        }
    }

    /// Starts a new state period in `phase`.
    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.generation = self.generation.wrapping_add(1);
        self.probes_in_flight = 0;
        self.probe_successes = 0;
        self.deadline = Instant::ZERO;
    }

    /// The transition of a manual operation, if the state changed; reported
    /// to the meter.
    fn change(&mut self, from: State, to: State, reason: Reason) -> Option<Transition> {
        let transition = (from != to).then_some(Transition { from, to, reason, at: self.latest });
        self.emit(transition)
    }

    /// Reports `transition` to the meter and hands it on.
    #[inline]
    fn emit(&mut self, transition: Option<Transition>) -> Option<Transition> {
        if let Some(t) = &transition {
            self.meter.transitioned(t);
        }
        transition
    }

    /// Closes, forgetting the outcomes counted and the backoff reached.
    fn close(&mut self) {
        self.enter(Phase::Closed);
        self.window.clear();
        self.consecutive = 0;
        self.open_for = self.config().open_timeout;
    }

    fn open(&mut self, now: Instant, reason: Reason, from: State) -> Option<Transition> {
        self.enter(Phase::Open);
        let c = self.config();
        self.deadline = now + jitter::shorten(self.open_for, c.jitter, c.jitter_seed, self.generation);
        Some(Transition { from, to: State::Open, reason, at: now })
    }

    fn count_closed(&mut self, now: Instant, failed: bool, slow: bool) -> Option<Transition> {
        self.consecutive = if failed { self.consecutive.saturating_add(1) } else { 0 };
        let window = self.config().window;
        self.window.record(window, now, failed, slow);
        if !failed || self.phase == Phase::Disabled {
            return None;
        }
        let c = self.config();
        let reason = policy::trip_reason(c, self.consecutive, self.window.totals(c.window, now))?;
        self.open_for = self.config().open_timeout;
        self.open(now, reason, State::Closed)
    }

    fn count_probe(&mut self, now: Instant, failed: bool) -> Option<Transition> {
        self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        let c = self.config();
        if failed {
            self.open_for = policy::grown_open_period(c, self.open_for);
            return self.open(now, Reason::ProbeFailed, State::HalfOpen);
        }
        let needed = c.half_open_successes;
        self.probe_successes += 1;
        if self.probe_successes < needed {
            return None;
        }
        self.close();
        Some(Transition { from: State::HalfOpen, to: State::Closed, reason: Reason::ProbesSucceeded, at: now })
    }
}

#[cfg(feature = "serde")]
mod saved {
    use super::*;
    use crate::snapshot::{Persist, SNAPSHOT_VERSION, SavedPhase, Snapshot, SnapshotError};

    impl<C: Borrow<Config>, M: Meter + Persist> Breaker<C, M> {
        /// The breaker's complete state at `now`, with times relative to `now`.
        pub fn snapshot(&self, now: Instant) -> Snapshot {
            let now = now.max(self.latest);
            let config = self.config();
            let phase = match self.phase {
                Phase::Closed => SavedPhase::Closed,
                Phase::Open => SavedPhase::Open,
                Phase::HalfOpen => SavedPhase::HalfOpen,
                Phase::ForcedOpen => SavedPhase::ForcedOpen,
                Phase::HeldOpen => SavedPhase::HeldOpen,
                Phase::Disabled => SavedPhase::Disabled,
            };
            Snapshot {
                version: SNAPSHOT_VERSION,
                config: config.fingerprint(),
                phase,
                generation: self.generation,
                deadline_in_us: (self.deadline - now).as_micros(),
                open_for_us: self.open_for.as_micros(),
                consecutive: self.consecutive,
                probes_in_flight: self.probes_in_flight,
                probe_successes: self.probe_successes,
                window: self.window.save(config.window, now),
                metrics: self.meter.save(now),
            }
        }

        /// The breaker `snapshot` describes, configured by `config` (which must
        /// be the configuration it was taken with), at `now`.
        pub fn restore(config: C, snapshot: &Snapshot, now: Instant) -> Result<Self, SnapshotError> {
            let s = snapshot;
            if s.version != SNAPSHOT_VERSION {
                return Err(if s.version > SNAPSHOT_VERSION {
                    SnapshotError::NewerVersion { found: s.version, supported: SNAPSHOT_VERSION }
                } else {
                    SnapshotError::Corrupt("version")
                });
            }
            let c = config.borrow();
            if c.validate().is_err() || s.config != c.fingerprint() {
                return Err(SnapshotError::ConfigMismatch);
            }
            let corrupt = |what| Err(SnapshotError::Corrupt(what));
            let (phase, probing) = match s.phase {
                SavedPhase::Closed => (Phase::Closed, false),
                SavedPhase::Open => (Phase::Open, false),
                SavedPhase::HalfOpen => (Phase::HalfOpen, true),
                SavedPhase::ForcedOpen => (Phase::ForcedOpen, false),
                SavedPhase::HeldOpen => (Phase::HeldOpen, false),
                SavedPhase::Disabled => (Phase::Disabled, false),
            };
            if !probing && (s.probes_in_flight > 0 || s.probe_successes > 0) {
                return corrupt("probes outside half-open");
            }
            if s.probes_in_flight > c.half_open_max_attempts || s.probe_successes >= c.half_open_successes {
                return corrupt("probes");
            }
            let open_for = Duration::from_micros(s.open_for_us);
            if open_for < c.open_timeout || open_for > c.max_open_timeout {
                return corrupt("open period");
            }
            let deadline_in = Duration::from_micros(s.deadline_in_us);
            let bounded = match phase {
                Phase::Open => deadline_in <= c.max_open_timeout,
                Phase::HalfOpen => deadline_in <= c.probe_timeout,
                _ => true,
            };
            if !bounded {
                return corrupt("deadline");
            }
            let window = WindowState::load(c, &s.window, now)?;
            let meter = M::load(s.metrics.as_ref(), now)?;
            Ok(Breaker {
                window,
                latest: now,
                deadline: now + deadline_in,
                open_for,
                generation: s.generation,
                consecutive: s.consecutive,
                probes_in_flight: s.probes_in_flight,
                probe_successes: s.probe_successes,
                phase,
                config,
                meter,
            })
        }
    }
}
