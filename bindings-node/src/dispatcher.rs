//! `NativeDispatcher`: the core's retaining dispatcher (seed 001) in front
//! of a breaker, driven with plain numbers. The messages stay in JavaScript,
//! named by their sequence numbers; the JavaScript class `Dispatcher`
//! (lib/dispatcher.js) sends them and reports how each went.

use std::sync::Arc;

use crate::breaker::{Gauges, metrics_of, transition_of};
use crate::error::{Buffer, Error, Refusal, Result, config as refused, out_of_memory};
use crate::options::{NativeOptions, millis_problem, whole_problem};
use crate::time::{duration, elapsed, instant, micros, ms, ms_at};
use crate::wire;
use crate::{NativeMetrics, NativeTransition};
use halfopen::retention::{
    DeadReason, Event, Overflow, Probe, Rate, RetentionConfig, RetentionQueue, RetentionSnapshot, exposition,
};
use halfopen::{Breaker, Config, Duration, LatencyHistogram, Metrics, Problem, SnapshotError};
#[cfg(feature = "node")]
use napi_derive::napi;

type Native = RetentionQueue<(), Arc<Config>, Gauges>;

/// How a dispatcher retains, as numbers (milliseconds for times); absent:
/// the core's default (no bound, reject, probe with the oldest, never give
/// up, no rate).
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeRetention {
    pub max_messages: Option<f64>,
    pub max_bytes: Option<f64>,
    /// `"reject"` or `"drop_oldest"`.
    pub overflow: Option<String>,
    /// `"oldest"` or `"new_message"`.
    pub probe: Option<String>,
    pub max_attempts: Option<f64>,
    pub max_age_ms: Option<f64>,
    pub release_per_second: Option<f64>,
    pub release_burst: Option<f64>,
}

/// Something JavaScript must hear of, in the core's order.
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeDispatchEvent {
    /// `"transition"`, `"dead"` or `"dropped"`.
    pub kind: String,
    /// The message's sequence number (dead, dropped).
    pub seq: Option<f64>,
    /// Why a message is dead: `"attempts"`, `"age"` or `"refused"`.
    pub reason: Option<String>,
    /// How many times a dead message was sent.
    pub attempts: Option<u32>,
    pub transition: Option<NativeTransition>,
}

/// What a dispatcher holds and did.
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeRetentionStats {
    pub retained: f64,
    pub in_flight: f64,
    pub bytes: f64,
    pub submitted: f64,
    pub refused: f64,
    pub sent: f64,
    pub delivered: f64,
    pub failed: f64,
    pub dead: f64,
    pub dropped: f64,
}

/// A whole number from 0 to `max` (`range` says so in words), or an error
/// naming `field`. (No float in the message: formatting one would bring
/// float formatting into the wasm module.)
fn whole(value: Option<f64>, field: &str, max: f64, range: &str) -> Result<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) => match whole_problem(v, max) {
            None => Ok(Some(v as u64)),
            Some(problem) => Err(refused(field, problem, range)),
        },
    }
}

const U32_RANGE: &str = "must be a whole number from 0 to 4294967295";

impl NativeRetention {
    /// The configuration these options describe (the core validates it
    /// against the breaker).
    fn config(&self) -> Result<RetentionConfig> {
        const U32: f64 = u32::MAX as f64;
        let mut c = RetentionConfig {
            max_messages: whole(self.max_messages, "max_messages", U32, U32_RANGE)?.map(|n| n as u32),
            max_bytes: whole(
                self.max_bytes,
                "max_bytes",
                9_007_199_254_740_991.0,
                "must be a whole number from 0 to 2^53 - 1",
            )?,
            max_attempts: whole(self.max_attempts, "max_attempts", U32, U32_RANGE)?.map(|n| n as u32),
            ..RetentionConfig::default()
        };
        if let Some(age) = self.max_age_ms {
            if let Some(problem) = millis_problem(age) {
                let range = "must be a finite, non-negative number of milliseconds, at most 18446744073709551";
                return Err(refused("max_age", problem, range));
            }
            c.max_age = Some(Duration::from_micros(micros(age).unwrap_or(u64::MAX)));
        }
        c.overflow = match self.overflow.as_deref() {
            None | Some("reject") => Overflow::Reject,
            Some("drop_oldest") => Overflow::DropOldest,
            Some(_) => return Err(refused("overflow", Problem::OutOfRange, "must be \"reject\" or \"drop_oldest\"")),
        };
        c.probe = match self.probe.as_deref() {
            None | Some("oldest") => Probe::Oldest,
            Some("new_message") => Probe::NewMessage,
            Some(_) => return Err(refused("probe", Problem::OutOfRange, "must be \"oldest\" or \"new_message\"")),
        };
        let per_second = whole(self.release_per_second, "release_rate", U32, U32_RANGE)?;
        let burst = whole(self.release_burst, "release_rate", U32, U32_RANGE)?;
        c.release_rate = match (per_second, burst) {
            (None, None) => None,
            (Some(per_second), Some(burst)) => Some(Rate { per_second: per_second as u32, burst: burst as u32 }),
            _ => return Err(refused("release_rate", Problem::Missing, "needs both perSecond and burst")),
        };
        Ok(c)
    }
}

