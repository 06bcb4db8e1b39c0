//! One breaker per key (seed 000 keeps one per WhatsApp instance), made on
//! first use from a shared configuration or a per-key override, in bounded
//! memory.
//!
//! At capacity, making a new breaker evicts the least recently used breaker
//! that is *idle*: closed, in no manual mode, with no call in flight, and
//! with no failure counted that a policy uses (the rule is
//! `policy::forgettable`). Forgetting such a breaker loses no protection: a
//! new one would decide the same. (Its metrics go with it; evictions are
//! counted.) An open, half-open, forced, disabled, busy or failing breaker is
//! never evicted. Calls are known to be in flight when they go through
//! [`Registry::try_acquire`] and [`Registry::record`]; a breaker borrowed with
//! [`Registry::get`] is the caller's to report on.
//!
//! Recency is exact (a use counter per breaker), but at more than
//! [`EVICTION_SAMPLE`] breakers the eviction looks at that many, drawn at
//! random, and takes the least recently used idle one among them (as Redis
//! does): keeping an exact order would cost every lookup two more cache
//! misses. If none of them is idle the new key is refused with
//! [`RegistryError::Full`]: protection is never dropped silently, and the
//! caller can retry (another sample is drawn).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashMap, HashTable};

use crate::breaker::Breaker;
use crate::config::Config;
use crate::error::ConfigError;
#[cfg(feature = "snapshot")]
use crate::fallible::OutOfMemory;
use crate::meter::Meter;
use crate::metrics::ReadMetrics;
use crate::permit::{Admission, Outcome, Permit};
use crate::policy;
use crate::state::{State, Transition};
use crate::time::Instant;

/// A breaker as the registry keeps it.
pub type Keyed<M> = Breaker<Arc<Config>, M>;

/// How many breakers an insertion at capacity looks at for an idle one.
pub const EVICTION_SAMPLE: usize = 16;

/// The longest name a registry takes, in UTF-8 bytes. A name is kept once
/// per breaker (and once more per name configured) and written in every
/// family of the Prometheus exposition, so it bounds what one name can cost:
/// a registry's names take at most `capacity` × 1 KiB, and a name that is
/// really a payload (a URL with a query, a message body) is refused instead
/// of exhausting memory.
pub const MAX_NAME_BYTES: usize = 1024;

/// Whether a registry takes `name` (at most [`MAX_NAME_BYTES`]).
pub fn check_name(name: &str) -> Result<(), RegistryError> {
    match name.len() {
        bytes if bytes > MAX_NAME_BYTES => Err(RegistryError::NameTooLong { bytes }),
        _ => Ok(()),
    }
}

/// Why the registry refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryError {
    /// At capacity, and none of the breakers looked at is idle.
    Full {
        /// The configured capacity.
        capacity: usize,
    },
    /// A configuration (shared or per key) is invalid.
    Config(ConfigError),
    /// The capacity is zero or more than 2^32 − 1 breakers.
    Capacity,
    /// [`configure`](Registry::configure) for more distinct names than the
    /// capacity.
    TooManyConfigured {
        /// The configured capacity.
        capacity: usize,
    },
    /// A name longer than [`MAX_NAME_BYTES`].
    NameTooLong {
        /// Its length in UTF-8 bytes.
        bytes: usize,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Full { capacity } => {
                write!(f, "registry full: {capacity} breakers, none of those sampled for eviction is idle")
            }
            RegistryError::Config(e) => e.fmt(f),
            RegistryError::Capacity => f.write_str("registry capacity must be between 1 and 2^32 - 1"),
            RegistryError::NameTooLong { bytes } => {
                write!(f, "a breaker name of {bytes} bytes: at most {MAX_NAME_BYTES} (UTF-8)")
            }
            RegistryError::TooManyConfigured { capacity } => {
                write!(f, "registry capacity {capacity} reached: no more names can be given their own configuration")
            }
        }
    }
}

impl core::error::Error for RegistryError {}

impl From<ConfigError> for RegistryError {
    fn from(e: ConfigError) -> Self {
        RegistryError::Config(e)
    }
}

