//! `NativeRegistry`: the core registry (one breaker per name, bounded), driven
//! with plain numbers and names. The JavaScript class `Registry`
//! (lib/registry.js) wraps it. Calls go through the registry's own
//! `try_acquire`/`record`, so a breaker with a call in flight is never evicted.

use crate::error::{Error, Result};
use halfopen::{Config, Permit, Registry, Transition};
#[cfg(feature = "node")]
use napi_derive::napi;

use crate::breaker::{
    Gauges, NativeLicence, NativeMetrics, NativeTransition, licence_of, metrics_of, mode_name, transition_of,
};
use crate::error::{Refusal, out_of_memory};
use crate::options::NativeOptions;
use crate::time::{duration, elapsed, instant, ms};
use crate::wire;

#[cfg_attr(feature = "node", napi)]
pub struct NativeRegistry {
    pub(crate) registry: Registry<Gauges>,
    /// Transitions not yet taken, with the name of their breaker.
    pub(crate) transitions: Vec<(String, Transition)>,
    /// Its group, once it joins one (`src/registry_group.rs`).
    pub(crate) group: Option<Box<RegistryGroup>>,
}

/// A registry's group: its members and the group's name (the keys' hash tag).
pub(crate) struct RegistryGroup {
    pub(crate) members: halfopen::group::KeyedMembers,
    pub(crate) name: String,
}

impl NativeRegistry {
    /// A name is configured: its new configuration must fit the group.
    fn group_check(&self, config: &Config) -> Result<()> {
        match &self.group {
            // (The one a name's configuration can break: probes that outlast
            // the group's lease; said of the option the name was given.)
            Some(group) => group.members.check(config).map_err(|_| {
                crate::error::config(
                    "probe_timeout",
                    halfopen::Problem::TooLarge,
                    "must be at most the group's lease (the registry's group.leaseMs)",
                )
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn keep(&mut self, name: &str, t: impl IntoIterator<Item = Transition>) -> bool {
        let before = self.transitions.len();
        self.transitions.extend(t.into_iter().map(|t| (name.to_owned(), t)));
        self.transitions.len() > before
    }
}

#[cfg_attr(feature = "node", napi)]
impl NativeRegistry {
    /// A registry of at most `capacity` breakers (the core's
    /// `DEFAULT_CAPACITY` without it) configured by `options`.
    #[cfg_attr(feature = "node", napi(constructor))]
    pub fn new(options: NativeOptions, capacity: Option<f64>) -> Result<Self> {
        let config: Config = options.config()?;
        let capacity = capacity.unwrap_or(halfopen::DEFAULT_CAPACITY as f64);
        if capacity.fract() != 0.0 || !(1.0..=f64::from(u32::MAX)).contains(&capacity) {
            return Err(Refusal::Registry(halfopen::RegistryError::Capacity).into());
        }
        let registry = Registry::new(config, capacity as usize).map_err(Refusal::from)?;
        Ok(NativeRegistry { registry, transitions: Vec::new(), group: None })
    }

    /// Gives `name` the registry's configuration changed by `options` (the
    /// core's `ConfigPatch` rule), replacing a breaker it has. True if a
    /// transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn configure(&mut self, name: String, options: NativeOptions, now_ms: f64) -> Result<bool> {
        let patch = options.patch()?;
        self.group_check(&patch.apply(self.registry.config()))?;
        let t = self.registry.configure_from(&name, &patch, instant(now_ms)).map_err(Refusal::from)?;
        Ok(self.keep(&name, t))
    }

    /// The longest name the core takes, in UTF-8 bytes (`MAX_NAME_BYTES`).
    #[cfg_attr(feature = "node", napi)]
    pub fn max_name_bytes(&self) -> u32 {
        halfopen::MAX_NAME_BYTES as u32
    }

    /// Like `NativeBreaker.acquire` for `name`'s breaker (made on first use),
    /// but a rejection carries the whole refusal (`wire::registry_rejection`);
    /// `wire::REGISTRY_FULL` when the registry is full.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn acquire(&mut self, name: String, now_ms: f64) -> f64 {
        let now = instant(now_ms);
        match self.registry.try_acquire(&name, now) {
            Ok(admission) => {
                self.keep(&name, admission.transition);
                match &admission.decision {
                    Ok(_) => wire::admission(&admission),
                    Err(rejection) => {
                        let gauge = self.registry.peek(&name).map_or(2, |b| b.state(now).gauge());
                        let pending = !self.transitions.is_empty();
                        wire::registry_rejection(rejection.retry_after(), rejection.wait.reason(), gauge, pending)
                    }
                }
            }
            Err(_) => wire::REGISTRY_FULL,
        }
    }

    /// Reports a call of `name`'s breaker. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn record(&mut self, name: String, generation: u32, issued_at_ms: f64, outcome_code: u32, now_ms: f64) -> bool {
        let permit = Permit::from_parts(generation, instant(issued_at_ms));
        let t = self.registry.record(&name, permit, wire::outcome(outcome_code), instant(now_ms));
        self.keep(&name, t)
    }

    /// Hands over what JavaScript did under `name`'s licence (see
    /// `NativeBreaker.handOver`): its calls hold the name until reported.
    /// True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn hand_over(
        &mut self,
        name: String,
        admitted: u32,
        first_ms: f64,
        generation: u32,
        successes: u32,
        at_ms: f64,
    ) -> bool {
        let t = self.registry.hand_over(&name, admitted, instant(first_ms), generation, successes, instant(at_ms));
        self.keep(&name, t)
    }

