//! The state machine: it moves a breaker through its [`Phase`]s by the call
//! protocol and manual control, applying the rules it decides by (what a
//! call meets, what trips it, what a probe needs, how long it stays open,
//! what a binding may do without asking), which are in
//! [`policy`](crate::policy).

use core::borrow::Borrow;

use crate::config::Config;
use crate::error::ConfigError;
use crate::histogram::LatencyHistogram;
use crate::licence::Licence;
use crate::limit::{LimitState, Limiter};
use crate::meter::{Meter, Report};
use crate::metrics::{MetricsReading, ReadMetrics};
use crate::permit::{Admission, Outcome, Permit, Rejection, Wait};
use crate::phase::{Phase, Probes};
use crate::policy::{self, Gate, Grant};
use crate::state::{Counts, Mode, Reason, State, Transition, Transitions};
use crate::time::{Duration, Instant};
use crate::window::WindowState;

mod group;
pub(crate) use group::Local;

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
    /// The open period the next probe failure multiplies (before jitter).
    open_for: Duration,
    generation: u32,
    consecutive: u32,
    /// Calls admitted and not yet reported nor given up, of every
    /// generation from `held_from` on (a stale report still frees its slot).
    in_flight: u32,
    /// Calls of generations before this were given up: they hold no slot.
    held_from: u32,
    /// Half-open probes admitted in this generation, not yet reported.
    probes_in_flight: u16,
    probe_successes: u16,
    phase: Phase,
    /// Where probes go from (elsewhere: another process of its group).
    probes: Probes,
    limiter: Limiter,
    /// What was counted while closed, since it was made (a group's deltas).
    tally: Tally,
    /// Whether its latest close was its probes' (not a manual operation's).
    closed_by_probes: bool,
}

/// Calls counted while closed (or disabled), failures (slow calls among
/// them) and slow calls, and calls rejected while open, since a breaker was
/// made: what its group member sends, as running totals, so that an
/// exchange sent twice counts once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Calls counted.
    pub calls: u64,
    /// Failures, slow calls included.
    pub failures: u64,
    /// Slow calls.
    pub slow: u64,
    /// Calls rejected while open (the demand a probe would serve).
    pub rejected: u64,
}