/// A key, stored inline when it is short (no allocation, no pointer to
/// follow on lookup), on the heap otherwise.
enum Name {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

const INLINE: usize = 22;

impl Name {
    fn new(name: &str) -> Self {
        let mut bytes = [0; INLINE];
        match bytes.get_mut(..name.len()) {
            Some(prefix) => {
                prefix.copy_from_slice(name.as_bytes());
                Name::Inline { len: name.len() as u8, bytes }
            }
            None => Name::Heap(name.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Holds a prefix of a `&str` cut at its length: valid UTF-8.
            Name::Inline { len, bytes } => core::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default(),
            Name::Heap(name) => name,
        }
    }
}

struct Entry<M> {
    name: Name,
    /// The registry's use counter when this breaker was last looked up.
    used: u64,
    /// Permits this breaker issued through [`Registry::try_acquire`], not yet reported.
    in_flight: u32,
    /// Calls of the breakers this name had before this one.
    earlier: Earlier,
    /// When this breaker was made, in the registry's count of breakers made.
    born: u64,
    breaker: Keyed<M>,
}

/// Calls admitted by the breakers a name had before its current one
/// (replaced by [`Registry::configure`] or a restore), not yet reported.
/// Their permits are of generations below `below`, where the current
/// breaker's start; their reports reach no breaker (the meter that counted
/// their admission is gone), but they keep the name from eviction.
#[derive(Debug, Clone, Copy, Default)]
struct Earlier {
    below: u32,
    in_flight: u32,
}

impl<M: Meter> Entry<M> {
    /// Every call of this name not yet reported, and the generation the
    /// next breaker of this name must start at.
    fn outstanding(&self, now: Instant) -> Earlier {
        Earlier {
            below: self.breaker.counts(now).generation.wrapping_add(1),
            in_flight: self.in_flight.saturating_add(self.earlier.in_flight),
        }
    }
}

/// Breakers by name, bounded in number. `M` is each breaker's meter
/// ([`Metrics`](crate::Metrics) by default; `()` to measure nothing).
pub struct Registry<M = crate::Metrics> {
    config: Arc<Config>,
    /// Per-name configurations (at most `capacity`).
    overrides: HashMap<Box<str>, Arc<Config>>,
    entries: Vec<Entry<M>>,
    /// Indices into `entries`, hashed by name.
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    /// Counts lookups; stamps `Entry::used`.
    uses: u64,
    /// Counts breakers made (on first use, configured, restored); stamps
    /// `Entry::born`.
    births: u64,
    /// Names a restore dropped while they had calls in flight (until those
    /// report): a breaker made for the name later starts after them.
    dropped: HashMap<Box<str>, Earlier>,
    /// State of the xorshift that draws eviction samples.
    sampler: u64,
    capacity: usize,
    evictions: u64,
    /// The name whose breaker was evicted last.
    last_evicted: Option<Name>,
}

/// The capacity of a registry whose user gives none (the bindings' default).
pub const DEFAULT_CAPACITY: usize = 10_000;

impl<M: Meter + Default> Registry<M> {
    /// A registry whose breakers use `config`, holding at most `capacity`
    /// ([`DEFAULT_CAPACITY`] where the user gives none).
    pub fn new(config: Config, capacity: usize) -> Result<Self, RegistryError> {
        config.validate()?;
        if capacity == 0 || capacity > u32::MAX as usize {
            return Err(RegistryError::Capacity);
        }
        Ok(Registry {
            config: Arc::new(config),
            overrides: HashMap::new(),
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            uses: 0,
            births: 0,
            dropped: HashMap::new(),
            sampler: 0x9E37_79B9_7F4A_7C15,
            capacity,
            evictions: 0,
            last_evicted: None,
        })
    }

    /// Gives `name` the registry's configuration changed by `patch` (see
    /// [`ConfigPatch`](crate::ConfigPatch): the rule every binding follows
    /// for a name's own options), as [`configure`](Self::configure) does.
    /// Each call starts from the registry's configuration again.
    pub fn configure_from(
        &mut self,
        name: &str,
        patch: &crate::ConfigPatch,
        now: Instant,
    ) -> Result<Option<Transition>, RegistryError> {
        self.configure(name, patch.apply(&self.config), now)
    }

