//! A breaker's group (one breaker for several processes, issue 23): the
//! core's `group::Member` beside the breaker, and the Redis script's keys,
//! arguments and reply, all from the core (`halfopen::group`). The I/O, an
//! `EVALSHA` per exchange through the user's ioredis client, is
//! `lib/group.js`'s.

use halfopen::Reason;
#[cfg(feature = "node")]
use halfopen::group::MemoryStore;
use halfopen::group::{GroupConfig, GroupConfigError, GroupEvent, Member, redis};
#[cfg(feature = "node")]
use napi_derive::napi;

use crate::breaker::NativeBreaker;
use crate::error::{Result, config, structured};
use crate::time::{duration, instant, ms_at};

/// A group's options, as given (absent: the core's default).
#[cfg_attr(feature = "node", napi(object))]
#[derive(Default)]
pub struct NativeGroupOptions {
    /// The member id: 16 hex digits, random per process.
    pub member: String,
    pub flush_interval_ms: Option<f64>,
    pub quorum: Option<u32>,
    pub store_timeout_ms: Option<f64>,
    pub lease_ms: Option<f64>,
    pub member_ttl_ms: Option<f64>,
}

impl NativeGroupOptions {
    /// The member id and the group's configuration (the core's defaults
    /// for those not given).
    pub(crate) fn read(&self) -> Result<(u64, GroupConfig)> {
        let id = u64::from_str_radix(&self.member, 16)
            .map_err(|_| structured("config", Some("member"), Some("out_of_range"), "member: 16 hex digits"))?;
        let defaults = GroupConfig::default();
        let group = GroupConfig {
            flush_interval: self.flush_interval_ms.map_or(defaults.flush_interval, duration),
            quorum: self.quorum.unwrap_or(defaults.quorum),
            store_timeout: self.store_timeout_ms.map(duration).or(defaults.store_timeout),
            lease: self.lease_ms.map(duration),
            member_ttl: self.member_ttl_ms.map(duration),
        };
        Ok((id, group))
    }
}

/// A group option that does not fit the breaker's configuration.
pub(crate) fn refused(e: GroupConfigError) -> crate::error::Error {
    config(e.field.name(), e.problem, e.problem.describe())
}

/// A grouped breaker's group, for prom-client (`circuit_group_*`).
#[cfg_attr(feature = "node", napi(object))]
pub struct NativeGroupReading {
    pub name: String,
    /// It decides alone: its store failed or was late.
    pub degraded: bool,
    /// The group's state gauge as last answered (0 closed, 1 half-open,
    /// 2 open), or null.
    pub state: Option<u32>,
}

impl NativeGroupReading {
    pub(crate) fn of(name: &str, g: halfopen::group::GroupReading) -> Self {
        NativeGroupReading { name: name.to_owned(), degraded: g.degraded, state: g.phase.map(|p| p.gauge().into()) }
    }
}

/// The store script (Lua) every process of a group runs.
#[cfg_attr(feature = "node", napi)]
pub fn group_script() -> String {
    redis::SCRIPT.into()
}

/// The Redis keys of group `name`, in the script's order (one hash slot);
/// a name with a brace (it would split the hash tag) is refused.
#[cfg_attr(feature = "node", napi)]
pub fn group_keys(name: String) -> Result<Vec<String>> {
    let keys = redis::keys(&name).map_err(|_| {
        structured(
            "config",
            Some("name"),
            Some("out_of_range"),
            "must be non-empty, hold no { or }, and be at most 1024 bytes of UTF-8",
        )
    })?;
    Ok(keys.into())
}

