//! The conformance runner's group cases (`tests/conformance/group/`):
//! simulated processes, each with its breaker and group member, sharing the
//! reference store through the Redis script's own arguments and reply
//! (`group::redis`), as every binding does. The format is in
//! `tests/conformance/README.md` ("The group protocol").

use std::collections::HashMap;
use std::sync::Arc;

use halfopen::group::{GroupConfig, GroupField, Member, MemoryStore, redis};
use halfopen::{Breaker, Config, Duration, Instant, Metrics, Permit, Problem, Reason, Transition};
use serde_json::{Map, Value};

use super::{Metered, acquire, call, check_retry_after, check_transition, equal, expect_breaker, object, outcome};

/// The most processes a case may simulate.
const MAX_PROCESSES: u64 = 16;

/// One sender process.
struct Process {
    breaker: Metered,
    member: Member,
    /// Its clock less the store's, ms.
    offset_ms: u64,
    permits: HashMap<String, Permit>,
}

/// A group case's processes around one store.
pub struct Run {
    store: MemoryStore,
    processes: Vec<Process>,
    /// The store's clock, ms.
    clock: u64,
    key_ttl: Duration,
}

/// The case's `group`, translated as a binding would: the process count,
/// each process's clock offset, and the group's options (values no option
/// can hold are errors naming the field).
pub fn build(breaker: Config, value: &Value) -> Result<Run, String> {
    const KEYS: &[&str] =
        &["processes", "clocks_ms", "flush_interval_ms", "quorum", "lease_ms", "member_ttl_ms", "store_timeout_ms"];
    let map = object(value, KEYS)?;
    let n = map.get("processes").and_then(Value::as_u64).filter(|n| (1..=MAX_PROCESSES).contains(n));
    let n = n.ok_or(format!("group.processes must be 1 to {MAX_PROCESSES}"))? as usize;
    let offsets: Vec<u64> = match map.get("clocks_ms") {
        None => vec![0; n],
        Some(list) => {
            let list = list.as_array().filter(|l| l.len() == n).ok_or("group.clocks_ms: one offset per process")?;
            list.iter().map(|v| v.as_u64().ok_or("group.clocks_ms: whole ms from 0")).collect::<Result<_, _>>()?
        }
    };
    let invalid = |field: GroupField| format!("{}: {}", field.name(), Problem::OutOfRange.code());
    let ms = |key: &str, field| {
        map.get(key).map(|v| v.as_u64().map(Duration::from_millis).ok_or_else(|| invalid(field))).transpose()
    };
    let defaults = GroupConfig::default();
    let config = GroupConfig {
        flush_interval: ms("flush_interval_ms", GroupField::FlushInterval)?.unwrap_or(defaults.flush_interval),
        quorum: match map.get("quorum") {
            None => defaults.quorum,
            Some(v) => v.as_u64().and_then(|q| q.try_into().ok()).ok_or_else(|| invalid(GroupField::Quorum))?,
        },
        lease: ms("lease_ms", GroupField::Lease)?,
        member_ttl: ms("member_ttl_ms", GroupField::MemberTtl)?,
        store_timeout: ms("store_timeout_ms", GroupField::StoreTimeout)?,
    };
    let key_ttl = redis::key_ttl(&breaker, &config);
    let config_arc = Arc::new(breaker);
    let processes = offsets
        .into_iter()
        .enumerate()
        .map(|(i, offset_ms)| {
            let member = Member::new(i as u64 + 1, config, &breaker)
                .map_err(|e| format!("{}: {}", e.field.name(), e.problem.code()))?;
            let breaker =
                Breaker::with_meter(config_arc.clone(), (Metrics::default(), None)).map_err(|e| e.to_string())?;
            Ok(Process { breaker, member, offset_ms, permits: HashMap::new() })
        })
        .collect::<Result<_, String>>()?;
    Ok(Run { store: MemoryStore::new(), processes, clock: 0, key_ttl })
}

impl Run {
    /// Process `i`'s clock.
    fn local(&self, i: usize) -> Instant {
        Instant::from_millis(self.clock + self.processes[i].offset_ms)
    }

