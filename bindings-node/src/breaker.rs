//! `NativeBreaker`: one core breaker (with metrics, and latency when asked),
//! driven with plain numbers so that a call crosses the boundary cheaply. The
//! JavaScript class `CircuitBreaker` (lib/breaker.js) wraps it.

use std::sync::Arc;

use crate::error::{Buffer, Error, Result};
use halfopen::{Breaker, Config, Instant, LatencyHistogram, Licence, Metrics, Mode, Permit, Snapshot, Transition};
#[cfg(feature = "node")]
use napi_derive::napi;

use crate::error::{Refusal, out_of_memory};
use crate::options::NativeOptions;
use crate::time::{duration, elapsed, instant, ms, ms_at};
use crate::wire;

/// Metrics, and a latency histogram when asked for (boxed: 4 KB otherwise inline).
pub(crate) type Gauges = (Metrics, Option<Box<LatencyHistogram>>);

/// A transition, for events (`name`: the breaker's, from a registry).
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeTransition {
    pub name: Option<String>,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub at_ms: f64,
}

/// What JavaScript may do without asking (the core's `Licence`), and the
/// state, at one reading.
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeLicence {
    /// 0: ask for every call; 1: admit until `untilMs`; 2: reject until `untilMs`.
    pub kind: u32,
    /// The generation of permits admitted under it.
    pub generation: u32,
    /// When it ends (ms on the caller's clock); `Infinity`: not by time.
    pub until_ms: f64,
    /// The state gauge: 0 closed, 1 half-open, 2 open.
    pub gauge: u32,
    /// Under "admit": a success slower than this is a failure (report it at
    /// once); `Infinity`: no success is slow.
    pub slow_after_ms: f64,
    /// Under "admit" with a concurrency limit: how many more calls may be in
    /// flight (admit while fewer are unreported, then ask; any outcome but a
    /// batched success is reported at once and the licence asked again);
    /// `Infinity`: no limit.
    pub room: f64,
    /// Under "admit": whether a success's window bucket can decide a trip
    /// (then read each success's time; else a timer at `untilMs` may end the
    /// batching, and a late one only moves the window's metrics).
    pub bucket_decides: bool,
    /// Under "reject": why, the core's reason's code (`wire::REFUSAL_REASONS`).
    pub refusal: u32,
    /// Whether a concurrency limit is configured: then every admission and
    /// report through the breaker may change the room, so ask again after each.
    pub limited: bool,
    /// Whether transitions wait in `takeTransitions` (a rejection may have
    /// observed one: an open time that ended, then a full limit).
    pub pending: bool,
}

/// Counters and derived figures, for `metrics()`.
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeMetrics {
    pub state: String,
    pub admitted: f64,
    pub successes: f64,
    pub failures: f64,
    pub slow: f64,
    pub rejections: f64,
    pub ignored: f64,
    pub cancelled: f64,
    pub stale: f64,
    pub opens: f64,
    #[cfg_attr(feature = "node", napi(js_name = "opensLast24h"))]
    pub opens_last_24h: f64,
    pub time_closed_ms: f64,
    pub time_open_ms: f64,
    pub time_half_open_ms: f64,
    pub mean_time_open_ms: Option<f64>,
    pub error_rate: Option<f64>,
    pub latency_count: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    pub consecutive_failures: f64,
    pub window_calls: f64,
    pub window_failures: f64,
    pub window_slow: f64,
    pub probes_in_flight: f64,
    pub probe_successes: f64,
    pub in_flight: f64,
    pub concurrency_limit: Option<f64>,
}

pub(crate) type Native = Breaker<Arc<Config>, Gauges>;

#[cfg_attr(feature = "node", napi)]
pub struct NativeBreaker {
    pub(crate) breaker: Native,
    /// Transitions not yet taken by JavaScript, oldest first.
    transitions: Vec<Transition>,
    /// Why the latest rejection was made (`Wait::reason`).
    refusal: &'static str,
    /// Its group's member, once it joins one (`src/group.rs`).
    pub(crate) group: Option<Box<halfopen::group::Member>>,
}