    /// Gives `name` its own configuration, from now on and after eviction
    /// (for at most `capacity` names). A breaker `name` already has is
    /// replaced at `now` by a new, closed one (its metrics start afresh; the
    /// calls it admitted are counted out when they report, but reach no
    /// breaker); if it was not closed, the returned
    /// transition says so (reason [`Reconfigured`](crate::Reason::Reconfigured)).
    pub fn configure(&mut self, name: &str, config: Config, now: Instant) -> Result<Option<Transition>, RegistryError> {
        check_name(name)?;
        config.validate()?;
        if !self.overrides.contains_key(name) && self.overrides.len() >= self.capacity {
            return Err(RegistryError::TooManyConfigured { capacity: self.capacity });
        }
        let config = Arc::new(config);
        self.overrides.insert(name.into(), config.clone());
        let Some(i) = self.find(name) else { return Ok(None) };
        let entry = &mut self.entries[i as usize];
        let from = entry.breaker.state(now);
        let mut fresh = Breaker::with_meter(config, M::default())?;
        fresh.follow(&entry.breaker, now);
        entry.earlier = entry.outstanding(now);
        entry.in_flight = 0;
        entry.breaker = fresh;
        self.births += 1;
        entry.born = self.births;
        let transition = (from != State::Closed).then_some(Transition {
            from,
            to: State::Closed,
            reason: crate::Reason::Reconfigured,
            at: now,
        });
        Ok(transition)
    }

    /// Asks `name`'s breaker (made on first use, as [`get`](Self::get)) for a
    /// permit; an admitted call counts as in flight, so its breaker is not
    /// evicted, until [`record`](Self::record) reports it.
    pub fn try_acquire(&mut self, name: &str, now: Instant) -> Result<Admission, RegistryError> {
        let i = self.touch(name, now)?;
        let entry = &mut self.entries[i as usize];
        let admission = entry.breaker.try_acquire(now);
        if admission.decision.is_ok() {
            entry.in_flight = entry.in_flight.saturating_add(1);
        }
        Ok(admission)
    }

    /// Reports a call admitted by [`try_acquire`](Self::try_acquire). If
    /// `name` has no breaker any more (a `restore` replaced
    /// them), the report is dropped: it is stale for any breaker.
    ///
    /// A call admitted by a breaker `name` had before its current one (see
    /// [`configure`](Self::configure)) is counted out, but reaches no
    /// breaker: the meter that counted its admission is gone.
    pub fn record(&mut self, name: &str, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        let Some(i) = self.find(name) else {
            if let Some(earlier) = self.dropped.get_mut(name) {
                earlier.in_flight = earlier.in_flight.saturating_sub(1);
                if earlier.in_flight == 0 {
                    self.dropped.remove(name);
                }
            }
            return None;
        };
        self.uses += 1;
        let entry = &mut self.entries[i as usize];
        entry.used = self.uses;
        if entry.breaker.issued_before(permit.generation(), entry.earlier.below) {
            entry.earlier.in_flight = entry.earlier.in_flight.saturating_sub(1);
            return None;
        }
        entry.in_flight = entry.in_flight.saturating_sub(1);
        entry.breaker.record(permit, outcome, now)
    }

    /// Hands over what a caller did under `name`'s [`Licence`](crate::Licence)
    /// (see [`Breaker::hand_over`]): the `admitted` calls hold the name (it
    /// is not evicted while they are out) until reported, the `successes`
    /// are reported. Dropped if `name` has no breaker (a caller hands over
    /// before anything that may evict or replace one).
    pub fn hand_over(
        &mut self,
        name: &str,
        admitted: u32,
        first: Instant,
        generation: u32,
        successes: u32,
        at: Instant,
    ) -> Option<Transition> {
        let i = self.find(name)?;
        self.uses += 1;
        let entry = &mut self.entries[i as usize];
        entry.used = self.uses;
        entry.in_flight = entry.in_flight.saturating_add(admitted).saturating_sub(successes);
        entry.breaker.hand_over(admitted, first, generation, successes, at)
    }

    /// Counts `count` calls of `name` rejected at `now` under a
    /// [`Licence::Reject`](crate::Licence) (see [`Breaker::count_rejections`]);
    /// dropped if `name` has no breaker.
    pub fn count_rejections(&mut self, name: &str, count: u32, now: Instant) {
        if let Some(i) = self.find(name) {
            self.uses += 1;
            let entry = &mut self.entries[i as usize];
            entry.used = self.uses;
            entry.breaker.count_rejections(count, now);
        }
    }

    /// Whether a name without a breaker would get one at `now`: there is
    /// room, or the next insertion would find an idle breaker to evict (the
    /// same sample it will draw). Changes nothing.
    pub fn has_room(&self, now: Instant) -> bool {
        self.entries.len() < self.capacity || self.idle_sample(&mut self.sampler.clone(), now).is_some()
    }