impl Tally {
    #[inline(always)]
    fn count(&mut self, failed: bool, slow: bool) {
        self.calls += 1;
        self.failures += u64::from(failed);
        self.slow += u64::from(slow);
    }
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
            window: WindowState::new(c.window, c.windowed()),
            latest: Instant::ZERO,
            open_for: policy::first_open_period(c),
            generation: 0,
            consecutive: 0,
            in_flight: 0,
            held_from: 0,
            probes_in_flight: 0,
            probe_successes: 0,
            phase: Phase::Closed,
            probes: Probes::HERE,
            limiter: Limiter::new(c),
            tally: Tally::default(),
            closed_by_probes: false,
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
        // The hot path: `policy::gate`'s closed row with room in the limit,
        // and its open row, inlined; every other case asks `gate`.
        match self.phase {
            Phase::Closed if self.limiter.admits(self.in_flight) => {
                self.in_flight += 1;
                self.limiter.admitted(self.latest, self.in_flight);
                self.meter.admitted(self.latest);
                Admission { decision: Ok(self.permit(self.latest)), transition: None }
            }
            Phase::Open { until } if self.latest < until => {
                self.tally.rejected += 1;
                self.meter.rejected(self.latest);
                let wait = self.open_wait(until, self.latest);
                Admission { decision: Err(Rejection { state: State::Open, wait }), transition: None }
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
        let decision = match self.wait_at(now) {
            Some(wait) => Err(Rejection { state: self.phase.state(), wait }),
            None => {
                if let Phase::HalfOpen { .. } = self.phase {
                    self.probes_in_flight += 1;
                    self.phase = Phase::HalfOpen { give_up_at: policy::probe_give_up_at(self.config(), now) };
                }
                self.in_flight = self.in_flight.saturating_add(1);
                self.limiter.admitted(now, self.in_flight);
                Ok(self.permit(now))
            }
        };
        match decision {
            Ok(_) => self.meter.admitted(now),
            Err(rejection) => {
                if let Wait::LimitFull { .. } = rejection.wait {
                    self.limiter.refused(self.config.borrow(), now);
                }
                self.tally.rejected += 1;
                self.meter.rejected(now)
            }
        }
        Admission { decision, transition }
    }

    /// Reports how a permitted call ended. Returns the transition this caused
    /// (or a timed one it observed). A permit from an earlier state period is
    /// stale: its report changes nothing.
    #[inline(always)]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        // The hot path, kept small enough to inline: a success in the closed
        // state (which has no timed change, unless a full limit may give its
        // calls up) that is not slow.
        if self.phase == Phase::Closed
            && outcome == Outcome::Success
            && permit.generation == self.generation
            && !self.limiter.give_up_pending()
        {
            let now = self.latest.max(now);
            let c = self.config.borrow();
            let latency = now - permit.issued_at;
            if !policy::is_slow(c, latency) {
                self.latest = now;
                self.consecutive = 0;
                self.in_flight = self.in_flight.saturating_sub(1);
                self.limiter.reported();
                self.limiter.succeeded(c);
                let window = c.window;
                self.window.record(window, now, false, false);
                self.tally.calls += 1;
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
        let slow = counted && policy::is_slow(self.config(), latency);
        self.meter.reported(Report { outcome, latency, slow, stale });
        let held = self.holds_slot(permit.generation);
        if held {
            self.in_flight = self.in_flight.saturating_sub(1);
            self.limiter.reported();
        }
        if !stale && self.phase.state() == State::HalfOpen {
            self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        }
        let Some(failed) = policy::verdict(outcome, stale, slow) else {
            // A call that held a slot ended without a verdict: it counts
            // toward the loss window only.
            if held {
                self.limiter.ended();
            }
            return observed;
        };
        match self.phase {
            Phase::Closed | Phase::Disabled => self.count_closed(now, failed, slow),
            Phase::HalfOpen { .. } => self.count_probe(now, failed),
            // No permit of the current generation exists while open.
            Phase::Open { .. } | Phase::ForcedOpen { .. } | Phase::HeldOpen => None,
        }
    }

    /// What a caller may do at `now` without asking: see [`Licence`]. Changes
    /// nothing.
    pub fn licence(&self, now: Instant) -> Licence {
        let now = now.max(self.latest);
        let c = self.config();
        let room = c.concurrency_limit.is_some().then(|| self.limiter.limit().saturating_sub(self.in_flight));
        match policy::grant(c, self.phase, now, self.meter.measures_latency(), room) {
            Grant::Admit => Licence::Admit {
                generation: self.generation,
                until: self.window.bucket_end(c.window, now),
                slow_after: policy::slow_after(c),
                bucket_decides: policy::bucket_decides(c),
                room,
            },
            Grant::Reject { until } => Licence::Reject { until },
            Grant::Ask => Licence::Ask,
        }
    }

    /// Counts `count` calls admitted under a [`Licence::Admit`], the first
    /// of them at `first` (only the meter sees them; their reports follow).
    pub fn admit_licensed(&mut self, count: u32, first: Instant) {
        self.latest = self.latest.max(first);
        self.in_flight = self.in_flight.saturating_add(count);
        if count > 0 {
            self.limiter.admitted(first, self.in_flight);
        }
        // At `first`, not the latest time seen: if these are the first calls
        // the breaker ever admitted, its time in states starts there.
        self.meter.admitted_many(first, count);
    }

    /// Reports `count` successes of calls admitted under a
    /// [`Licence::Admit`] of `generation`, as if each were reported at `at`
    /// (the latest of their readings, before the licence's `until`). Their
    /// latency is not measured. From a generation that has passed, they are
    /// stale.
    pub fn record_successes(&mut self, generation: u32, count: u32, at: Instant) -> Option<Transition> {
        // The common case at once: as many `record` hot paths (each sees the
        // same time, so the same latency, and changes no phase).
        if count > 0
            && self.phase == Phase::Closed
            && generation == self.generation
            && !self.limiter.give_up_pending()
            && !policy::is_slow(self.config(), self.latest.max(at) - at)
        {
            let now = self.latest.max(at);
            let c = self.config.borrow();
            self.latest = now;
            self.consecutive = 0;
            self.in_flight = self.in_flight.saturating_sub(count);
            self.limiter.reported();
            self.limiter.succeeded_many(c, count);
            let window = c.window;
            self.window.record_successes(window, now, count);
            self.tally.calls += u64::from(count);
            let report = Report { outcome: Outcome::Success, latency: now - at, slow: false, stale: false };
            self.meter.reported_many(report, count);
            return None;
        }
        let mut transition = None;
        for _ in 0..count {
            let reported = self.record(Permit { generation, issued_at: at }, Outcome::Success, at);
            transition = transition.or(reported);
        }
        transition
    }

    /// Hands over, in one step, what a binding did under a
    /// [`Licence::Admit`] of `generation` since it last did: `admitted`
    /// calls, the first read at `first` ([`admit_licensed`](Self::admit_licensed)),
    /// and `successes` ([`record_successes`](Self::record_successes), the
    /// latest read at `at`). The admissions go first unless the first was
    /// read after `at` (then none of the successes' calls is among them), so
    /// that nothing tells the breaker a later time before the successes and
    /// no success ends a call not yet counted in flight.
    pub fn hand_over(
        &mut self,
        admitted: u32,
        first: Instant,
        generation: u32,
        successes: u32,
        at: Instant,
    ) -> Option<Transition> {
        let admissions_first = successes == 0 || first <= at;
        if admitted > 0 && admissions_first {
            self.admit_licensed(admitted, first);
        }
        let transition = self.record_successes(generation, successes, at);
        if admitted > 0 && !admissions_first {
            self.admit_licensed(admitted, first);
        }
        transition
    }

    /// Counts `count` calls rejected at `now` under a [`Licence::Reject`]
    /// (only the meter sees them).
    pub fn count_rejections(&mut self, count: u32, now: Instant) {
        self.latest = self.latest.max(now);
        self.tally.rejected += u64::from(count);
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
        policy::phase_deadline(self.phase, self.probes_in_flight).or_else(|| {
            let full = self.in_flight > 0 && !self.limiter.admits(self.in_flight);
            full.then(|| self.limiter.give_up_at(self.config())).flatten()
        })
    }

    /// The state at `now`, counting elapsed time; changes nothing.
    pub fn state(&self, now: Instant) -> State {
        let now = now.max(self.latest);
        match policy::open_period_ended(self.phase, now) {
            Some(_) => State::HalfOpen,
            None => self.phase.state(),
        }
    }

    /// Whether a call would be admitted at `now`; consumes nothing.
    pub fn check(&self, now: Instant) -> Result<(), Rejection> {
        match self.wait_at(now) {
            None => Ok(()),
            Some(wait) => Err(Rejection { state: self.state(now), wait }),
        }
    }

    /// How long from `now` until a call is worth trying: zero if it would be
    /// admitted now, `None` if held open until released (see
    /// [`Wait::retry_after`]). Changes nothing.
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        self.wait_at(now).map_or(Some(Duration::ZERO), Wait::retry_after)
    }

    /// The manual control in force at `now`.
    pub fn mode(&self, now: Instant) -> Mode {
        match self.phase {
            Phase::HeldOpen => Mode::ForcedOpen { until: None },
            Phase::ForcedOpen { until } if now.max(self.latest) < until => Mode::ForcedOpen { until: Some(until) },
            Phase::Disabled => Mode::Disabled,
            _ => Mode::Normal,
        }
    }

    /// Probes that succeeded in the current half-open period (0 in any
    /// other state).
    #[cfg(feature = "alloc")]
    pub(crate) fn probe_successes(&self) -> u16 {
        if self.phase.state() == State::HalfOpen { self.probe_successes } else { 0 }
    }

    /// The counters at `now`; changes nothing.
    pub fn counts(&self, now: Instant) -> Counts {
        let now = now.max(self.latest);
        let (in_flight, probes_in_flight) = match self.given_up_by(now) {
            true => (0, 0),
            false => (self.in_flight, self.probes_in_flight),
        };
        let probing = self.state(now) == State::HalfOpen;
        let probe_successes = if self.phase.state() == State::HalfOpen { self.probe_successes } else { 0 };
        let limiter = self.limiter_at(now);
        Counts {
            consecutive_failures: self.consecutive,
            window: self.window.totals(self.config().window, now),
            in_flight,
            concurrency_limit: limiter.map(|l| l.limit),
            probes_in_flight: if probing { probes_in_flight } else { 0 },
            probe_successes,
            generation: self.generation,
        }
    }

    /// Everything measured at `now`; changes nothing.
    pub fn metrics(&self, now: Instant) -> MetricsReading
    where
        M: ReadMetrics,
    {
        let now = now.max(self.latest);
        let metrics = self.meter.metrics();
        let pending = policy::open_period_ended(self.phase, now).map(|(until, _)| (until, State::HalfOpen));
        let [time_closed, time_half_open, time_open] = metrics.times(now, pending);
        let counters = *metrics.counters();
        let window = self.window.totals(self.config().window, now);
        MetricsReading {
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
    pub fn force_open(&mut self, now: Instant, duration: Option<Duration>) -> Transitions {
        let (observed, from) = self.settle(now);
        match duration {
            Some(d) => self.enter(Phase::ForcedOpen { until: self.latest + d }),
            None => self.enter(Phase::HeldOpen),
        }
        Transitions::of(observed, self.change(from, State::Open, Reason::ForcedOpen))
    }

    /// Holds the breaker open for at least `duration`, then half-open: the
    /// upstream's own hint, such as an HTTP `Retry-After`. As
    /// [`force_open`](Self::force_open)`(now, Some(duration))`, except that it
    /// never shortens an open period in force: when the breaker is already
    /// open until `now + duration` or later (its own open period, a longer
    /// forced one, or held until [`release`](Self::release)), nothing changes.
    /// One call, so two callers with different hints keep the longer.
    pub fn force_open_at_least(&mut self, now: Instant, duration: Duration) -> Transitions {
        let (observed, from) = self.settle(now);
        let until = self.latest + duration;
        if policy::open_lasts_until(self.open_until(), until) {
            return Transitions::of(observed, None);
        }
        self.enter(Phase::ForcedOpen { until });
        Transitions::of(observed, self.change(from, State::Open, Reason::ForcedOpen))
    }

    /// When the open period in force ends: `Some(None)` when held until
    /// released, `None` when the breaker is not open.
    fn open_until(&self) -> Option<Option<Instant>> {
        match self.phase {
            Phase::Open { until } | Phase::ForcedOpen { until } => Some(Some(until)),
            Phase::HeldOpen => Some(None),
            _ => None,
        }
    }

    /// Closes the breaker now and forgets the failures counted and the backoff
    /// reached. Ends any manual mode.
    pub fn force_close(&mut self, now: Instant) -> Transitions {
        let (observed, from) = self.settle(now);
        self.close();
        Transitions::of(observed, self.change(from, State::Closed, Reason::ForcedClose))
    }

    /// Admits every call and keeps counting outcomes, but never trips, until
    /// [`release`](Self::release).
    pub fn disable(&mut self, now: Instant) -> Transitions {
        let (observed, from) = self.settle(now);
        if from != State::Closed {
            self.close();
        }
        self.enter(Phase::Disabled);
        Transitions::of(observed, self.change(from, State::Closed, Reason::Disabled))
    }

    /// Ends [`force_open`](Self::force_open) (the breaker goes half-open and
    /// probes) or [`disable`](Self::disable) (it judges again from the next
    /// report, on the outcomes counted meanwhile). Otherwise does nothing.
    pub fn release(&mut self, now: Instant) -> Transitions {
        let (observed, _) = self.settle(now);
        let own = match self.phase {
            Phase::ForcedOpen { .. } | Phase::HeldOpen => {
                self.enter(Phase::HalfOpen { give_up_at: self.latest });
                self.change(State::Open, State::HalfOpen, Reason::Released)
            }
            Phase::Disabled => {
                self.enter(Phase::Closed);
                None
            }
            _ => None,
        };
        Transitions::of(observed, own)
    }

    /// Back to a new breaker's state: closed, nothing counted, no backoff, no
    /// manual mode. (What the meter measured is kept.)
    pub fn reset(&mut self, now: Instant) -> Transitions {
        let (observed, from) = self.settle(now);
        self.close();
        Transitions::of(observed, self.change(from, State::Closed, Reason::Reset))
    }

    /// Takes over from `previous`, a breaker this one replaces at `now`:
    /// its clock and generations continue, so the permits `previous`
    /// issued are stale here.
    #[cfg(feature = "alloc")]
    pub(crate) fn follow<D, N>(&mut self, previous: &Breaker<D, N>, now: Instant) {
        self.follow_generation(previous.generation, previous.latest.max(now));
    }

    /// Starts after `generation` (a breaker of the same name had it), so
    /// that its permits are stale here.
    #[cfg(feature = "alloc")]
    pub(crate) fn follow_generation(&mut self, generation: u32, now: Instant) {
        self.latest = self.latest.max(now);
        self.generation = generation.wrapping_add(1);
        self.held_from = self.generation;
    }

    #[inline]
    fn permit(&self, now: Instant) -> Permit {
        Permit { generation: self.generation, issued_at: now }
    }

    /// What a call must wait for at `now` (`None`: it would be admitted),
    /// with timed changes applied in the view only.
    fn wait_at(&self, now: Instant) -> Option<Wait> {
        let now = now.max(self.latest);
        match policy::gate(self.config(), self.phase, self.probes_in_flight, self.probes, now) {
            Gate::Pass => None,
            Gate::UntilHalfOpen { until } => Some(self.open_wait(until, now)),
            Gate::Held => Some(Wait::Held),
            Gate::ProbesBusy { retry, give_up } => Some(Wait::ProbesBusy { retry, give_up }),
            Gate::Limit { probing, restarted: false } => self.limit_wait(self.limiter.get(), now, probing),
            // Probing would begin: the first probe meets the limit started again.
            Gate::Limit { probing, restarted: true } => self.limit_wait(self.limiter_at(now).as_ref(), now, probing),
        }
    }

    /// The limiter as it would be at `now`: an open period that has ended
    /// starts probing, and the limit again.
    fn limiter_at(&self, now: Instant) -> Option<LimitState> {
        let mut limiter = *self.limiter.get()?;
        if policy::open_period_ended(self.phase, now).is_some() {
            limiter.restart(self.config());
        }
        Some(limiter)
    }

    /// Whether the calls in flight are given up by `now` (half-open probes
    /// not reported in time, or a full limit idle for `probe_timeout`).
    fn given_up_by(&self, now: Instant) -> bool {
        policy::probes_given_up(self.phase, self.probes_in_flight, now)
            || self.limiter.gives_up(self.config(), self.in_flight, now)
    }

    /// Whether a permit of `generation` is older than generation `since`,
    /// counting back from the current generation (so that it holds when the
    /// count wraps past `u32::MAX`).
    #[cfg(feature = "alloc")]
    pub(crate) fn issued_before(&self, generation: u32, since: u32) -> bool {
        self.generation.wrapping_sub(generation) > self.generation.wrapping_sub(since)
    }

    /// Whether a report of a permit of `generation` frees a slot: one from
    /// `held_from` up to the current generation (not given up, not forged).
    fn holds_slot(&self, generation: u32) -> bool {
        self.generation.wrapping_sub(generation) <= self.generation.wrapping_sub(self.held_from)
    }

    /// Gives up every call in flight: their slots are freed, and their
    /// permits, of earlier generations from now on, are stale.
    fn give_up(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.held_from = self.generation;
        self.in_flight = 0;
        self.probes_in_flight = 0;
        self.limiter.forget_in_flight();
        // The next give-up waits for refusals of the calls admitted from now.
        self.limiter.reported();
    }

    /// An open rejection's wait at `now`, the period ending at `until`.
    #[inline]
    fn open_wait(&self, until: Instant, now: Instant) -> Wait {
        let left = until - now;
        let spread = crate::limit::spread(self.config(), self.generation, now);
        Wait::UntilHalfOpen { left, retry: Duration::from_micros(left.as_micros().saturating_add(spread.as_micros())) }
    }

    /// Whether the concurrency limit refuses a call at `now`, and the wait:
    /// about one round trip while closed; while `probing`, the probes' hint,
    /// since the window counted nothing while the breaker was open. A full
    /// limit whose calls are given up by `now` refuses nothing, and no limit
    /// (`None`) refuses nothing.
    fn limit_wait(&self, limiter: Option<&LimitState>, now: Instant, probing: bool) -> Option<Wait> {
        let limiter = limiter?;
        let c = self.config();
        if limiter.admits(self.in_flight) || limiter.gives_up(c, self.in_flight, now) {
            return None;
        }
        // The first refusal starts the time after which the calls are given up.
        let give_up = limiter.give_up_at(c).unwrap_or_else(|| policy::probe_give_up_at(c, now)) - now;
        let retry = match probing {
            true => policy::probe_retry_hint(c, give_up),
            false => limiter.retry_hint(c, self.in_flight, self.window.totals(c.window, now), now, give_up),
        };
        Some(Wait::LimitFull { retry })
    }

    /// Applies the timed changes due by `now` (reported to the meter), for a
    /// manual operation; returns the transition applied, if any, and the
    /// state the operation starts from.
    fn settle(&mut self, now: Instant) -> (Option<Transition>, State) {
        let observed = self.advance(now);
        let observed = self.emit(observed);
        (observed, self.phase.state())
    }

    /// Moves the clock to `now` and applies the timed changes due.
    fn advance(&mut self, now: Instant) -> Option<Transition> {
        self.latest = self.latest.max(now);
        if let Some((until, reason)) = policy::open_period_ended(self.phase, self.latest) {
            self.enter(Phase::HalfOpen { give_up_at: until });
            return Some(Transition { from: State::Open, to: State::HalfOpen, reason, at: until });
        }
        // Every in-flight probe was admitted at least `probe_timeout` ago,
        // or a full limit has refused calls for as long with no report:
        // give up the calls in flight; their late reports will be stale.
        if self.given_up_by(self.latest) {
            self.give_up();
        }
        None
    }

    /// Starts a new state period in `phase`: the permits issued so far are
    /// stale, but hold their slots until reported. Probing starts an
    /// adaptive limit again from the probe count.
    fn enter(&mut self, phase: Phase) {
        if let Phase::HalfOpen { .. } = phase {
            self.limiter.restart(self.config.borrow());
        }
        self.phase = phase;
        self.generation = self.generation.wrapping_add(1);
        // A limit refuses nothing while open, and an open breaker's licence
        // (rejecting without asking) must not outlive a timed give-up.
        self.limiter.reported();
        self.probes_in_flight = 0;
        self.probe_successes = 0;
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

    /// Closes, forgetting the outcomes counted and the backoff reached; a
    /// concurrency limit starts again from its starting value.
    fn close(&mut self) {
        self.enter(Phase::Closed);
        self.closed_by_probes = false;
        self.window.clear();
        self.consecutive = 0;
        let c = self.config.borrow();
        self.open_for = policy::first_open_period(c);
        self.limiter.restart(c);
        self.limiter.window_cleared();
    }

    fn open(&mut self, now: Instant, reason: Reason, from: State) -> Option<Transition> {
        let c = self.config();
        // The period is drawn for the generation the open phase starts.
        let generation = self.generation.wrapping_add(1);
        let until = now + policy::open_period(c, self.open_for, generation);
        self.enter(Phase::Open { until });
        Some(Transition { from, to: State::Open, reason, at: now })
    }

    fn count_closed(&mut self, now: Instant, failed: bool, slow: bool) -> Option<Transition> {
        self.consecutive = if failed { self.consecutive.saturating_add(1) } else { 0 };
        let c = self.config.borrow();
        if failed {
            self.limiter.failed(c, self.in_flight);
        } else {
            self.limiter.succeeded(c);
        }
        let window = self.config().window;
        self.window.record(window, now, failed, slow);
        self.tally.count(failed, slow);
        if !failed {
            return None;
        }
        let c = self.config();
        let reason = policy::trip(c, self.phase, self.consecutive, self.window.totals(c.window, now))?;
        self.open_for = policy::first_open_period(c);
        self.open(now, reason, State::Closed)
    }

    fn count_probe(&mut self, now: Instant, failed: bool) -> Option<Transition> {
        if failed {
            self.open_for = policy::grown_open_period(self.config(), self.open_for);
            return self.open(now, Reason::ProbeFailed, State::HalfOpen);
        }
        self.probe_successes += 1;
        if !policy::probes_close(self.config(), self.probe_successes) {
            return None;
        }
        self.close();
        self.closed_by_probes = true;
        Some(Transition { from: State::HalfOpen, to: State::Closed, reason: Reason::ProbesSucceeded, at: now })
    }
}

#[cfg(feature = "snapshot")]
mod saved {
    use super::*;
    use crate::error::SnapshotError;
    use crate::metrics::Persist;
    use serde::de::{Error as _, SeqAccess, Visitor};
    use serde::ser::SerializeStruct;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::snapshot::{Elapsed, SNAPSHOT_VERSION, Saved, TAKEN_AT_VERSION, check_version, malformed};

    /// Where a breaker is, in a [`Snapshot`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum SavedPhase {
        #[default]
        Closed,
        Open,
        HalfOpen,
        ForcedOpen,
        HeldOpen,
        Disabled,
    }

    /// The state of one breaker, with times relative to when it was taken.
    /// Build it with [`Breaker::snapshot`]; restore it with
    /// [`Breaker::restore`]; encode it with `to_json` / `to_bytes`.
    #[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
    #[serde(deny_unknown_fields, remote = "Self")]
    pub struct Snapshot {
        /// [`SNAPSHOT_VERSION`] when written.
        pub version: u32,
        /// Fingerprint of the configuration.
        pub config: u64,
        /// The `now` it was taken at, in µs (none in format 2 and earlier,
        /// or past 2^53 − 1 µs).
        #[serde(default)]
        pub(crate) taken_at_us: Option<u64>,
        pub(crate) phase: SavedPhase,
        pub(crate) generation: u32,
        /// Open / forced open: time until half-open. Half-open: time until
        /// the probes in flight would be given up (a restore gives them up
        /// at once: their reports can never reach the restored breaker).
        pub(crate) deadline_in_us: u64,
        pub(crate) open_for_us: u64,
        pub(crate) consecutive: u32,
        pub(crate) probes_in_flight: u16,
        pub(crate) probe_successes: u16,
        pub(crate) window: crate::window::SavedWindow,
        /// A concurrency limit's state (none without one; absent in format 1).
        pub(crate) limit: Option<crate::limit::SavedLimit>,
        pub(crate) metrics: Option<crate::metrics::SavedMetrics>,
    }

    /// Read by serde's derive from JSON (fields by name); from the compact
    /// form, whose fields have no names, by hand: `taken_at_us` is there
    /// only from format 3 on, which the version, read first, tells.
    impl<'de> Deserialize<'de> for Snapshot {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            if d.is_human_readable() {
                return Snapshot::deserialize(d);
            }
            d.deserialize_tuple(13, Positional)
        }
    }

    /// The compact form's reader.
    struct Positional;

    impl<'de> Visitor<'de> for Positional {
        type Value = Snapshot;

        fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("a breaker's snapshot")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Snapshot, A::Error> {
            let version: u32 = element(&mut s)?;
            if version < 2 {
                return Err(A::Error::custom(crate::snapshot::COMPACT_V1));
            }
            if version > SNAPSHOT_VERSION {
                return Err(A::Error::custom("a breaker of a newer format"));
            }
            let config = element(&mut s)?;
            let taken_at_us = if version >= TAKEN_AT_VERSION { element(&mut s)? } else { None };
            Ok(Snapshot {
                version,
                config,
                taken_at_us,
                phase: element(&mut s)?,
                generation: element(&mut s)?,
                deadline_in_us: element(&mut s)?,
                open_for_us: element(&mut s)?,
                consecutive: element(&mut s)?,
                probes_in_flight: element(&mut s)?,
                probe_successes: element(&mut s)?,
                window: element(&mut s)?,
                limit: element(&mut s)?,
                metrics: element(&mut s)?,
            })
        }
    }

    fn element<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(s: &mut A) -> Result<T, A::Error> {
        s.next_element()?.ok_or_else(|| A::Error::custom("the bytes end too early"))
    }

    /// Written by hand for one field: `taken_at_us` only from format 3 on.
    impl Serialize for Snapshot {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let taken_at = self.version >= TAKEN_AT_VERSION;
            let mut r = s.serialize_struct("Snapshot", 12 + usize::from(taken_at))?;
            r.serialize_field("version", &self.version)?;
            r.serialize_field("config", &self.config)?;
            if taken_at {
                r.serialize_field("taken_at_us", &self.taken_at_us)?;
            }
            r.serialize_field("phase", &self.phase)?;
            r.serialize_field("generation", &self.generation)?;
            r.serialize_field("deadline_in_us", &self.deadline_in_us)?;
            r.serialize_field("open_for_us", &self.open_for_us)?;
            r.serialize_field("consecutive", &self.consecutive)?;
            r.serialize_field("probes_in_flight", &self.probes_in_flight)?;
            r.serialize_field("probe_successes", &self.probe_successes)?;
            r.serialize_field("window", &self.window)?;
            r.serialize_field("limit", &self.limit)?;
            r.serialize_field("metrics", &self.metrics)?;
            r.end()
        }
    }

    impl Saved for Snapshot {
        fn settle(&mut self) -> Result<(), SnapshotError> {
            // A breaker inside a registry's or a dispatcher's snapshot.
            check_version(self.version)?;
            if self.version < TAKEN_AT_VERSION && self.taken_at_us.is_some() {
                return Err(malformed("unknown field `taken_at_us` (before format 3)"));
            }
            Ok(())
        }
    }

    crate::snapshot::encodings!(Snapshot);

    impl Snapshot {
        /// The instant a restore at `now` resumes this snapshot at (see
        /// [`Elapsed`]).
        pub(crate) fn resume_at(&self, now: Instant, elapsed: Elapsed) -> Instant {
            elapsed.resume_at(self.taken_at_us, now)
        }
    }

    impl<C: Borrow<Config>, M: Meter + Persist> Breaker<C, M> {
        /// The breaker's complete state at `now`, with times relative to `now`
        /// (and `now` itself, for a restore that counts the time since).
        pub fn snapshot(&self, now: Instant) -> Snapshot {
            let now = now.max(self.latest);
            let config = self.config();
            let (phase, deadline) = match self.phase {
                Phase::Closed => (SavedPhase::Closed, now),
                Phase::Open { until } => (SavedPhase::Open, until),
                Phase::HalfOpen { give_up_at } => (SavedPhase::HalfOpen, give_up_at),
                Phase::ForcedOpen { until } => (SavedPhase::ForcedOpen, until),
                Phase::HeldOpen => (SavedPhase::HeldOpen, now),
                Phase::Disabled => (SavedPhase::Disabled, now),
            };
            Snapshot {
                version: SNAPSHOT_VERSION,
                config: config.fingerprint(),
                taken_at_us: Some(now.as_micros()).filter(|&t| t <= crate::MAX_SAVED_COUNTER),
                phase,
                generation: self.generation,
                // A forced open can be asked for any length: kept within
                // what a snapshot holds (2^53 − 1 µs, 285 years).
                deadline_in_us: (deadline - now).as_micros().min(crate::MAX_SAVED_COUNTER),
                open_for_us: self.open_for.as_micros(),
                consecutive: self.consecutive,
                probes_in_flight: self.probes_in_flight,
                probe_successes: self.probe_successes,
                window: self.window.save(config.window, now),
                limit: self.limiter.save(config, now),
                metrics: self.meter.save(now),
            }
        }

        /// The breaker `snapshot` describes, configured by `config` (which must
        /// be the configuration it was taken with), at `now`; with
        /// [`Elapsed::Counted`] the time since the snapshot was taken counts.
        ///
        /// The restored breaker starts a new generation: permits issued
        /// before the snapshot was taken (calls in flight in the saving
        /// process, half-open probes among them) are stale for it, so a
        /// half-open breaker admits new probes at once instead of waiting
        /// for probes that can never report.
        ///
        /// With `Counted`, the saved state resumes at `taken_at` and `now`
        /// is the latest time the breaker has seen (an earlier reading after
        /// the restore counts as `now`); a timed change due meanwhile (an
        /// open period that ended) is applied by the next call, which reports
        /// it at the time it was due.
        pub fn restore(config: C, snapshot: &Snapshot, now: Instant, elapsed: Elapsed) -> Result<Self, SnapshotError> {
            let s = snapshot;
            check_version(s.version)?;
            if s.taken_at_us.is_some_and(|t| t > crate::MAX_SAVED_COUNTER) {
                return Err(SnapshotError::Corrupt("taken_at out of range"));
            }
            let latest = now;
            let now = s.resume_at(now, elapsed);
            let c = config.borrow();
            if c.validate().is_err() || s.config != c.fingerprint() {
                return Err(SnapshotError::ConfigMismatch);
            }
            let corrupt = |what| Err(SnapshotError::Corrupt(what));
            let deadline_in = Duration::from_micros(s.deadline_in_us);
            let phase = match s.phase {
                SavedPhase::Closed => Phase::Closed,
                SavedPhase::Open if deadline_in <= c.open_timeout_cap() => Phase::Open { until: now + deadline_in },
                SavedPhase::Open => return corrupt("deadline"),
                SavedPhase::HalfOpen => Phase::HalfOpen { give_up_at: now },
                SavedPhase::ForcedOpen if s.deadline_in_us <= crate::MAX_SAVED_COUNTER => {
                    Phase::ForcedOpen { until: now + deadline_in }
                }
                SavedPhase::ForcedOpen => return corrupt("deadline"),
                SavedPhase::HeldOpen => Phase::HeldOpen,
                SavedPhase::Disabled => Phase::Disabled,
            };
            let probing = matches!(phase, Phase::HalfOpen { .. });
            if !probing && (s.probes_in_flight > 0 || s.probe_successes > 0) {
                return corrupt("probes outside half-open");
            }
            if s.probes_in_flight > c.half_open_max_attempts || policy::probes_close(c, s.probe_successes) {
                return corrupt("probes");
            }
            let open_for = Duration::from_micros(s.open_for_us);
            if open_for < c.open_timeout || open_for > c.open_timeout_cap() {
                return corrupt("open period");
            }
            let window = WindowState::load(c.window, c.windowed(), &s.window, now)?;
            let limiter = Limiter::load(c, s.limit.as_ref(), now)?;
            let meter = M::load(s.metrics.as_ref(), now)?;
            Ok(Breaker {
                window,
                latest,
                open_for,
                generation: s.generation.wrapping_add(1),
                held_from: s.generation.wrapping_add(1),
                consecutive: s.consecutive,
                in_flight: 0,
                probes_in_flight: 0,
                probe_successes: s.probe_successes,
                phase,
                probes: Probes::HERE,
                limiter,
                tally: Tally::default(),
                closed_by_probes: false,
                config,
                meter,
            })
        }

        /// Replaces this breaker's state, in place, with the one `snapshot`
        /// describes (taken with this breaker's configuration), at `now`
        /// (`elapsed` as for [`restore`](Self::restore)):
        /// as `restore` makes it, except that its
        /// generations continue from this breaker's, so the permits it
        /// issued before are stale for the new state, however old the
        /// snapshot. Like any restored breaker it starts with no call in
        /// flight: those admitted before hold no concurrency-limit slot (the
        /// conformance suite's `snapshot_restore`). On error nothing
        /// changes. The meter is the snapshot's (a latency histogram, which
        /// snapshots do not hold, starts afresh as `M`'s `load` makes it).
        pub fn load(&mut self, snapshot: &Snapshot, now: Instant, elapsed: Elapsed) -> Result<(), SnapshotError>
        where
            C: Clone,
        {
            self.replace(snapshot, now, elapsed, false)
        }

        /// As [`load`](Self::load), but the meter stays this breaker's: the
        /// state another process left (its metrics are its own).
        pub fn load_state(&mut self, snapshot: &Snapshot, now: Instant, elapsed: Elapsed) -> Result<(), SnapshotError>
        where
            C: Clone,
        {
            self.replace(snapshot, now, elapsed, true)
        }

        fn replace(
            &mut self,
            snapshot: &Snapshot,
            now: Instant,
            elapsed: Elapsed,
            keep_meter: bool,
        ) -> Result<(), SnapshotError>
        where
            C: Clone,
        {
            let mut restored = Self::restore(self.config.clone(), snapshot, now, elapsed)?;
            restored.follow(self, now);
            // Running totals only grow (a group counts by their differences).
            restored.tally = self.tally;
            if keep_meter {
                core::mem::swap(&mut restored.meter, &mut self.meter);
            }
            *self = restored;
            Ok(())
        }
    }
}

#[cfg(feature = "snapshot")]
pub use saved::Snapshot;

/// What a breaker holds, part by part (BENCHMARKS.md, issue 26's memory
/// targets, reads these): a size that grows is a decision, not a side effect.
#[cfg(all(test, target_pointer_width = "64"))]
mod sizes {
    use core::mem::size_of;

    #[test]
    fn a_breaker_and_its_parts_keep_their_sizes() {
        // A limit's state is behind a pointer with an allocator, inline without.
        let limiter = if cfg!(feature = "alloc") { 8 } else { 80 };
        assert_eq!(size_of::<crate::limit::Limiter>(), limiter);
        assert_eq!(size_of::<super::Breaker<&'static crate::Config, ()>>(), 216 + limiter);
        assert_eq!(size_of::<crate::window::WindowState>(), 112);
        assert_eq!(size_of::<crate::limit::LimitState>(), 80);
        assert_eq!(size_of::<Option<crate::limit::Share>>(), 40);
        assert_eq!(size_of::<super::Tally>(), 32);
    }
}