/// The licence and state of `breaker` at `now`.
pub(crate) fn licence_of(breaker: &Native, now: Instant, pending: bool) -> NativeLicence {
    let gauge = u32::from(breaker.state(now).gauge());
    let generation = breaker.counts(now).generation;
    let licence = breaker.licence(now);
    let refusal = wire::refusal_reason(licence.refusal_reason());
    let (kind, until, slow_after, room, bucket_decides) = match licence {
        Licence::Ask => (wire::licence_kind("ask"), Instant::MAX, None, None, true),
        Licence::Admit { until, slow_after, room, bucket_decides, .. } => {
            (wire::licence_kind("admit"), until, slow_after, room, bucket_decides)
        }
        Licence::Reject { until } => (wire::licence_kind("reject"), until.unwrap_or(Instant::MAX), None, None, true),
    };
    let slow_after_ms = slow_after.map_or(f64::INFINITY, ms);
    let room = room.map_or(f64::INFINITY, f64::from);
    let limited = breaker.config().concurrency_limit.is_some();
    NativeLicence {
        kind,
        generation,
        until_ms: ms_at(until),
        gauge,
        slow_after_ms,
        room,
        bucket_decides,
        refusal,
        limited,
        pending,
    }
}

impl NativeBreaker {
    pub(crate) fn keep(&mut self, t: impl IntoIterator<Item = Transition>) -> bool {
        let before = self.transitions.len();
        self.transitions.extend(t);
        self.transitions.len() > before
    }
}

#[cfg_attr(feature = "node", napi)]
impl NativeBreaker {
    /// Bytes of one native breaker (its Rust struct, allocated once per
    /// `CircuitBreaker`; the shared configuration and the napi wrapper aside),
    /// for the memory benchmark.
    #[cfg_attr(feature = "node", napi)]
    pub fn bytes() -> u32 {
        std::mem::size_of::<NativeBreaker>() as u32
    }

    /// A breaker from `options`; throws a structured error for an invalid one.
    #[cfg_attr(feature = "node", napi(constructor))]
    pub fn new(options: NativeOptions, latency_histogram: bool) -> Result<Self> {
        let config = options.config()?;
        let meter = (Metrics::default(), latency_histogram.then(Box::<LatencyHistogram>::default));
        let breaker = Breaker::with_meter(halfopen::shared_config(config), meter).map_err(Refusal::from)?;
        Ok(NativeBreaker { breaker, transitions: Vec::new(), refusal: "", group: None })
    }