    /// `name`'s state at `now`; closed for a name without a breaker (a new
    /// one would be). Changes nothing.
    pub fn state(&self, name: &str, now: Instant) -> State {
        self.peek(name).map_or(State::Closed, |b| b.state(now))
    }

    /// `name`'s manual mode; normal for a name without a breaker.
    pub fn mode(&self, name: &str, now: Instant) -> crate::Mode {
        self.peek(name).map_or(crate::Mode::Normal, |b| b.mode(now))
    }

    /// When a call for `name` is worth trying: its breaker's
    /// [`retry_after`](Breaker::retry_after); for a name without one, zero
    /// if it would get one now ([`has_room`](Self::has_room)), `None` when
    /// the registry is full of busy breakers (no time is known). Changes
    /// nothing.
    pub fn retry_after(&self, name: &str, now: Instant) -> Option<crate::Duration> {
        match self.peek(name) {
            Some(b) => b.retry_after(now),
            None => self.has_room(now).then_some(crate::Duration::ZERO),
        }
    }

    /// The breaker for `name`, made on first use (which, at capacity, evicts
    /// the least recently used idle breaker as of `now`). Marks it most
    /// recently used.
    pub fn get(&mut self, name: &str, now: Instant) -> Result<&mut Keyed<M>, RegistryError> {
        let i = self.touch(name, now)?;
        Ok(&mut self.entries[i as usize].breaker)
    }

    /// The index of `name`'s breaker (made on first use), marked most
    /// recently used.
    fn touch(&mut self, name: &str, now: Instant) -> Result<u32, RegistryError> {
        let i = match self.find(name) {
            Some(i) => i,
            None => self.insert(name, now)?,
        };
        self.uses += 1;
        self.entries[i as usize].used = self.uses;
        Ok(i)
    }

    /// Every name with a breaker (in no particular order), or
    /// [`OutOfMemory`](crate::OutOfMemory): an output that grows with the
    /// registry, built without aborting.
    pub fn try_names(&self) -> Result<Vec<alloc::string::String>, crate::OutOfMemory> {
        crate::try_collect(self.iter().map(|(name, _)| crate::try_to_string(name)))
    }

    /// The breaker for `name` if there is one; does not change recency.
    pub fn peek(&self, name: &str) -> Option<&Keyed<M>> {
        self.find(name).map(|i| &self.entries[i as usize].breaker)
    }

    /// The breaker for `name` if there is one, to change; does not change
    /// recency (a group's exchange is not a use).
    pub fn peek_mut(&mut self, name: &str) -> Option<&mut Keyed<M>> {
        self.find(name).map(|i| &mut self.entries[i as usize].breaker)
    }

    /// A stamp of `name`'s breaker that changes whenever the breaker is
    /// replaced (made on first use, after an eviction too; configured;
    /// restored): a new breaker's running totals start again.
    pub fn born(&self, name: &str) -> Option<u64> {
        self.find(name).map(|i| self.entries[i as usize].born)
    }

    /// The configuration of a name without its own.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every configuration a name can have: the registry's, then each
    /// name's own.
    pub fn configs(&self) -> impl Iterator<Item = &Config> {
        core::iter::once(&*self.config).chain(self.overrides.values().map(|c| &**c))
    }

    /// Breakers held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no breaker is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Idle breakers evicted to make room, since the registry was made.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// The name whose breaker was evicted last (`None` before the first
    /// eviction, and after a restore): with [`evictions`](Self::evictions)
    /// read before and after a call, which name lost its breaker when one
    /// did.
    pub fn last_evicted(&self) -> Option<&str> {
        self.last_evicted.as_ref().map(Name::as_str)
    }

    /// Every `(name, breaker)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Keyed<M>)> {
        self.entries.iter().map(|e| (e.name.as_str(), &e.breaker))
    }

