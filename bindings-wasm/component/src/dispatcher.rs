//! The `dispatcher` resource: the core's retaining dispatcher (seed 001) in
//! front of a breaker with metrics. The host keeps the messages by sequence
//! number: the core holds none of them (`()`).

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use halfopen as ho;
use halfopen::retention as r;

use crate::breaker::Gauges;
use crate::convert::{self, config_in, duration, instant};
use crate::wit;

type Native = r::RetentionQueue<(), ho::Config, Gauges>;

pub(crate) struct Queue(RefCell<Native>);

fn retention_in(c: &wit::RetentionConfig) -> r::RetentionConfig {
    r::RetentionConfig {
        max_messages: c.max_messages,
        max_bytes: c.max_bytes,
        overflow: match c.overflow {
            wit::Overflow::Reject => r::Overflow::Reject,
            wit::Overflow::DropOldest => r::Overflow::DropOldest,
        },
        probe: match c.probe {
            wit::Probe::Oldest => r::Probe::Oldest,
            wit::Probe::NewMessage => r::Probe::NewMessage,
        },
        max_attempts: c.max_attempts,
        max_age: c.max_age.map(duration),
        release_rate: c.release_rate.map(|rate| r::Rate { per_second: rate.per_second, burst: rate.burst }),
    }
}

fn retention_error(e: r::RetentionError) -> wit::DispatcherError {
    let field = match e.field {
        r::RetentionField::MaxMessages => wit::RetentionField::MaxMessages,
        r::RetentionField::MaxBytes => wit::RetentionField::MaxBytes,
        r::RetentionField::MaxAttempts => wit::RetentionField::MaxAttempts,
        r::RetentionField::MaxAge => wit::RetentionField::MaxAge,
        r::RetentionField::ReleaseRate => wit::RetentionField::ReleaseRate,
    };
    let problem = convert::problem(e.problem);
    wit::DispatcherError::Retention(wit::RetentionError { field, problem, message: alloc::format!("{e}") })
}

fn event(e: r::Event<()>) -> wit::DispatchEvent {
    match e {
        r::Event::Transition(t) => wit::DispatchEvent::Transition(convert::transition(t)),
        r::Event::Dead { seq, reason, attempts, .. } => wit::DispatchEvent::Dead(wit::DeadLetter {
            seq,
            reason: match reason {
                r::DeadReason::Attempts => wit::DeadReason::Attempts,
                r::DeadReason::Age => wit::DeadReason::Age,
                r::DeadReason::Refused => wit::DeadReason::Refused,
            },
            attempts,
        }),
        r::Event::Dropped { seq, .. } => wit::DispatchEvent::Dropped(seq),
    }
}

impl Queue {
    fn restored(
        config: &wit::Config,
        retention: &wit::RetentionConfig,
        decoded: Result<r::RetentionSnapshot, ho::SnapshotError>,
        mut held: Vec<u64>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Dispatcher, wit::SnapshotError> {
        let snapshot = decoded.map_err(convert::snapshot_error)?;
        held.sort_unstable();
        let has = |seq: u64| held.binary_search(&seq).is_ok().then_some(());
        let (config, retention) = (config_in(config), retention_in(retention));
        let d = Native::restore(config, retention, &snapshot, instant(now), convert::elapsed(elapsed), has)
            .map_err(convert::snapshot_error)?;
        Ok(wit::Dispatcher::new(Queue(RefCell::new(d))))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Native) -> T) -> T {
        f(&mut self.0.borrow_mut())
    }
}

impl wit::GuestDispatcher for Queue {
    fn create(config: wit::Config, retention: wit::RetentionConfig) -> Result<wit::Dispatcher, wit::DispatcherError> {
        let breaker = ho::Breaker::with_meter(config_in(&config), Gauges::default())
            .map_err(|e| wit::DispatcherError::Config(convert::config_error(e)))?;
        let d = Native::new(breaker, retention_in(&retention)).map_err(retention_error)?;
        Ok(wit::Dispatcher::new(Queue(RefCell::new(d))))
    }

