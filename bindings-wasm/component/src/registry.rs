//! The `registry` resource: the core registry (one breaker per name,
//! bounded), with metrics for every breaker.

use alloc::collections::BTreeSet;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use halfopen as ho;

use crate::breaker::Gauges;
use crate::convert::{self, config_in, duration, instant};
use crate::permit::{Held, Issuer};
use crate::wit;

type Native = ho::Registry<Gauges>;

/// The most breakers a registry may be made to hold here: about 400 bytes
/// each, so that a full registry fits a 32-bit WebAssembly memory (4 GiB)
/// with room to grow its table, rather than trapping when memory runs out.
const MAX_CAPACITY: u32 = 1 << 20;

/// A registry, and the names of its permits not yet reported (one copy of
/// each name, however many permits carry it).
pub(crate) struct Shared {
    registry: RefCell<Native>,
    names: RefCell<BTreeSet<Rc<str>>>,
}

impl Shared {
    /// `name`, shared with the other permits that carry it.
    fn intern(&self, name: String) -> Rc<str> {
        let mut names = self.names.borrow_mut();
        if let Some(known) = names.get(name.as_str()) {
            return known.clone();
        }
        let name: Rc<str> = name.into();
        names.insert(name.clone());
        name
    }

    /// Forgets `name` once no permit but the one releasing it carries it.
    fn release(&self, name: &Rc<str>) {
        if Rc::strong_count(name) <= 2 {
            self.names.borrow_mut().remove(name);
        }
    }

    /// Reports a permit of `name`'s breaker.
    fn record(&self, name: &str, permit: ho::Permit, outcome: ho::Outcome, now: ho::Instant) -> Option<ho::Transition> {
        self.registry.borrow_mut().record(name, permit, outcome, now)
    }
}

impl Issuer for Shared {
    fn dropped(&self, name: Option<&Rc<str>>, permit: Option<ho::Permit>) {
        // A registry's permits always carry their name.
        let Some(name) = name else { return };
        if let Some(permit) = permit {
            let _ = self.record(name, permit, ho::Outcome::Cancelled, ho::Instant::ZERO);
        }
        self.release(name);
    }
}

pub(crate) struct Many(Rc<Shared>);

type Manual = fn(&mut ho::Keyed<Gauges>, ho::Instant, Option<ho::Duration>) -> ho::Transitions;

impl Many {
    fn with<T>(&self, f: impl FnOnce(&mut Native) -> T) -> T {
        f(&mut self.0.registry.borrow_mut())
    }

    /// A reading of `name`'s breaker, if it has one (without making it).
    fn peek<T>(&self, name: &str, f: impl FnOnce(&ho::Keyed<Gauges>) -> T) -> Option<T> {
        self.0.registry.borrow().peek(name).map(f)
    }

    /// A manual operation on `name`'s breaker (made on first use).
    fn manual(
        &self,
        name: &str,
        now: u64,
        for_us: Option<u64>,
        op: Manual,
    ) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        let now = instant(now);
        self.with(|r| {
            let breaker = r.get(name, now).map_err(convert::registry_error)?;
            Ok(convert::transitions(op(breaker, now, for_us.map(duration))))
        })
    }

    fn restored(
        &self,
        restored: Result<Vec<(String, ho::Transition)>, ho::SnapshotError>,
    ) -> Result<Vec<wit::NamedTransition>, wit::SnapshotError> {
        let transitions = restored.map_err(convert::snapshot_error)?;
        Ok(transitions.iter().map(|(name, t)| convert::named(name, *t)).collect())
    }
}

impl wit::GuestRegistry for Many {
    fn create(config: wit::Config, capacity: u32) -> Result<wit::Registry, wit::RegistryError> {
        if capacity > MAX_CAPACITY {
            return Err(wit::RegistryError::Capacity);
        }
        let registry = Native::new(config_in(&config), capacity as usize).map_err(convert::registry_error)?;
        let shared = Shared { registry: RefCell::new(registry), names: RefCell::new(BTreeSet::new()) };
        Ok(wit::Registry::new(Many(Rc::new(shared))))
    }

    fn configure(
        &self,
        name: String,
        config: wit::Config,
        now: u64,
    ) -> Result<Option<wit::Transition>, wit::RegistryError> {
        let t = self.with(|r| r.configure(&name, config_in(&config), instant(now)));
        Ok(t.map_err(convert::registry_error)?.map(convert::transition))
    }

    fn configure_from(
        &self,
        name: String,
        changes: Vec<wit::ConfigChange>,
        now: u64,
    ) -> Result<Option<wit::Transition>, wit::RegistryError> {
        let patch = convert::patch_in(&changes);
        let t = self.with(|r| r.configure_from(&name, &patch, instant(now)));
        Ok(t.map_err(convert::registry_error)?.map(convert::transition))
    }

