//! `NativeRegistry`: the core registry (one breaker per name, bounded), driven
//! with plain numbers and names. The JavaScript class `Registry` wraps it.

use halfopen::{Config, Permit, Registry, RegistryError, RegistrySnapshot};
use napi::bindgen_prelude::{Error, Result};
use napi_derive::napi;

use crate::breaker::{
    Gauges, NativeMetrics, NativeTransition, admission_code, instant, metrics_of, outcome, refused, transition_of,
};
use crate::options::{NativeOptions, Refused};

/// What `acquire` returns when the registry is full (no idle breaker to evict).
const FULL: f64 = -0.5;

#[napi]
pub struct NativeRegistry {
    registry: Registry<Gauges>,
    /// Transitions not yet taken, with the name of their breaker.
    transitions: Vec<(String, halfopen::Transition)>,
}

fn registry_error(e: RegistryError) -> Error {
    match e {
        RegistryError::Config(c) => refused(Refused(c.field.name(), c.problem.describe())),
        RegistryError::Capacity => Error::from_reason("capacity|must be a whole number from 1 to 4294967295"),
        RegistryError::Full { .. } => Error::from_reason(format!("full|{e}")),
    }
}

#[napi]
impl NativeRegistry {
    /// A registry of at most `capacity` breakers configured by `options`.
    #[napi(constructor)]
    pub fn new(options: NativeOptions, capacity: f64) -> Result<Self> {
        let config: Config = options.config().map_err(refused)?;
        if capacity.fract() != 0.0 || !(1.0..=f64::from(u32::MAX)).contains(&capacity) {
            return Err(registry_error(RegistryError::Capacity));
        }
        let registry = Registry::new(config, capacity as usize).map_err(registry_error)?;
        Ok(NativeRegistry { registry, transitions: Vec::new() })
    }

    /// Gives `name` its own options (replacing a breaker it has).
    #[napi(catch_unwind)]
    pub fn configure(&mut self, name: String, options: NativeOptions) -> Result<()> {
        let config = options.config().map_err(refused)?;
        self.registry.configure(&name, config).map_err(registry_error)
    }

    /// Like `NativeBreaker.acquire` for `name`'s breaker (made on first use),
    /// or -0.5 when the registry is full.
    #[napi(catch_unwind)]
    pub fn acquire(&mut self, name: String, now_ms: f64) -> f64 {
        let now = instant(now_ms);
        let breaker = match self.registry.get(&name, now) {
            Ok(b) => b,
            Err(_) => return FULL,
        };
        let admission = breaker.try_acquire(now);
        let code = admission_code(&admission);
        self.transitions.extend(admission.transition.map(|t| (name, t)));
        code
    }

    /// Reports a call of `name`'s breaker. True if a transition waits.
    #[napi(catch_unwind)]
    pub fn record(&mut self, name: String, generation: u32, issued_at_ms: f64, outcome_code: u32, now_ms: f64) -> bool {
        let now = instant(now_ms);
        let Ok(breaker) = self.registry.get(&name, now) else { return false };
        let t = breaker.record(Permit::from_parts(generation, instant(issued_at_ms)), outcome(outcome_code), now);
        self.transitions.extend(t.map(|t| (name, t)));
        t.is_some()
    }

    /// Applies a manual operation to `name`'s breaker: "force_open" (with
    /// `forMs`), "force_close", "disable", "release", "reset", "handle_timeout".
    #[napi(catch_unwind)]
    pub fn manual(&mut self, name: String, op: String, now_ms: f64, for_ms: Option<f64>) -> Result<bool> {
        let now = instant(now_ms);
        let breaker = self.registry.get(&name, now).map_err(registry_error)?;
        let t = match op.as_str() {
            "force_open" => breaker.force_open(now, for_ms.map(|f| instant(f) - halfopen::Instant::ZERO)),
            "force_close" => breaker.force_close(now),
            "disable" => breaker.disable(now),
            "release" => breaker.release(now),
            "reset" => breaker.reset(now),
            "handle_timeout" => breaker.handle_timeout(now),
            other => return Err(Error::from_reason(format!("unknown operation {other}"))),
        };
        self.transitions.extend(t.map(|t| (name, t)));
        Ok(t.is_some())
    }

    /// Transitions since the last call, oldest first, with the breaker's name as `name`.
    #[napi]
    pub fn take_transitions(&mut self) -> Vec<NativeTransition> {
        self.transitions.drain(..).map(|(name, t)| NativeTransition { name: Some(name), ..transition_of(t) }).collect()
    }

    /// `name`'s state gauge (0 closed, 1 half-open, 2 open) at `nowMs`, or -1 if it has no breaker.
    #[napi]
    pub fn state(&self, name: String, now_ms: f64) -> f64 {
        self.registry.peek(&name).map_or(-1.0, |b| f64::from(b.state(instant(now_ms)).gauge()))
    }

    /// ms until `name`'s breaker admits (0 also when it has none).
    #[napi]
    pub fn retry_after(&self, name: String, now_ms: f64) -> f64 {
        self.registry
            .peek(&name)
            .map_or(0.0, |b| b.retry_after(instant(now_ms)).map_or(f64::INFINITY, crate::breaker::ms))
    }

    /// `name`'s metrics, if it has a breaker.
    #[napi]
    pub fn metrics(&self, name: String, now_ms: f64) -> Option<NativeMetrics> {
        self.registry.peek(&name).map(|b| metrics_of(b, instant(now_ms)))
    }

    /// The names of every breaker held.
    #[napi]
    pub fn names(&self) -> Vec<String> {
        self.registry.iter().map(|(name, _)| name.to_owned()).collect()
    }

    /// Whether `name` has a breaker.
    #[napi]
    pub fn has(&self, name: String) -> bool {
        self.registry.peek(&name).is_some()
    }

    /// Breakers held.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.registry.len() as u32
    }

    /// Idle breakers evicted so far.
    #[napi(getter)]
    pub fn evictions(&self) -> f64 {
        self.registry.evictions() as f64
    }

    /// The Prometheus text exposition of every breaker.
    #[napi(catch_unwind)]
    pub fn prometheus(&self, now_ms: f64) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.registry.render_prometheus(&mut out, instant(now_ms));
        out
    }

    /// Every breaker's state as JSON.
    #[napi(catch_unwind)]
    pub fn snapshot_json(&self, now_ms: f64) -> String {
        self.registry.snapshot(instant(now_ms)).to_json()
    }

    /// Replaces every breaker with a snapshot's; throws `"snapshot|kind|message"`.
    #[napi(catch_unwind)]
    pub fn restore_json(&mut self, json: String, now_ms: f64) -> Result<()> {
        let restored = RegistrySnapshot::from_json(&json).and_then(|s| self.registry.restore(&s, instant(now_ms)));
        restored.map_err(|e| Error::from_reason(format!("snapshot|{}|{e}", crate::breaker::snapshot_kind(&e))))?;
        self.transitions.clear();
        Ok(())
    }
}