    pub fn step(&mut self, step: &Value) -> Result<(), String> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let keys: &[&str] = match op {
            "acquire" => &["permit", "rejected", "transition"],
            "record" => &["permit", "outcome", "transition"],
            "call" => &["outcome", "duration_ms", "repeat", "transition", "transitions"],
            "expect" => &["state", "retry_after_ms", "mode", "counts", "poll_timeout_ms", "metrics", "group", "store"],
            "exchange" => &["due", "lost", "transition", "transitions"],
            "group_force_open" => &["for_ms", "transition", "transitions"],
            "group_force_close" | "group_reset" => &["transition", "transitions"],
            "store_restart" => &[],
            other => return Err(format!("unknown op {other:?}")),
        };
        let allowed: Vec<&str> = ["op", "at", "process", "events"].iter().chain(keys).copied().collect();
        let map = object(step, &allowed)?;
        if let Some(at) = map.get("at") {
            self.clock = at.as_u64().ok_or("at must be whole milliseconds")?;
        }
        let process = match map.get("process") {
            None => None,
            Some(p) => {
                Some(p.as_u64().map(|p| p as usize).filter(|&p| p < self.processes.len()).ok_or("process: an index")?)
            }
        };
        if op == "store_restart" {
            return if process.is_some() || map.contains_key("events") {
                Err("store_restart takes no process (and has no events)".into())
            } else {
                self.store = MemoryStore::new();
                Ok(())
            };
        }
        let store_want = map.get("store");
        let Some(i) = process else {
            // Without a process, only the store is read.
            return match (op, store_want) {
                ("expect", Some(want)) if map.len() == 2 + usize::from(map.contains_key("at")) => {
                    self.expect_store(want)
                }
                _ => Err("this step needs a process (an expect without one reads only the store)".into()),
            };
        };
        let mut seen = Vec::new();
        match op {
            "expect" => {
                if let Some(want) = store_want {
                    self.expect_store(want)?;
                }
                let now = self.local(i);
                let p = &self.processes[i];
                expect_breaker(&p.breaker, now, map)?;
                if let Some(want) = map.get("group") {
                    expect_group(p, now, want)?;
                }
            }
            "exchange" => seen = self.exchange(i, map)?,
            _ => {
                let now = self.local(i);
                let p = &mut self.processes[i];
                match op {
                    "acquire" => acquire(&mut p.breaker, now, map, &mut seen, &mut p.permits)?,
                    "record" => {
                        let name = map.get("permit").and_then(Value::as_str).ok_or("record needs a permit name")?;
                        let permit = p.permits.remove(name).ok_or_else(|| format!("no permit named {name:?}"))?;
                        seen.extend(p.breaker.record(permit, outcome(map)?, now));
                    }
                    "call" => {
                        let end = call(&mut p.breaker, now, map, &mut seen)?;
                        self.clock += (end - now).as_millis();
                    }
                    "group_force_open" => {
                        let ms = map.get("for_ms").and_then(Value::as_u64).ok_or("for_ms: whole ms")?;
                        seen.extend(p.member.force_open(&mut p.breaker, now, Duration::from_millis(ms)));
                    }
                    "group_force_close" => seen.extend(p.member.force_close(&mut p.breaker, now, Reason::ForcedClose)),
                    "group_reset" => seen.extend(p.member.force_close(&mut p.breaker, now, Reason::Reset)),
                    _ => unreachable!("ops checked above"),
                }
            }
        }
        check_transitions(map, &seen)?;
        let p = &mut self.processes[i];
        let events: Vec<Value> = std::iter::from_fn(|| p.member.poll_event())
            .map(|e| Value::from(if e == halfopen::group::GroupEvent::Degraded { "degraded" } else { "recovered" }))
            .collect();
        let want = map.get("events").cloned().unwrap_or(Value::Array(vec![]));
        if Value::Array(events.clone()) != want {
            Err(format!("events: expected {want}, got {events:?}"))
        } else {
            Ok(())
        }
    }

    /// An `exchange` step: process `i`'s request due (or none, with `"due":
    /// false`), through the store unless `lost`.
    fn exchange(&mut self, i: usize, map: &Map<String, Value>) -> Result<Vec<Transition>, String> {
        let due = map.get("due").map_or(Some(true), Value::as_bool).ok_or("due must be true or false")?;
        let lost = match map.get("lost").map(Value::as_str) {
            None => None,
            Some(Some(l @ ("request" | "answer"))) => Some(l),
            Some(_) => return Err("lost must be \"request\" or \"answer\"".into()),
        };
        let now = self.local(i);
        let store_us = self.clock * 1_000;
        let p = &mut self.processes[i];
        let request = p.member.request(&mut p.breaker, now);
        let Some(request) = request else {
            return if due { Err("expected an exchange due, the member has none".into()) } else { Ok(vec![]) };
        };
        if !due {
            return Err(format!("expected no exchange due, the member sends {request:?}"));
        }
        let args = redis::args(&request, self.key_ttl);
        if lost == Some("request") {
            p.member.failed(&mut p.breaker, now);
            return Ok(vec![]);
        }
        let reply = redis::exchange(&mut self.store, &args, store_us).map_err(|_| "the store refused the arguments")?;
        if lost == Some("answer") {
            p.member.failed(&mut p.breaker, now);
            return Ok(vec![]);
        }
        let answer = redis::answer(&reply).map_err(|_| "the reply does not read")?;
        Ok(p.member.apply(&mut p.breaker, &answer, now).into_iter().collect())
    }

    /// `{"phase", "epoch", "limit"}`: the store's register, and the
    /// group's concurrency limit (0: none set).
    fn expect_store(&self, want: &Value) -> Result<(), String> {
        let want = object(want, &["phase", "epoch", "limit"])?;
        let register = self.store.register();
        if let Some(phase) = want.get("phase") {
            equal("store.phase", register.phase.name(), phase)?;
        }
        for (key, got) in [("epoch", register.epoch), ("limit", u64::from(self.store.limit().limit))] {
            if let Some(e) = want.get(key).filter(|e| e.as_u64() != Some(got)) {
                return Err(format!("store.{key}: expected {e}, got {got}"));
            }
        }
        Ok(())
    }
}

