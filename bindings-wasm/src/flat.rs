//! The translation's objects as flat values for `js/native.js`, which builds
//! the objects the napi addon returns (same names, same values): numbers in
//! a fixed order (`NaN`: a field that is absent), strings where a value is
//! one. The order is written here only: [`FIELDS`] names each record's
//! fields in the order its builder below emits them, and `js/native.js`
//! reads every value at its name's place (`flatFields()`). That the two
//! agree is checked by `test/flat.test.js`, which compares the objects
//! built with the Node addon's for the same calls.

use halfopen_node::{NativeDispatchEvent, NativeLicence, NativeMetrics, NativeRetentionStats, NativeTransition};
use wasm_bindgen::prelude::*;

/// Each record's field names, in the order its values come:
/// `record=field,...;` for licence, metrics, transition, event, stats.
const FIELDS: &str = concat!(
    "licence=kind,generation,untilMs,gauge,slowAfterMs,room,bucketDecides,refusal,limited,pending;",
    "metrics=state,admitted,successes,failures,slow,rejections,ignored,cancelled,stale,opens,opensLast24h,",
    "timeClosedMs,timeOpenMs,timeHalfOpenMs,meanTimeOpenMs,errorRate,latencyCount,latencyP50Ms,latencyP95Ms,",
    "latencyP99Ms,latencyMaxMs,consecutiveFailures,windowCalls,windowFailures,windowSlow,probesInFlight,",
    "probeSuccesses,inFlight,concurrencyLimit;",
    "transition=name,from,to,reason,atMs;",
    "event=kind,seq,reason,attempts,from,to,transitionReason,atMs;",
    "stats=retained,inFlight,bytes,submitted,refused,sent,delivered,failed,dead,dropped",
);

/// [`FIELDS`], for `js/native.js`.
#[wasm_bindgen(js_name = flatFields)]
pub fn flat_fields() -> String {
    FIELDS.to_owned()
}

/// kind, generation, untilMs, gauge, slowAfterMs, room, bucketDecides, refusal, limited, pending.
pub(crate) fn licence(l: &NativeLicence) -> Vec<f64> {
    let flag = |b: bool| f64::from(u8::from(b));
    vec![
        f64::from(l.kind),
        f64::from(l.generation),
        l.until_ms,
        f64::from(l.gauge),
        l.slow_after_ms,
        l.room,
        flag(l.bucket_decides),
        f64::from(l.refusal),
        flag(l.limited),
        flag(l.pending),
    ]
}

/// The state's gauge (0 closed, 1 half-open, 2 open), then every number of
/// `NativeMetrics` in declaration order.
pub(crate) fn metrics(m: &NativeMetrics) -> Vec<f64> {
    let gauge = match m.state.as_str() {
        "closed" => 0.0,
        "half_open" => 1.0,
        _ => 2.0,
    };
    let absent = |v: Option<f64>| v.unwrap_or(f64::NAN);
    vec![
        gauge,
        m.admitted,
        m.successes,
        m.failures,
        m.slow,
        m.rejections,
        m.ignored,
        m.cancelled,
        m.stale,
        m.opens,
        m.opens_last_24h,
        m.time_closed_ms,
        m.time_open_ms,
        m.time_half_open_ms,
        absent(m.mean_time_open_ms),
        absent(m.error_rate),
        absent(m.latency_count),
        absent(m.latency_p50_ms),
        absent(m.latency_p95_ms),
        absent(m.latency_p99_ms),
        absent(m.latency_max_ms),
        m.consecutive_failures,
        m.window_calls,
        m.window_failures,
        m.window_slow,
        m.probes_in_flight,
        m.probe_successes,
        m.in_flight,
        absent(m.concurrency_limit),
    ]
}

/// Five values per transition: name (`undefined` but from a registry),
/// from, to, reason, atMs.
pub(crate) fn transitions(list: Vec<NativeTransition>) -> Vec<JsValue> {
    let mut out = Vec::with_capacity(list.len() * 5);
    for t in list {
        out.push(t.name.map_or(JsValue::UNDEFINED, |n| JsValue::from_str(&n)));
        out.push(JsValue::from_str(&t.from));
        out.push(JsValue::from_str(&t.to));
        out.push(JsValue::from_str(&t.reason));
        out.push(JsValue::from_f64(t.at_ms));
    }
    out
}

/// Eight values per event: kind, seq (`NaN`: none), reason (`undefined`:
/// none), attempts (`NaN`: none), then the transition's from, to, reason,
/// atMs (`undefined`: not a transition).
pub(crate) fn events(list: Vec<NativeDispatchEvent>) -> Vec<JsValue> {
    let mut out = Vec::with_capacity(list.len() * 8);
    let text = |s: Option<&str>| s.map_or(JsValue::UNDEFINED, JsValue::from_str);
    for e in list {
        out.push(JsValue::from_str(&e.kind));
        out.push(JsValue::from_f64(e.seq.unwrap_or(f64::NAN)));
        out.push(text(e.reason.as_deref()));
        out.push(JsValue::from_f64(e.attempts.map_or(f64::NAN, f64::from)));
        let t = e.transition.as_ref();
        out.push(text(t.map(|t| t.from.as_str())));
        out.push(text(t.map(|t| t.to.as_str())));
        out.push(text(t.map(|t| t.reason.as_str())));
        out.push(t.map_or(JsValue::UNDEFINED, |t| JsValue::from_f64(t.at_ms)));
    }
    out
}

/// Every number of `NativeRetentionStats`, in declaration order.
pub(crate) fn stats(s: &NativeRetentionStats) -> Vec<f64> {
    vec![s.retained, s.in_flight, s.bytes, s.submitted, s.refused, s.sent, s.delivered, s.failed, s.dead, s.dropped]
}