    /// The Prometheus text exposition of every breaker at `now`, plus
    /// `circuit_registry_breakers` and `circuit_registry_evictions_total`.
    pub fn render_prometheus(&self, out: &mut impl fmt::Write, now: Instant) -> fmt::Result
    where
        M: ReadMetrics,
    {
        crate::prometheus::render(out, || self.iter().map(|(name, b)| (name, b.metrics(now))))?;
        writeln!(out, "# HELP circuit_registry_breakers Breakers held by the registry.")?;
        writeln!(out, "# TYPE circuit_registry_breakers gauge")?;
        writeln!(out, "circuit_registry_breakers {}", self.len())?;
        writeln!(out, "# HELP circuit_registry_evictions_total Idle breakers evicted to make room.")?;
        writeln!(out, "# TYPE circuit_registry_evictions_total counter")?;
        writeln!(out, "circuit_registry_evictions_total {}", self.evictions)
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    fn find(&self, name: &str) -> Option<u32> {
        let entries = &self.entries;
        self.index.find(self.hash(name), |&i| entries[i as usize].name.as_str() == name).copied()
    }

    fn config_for(&self, name: &str) -> Arc<Config> {
        self.overrides.get(name).unwrap_or(&self.config).clone()
    }

    /// Makes the breaker for `name` (evicting an idle one at capacity) and
    /// returns its index.
    fn insert(&mut self, name: &str, now: Instant) -> Result<u32, RegistryError> {
        check_name(name)?;
        let breaker = Breaker::with_meter(self.config_for(name), M::default())?;
        self.births += 1;
        let born = self.births;
        let entry = Entry { name: Name::new(name), used: 0, in_flight: 0, earlier: Earlier::default(), born, breaker };
        let i = if self.entries.len() < self.capacity {
            // Doubling, but never room for more breakers than the capacity:
            // a registry filled to it holds no spare entries.
            let len = self.entries.len();
            if len == self.entries.capacity() {
                self.entries.reserve_exact(len.max(4).min(self.capacity - len));
            }
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        } else {
            let mut sampler = self.sampler;
            let victim = self.idle_sample(&mut sampler, now);
            self.sampler = sampler;
            let victim = victim.ok_or(RegistryError::Full { capacity: self.capacity })?;
            let old = core::mem::replace(&mut self.entries[victim as usize], entry);
            let hash = self.hash(old.name.as_str());
            if let Ok(slot) = self.index.find_entry(hash, |&j| j == victim) {
                slot.remove();
            }
            self.evictions += 1;
            self.last_evicted = Some(old.name);
            victim
        };
        // Only now that it has a place: calls of a breaker a restore dropped.
        if let Some(earlier) = self.dropped.remove(name) {
            let entry = &mut self.entries[i as usize];
            entry.breaker.follow_generation(earlier.below.wrapping_sub(1), now);
            entry.earlier = earlier;
        }
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index.insert_unique(self.hash(name), i, |&j| hasher.hash_one(entries[j as usize].name.as_str()));
        Ok(i)
    }

    /// The least recently used idle breaker among all of them (at most
    /// [`EVICTION_SAMPLE`]) or among that many drawn at random with `sampler`.
    fn idle_sample(&self, sampler: &mut u64, now: Instant) -> Option<u32> {
        let len = self.entries.len();
        let sampled = len > EVICTION_SAMPLE;
        let mut best: Option<(u64, u32)> = None;
        for k in 0..len.min(EVICTION_SAMPLE) {
            let i = if sampled { draw(sampler, len) } else { k as u32 };
            let entry = &self.entries[i as usize];
            if is_idle(entry, now) && best.is_none_or(|(used, _)| entry.used < used) {
                best = Some((entry.used, i));
            }
        }
        best.map(|(_, i)| i)
    }
}

/// A random index below `len`, from the xorshift64 state `x`.
fn draw(x: &mut u64, len: usize) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    (*x % len as u64) as u32
}

/// Whether the entry's breaker may be forgotten (see `policy::forgettable`).
fn is_idle<M: Meter>(entry: &Entry<M>, now: Instant) -> bool {
    let b = &entry.breaker;
    let in_flight = entry.in_flight.saturating_add(entry.earlier.in_flight);
    policy::forgettable(b.config(), b.state(now), b.mode(now), &b.counts(now), in_flight)
}

/// The state of a registry: every breaker by name, and its eviction count.
#[cfg(feature = "snapshot")]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySnapshot {
    /// [`SNAPSHOT_VERSION`](crate::SNAPSHOT_VERSION) when written.
    pub version: u32,
    /// Idle breakers evicted so far.
    pub evictions: u64,
    /// Each breaker's name and state.
    pub breakers: Vec<(alloc::string::String, crate::Snapshot)>,
}