    fn try_acquire(&self, name: String, now: u64) -> Result<wit::Admission, wit::RegistryError> {
        let admission = self.with(|r| r.try_acquire(&name, instant(now))).map_err(convert::registry_error)?;
        let transition = admission.transition.map(convert::transition);
        let decision = match admission.decision {
            Ok(permit) => Ok(Held::handle(self.0.clone(), Some(self.0.intern(name)), permit)),
            Err(rejection) => Err(convert::rejection(&rejection)),
        };
        Ok(wit::Admission { decision, transition })
    }

    fn record(
        &self,
        permit: wit::Permit,
        outcome: wit::Outcome,
        now: u64,
    ) -> Result<Option<wit::NamedTransition>, wit::PermitError> {
        let held: Held = permit.into_inner();
        let name = match &held.name {
            Some(name) if held.issued_by(&self.0) => name,
            // Dropped here: reported to its issuer as cancelled.
            _ => return Err(wit::PermitError::OtherOwner),
        };
        let Some(permit) = held.permit.take() else { return Ok(None) };
        let t = self.0.record(name, permit, convert::outcome(outcome), instant(now));
        Ok(t.map(|t| convert::named(name, t)))
    }

    fn state(&self, name: String, now: u64) -> Option<wit::State> {
        self.peek(&name, |b| convert::state(b.state(instant(now))))
    }

    fn retry_after(&self, name: String, now: u64) -> Option<u64> {
        self.with(|r| r.retry_after(&name, instant(now))).map(|d| d.as_micros())
    }

    fn mode(&self, name: String, now: u64) -> Option<wit::Mode> {
        self.peek(&name, |b| convert::mode(b.mode(instant(now))))
    }

    fn counts(&self, name: String, now: u64) -> Option<wit::Counts> {
        self.peek(&name, |b| convert::counts(b.counts(instant(now))))
    }

    fn metrics(&self, name: String, now: u64) -> Option<wit::Metrics> {
        self.peek(&name, |b| convert::metrics(b.metrics(instant(now))))
    }

    fn poll_timeout(&self, name: String) -> Option<u64> {
        self.peek(&name, |b| b.poll_timeout()).flatten().map(|t| t.as_micros())
    }

    fn force_open(
        &self,
        name: String,
        now: u64,
        for_us: Option<u64>,
    ) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, for_us, |b, now, d| b.force_open(now, d))
    }

    fn force_open_at_least(
        &self,
        name: String,
        now: u64,
        for_us: u64,
    ) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, Some(for_us), |b, now, d| b.force_open_at_least(now, d.unwrap_or_default()))
    }

    fn force_close(&self, name: String, now: u64) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, None, |b, now, _| b.force_close(now))
    }

    fn disable(&self, name: String, now: u64) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, None, |b, now, _| b.disable(now))
    }

    fn release(&self, name: String, now: u64) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, None, |b, now, _| b.release(now))
    }

    fn reset(&self, name: String, now: u64) -> Result<Vec<wit::Transition>, wit::RegistryError> {
        self.manual(&name, now, None, |b, now, _| b.reset(now))
    }

    fn handle_timeout(&self, name: String, now: u64) -> Option<wit::Transition> {
        // Only a breaker the registry holds can have a change due.
        let now = instant(now);
        self.with(|r| r.peek(&name).is_some().then(|| r.get(&name, now).ok()?.handle_timeout(now)))
            .flatten()
            .map(convert::transition)
    }

    fn names(&self) -> Result<Vec<String>, wit::OutputError> {
        self.with(|r| r.try_names()).map_err(convert::output_error)
    }

    fn len(&self) -> u32 {
        self.with(|r| r.len() as u32)
    }

    fn evictions(&self) -> u64 {
        self.with(|r| r.evictions())
    }

    fn prometheus(&self, now: u64) -> Result<String, wit::OutputError> {
        self.with(|r| ho::try_render(|out| r.render_prometheus(out, instant(now)))).map_err(convert::output_error)
    }

    fn snapshot(&self, now: u64) -> Result<Vec<u8>, wit::OutputError> {
        let snapshot = self.with(|r| r.try_snapshot(instant(now)));
        snapshot.and_then(ho::RegistrySnapshot::try_into_bytes).map_err(convert::output_error)
    }

    fn snapshot_json(&self, now: u64) -> Result<String, wit::OutputError> {
        let snapshot = self.with(|r| r.try_snapshot(instant(now)));
        snapshot.and_then(ho::RegistrySnapshot::try_into_json).map_err(convert::output_error)
    }

    fn restore(
        &self,
        snapshot: Vec<u8>,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<Vec<wit::NamedTransition>, wit::SnapshotError> {
        let restored = self.with(|r| r.restore_bytes(&snapshot, instant(now), convert::elapsed(elapsed)));
        self.restored(restored)
    }

    fn restore_json(
        &self,
        snapshot: String,
        now: u64,
        elapsed: wit::Elapsed,
    ) -> Result<Vec<wit::NamedTransition>, wit::SnapshotError> {
        let restored = self.with(|r| r.restore_json(&snapshot, instant(now), convert::elapsed(elapsed)));
        self.restored(restored)
    }
}