    /// Admission: `wire::admission`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn acquire(&mut self, now_ms: f64) -> f64 {
        let admission = self.breaker.try_acquire(instant(now_ms));
        self.keep(admission.transition);
        if let Err(rejection) = &admission.decision {
            self.refusal = rejection.wait.reason();
        }
        wire::admission(&admission)
    }

    /// Why the latest rejection `acquire` made was made: `"open"`,
    /// `"probes_busy"`, `"limit_full"` or `"held"`.
    #[cfg_attr(feature = "node", napi)]
    pub fn refusal_reason(&self) -> String {
        self.refusal.into()
    }

    /// Reports a call admitted in `generation` at `issuedAtMs` (the outcome's
    /// code: `wire::OUTCOMES`). True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn record(&mut self, generation: u32, issued_at_ms: f64, outcome_code: u32, now_ms: f64) -> bool {
        let permit = Permit::from_parts(generation, instant(issued_at_ms));
        let t = self.breaker.record(permit, wire::outcome(outcome_code), instant(now_ms));
        self.keep(t)
    }

    /// What JavaScript may do without asking from `nowMs`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn licence(&self, now_ms: f64) -> NativeLicence {
        licence_of(&self.breaker, instant(now_ms), !self.transitions.is_empty())
    }

    /// Hands over what was done under the licence of `generation`:
    /// `admitted` calls, the first read at `firstMs`, and `successes` of
    /// them, the latest read at `atMs` (the core's `hand_over`, which orders
    /// them). True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn hand_over(&mut self, admitted: u32, first_ms: f64, generation: u32, successes: u32, at_ms: f64) -> bool {
        let t = self.breaker.hand_over(admitted, instant(first_ms), generation, successes, instant(at_ms));
        self.keep(t)
    }

    /// Counts `count` calls rejected under a licence.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn count_rejections(&mut self, count: u32, now_ms: f64) {
        self.breaker.count_rejections(count, instant(now_ms));
    }

    /// The transitions that happened since the last call, oldest first.
    #[cfg_attr(feature = "node", napi)]
    pub fn take_transitions(&mut self) -> Vec<NativeTransition> {
        self.transitions.drain(..).map(transition_of).collect()
    }

    /// Milliseconds until a call is worth trying: 0 now, Infinity when held open.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn retry_after(&self, now_ms: f64) -> f64 {
        self.breaker.retry_after(instant(now_ms)).map_or(f64::INFINITY, ms)
    }

    /// `"normal"`, `"forced_open"` or `"disabled"`.
    #[cfg_attr(feature = "node", napi)]
    pub fn mode(&self, now_ms: f64) -> String {
        mode_name(self.breaker.mode(instant(now_ms))).into()
    }

    /// Holds the breaker open for `forMs` (checked: finite, ≥ 0), or until
    /// `release` without it. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn force_open(&mut self, now_ms: f64, for_ms: Option<f64>) -> bool {
        let t = self.breaker.force_open(instant(now_ms), for_ms.map(duration));
        self.keep(t)
    }

    /// Holds the breaker open for at least `forMs` (checked: finite, ≥ 0),
    /// never shortening an open period in force. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn force_open_at_least(&mut self, now_ms: f64, for_ms: f64) -> bool {
        let t = self.breaker.force_open_at_least(instant(now_ms), duration(for_ms));
        self.keep(t)
    }

    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn force_close(&mut self, now_ms: f64) -> bool {
        let t = self.breaker.force_close(instant(now_ms));
        self.keep(t)
    }

    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn disable(&mut self, now_ms: f64) -> bool {
        let t = self.breaker.disable(instant(now_ms));
        self.keep(t)
    }

    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn release(&mut self, now_ms: f64) -> bool {
        let t = self.breaker.release(instant(now_ms));
        self.keep(t)
    }

    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn reset(&mut self, now_ms: f64) -> bool {
        let t = self.breaker.reset(instant(now_ms));
        self.keep(t)
    }

    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn handle_timeout(&mut self, now_ms: f64) -> bool {
        let t = self.breaker.handle_timeout(instant(now_ms));
        self.keep(t)
    }

    /// When the breaker next changes by itself (ms on the caller's clock), if it will.
    #[cfg_attr(feature = "node", napi)]
    pub fn poll_timeout_ms(&self) -> Option<f64> {
        self.breaker.poll_timeout().map(ms_at)
    }

    /// Everything measured at `nowMs`, with the breaker's counts.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn metrics(&self, now_ms: f64) -> NativeMetrics {
        metrics_of(&self.breaker, instant(now_ms))
    }

    /// The Prometheus text exposition of this breaker under `name`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn prometheus(&self, name: String, now_ms: f64) -> Result<String> {
        let m = self.breaker.metrics(instant(now_ms));
        let group = self.group.as_ref().map(|member| member.exposed());
        halfopen::try_render(|out| {
            halfopen::prometheus::render(out, || std::iter::once((name.as_str(), m)))?;
            halfopen::group::render_prometheus(out, || group.map(|g| (name.as_str(), g)).into_iter())
        })
        .map_err(|_| out_of_memory("the exposition"))
    }

    /// The breaker's state as JSON (the core's versioned snapshot form).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String> {
        self.breaker.snapshot(instant(now_ms)).try_into_json().map_err(|_| out_of_memory("the snapshot"))
    }

    /// The breaker's state as compact bytes.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    // Without the `node` feature `Buffer` is the `Vec` itself.
    #[allow(clippy::useless_conversion)]
    pub fn snapshot_bytes(&self, now_ms: f64) -> Result<Buffer> {
        let bytes = self.breaker.snapshot(instant(now_ms)).try_into_bytes();
        Ok(bytes.map_err(|_| out_of_memory("the snapshot"))?.into())
    }

    /// The longest name the core takes, in UTF-8 bytes (`MAX_NAME_BYTES`).
    #[cfg_attr(feature = "node", napi)]
    pub fn max_name_bytes(&self) -> u32 {
        halfopen::MAX_NAME_BYTES as u32
    }

    /// Replaces this breaker's state with a snapshot (JSON text or bytes),
    /// leaving it as it was on error; `counted`: the time since the
    /// snapshot was taken counts (the clock is shared).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn restore(&mut self, json: Option<String>, bytes: Option<Buffer>, now_ms: f64, counted: bool) -> Result<()> {
        let decoded = match (json, bytes) {
            (Some(text), _) => Snapshot::from_json(&text),
            (None, Some(b)) => Snapshot::from_bytes(&b),
            (None, None) => Err(halfopen::SnapshotError::Malformed("no snapshot given".into())),
        };
        let config = halfopen::shared_config(*self.breaker.config());
        let latency = self.breaker.meter().1.is_some();
        let mut breaker = decoded
            .and_then(|s| Native::restore(config, &s, instant(now_ms), elapsed(counted)))
            .map_err(|e| Error::from(Refusal::from(e)))?;
        // The histogram is not in snapshots: it starts afresh.
        breaker.meter_mut().1 = latency.then(Box::<LatencyHistogram>::default);
        self.breaker = breaker;
        self.transitions.clear();
        self.refusal = "";
        Ok(())
    }
}

