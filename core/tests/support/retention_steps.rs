//! The conformance runner's retention cases (a case with `"retention"`): a
//! [`RetentionQueue`] of named messages in front of the case's breaker. The
//! format is in `tests/conformance/README.md` ("Retention").

use std::collections::HashMap;

use halfopen::retention::{
    DeadReason, Event, Overflow, Probe, Rate, Reported, RetentionConfig, RetentionError, RetentionQueue,
    RetentionSnapshot, Submitted,
};
use halfopen::{Breaker, Config, Duration, Elapsed, Instant, Problem};
use serde_json::{Map, Value};

use super::{check_transition, equal, number, object, outcome};

/// The suite's flat retention config, translated as a binding would: values
/// no [`RetentionConfig`] can hold are errors naming the field.
pub fn build(value: &Value) -> Result<RetentionConfig, String> {
    const KEYS: &[&str] = &[
        "max_messages",
        "max_bytes",
        "overflow",
        "probe",
        "max_attempts",
        "max_age_ms",
        "release_per_second",
        "release_burst",
    ];
    let map = object(value, KEYS)?;
    let invalid = |field: &str| format!("{field}: {}", Problem::OutOfRange.code());
    // A whole number ≥ 0 within `max`, or the field's error.
    let whole = |key: &str, field: &str, max: u64| {
        map.get(key)
            .map(|v| match number(v) {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= max as f64 => Ok(n as u64),
                _ => Err(invalid(field)),
            })
            .transpose()
    };
    let u32_max = u64::from(u32::MAX);
    let mut c = RetentionConfig {
        max_messages: whole("max_messages", "max_messages", u32_max)?.map(|n| n as u32),
        max_bytes: whole("max_bytes", "max_bytes", halfopen::MAX_SAVED_COUNTER)?,
        max_attempts: whole("max_attempts", "max_attempts", u32_max)?.map(|n| n as u32),
        max_age: whole("max_age_ms", "max_age", 9_007_199_254_740_991)?.map(Duration::from_millis),
        ..RetentionConfig::default()
    };
    c.overflow = match map.get("overflow").map(Value::as_str) {
        None | Some(Some("reject")) => Overflow::Reject,
        Some(Some("drop_oldest")) => Overflow::DropOldest,
        Some(other) => return Err(format!("unknown overflow {other:?}")),
    };
    c.probe = match map.get("probe").map(Value::as_str) {
        None | Some(Some("oldest")) => Probe::Oldest,
        Some(Some("new_message")) => Probe::NewMessage,
        Some(other) => return Err(format!("unknown probe {other:?}")),
    };
    let per_second = whole("release_per_second", "release_rate", u32_max)?;
    let burst = whole("release_burst", "release_rate", u32_max)?;
    c.release_rate = match (per_second, burst) {
        (Some(per_second), Some(burst)) => Some(Rate { per_second: per_second as u32, burst: burst as u32 }),
        (None, None) => None,
        _ => return Err("release_per_second and release_burst go together".into()),
    };
    Ok(c)
}

pub fn describe(e: RetentionError) -> String {
    format!("{}: {}", e.field.name(), e.problem.code())
}

/// A retention case's dispatcher, clock and message names.
pub struct Run {
    dispatcher: RetentionQueue<String>,
    clock: Instant,
    /// Sequence numbers by message name, of every message accepted.
    seqs: HashMap<String, u64>,
    /// Every message accepted, by sequence number (what a store would keep).
    messages: HashMap<u64, String>,
}

impl Run {
    pub fn new(config: Config, retention: RetentionConfig) -> Result<Run, String> {
        let breaker = Breaker::with_meter(config, halfopen::Metrics::default())
            .map_err(|e| format!("{}: {}", e.field.name(), e.problem.code()))?;
        let dispatcher = RetentionQueue::new(breaker, retention).map_err(describe)?;
        Ok(Run { dispatcher, clock: Instant::ZERO, seqs: HashMap::new(), messages: HashMap::new() })
    }