    fn restore(
        config: wit::Config,
        retention: wit::RetentionConfig,
        snapshot: Vec<u8>,
        held: Vec<u64>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Dispatcher, wit::SnapshotError> {
        Queue::restored(&config, &retention, r::RetentionSnapshot::from_bytes(&snapshot), held, now, elapsed)
    }

    fn restore_json(
        config: wit::Config,
        retention: wit::RetentionConfig,
        snapshot: String,
        held: Vec<u64>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<wit::Dispatcher, wit::SnapshotError> {
        Queue::restored(&config, &retention, r::RetentionSnapshot::from_json(&snapshot), held, now, elapsed)
    }

    fn submit(&self, bytes: u64, now: u64) -> Option<wit::Submitted> {
        match self.with(|d| d.submit((), bytes, instant(now))) {
            Ok(r::Submitted::Send(seq)) => Some(wit::Submitted::Send(seq)),
            Ok(r::Submitted::Retained(seq)) => Some(wit::Submitted::Retained(seq)),
            Err(_) => None,
        }
    }

    fn next(&self, now: u64) -> Vec<u64> {
        self.with(|d| core::iter::from_fn(|| d.next(instant(now))).collect())
    }

    fn report(&self, seq: u64, outcome: wit::Outcome, now: u64) -> wit::Reported {
        match self.with(|d| d.report(seq, convert::outcome(outcome), instant(now))) {
            Some(r::Reported::Delivered(())) => wit::Reported::Delivered,
            Some(r::Reported::Retained) => wit::Reported::Retained,
            Some(r::Reported::Dead) => wit::Reported::Dead,
            None => wit::Reported::Unknown,
        }
    }

    fn handle_timeout(&self, now: u64) {
        self.with(|d| d.handle_timeout(instant(now)));
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.with(|d| d.poll_timeout()).map(|t| t.as_micros())
    }

    fn take_events(&self) -> Vec<wit::DispatchEvent> {
        self.with(|d| core::iter::from_fn(|| d.poll_event()).map(event).collect())
    }

    fn force_open(&self, now: u64, for_: Option<u64>) {
        self.with(|d| d.force_open(instant(now), for_.map(duration)));
    }

    fn force_open_at_least(&self, now: u64, for_: u64) {
        self.with(|d| d.force_open_at_least(instant(now), duration(for_)));
    }

    fn release(&self, now: u64) {
        self.with(|d| d.release(instant(now)));
    }

    fn state(&self, now: u64) -> wit::State {
        convert::state(self.with(|d| d.breaker().state(instant(now))))
    }

    fn stats(&self) -> wit::RetentionStats {
        let reading = self.with(|d| d.reading());
        let c = reading.counters;
        wit::RetentionStats {
            retained: reading.retained,
            in_flight: reading.in_flight,
            bytes: reading.bytes,
            submitted: c.submitted,
            refused: c.refused,
            sent: c.sent,
            delivered: c.delivered,
            failed: c.failed,
            dead: c.dead,
            dropped: c.dropped,
        }
    }

    fn metrics(&self, now: u64) -> wit::Metrics {
        convert::metrics(self.with(|d| d.breaker().metrics(instant(now))))
    }

    fn held(&self) -> Vec<u64> {
        self.with(|d| d.held().collect())
    }

    fn prometheus(&self, name: String, now: u64) -> Result<String, wit::OutputError> {
        let (metrics, reading) = self.with(|d| (d.breaker().metrics(instant(now)), d.reading()));
        ho::try_render(|out| {
            ho::prometheus::render(out, || core::iter::once((name.as_str(), metrics)))?;
            r::exposition::render(out, || core::iter::once((name.as_str(), reading)))
        })
        .map_err(convert::output_error)
    }

    fn snapshot(&self, now: u64) -> Result<Vec<u8>, wit::OutputError> {
        self.with(|d| d.snapshot(instant(now))).try_into_bytes().map_err(convert::output_error)
    }

    fn snapshot_json(&self, now: u64) -> Result<String, wit::OutputError> {
        self.with(|d| d.snapshot(instant(now))).try_into_json().map_err(convert::output_error)
    }
}