#[cfg_attr(feature = "node", napi)]
impl NativeBreaker {
    /// Makes this breaker a member of a group; throws a structured error for
    /// an invalid option.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_join(&mut self, options: NativeGroupOptions) -> Result<()> {
        let (id, group) = options.read()?;
        let member = Member::new(id, group, self.breaker.config()).map_err(refused)?;
        self.group = Some(Box::new(member));
        Ok(())
    }

    /// How long an exchange may take (ms), once joined.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_store_timeout_ms(&self) -> f64 {
        self.group.as_ref().map_or(0.0, |m| crate::time::ms(m.config().store_timeout()))
    }

    /// When the next exchange is due (ms on the breaker's clock); `Infinity`
    /// outside a group.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_next_ms(&self, now_ms: f64) -> f64 {
        self.group.as_ref().map_or(f64::INFINITY, |m| ms_at(m.next_exchange(&self.breaker, instant(now_ms))))
    }

    /// The script's arguments for the exchange due at `nowMs` (after the
    /// keys), or null if none is due.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_request(&mut self, now_ms: f64) -> Option<Vec<String>> {
        let member = self.group.as_mut()?;
        let request = member.request(&mut self.breaker, instant(now_ms))?;
        let ttl = redis::key_ttl(self.breaker.config(), member.config());
        Some(redis::args(&request, ttl))
    }

    /// Applies the script's reply at `nowMs`: 1 if a transition waits, 0 if
    /// not, -1 if the reply is not the script's (counted as a failed exchange).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_apply(&mut self, reply: Vec<String>, now_ms: f64) -> i32 {
        let Some(member) = self.group.as_mut() else { return 0 };
        let now = instant(now_ms);
        match redis::answer(&reply) {
            Ok(answer) => {
                let t = member.apply(&mut self.breaker, &answer, now);
                i32::from(self.keep(t))
            }
            Err(_) => {
                member.failed(&mut self.breaker, now);
                -1
            }
        }
    }

    /// Opens the whole group for `forMs` (checked by the caller: a finite
    /// number of ms from 0) at `nowMs`: this breaker at once, the others at
    /// their next exchange. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_force_open(&mut self, now_ms: f64, for_ms: f64) -> bool {
        let Some(member) = self.group.as_mut() else { return false };
        let t = member.force_open(&mut self.breaker, instant(now_ms), duration(for_ms));
        self.keep(t)
    }

    /// Closes the whole group at `nowMs` (`reset`: a reset, else a
    /// force-close): this breaker at once, the others at their next
    /// exchange. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_force_close(&mut self, now_ms: f64, reset: bool) -> bool {
        let Some(member) = self.group.as_mut() else { return false };
        let reason = if reset { Reason::Reset } else { Reason::ForcedClose };
        let t = member.force_close(&mut self.breaker, instant(now_ms), reason);
        self.keep(t)
    }

    /// The exchange out failed or took too long, at `nowMs`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_failed(&mut self, now_ms: f64) {
        if let Some(member) = self.group.as_mut() {
            member.failed(&mut self.breaker, instant(now_ms));
        }
    }

    /// Leaves the group: the breaker decides alone from now on (its
    /// concurrency limit adapts by itself again, from its share).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_leave(&mut self) {
        if let Some(member) = self.group.take() {
            member.leave(&mut self.breaker);
        }
    }

    /// A change of the link to the store: `"degraded"`, `"recovered"`, or null.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_event(&mut self) -> Option<String> {
        let event = self.group.as_mut()?.poll_event()?;
        Some(match event {
            GroupEvent::Degraded => "degraded".into(),
            GroupEvent::Recovered => "recovered".into(),
        })
    }

    /// Its group as `name` (for prom-client's `circuit_group_*`): none
    /// outside a group.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_readings(&self, name: String) -> Vec<NativeGroupReading> {
        self.group.iter().map(|member| NativeGroupReading::of(&name, member.exposed())).collect()
    }

    /// Whether the member decides alone because its store failed.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_degraded(&self) -> bool {
        self.group.as_ref().is_some_and(|m| m.degraded())
    }

    /// The group's phase as last answered (`"closed"`, `"open"`,
    /// `"half_open"`), or null (no answer yet, or the store failed since).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_phase(&self) -> Option<String> {
        Some(self.group.as_ref()?.register()?.phase.name().into())
    }
}

/// The group's reference store in memory (the core's `MemoryStore`),
/// answering the Redis script's own arguments as the script would: the
/// store of the group protocol's conformance cases (test/group-conformance.test.js),
/// whose clock is the case's. (JavaScript's only: no Rust code uses it.)
#[cfg(feature = "node")]
#[napi]
#[derive(Default)]
pub struct NativeGroupMemoryStore {
    store: MemoryStore,
}

#[cfg(feature = "node")]
#[napi]
impl NativeGroupMemoryStore {
    /// An empty store: the group closed at epoch 0.
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    /// The script's reply to `args` (one request or several) at the store's
    /// `nowMs`; arguments no exchange wrote are a structured error.
    #[napi]
    pub fn exchange(&mut self, args: Vec<String>, now_ms: f64) -> Result<Vec<String>> {
        redis::exchange(&mut self.store, &args, instant(now_ms).as_micros())
            .map_err(|_| structured("store", None, None, "arguments the group script's caller cannot have written"))
    }

    /// Forgets everything (a Redis restarted empty).
    #[napi]
    pub fn restart(&mut self) {
        self.store = MemoryStore::new();
    }

    /// The register's phase: `closed`, `open` or `half_open`.
    #[napi]
    pub fn phase(&self) -> String {
        self.store.register().phase.name().into()
    }

    /// The register's epoch.
    #[napi]
    pub fn epoch(&self) -> f64 {
        self.store.register().epoch as f64
    }

    /// The group's concurrency limit (0: none set).
    #[napi]
    pub fn limit(&self) -> u32 {
        self.store.limit().limit
    }
}