    pub fn step(&mut self, step: &Value) -> Result<(), String> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let keys: &[&str] = match op {
            "submit" => &["message", "bytes", "result"],
            "next" => &["sends"],
            "report" => &["message", "outcome", "result"],
            "handle_timeout" | "release" => &[],
            "force_open" | "force_open_at_least" => &["for_ms"],
            "expect" => &["state", "retention"],
            "snapshot_restore" => &["encoding", "restore_at", "elapsed"],
            other => return Err(format!("unknown op {other:?} in a retention case")),
        };
        let allowed: Vec<&str> = ["op", "at", "events"].iter().chain(keys).copied().collect();
        let map = object(step, &allowed)?;
        if let Some(at) = map.get("at") {
            self.clock = Instant::from_millis(at.as_u64().ok_or("at must be whole milliseconds")?);
        }
        let now = self.clock;
        match op {
            "submit" => self.submit(map, now)?,
            "next" => {
                let want = map.get("sends").and_then(Value::as_array).ok_or("sends must be a list")?;
                let mut sent = Vec::new();
                while let Some(seq) = self.dispatcher.next(now) {
                    if self.dispatcher.message(seq) != self.messages.get(&seq) {
                        return Err(format!("message({seq}) is not the message handed out"));
                    }
                    sent.push(Value::from(self.messages[&seq].clone()));
                    if sent.len() > want.len() {
                        break;
                    }
                }
                if &sent != want {
                    return Err(format!("next: expected the sends {want:?}, got {sent:?}"));
                }
            }
            "report" => self.report(map, now)?,
            "handle_timeout" => self.dispatcher.handle_timeout(now),
            "force_open" => {
                let duration = map.get("for_ms").map(|v| v.as_u64().ok_or("for_ms: whole ms")).transpose()?;
                self.dispatcher.force_open(now, duration.map(Duration::from_millis));
            }
            "force_open_at_least" => {
                let duration = map.get("for_ms").and_then(Value::as_u64).ok_or("for_ms: whole ms")?;
                self.dispatcher.force_open_at_least(now, Duration::from_millis(duration));
            }
            "release" => self.dispatcher.release(now),
            "expect" => self.expect(map, now)?,
            "snapshot_restore" => self.snapshot_restore(map, now)?,
            _ => unreachable!("ops checked above"),
        }
        self.check_events(map)
    }

    fn name(map: &Map<String, Value>) -> Result<&str, String> {
        map.get("message").and_then(Value::as_str).ok_or_else(|| "message must be a name".into())
    }

    fn submit(&mut self, map: &Map<String, Value>, now: Instant) -> Result<(), String> {
        let name = Self::name(map)?;
        let bytes = map.get("bytes").map_or(Some(0), Value::as_u64).ok_or("bytes must be a count")?;
        let got = match self.dispatcher.submit(name.to_owned(), bytes, now) {
            Ok(Submitted::Send(seq)) => ("send", Some(seq)),
            Ok(Submitted::Retained(seq)) => ("retained", Some(seq)),
            Err(overflowed) if overflowed.message == name => ("refused", None),
            Err(_) => return Err("the refused message handed back is another".into()),
        };
        if let Some(seq) = got.1 {
            if self.seqs.insert(name.to_owned(), seq).is_some() {
                return Err(format!("message name {name:?} used twice"));
            }
            self.messages.insert(seq, name.to_owned());
        }
        equal("submit", got.0, map.get("result").ok_or("submit needs a result")?)
    }

    fn report(&mut self, map: &Map<String, Value>, now: Instant) -> Result<(), String> {
        let name = Self::name(map)?;
        let seq = *self.seqs.get(name).ok_or_else(|| format!("no message named {name:?}"))?;
        let got = match self.dispatcher.report(seq, outcome(map)?, now) {
            Some(Reported::Delivered(message)) if message == name => "delivered",
            Some(Reported::Delivered(other)) => return Err(format!("delivered {other:?} for {name:?}")),
            Some(Reported::Retained) => "retained",
            Some(Reported::Dead) => "dead",
            None => "unknown",
        };
        equal("report", got, map.get("result").ok_or("report needs a result")?)
    }

    /// The step's `events` (none if absent) against what the dispatcher queued.
    fn check_events(&mut self, map: &Map<String, Value>) -> Result<(), String> {
        let mut got = Vec::new();
        while let Some(event) = self.dispatcher.poll_event() {
            got.push(event);
        }
        let want = map.get("events").map_or(Some(&[][..]), |e| e.as_array().map(Vec::as_slice)).ok_or("events")?;
        if got.len() != want.len() {
            return Err(format!("expected the events {want:?}, got {got:?}"));
        }
        for (event, want) in got.iter().zip(want) {
            let mismatch = || format!("expected the event {want}, got {event:?}");
            match event {
                Event::Transition(t) => {
                    let want = object(want, &["transition"])?;
                    check_transition(t, want.get("transition").ok_or_else(mismatch)?)?;
                }
                Event::Dead { message, reason, attempts, .. } => {
                    let want = object(want, &["dead", "reason", "attempts"]).map_err(|_| mismatch())?;
                    let reason = match reason {
                        DeadReason::Attempts => "attempts",
                        DeadReason::Age => "age",
                        DeadReason::Refused => "refused",
                    };
                    equal("dead", message, want.get("dead").ok_or_else(mismatch)?)?;
                    equal("dead reason", reason, want.get("reason").ok_or_else(mismatch)?)?;
                    if want.get("attempts").and_then(Value::as_u64) != Some(u64::from(*attempts)) {
                        return Err(mismatch());
                    }
                }
                Event::Dropped { message, .. } => {
                    let want = object(want, &["dropped"]).map_err(|_| mismatch())?;
                    equal("dropped", message, want.get("dropped").ok_or_else(mismatch)?)?;
                }
            }
        }
        Ok(())
    }

    fn expect(&self, map: &Map<String, Value>, now: Instant) -> Result<(), String> {
        if let Some(state) = map.get("state") {
            equal("state", self.dispatcher.breaker().state(now).name(), state)?;
        }
        let Some(want) = map.get("retention") else { return Ok(()) };
        let want = object(want, &["retained", "in_flight", "bytes", "poll_timeout_ms", "counters"])?;
        let d = &self.dispatcher;
        for (key, got) in [("retained", d.retained() as u64), ("in_flight", d.in_flight() as u64), ("bytes", d.bytes())]
        {
            if let Some(n) = want.get(key)
                && n.as_u64() != Some(got)
            {
                return Err(format!("retention.{key}: expected {n}, got {got}"));
            }
        }
        if let Some(at) = want.get("poll_timeout_ms") {
            let got = d.poll_timeout().map(Instant::as_micros);
            let at = if at.is_null() { None } else { Some(at.as_u64().ok_or("poll_timeout_ms")? * 1_000) };
            if got != at {
                return Err(format!("retention.poll_timeout: expected {at:?} µs, got {got:?} µs"));
            }
        }
        if let Some(counters) = want.get("counters") {
            let c = d.counters();
            let actual = [
                ("submitted", c.submitted),
                ("refused", c.refused),
                ("sent", c.sent),
                ("delivered", c.delivered),
                ("failed", c.failed),
                ("dead", c.dead),
                ("dropped", c.dropped),
            ];
            let names: Vec<&str> = actual.iter().map(|(n, _)| *n).collect();
            for (key, n) in object(counters, &names)? {
                let got = actual.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
                if n.as_u64() != got {
                    return Err(format!("retention.counters.{key}: expected {n}, got {got:?}"));
                }
            }
        }
        Ok(())
    }

    /// Snapshot at the current time, encode, decode, and restore a new
    /// dispatcher that takes the messages back by sequence number.
    /// The restore happens at `restore_at` (the clock moves there), counting
    /// the time between as `elapsed` says (`"ignored"`, the default, or
    /// `"counted"`).
    fn snapshot_restore(&mut self, map: &Map<String, Value>, now: Instant) -> Result<(), String> {
        let saved = self.dispatcher.snapshot(now);
        let elapsed = match map.get("elapsed").map(|v| v.as_str()) {
            None | Some(Some("ignored")) => Elapsed::Ignored,
            Some(Some("counted")) => Elapsed::Counted,
            other => return Err(format!("elapsed must be \"ignored\" or \"counted\", got {other:?}")),
        };
        if let Some(at) = map.get("restore_at") {
            self.clock = Instant::from_millis(at.as_u64().ok_or("restore_at must be whole ms")?);
        }
        let now = self.clock;
        let decoded = match map.get("encoding").and_then(Value::as_str) {
            Some("json") => RetentionSnapshot::from_json(&saved.to_json()),
            Some("compact") => RetentionSnapshot::from_bytes(&saved.to_bytes()),
            other => return Err(format!("encoding must be \"json\" or \"compact\", got {other:?}")),
        };
        let config = *self.dispatcher.breaker().config();
        let retention = *self.dispatcher.config();
        let messages = &self.messages;
        self.dispatcher =
            RetentionQueue::restore(config, retention, &decoded.map_err(|e| e.to_string())?, now, elapsed, |seq| {
                messages.get(&seq).cloned()
            })
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}