    /// Counts `count` calls of `name` rejected under its licence.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn count_rejections(&mut self, name: String, count: u32, now_ms: f64) {
        self.registry.count_rejections(&name, count, instant(now_ms));
    }

    /// Applies a manual operation to `name`'s breaker: "force_open" (with
    /// `forMs`), "force_open_at_least" (with `forMs`, required),
    /// "force_close", "disable", "release", "reset", "handle_timeout".
    /// True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn manual(&mut self, name: String, op: String, now_ms: f64, for_ms: Option<f64>) -> Result<bool> {
        let now = instant(now_ms);
        let breaker = self.registry.get(&name, now).map_err(Refusal::from)?;
        let t = match op.as_str() {
            "force_open" => breaker.force_open(now, for_ms.map(duration)),
            "force_open_at_least" => match for_ms {
                Some(ms) => breaker.force_open_at_least(now, duration(ms)),
                None => return Err(Error::from_reason("force_open_at_least needs forMs".to_string())),
            },
            "force_close" => breaker.force_close(now),
            "disable" => breaker.disable(now),
            "release" => breaker.release(now),
            "reset" => breaker.reset(now),
            "handle_timeout" => {
                let t = breaker.handle_timeout(now);
                return Ok(self.keep(&name, t));
            }
            other => return Err(Error::from_reason(format!("unknown operation {other}"))),
        };
        Ok(self.keep(&name, t))
    }

    /// Transitions since the last call, oldest first, with the breaker's name as `name`.
    #[cfg_attr(feature = "node", napi)]
    pub fn take_transitions(&mut self) -> Vec<NativeTransition> {
        self.transitions.drain(..).map(|(name, t)| NativeTransition { name: Some(name), ..transition_of(t) }).collect()
    }

    /// `name`'s licence and state at `nowMs`, or `null` if it has no breaker.
    #[cfg_attr(feature = "node", napi)]
    pub fn licence(&self, name: String, now_ms: f64) -> Option<NativeLicence> {
        let pending = self.transitions.iter().any(|(n, _)| *n == name);
        self.registry.peek(&name).map(|b| licence_of(b, instant(now_ms), pending))
    }

    /// Milliseconds until a call for `name` is worth trying: 0 now, Infinity
    /// when held open — or, for a name without a breaker, 0 if one would be
    /// made now and Infinity if the registry is full of busy breakers.
    #[cfg_attr(feature = "node", napi)]
    pub fn retry_after(&self, name: String, now_ms: f64) -> f64 {
        self.registry.retry_after(&name, instant(now_ms)).map_or(f64::INFINITY, ms)
    }

    /// `name`'s mode, or "normal" without a breaker.
    #[cfg_attr(feature = "node", napi)]
    pub fn mode(&self, name: String, now_ms: f64) -> String {
        mode_name(self.registry.mode(&name, instant(now_ms))).into()
    }

    /// `name`'s metrics, if it has a breaker.
    #[cfg_attr(feature = "node", napi)]
    pub fn metrics(&self, name: String, now_ms: f64) -> Option<NativeMetrics> {
        self.registry.peek(&name).map(|b| metrics_of(b, instant(now_ms)))
    }

    /// The names of every breaker held.
    #[cfg_attr(feature = "node", napi)]
    pub fn names(&self) -> Result<Vec<String>> {
        self.registry.try_names().map_err(|_| out_of_memory("the names"))
    }

    /// Whether `name` has a breaker.
    #[cfg_attr(feature = "node", napi)]
    pub fn has(&self, name: String) -> bool {
        self.registry.peek(&name).is_some()
    }

    /// Breakers held.
    #[cfg_attr(feature = "node", napi(getter))]
    pub fn size(&self) -> u32 {
        self.registry.len() as u32
    }

    /// Idle breakers evicted so far.
    #[cfg_attr(feature = "node", napi(getter))]
    pub fn evictions(&self) -> f64 {
        self.registry.evictions() as f64
    }

    /// The name whose breaker was evicted last, if any (lib/registry.js
    /// drops its licence holder alone when it is the only one evicted).
    #[cfg_attr(feature = "node", napi(getter))]
    pub fn last_evicted(&self) -> Option<String> {
        self.registry.last_evicted().map(str::to_owned)
    }

    /// The Prometheus text exposition of every breaker.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn prometheus(&self, now_ms: f64) -> Result<String> {
        halfopen::try_render(|out| {
            self.registry.render_prometheus(out, instant(now_ms))?;
            let Some(group) = &self.group else { return Ok(()) };
            halfopen::group::render_prometheus(out, || group.members.iter().map(|(n, m)| (n, m.exposed())))
        })
        .map_err(|_| out_of_memory("the exposition"))
    }

    /// Every breaker's state as JSON.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn snapshot_json(&self, now_ms: f64) -> Result<String> {
        self.registry
            .try_snapshot(instant(now_ms))
            .and_then(|s| s.try_into_json())
            .map_err(|_| out_of_memory("the snapshot"))
    }

    /// Replaces every breaker with a snapshot's, leaving them as they were on
    /// error; `counted`: the time since it was taken counts (the clock is
    /// shared). True if transitions wait (breakers whose state changed).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn restore_json(&mut self, json: String, now_ms: f64, counted: bool) -> Result<bool> {
        let changed = self
            .registry
            .restore_json(&json, instant(now_ms), elapsed(counted))
            .map_err(|e| Error::from(Refusal::from(e)))?;
        self.transitions.clear();
        self.transitions.extend(changed);
        Ok(!self.transitions.is_empty())
    }
}