pub(crate) fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Normal => "normal",
        Mode::ForcedOpen { .. } => "forced_open",
        Mode::Disabled => "disabled",
    }
}

pub(crate) fn transition_of(t: Transition) -> NativeTransition {
    NativeTransition {
        name: None,
        from: t.from.name().into(),
        to: t.to.name().into(),
        reason: t.reason.name().into(),
        at_ms: ms_at(t.at),
    }
}

/// A breaker's metrics and counts at `now`.
pub(crate) fn metrics_of(breaker: &Native, now: Instant) -> NativeMetrics {
    let m = breaker.metrics(now);
    let k = breaker.counts(now);
    let c = m.counters;
    let n = |v: u64| v as f64;
    NativeMetrics {
        state: m.state.name().into(),
        admitted: n(c.admitted),
        successes: n(c.successes),
        failures: n(c.failures),
        slow: n(c.slow),
        rejections: n(c.rejections),
        ignored: n(c.ignored),
        cancelled: n(c.cancelled),
        stale: n(c.stale),
        opens: n(c.opens),
        opens_last_24h: f64::from(m.opens_last_24h),
        time_closed_ms: ms(m.time_closed),
        time_open_ms: ms(m.time_open),
        time_half_open_ms: ms(m.time_half_open),
        mean_time_open_ms: m.mean_time_open.map(ms),
        error_rate: m.error_rate,
        latency_count: m.latency.map(|l| n(l.count)),
        latency_p50_ms: m.latency.map(|l| ms(l.p50)),
        latency_p95_ms: m.latency.map(|l| ms(l.p95)),
        latency_p99_ms: m.latency.map(|l| ms(l.p99)),
        latency_max_ms: m.latency.map(|l| ms(l.max)),
        consecutive_failures: f64::from(k.consecutive_failures),
        window_calls: f64::from(k.window.calls),
        window_failures: f64::from(k.window.failures),
        window_slow: f64::from(k.window.slow),
        probes_in_flight: f64::from(k.probes_in_flight),
        probe_successes: f64::from(k.probe_successes),
        in_flight: f64::from(k.in_flight),
        concurrency_limit: k.concurrency_limit.map(f64::from),
    }
}
