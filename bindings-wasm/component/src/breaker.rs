//! The `breaker` resource: one core breaker with metrics (and a latency
//! histogram when asked).

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use halfopen as ho;

use crate::convert::{self, config_in, duration, instant};
use crate::permit::{Held, Issuer};
use crate::wit;

/// Metrics, and a latency histogram when asked for.
pub(crate) type Gauges = (ho::Metrics, Option<Box<ho::LatencyHistogram>>);

/// The core breaker a `breaker` resource holds.
pub(crate) type Native = ho::Breaker<ho::Config, Gauges>;

pub(crate) struct One(Rc<RefCell<Native>>);

impl Issuer for RefCell<Native> {
    fn dropped(&self, _name: Option<&Rc<str>>, permit: Option<ho::Permit>) {
        if let Some(permit) = permit {
            let _ = self.borrow_mut().record(permit, ho::Outcome::Cancelled, ho::Instant::ZERO);
        }
    }
}

impl One {
    fn handle(breaker: Native) -> wit::Breaker {
        wit::Breaker::new(One(Rc::new(RefCell::new(breaker))))
    }

    fn restored(
        config: &wit::Config,
        latency_histogram: bool,
        decoded: Result<ho::Snapshot, ho::SnapshotError>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Breaker, wit::SnapshotError> {
        let snapshot = decoded.map_err(convert::snapshot_error)?;
        let mut breaker = Native::restore(config_in(config), &snapshot, instant(now), convert::elapsed(elapsed))
            .map_err(convert::snapshot_error)?;
        breaker.meter_mut().1 = latency_histogram.then(Box::default);
        Ok(One::handle(breaker))
    }

    fn load_decoded(
        &self,
        decoded: Result<ho::Snapshot, ho::SnapshotError>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<(), wit::SnapshotError> {
        let snapshot = decoded.map_err(convert::snapshot_error)?;
        self.with(|b| {
            let latency = b.meter().1.is_some();
            b.load(&snapshot, instant(now), convert::elapsed(elapsed)).map_err(convert::snapshot_error)?;
            // The histogram is not in snapshots: it starts afresh.
            b.meter_mut().1 = latency.then(Box::default);
            Ok(())
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Native) -> T) -> T {
        f(&mut self.0.borrow_mut())
    }
}

impl wit::GuestBreaker for One {
    fn create(config: wit::Config, latency_histogram: bool) -> Result<wit::Breaker, wit::ConfigError> {
        let gauges = (ho::Metrics::default(), latency_histogram.then(Box::default));
        let breaker = Native::with_meter(config_in(&config), gauges).map_err(convert::config_error)?;
        Ok(One::handle(breaker))
    }

    fn restore(
        config: wit::Config,
        latency_histogram: bool,
        snapshot: Vec<u8>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Breaker, wit::SnapshotError> {
        One::restored(&config, latency_histogram, ho::Snapshot::from_bytes(&snapshot), now, elapsed)
    }

    fn restore_json(
        config: wit::Config,
        latency_histogram: bool,
        snapshot: String,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Breaker, wit::SnapshotError> {
        One::restored(&config, latency_histogram, ho::Snapshot::from_json(&snapshot), now, elapsed)
    }

    fn try_acquire(&self, now: u64) -> wit::Admission {
        let admission = self.with(|b| b.try_acquire(instant(now)));
        let decision = match admission.decision {
            Ok(permit) => Ok(Held::handle(self.0.clone(), None, permit)),
            Err(rejection) => Err(convert::rejection(&rejection)),
        };
        wit::Admission { decision, transition: admission.transition.map(convert::transition) }
    }

    fn record(
        &self,
        permit: wit::Permit,
        outcome: wit::Outcome,
        now: u64,
    ) -> Result<Option<wit::Transition>, wit::PermitError> {
        let held: Held = permit.into_inner();
        if !held.issued_by(&self.0) {
            // Dropped here: reported to its issuer as cancelled.
            return Err(wit::PermitError::OtherOwner);
        }
        let Some(permit) = held.permit.take() else { return Ok(None) };
        let transition = self.with(|b| b.record(permit, convert::outcome(outcome), instant(now)));
        Ok(transition.map(convert::transition))
    }

    fn state(&self, now: u64) -> wit::State {
        convert::state(self.with(|b| b.state(instant(now))))
    }

    fn retry_after(&self, now: u64) -> Option<u64> {
        self.with(|b| b.retry_after(instant(now))).map(|d| d.as_micros())
    }

    fn mode(&self, now: u64) -> wit::Mode {
        convert::mode(self.with(|b| b.mode(instant(now))))
    }

    fn counts(&self, now: u64) -> wit::Counts {
        convert::counts(self.with(|b| b.counts(instant(now))))
    }

    fn metrics(&self, now: u64) -> wit::Metrics {
        convert::metrics(self.with(|b| b.metrics(instant(now))))
    }

    fn force_open(&self, now: u64, for_us: Option<u64>) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.force_open(instant(now), for_us.map(duration))))
    }

    fn force_open_at_least(&self, now: u64, for_us: u64) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.force_open_at_least(instant(now), duration(for_us))))
    }

    fn force_close(&self, now: u64) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.force_close(instant(now))))
    }

    fn disable(&self, now: u64) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.disable(instant(now))))
    }

    fn release(&self, now: u64) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.release(instant(now))))
    }

    fn reset(&self, now: u64) -> Vec<wit::Transition> {
        convert::transitions(self.with(|b| b.reset(instant(now))))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.with(|b| b.poll_timeout()).map(|t| t.as_micros())
    }

    fn handle_timeout(&self, now: u64) -> Option<wit::Transition> {
        self.with(|b| b.handle_timeout(instant(now))).map(convert::transition)
    }

    fn prometheus(&self, name: String, now: u64) -> Result<String, wit::OutputError> {
        let reading = self.with(|b| b.metrics(instant(now)));
        ho::try_render(|out| ho::prometheus::render(out, || core::iter::once((name.as_str(), reading))))
            .map_err(convert::output_error)
    }

    fn snapshot(&self, now: u64) -> Result<Vec<u8>, wit::OutputError> {
        self.with(|b| b.snapshot(instant(now))).try_into_bytes().map_err(convert::output_error)
    }

    fn snapshot_json(&self, now: u64) -> Result<String, wit::OutputError> {
        self.with(|b| b.snapshot(instant(now))).try_into_json().map_err(convert::output_error)
    }

    fn load(&self, snapshot: Vec<u8>, now: u64, elapsed: wit::Elapsed) -> Result<(), wit::SnapshotError> {
        self.load_decoded(ho::Snapshot::from_bytes(&snapshot), now, elapsed)
    }

    fn load_json(&self, snapshot: String, now: u64, elapsed: wit::Elapsed) -> Result<(), wit::SnapshotError> {
        self.load_decoded(ho::Snapshot::from_json(&snapshot), now, elapsed)
    }
}