#[cfg(feature = "snapshot")]
impl crate::snapshot::Saved for RegistrySnapshot {
    fn settle(&mut self) -> Result<(), crate::SnapshotError> {
        self.breakers.iter_mut().try_for_each(|(_, b)| b.settle())
    }
}

#[cfg(feature = "snapshot")]
crate::snapshot::encodings!(RegistrySnapshot);

/// The length of a registry snapshot's list of breakers.
#[cfg(feature = "snapshot")]
#[derive(serde::Deserialize)]
struct BreakerCount {
    breakers: Option<crate::snapshot::ListLength>,
}

#[cfg(feature = "snapshot")]
impl RegistrySnapshot {
    /// How many breakers the JSON text of a registry snapshot holds,
    /// counted without decoding any (the text is checked and scanned,
    /// nothing is allocated per breaker), so that a snapshot too large for a
    /// registry is refused before it costs memory.
    pub fn count_json(text: &str) -> Result<usize, crate::SnapshotError> {
        crate::snapshot::count_json(text, |c: &BreakerCount| c.breakers.map(|n| n.0))
    }

    /// How many breakers the compact bytes of a registry snapshot hold, read
    /// from the list's length before any breaker is decoded.
    pub fn count_bytes(bytes: &[u8]) -> Result<usize, crate::SnapshotError> {
        // After the version and the evictions.
        crate::snapshot::count_bytes(bytes, 1)
    }
}

#[cfg(feature = "snapshot")]
mod saved {
    use alloc::string::String;

    use super::*;
    use crate::error::SnapshotError;
    use crate::metrics::Persist;
    use crate::snapshot::{Elapsed, SNAPSHOT_VERSION, check_version};

    impl<M: Meter + Default + Persist> Registry<M> {
        /// Restores from the JSON text of a snapshot: the breakers are
        /// counted first, and a snapshot with more than the capacity is
        /// refused before any is decoded.
        pub fn restore_json(
            &mut self,
            text: &str,
            now: Instant,
            elapsed: Elapsed,
        ) -> Result<Vec<(String, Transition)>, SnapshotError> {
            self.check_count(RegistrySnapshot::count_json(text)?)?;
            self.restore(&RegistrySnapshot::from_json(text)?, now, elapsed)
        }

        /// Restores from compact bytes, refusing too many breakers before
        /// decoding any.
        pub fn restore_bytes(
            &mut self,
            bytes: &[u8],
            now: Instant,
            elapsed: Elapsed,
        ) -> Result<Vec<(String, Transition)>, SnapshotError> {
            self.check_count(RegistrySnapshot::count_bytes(bytes)?)?;
            self.restore(&RegistrySnapshot::from_bytes(bytes)?, now, elapsed)
        }

        fn check_count(&self, breakers: usize) -> Result<(), SnapshotError> {
            if breakers > self.capacity {
                return Err(SnapshotError::Corrupt("more breakers than the registry's capacity"));
            }
            Ok(())
        }

        /// Every breaker's state at `now`, least recently used first.
        pub fn snapshot(&self, now: Instant) -> RegistrySnapshot {
            self.try_snapshot(now).unwrap_or_else(|_| crate::fallible::out_of_memory())
        }

        /// As [`snapshot`](Self::snapshot), or [`OutOfMemory`] if the memory
        /// runs out while it is made (a registry of many long names): encode
        /// it with [`try_into_json`](RegistrySnapshot::try_into_json) and
        /// the whole way is fallible.
        pub fn try_snapshot(&self, now: Instant) -> Result<RegistrySnapshot, OutOfMemory> {
            let mut entries: Vec<&Entry<M>> = Vec::new();
            entries.try_reserve_exact(self.entries.len()).map_err(|_| OutOfMemory)?;
            entries.extend(self.entries.iter());
            // Every use has its own count: unstable is the same order, and
            // allocates nothing.
            entries.sort_unstable_by_key(|e| e.used);
            let mut breakers = Vec::new();
            breakers.try_reserve_exact(entries.len()).map_err(|_| OutOfMemory)?;
            for e in entries {
                breakers.push((crate::try_to_string(e.name.as_str())?, e.breaker.snapshot(now)));
            }
            Ok(RegistrySnapshot { version: SNAPSHOT_VERSION, evictions: self.evictions, breakers })
        }

