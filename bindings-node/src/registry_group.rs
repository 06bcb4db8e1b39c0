//! A registry in a group (issue 23): each name's breaker is a group of its
//! own, all of them exchanged in one script call (the core's
//! `group::KeyedMembers`); the keys, arguments and reply are the core's
//! (`group::redis`). The I/O is `lib/group.js`'s, as for a breaker.

use halfopen::group::{GroupEvent, KeyedMembers, redis};
#[cfg(feature = "node")]
use napi_derive::napi;

use crate::error::{Refusal, Result, structured};
use crate::group::{NativeGroupOptions, NativeGroupReading, refused};
use crate::registry::{NativeRegistry, RegistryGroup};
use crate::time::{duration, instant, ms, ms_at};

/// One script call: its keys (one per name) and arguments (23 per name).
#[cfg_attr(feature = "node", napi(object))]
pub struct NativeGroupCall {
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

#[cfg_attr(feature = "node", napi)]
impl NativeRegistry {
    /// Puts every name of this registry in a group under `name` (checked by
    /// `groupKeys`); throws a structured error for an invalid option, or
    /// one a name's own configuration cannot take.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_join(&mut self, name: String, options: NativeGroupOptions) -> Result<()> {
        redis::keys(&name).map_err(|_| structured("config", Some("name"), Some("out_of_range"), "a group name"))?;
        let (id, config) = options.read()?;
        let members = KeyedMembers::new(id, config, &self.registry).map_err(refused)?;
        self.group = Some(Box::new(RegistryGroup { members, name }));
        Ok(())
    }

    /// How long an exchange may take (ms), once joined.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_store_timeout_ms(&self) -> f64 {
        self.group.as_ref().map_or(0.0, |g| ms(g.members.config().store_timeout()))
    }

    /// When the next exchange is due (ms on the registry's clock);
    /// `Infinity` outside a group.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_next_ms(&self, now_ms: f64) -> f64 {
        self.group.as_ref().map_or(f64::INFINITY, |g| ms_at(g.members.next_exchange(&self.registry, instant(now_ms))))
    }

    /// The script call due at `nowMs` (every name due in it), or null.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_request(&mut self, now_ms: f64) -> Option<NativeGroupCall> {
        let group = self.group.as_mut()?;
        let requests = group.members.requests(&mut self.registry, instant(now_ms))?;
        let mut call = NativeGroupCall { keys: Vec::new(), args: Vec::new() };
        for (name, request) in group.members.names_out().iter().zip(&requests) {
            let config = self.registry.peek(name).map_or(self.registry.config(), |b| b.config());
            let ttl = redis::key_ttl(config, group.members.config());
            // The group's name was checked at join: a name's keys always are.
            call.keys.extend(redis::keyed_keys(&group.name, name).into_iter().flatten());
            call.args.extend(redis::args(request, ttl));
        }
        Some(call)
    }

    /// Applies the script's reply at `nowMs`: 1 if transitions wait, 0 if
    /// not, -1 if the reply is not the script's (a failed exchange).
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_apply(&mut self, reply: Vec<String>, now_ms: f64) -> i32 {
        let Some(group) = self.group.as_mut() else { return 0 };
        let now = instant(now_ms);
        let Ok(answers) = redis::answers(&reply) else {
            group.members.failed(&mut self.registry, now);
            return -1;
        };
        let before = self.transitions.len();
        let transitions = &mut self.transitions;
        let applied = group.members.apply(&mut self.registry, &answers, now, |name, t| {
            transitions.extend(t.into_iter().map(|t| (name.to_owned(), t)));
        });
        if !applied {
            return -1;
        }
        i32::from(self.transitions.len() > before)
    }

    /// The exchange out failed or took too long, at `nowMs`.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_failed(&mut self, now_ms: f64) {
        if let Some(group) = self.group.as_mut() {
            group.members.failed(&mut self.registry, instant(now_ms));
        }
    }

    /// Opens `name`'s group for `forMs` at `nowMs` (its breaker made if it
    /// has none): here at once, the other processes at their next
    /// exchange. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_force_open(&mut self, name: String, now_ms: f64, for_ms: f64) -> Result<bool> {
        let now = instant(now_ms);
        self.registry.get(&name, now).map_err(Refusal::from)?;
        let Some(group) = self.group.as_mut() else { return Ok(false) };
        let t = group.members.force_open(&mut self.registry, &name, now, duration(for_ms));
        Ok(self.keep(&name, t.into_iter().flatten()))
    }

    /// Closes `name`'s group at `nowMs` (`reset`: a reset, else a
    /// force-close; its breaker made if it has none): here at once, the
    /// other processes at their next exchange. True if a transition waits.
    #[cfg_attr(feature = "node", napi(catch_unwind))]
    pub fn group_force_close(&mut self, name: String, now_ms: f64, reset: bool) -> Result<bool> {
        let now = instant(now_ms);
        self.registry.get(&name, now).map_err(Refusal::from)?;
        let Some(group) = self.group.as_mut() else { return Ok(false) };
        let reason = if reset { halfopen::Reason::Reset } else { halfopen::Reason::ForcedClose };
        let t = group.members.force_close(&mut self.registry, &name, now, reason);
        Ok(self.keep(&name, t.into_iter().flatten()))
    }

    /// Leaves the group: every name decides alone from now on.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_leave(&mut self) {
        if let Some(group) = self.group.take() {
            group.members.leave(&mut self.registry);
        }
    }

    /// A change of the link to the store: `"degraded"`, `"recovered"`, or null.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_event(&mut self) -> Option<String> {
        let event = self.group.as_mut()?.members.poll_event()?;
        Some(match event {
            GroupEvent::Degraded => "degraded".into(),
            GroupEvent::Recovered => "recovered".into(),
        })
    }

    /// Whether some names decide alone (the store failed them).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_degraded(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.members.degraded())
    }

    /// Names in the group (with a member: joined at an exchange).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_size(&self) -> u32 {
        self.group.as_ref().map_or(0, |g| g.members.len() as u32)
    }

    /// Each grouped name's group (for prom-client's `circuit_group_*`).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_readings(&self) -> Vec<NativeGroupReading> {
        let Some(group) = &self.group else { return Vec::new() };
        group.members.iter().map(|(name, member)| NativeGroupReading::of(name, member.exposed())).collect()
    }

    /// Names whose group answered since the store last failed for them.
    #[cfg_attr(feature = "node", napi)]
    pub fn group_answered(&self) -> u32 {
        self.group.as_ref().map_or(0, |g| g.members.answered() as u32)
    }

    /// `name`'s group phase as last answered (`"closed"`, `"open"`,
    /// `"half_open"`), or null (not joined yet, or the store failed since).
    #[cfg_attr(feature = "node", napi)]
    pub fn group_phase(&self, name: String) -> Option<String> {
        Some(self.group.as_ref()?.members.member(&name)?.register()?.phase.name().into())
    }
}