/// `{"degraded", "phase", "next_exchange_ms"}`: what process `p` knows of
/// its group at `now` (`phase` as last answered, `null` for none; the next
/// exchange in ms from now, exact or `{"min", "max"}`).
fn expect_group(p: &Process, now: Instant, want: &Value) -> Result<(), String> {
    let want = object(want, &["degraded", "phase", "next_exchange_ms"])?;
    if let Some(d) = want.get("degraded")
        && d.as_bool() != Some(p.member.degraded())
    {
        return Err(format!("group.degraded: expected {d}, got {}", p.member.degraded()));
    }
    if let Some(phase) = want.get("phase") {
        let got = p.member.register().map(|r| r.phase.name());
        if phase.as_str() != got {
            return Err(format!("group.phase: expected {phase}, got {got:?}"));
        }
    }
    if let Some(next) = want.get("next_exchange_ms") {
        let at = p.member.next_exchange(&p.breaker, now);
        let wait = if at > now { at - now } else { Duration::ZERO };
        check_retry_after(Some(wait), next).map_err(|e| format!("group.next_exchange_ms: {e}"))?;
    }
    Ok(())
}

/// The step's `transition` / `transitions` against those `seen`.
fn check_transitions(map: &Map<String, Value>, seen: &[Transition]) -> Result<(), String> {
    let expected: Vec<&Value> = match (map.get("transition"), map.get("transitions")) {
        (Some(t), None) => vec![t],
        (None, Some(list)) => list.as_array().ok_or("transitions must be an array")?.iter().collect(),
        (None, None) => vec![],
        (Some(_), Some(_)) => return Err("transition and transitions are exclusive".into()),
    };
    if seen.len() != expected.len() {
        return Err(format!("expected transitions {expected:?}, got {seen:?}"));
    }
    seen.iter().zip(expected).try_for_each(|(got, want)| check_transition(got, want))
}