        /// Replaces every breaker with those `snapshot` holds, at `now`
        /// (`elapsed` as for [`Breaker::restore`](crate::Breaker::restore));
        /// each must have been taken with the configuration this registry
        /// gives its name. On error the registry is left as it was.
        ///
        /// Calls in flight stay in flight: a breaker that replaces one of the
        /// same name continues its generations (their reports are stale for
        /// it) and keeps them from eviction. Returns, for each name whose
        /// state changed (a name without a breaker counts as closed), the
        /// transition, with reason [`Restored`](crate::Reason::Restored).
        pub fn restore(
            &mut self,
            snapshot: &RegistrySnapshot,
            now: Instant,
            elapsed: Elapsed,
        ) -> Result<Vec<(String, Transition)>, SnapshotError> {
            check_version(snapshot.version)?;
            self.check_count(snapshot.breakers.len())?;
            if snapshot.evictions > crate::MAX_SAVED_COUNTER {
                return Err(SnapshotError::Corrupt("evictions out of range"));
            }
            let mut restored = Registry {
                config: self.config.clone(),
                overrides: self.overrides.clone(),
                entries: Vec::with_capacity(snapshot.breakers.len()),
                index: HashTable::new(),
                hasher: self.hasher,
                uses: 0,
                births: self.births,
                dropped: HashMap::new(),
                sampler: self.sampler,
                capacity: self.capacity,
                evictions: snapshot.evictions,
                last_evicted: None,
            };
            let mut transitions = Vec::new();
            for (name, saved) in &snapshot.breakers {
                if restored.find(name).is_some() {
                    return Err(SnapshotError::Corrupt("a name appears twice"));
                }
                if check_name(name).is_err() {
                    return Err(SnapshotError::Corrupt("a name longer than MAX_NAME_BYTES"));
                }
                let mut breaker = Keyed::restore(restored.config_for(name), saved, now, elapsed)?;
                let (from, earlier) = match self.find(name) {
                    Some(i) => {
                        let old = &self.entries[i as usize];
                        breaker.follow(&old.breaker, now);
                        (old.breaker.state(now), old.outstanding(now))
                    }
                    None => {
                        let earlier = self.dropped.get(name.as_str()).copied().unwrap_or_default();
                        if earlier.in_flight > 0 {
                            breaker.follow_generation(earlier.below.wrapping_sub(1), now);
                        }
                        (State::Closed, earlier)
                    }
                };
                // A timed change due by now (an open time that ended while the
                // snapshot waited) is applied here: the restore reports where
                // the breaker is, and the next call must not report it again.
                let _ = breaker.handle_timeout(now);
                let to = breaker.state(now);
                if from != to {
                    transitions.push((name.clone(), Transition { from, to, reason: crate::Reason::Restored, at: now }));
                }
                restored.uses += 1;
                restored.births += 1;
                let i = restored.entries.len() as u32;
                let born = restored.births;
                let entry = Entry { name: Name::new(name), used: restored.uses, in_flight: 0, earlier, born, breaker };
                restored.entries.push(entry);
                let (entries, hasher) = (&restored.entries, &restored.hasher);
                let hash = hasher.hash_one(name.as_str());
                restored.index.insert_unique(hash, i, |&j| hasher.hash_one(entries[j as usize].name.as_str()));
            }
            // Names the snapshot drops: their calls in flight must stay out
            // of a breaker made for the name later; a state other than
            // closed ends (a name without a breaker is closed).
            let mut dropped = core::mem::take(&mut self.dropped);
            dropped.retain(|name, _| restored.find(name).is_none());
            for entry in &self.entries {
                let name = entry.name.as_str();
                if restored.find(name).is_some() {
                    continue;
                }
                let outstanding = entry.outstanding(now);
                if outstanding.in_flight > 0 {
                    dropped.insert(name.into(), outstanding);
                }
                let from = entry.breaker.state(now);
                if from != State::Closed {
                    let reason = crate::Reason::Restored;
                    transitions.push((name.into(), Transition { from, to: State::Closed, reason, at: now }));
                }
            }
            restored.dropped = dropped;
            *self = restored;
            Ok(transitions)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_filled_to_its_capacity_holds_no_spare_entries() {
        for capacity in [1, 2, 3, 5, 1_000, 1_025] {
            let mut r: Registry<()> = Registry::new(Config::default(), capacity).unwrap();
            for i in 0..capacity {
                r.get(&alloc::format!("n{i}"), Instant::ZERO).unwrap();
            }
            assert_eq!(r.entries.capacity(), capacity);
        }
    }
}