fn retention_error(e: halfopen::retention::RetentionError) -> Error {
    refused(e.field.name(), e.problem, &e.to_string())
}

/// A breaker from `options` (latency measured if asked).
fn breaker(options: &NativeOptions, latency_histogram: bool) -> Result<Breaker<Arc<Config>, Gauges>> {
    let meter = (Metrics::default(), latency_histogram.then(Box::<LatencyHistogram>::default));
    Breaker::with_meter(halfopen::shared_config(options.config()?), meter).map_err(|e| Refusal::from(e).into())
}

#[cfg_attr(feature = "node", napi)]
pub struct NativeDispatcher {
    dispatcher: Native,
}

#[cfg_attr(feature = "node", napi)]
impl NativeDispatcher {
    /// A dispatcher in front of a breaker made from `options`; throws a
    /// structured error naming the field of an invalid option.
    #[cfg_attr(feature = "node", napi(constructor))]
    pub fn new(options: NativeOptions, latency_histogram: bool, retention: NativeRetention) -> Result<Self> {
        let retention = retention.config()?;
        let dispatcher =
            RetentionQueue::new(breaker(&options, latency_histogram)?, retention).map_err(retention_error)?;
        Ok(NativeDispatcher { dispatcher })
    }

    /// Replaces this dispatcher's state with a snapshot's (JSON text or
    /// bytes) taken with the same options; `held` lists the sequence numbers
    /// whose messages the caller still has (a snapshot naming another is
    /// corrupt: it would be lost); `counted`: the time since it was taken
    /// counts (the clock is shared). On error nothing changes.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn load(
        &mut self,
        json: Option<String>,
        bytes: Option<Buffer>,
        held: Vec<f64>,
        now_ms: f64,
        counted: bool,
    ) -> Result<()> {
        let decoded = match (json, bytes) {
            (Some(text), _) => RetentionSnapshot::from_json(&text),
            (None, Some(b)) => RetentionSnapshot::from_bytes(&b),
            (None, None) => Err(SnapshotError::Malformed("no snapshot given".into())),
        };
        let config = halfopen::shared_config(*self.dispatcher.breaker().config());
        let retention = *self.dispatcher.config();
        let latency = self.dispatcher.breaker().meter().1.is_some();
        let held: std::collections::HashSet<u64> =
            held.into_iter().filter(|&s| s >= 0.0 && s.fract() == 0.0).map(|s| s as u64).collect();
        let mut dispatcher = decoded
            .and_then(|s| {
                let elapsed = elapsed(counted);
                Native::restore(config, retention, &s, instant(now_ms), elapsed, |seq| {
                    held.contains(&seq).then_some(())
                })
            })
            .map_err(|e| Error::from(Refusal::from(e)))?;
        // The histogram is not in snapshots: it starts afresh.
        dispatcher.breaker_mut().meter_mut().1 = latency.then(Box::default);
        self.dispatcher = dispatcher;
        Ok(())
    }

    /// Submits a message of `bytes` (checked: a whole number ≥ 0): a code,
    /// `wire::submitted`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn submit(&mut self, bytes: f64, now_ms: f64) -> f64 {
        let result = self.dispatcher.submit((), bytes as u64, instant(now_ms));
        wire::submitted(&result, self.dispatcher.has_events())
    }

    /// Every retained message to send now, oldest first (by sequence
    /// number), then `wire::EVENTS_WAIT_IN_LIST` if `takeEvents` has something.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn next(&mut self, now_ms: f64) -> Vec<f64> {
        let now = instant(now_ms);
        let mut out: Vec<f64> = std::iter::from_fn(|| self.dispatcher.next(now)).map(|seq| seq as f64).collect();
        if self.dispatcher.has_events() {
            out.push(wire::EVENTS_WAIT_IN_LIST);
        }
        out
    }

    /// Reports the send of `seq` (the outcome's code: `wire::OUTCOMES`): a
    /// code, `wire::reported`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn report(&mut self, seq: f64, outcome_code: u32, now_ms: f64) -> u32 {
        let reported = match seq >= 0.0 && seq.fract() == 0.0 {
            true => self.dispatcher.report(seq as u64, wire::outcome(outcome_code), instant(now_ms)),
            false => None,
        };
        wire::reported(reported.as_ref(), self.dispatcher.has_events())
    }

    /// Applies what is due at `nowMs` (an open time that ended, messages
    /// aged out). True if `takeEvents` has something.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn handle_timeout(&mut self, now_ms: f64) -> bool {
        self.dispatcher.handle_timeout(instant(now_ms));
        self.dispatcher.has_events()
    }

    /// When `next` may hand out something it cannot now, or a retained
    /// message ages out (ms on the caller's clock); `null`: not by time.
    #[cfg_attr(feature = "node", napi)]
    pub fn poll_timeout_ms(&self) -> Option<f64> {
        self.dispatcher.poll_timeout().map(ms_at)
    }

    /// The events since the last call, oldest first.
    #[cfg_attr(feature = "node", napi)]
    pub fn take_events(&mut self) -> Vec<NativeDispatchEvent> {
        std::iter::from_fn(|| self.dispatcher.poll_event()).map(event_of).collect()
    }

    /// Holds the breaker open for `forMs` (checked: finite, ≥ 0), or until
    /// `release` without it (its transition comes as an event). True if
    /// `takeEvents` has something.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn force_open(&mut self, now_ms: f64, for_ms: Option<f64>) -> bool {
        self.dispatcher.force_open(instant(now_ms), for_ms.map(duration));
        self.dispatcher.has_events()
    }

    /// Holds the breaker open for at least `forMs` (checked: finite, ≥ 0),
    /// never shortening an open period in force (its transition comes as an
    /// event). True if `takeEvents` has something.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn force_open_at_least(&mut self, now_ms: f64, for_ms: f64) -> bool {
        self.dispatcher.force_open_at_least(instant(now_ms), duration(for_ms));
        self.dispatcher.has_events()
    }

    /// Ends a forced open (its transition comes as an event). True if
    /// `takeEvents` has something.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn release(&mut self, now_ms: f64) -> bool {
        self.dispatcher.release(instant(now_ms));
        self.dispatcher.has_events()
    }

    /// The breaker's state at `nowMs`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn state(&self, now_ms: f64) -> String {
        self.dispatcher.breaker().state(instant(now_ms)).name().into()
    }

    /// What it holds and did.
    #[cfg_attr(feature = "node", napi)]
    pub fn stats(&self) -> NativeRetentionStats {
        let r = self.dispatcher.reading();
        let c = r.counters;
        let n = |v: u64| v as f64;
        NativeRetentionStats {
            retained: n(r.retained),
            in_flight: n(r.in_flight),
            bytes: n(r.bytes),
            submitted: n(c.submitted),
            refused: n(c.refused),
            sent: n(c.sent),
            delivered: n(c.delivered),
            failed: n(c.failed),
            dead: n(c.dead),
            dropped: n(c.dropped),
        }
    }

    /// The breaker's metrics and counts at `nowMs`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn metrics(&self, now_ms: f64) -> NativeMetrics {
        metrics_of(self.dispatcher.breaker(), instant(now_ms))
    }

    /// The Prometheus text of the breaker and the retention under `name`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn prometheus(&self, name: String, now_ms: f64) -> Result<String> {
        let m = self.dispatcher.breaker().metrics(instant(now_ms));
        let reading = self.dispatcher.reading();
        halfopen::try_render(|out| {
            halfopen::prometheus::render(out, || std::iter::once((name.as_str(), m)))?;
            exposition::render(out, || std::iter::once((name.as_str(), reading)))
        })
        .map_err(|_| out_of_memory("the exposition"))
    }

    /// The breaker state this dispatcher leaves for the next holder of an
    /// outbox's lease (`outbox::carried::left`), as JSON.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn left_state(&self, now_ms: f64) -> Result<String> {
        let state = halfopen::outbox::carried::left(self.dispatcher.breaker(), instant(now_ms));
        state.try_into_json().map_err(|_| out_of_memory("the breaker state"))
    }

    /// Resumes this dispatcher's breaker from the state an outbox's last
    /// holder left `age_ms` ago (`outbox::carried::resume`); throws a
    /// SnapshotError (its kind: another configuration, say) and changes
    /// nothing if it cannot.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn resume_state(&mut self, json: String, now_ms: f64, age_ms: f64) -> Result<()> {
        let state = halfopen::Snapshot::from_json(&json).map_err(|e| Error::from(Refusal::from(e)))?;
        halfopen::outbox::carried::resume(self.dispatcher.breaker_mut(), &state, instant(now_ms), duration(age_ms))
            .map_err(|e| Error::from(Refusal::from(e)))
    }

    /// The dispatcher's state as JSON (not the messages: the caller keeps them).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String> {
        self.dispatcher.snapshot(instant(now_ms)).try_into_json().map_err(|_| out_of_memory("the snapshot"))
    }

    /// The dispatcher's state as compact bytes.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    // Without the `node` feature `Buffer` is the `Vec` itself.
    #[allow(clippy::useless_conversion)]
    pub fn snapshot_bytes(&self, now_ms: f64) -> Result<Buffer> {
        let bytes = self.dispatcher.snapshot(instant(now_ms)).try_into_bytes();
        Ok(bytes.map_err(|_| out_of_memory("the snapshot"))?.into())
    }

    /// The sequence numbers of the messages held, in submission order (the
    /// retained ones, then those in flight), for a store to check against.
    #[cfg_attr(feature = "node", napi)]
    pub fn held(&self) -> Vec<f64> {
        self.dispatcher.held().map(|seq| seq as f64).collect()
    }

    /// The longest name the core takes, in UTF-8 bytes (`MAX_NAME_BYTES`).
    #[cfg_attr(feature = "node", napi)]
    pub fn max_name_bytes(&self) -> u32 {
        halfopen::MAX_NAME_BYTES as u32
    }

    /// The core's default time a send may take (ms) before the driver
    /// aborts it.
    #[cfg_attr(feature = "node", napi)]
    pub fn default_send_timeout_ms(&self) -> f64 {
        ms(halfopen::retention::DEFAULT_SEND_TIMEOUT)
    }

    /// The core's delay (ms) before a driver whose clock failed looks again.
    #[cfg_attr(feature = "node", napi)]
    pub fn clock_failure_retry_ms(&self) -> f64 {
        ms(halfopen::retention::CLOCK_FAILURE_RETRY)
    }
}

fn event_of(event: Event<()>) -> NativeDispatchEvent {
    let none = |kind: &str| NativeDispatchEvent {
        kind: kind.into(),
        seq: None,
        reason: None,
        attempts: None,
        transition: None,
    };
    match event {
        Event::Transition(t) => NativeDispatchEvent { transition: Some(transition_of(t)), ..none("transition") },
        Event::Dead { seq, reason, attempts, .. } => NativeDispatchEvent {
            seq: Some(seq as f64),
            reason: Some(dead_reason(reason).into()),
            attempts: Some(attempts),
            ..none("dead")
        },
        Event::Dropped { seq, .. } => NativeDispatchEvent { seq: Some(seq as f64), ..none("dropped") },
    }
}

fn dead_reason(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::Attempts => "attempts",
        DeadReason::Age => "age",
        DeadReason::Refused => "refused",
    }
}
