//! One breaker per key (seed 000 keeps one per WhatsApp instance), made on
//! first use from a shared configuration or a per-key override, in bounded
//! memory.
//!
//! At capacity, making a new breaker evicts the least recently used breaker
//! that is *idle*: closed, in no manual mode, and with no failure counted that
//! a policy uses (none in its window; none in a row, if `consecutive_failures`
//! is set). Forgetting such a breaker loses no protection: a new one would
//! decide the same. (Its metrics go with it; evictions are counted.) An open, half-open,
//! forced or failing breaker is never evicted; if no idle breaker is found
//! among the least recently used ones, the new key is refused with
//! [`RegistryError::Full`] (never silently dropped protection).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::breaker::Breaker;
use crate::config::Config;
use crate::error::ConfigError;
use crate::meter::Meter;
use crate::metrics::ReadMetrics;
use crate::state::{Mode, State};
use crate::time::Instant;

/// A breaker as the registry keeps it.
pub type Keyed<M> = Breaker<Arc<Config>, M>;

/// How many of the least recently used breakers an insertion at capacity
/// looks at for an idle one. Those it passes over (busy) count as used.
const EVICTION_SCAN: usize = 16;

const NIL: u32 = u32::MAX;

/// Why the registry refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryError {
    /// At capacity, and none of the least recently used breakers is idle.
    Full {
        /// The configured capacity.
        capacity: usize,
    },
    /// A configuration (shared or per key) is invalid.
    Config(ConfigError),
    /// The capacity is zero or more than 2^32 − 2 breakers.
    Capacity,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Full { capacity } => {
                write!(f, "registry full: {capacity} breakers, none of the least recently used is idle")
            }
            RegistryError::Config(e) => e.fmt(f),
            RegistryError::Capacity => f.write_str("registry capacity must be between 1 and 2^32 - 2"),
        }
    }
}

impl core::error::Error for RegistryError {}

impl From<ConfigError> for RegistryError {
    fn from(e: ConfigError) -> Self {
        RegistryError::Config(e)
    }
}

struct Entry<M> {
    name: Box<str>,
    breaker: Keyed<M>,
    /// Neighbours in recency order (towards `newest` / towards `oldest`).
    newer: u32,
    older: u32,
}

/// Breakers by name, bounded in number. `M` is each breaker's meter
/// ([`Metrics`](crate::Metrics) by default; `()` to measure nothing).
pub struct Registry<M = crate::Metrics> {
    config: Arc<Config>,
    overrides: Vec<(Box<str>, Arc<Config>)>,
    entries: Vec<Entry<M>>,
    /// Indices into `entries`, hashed by name.
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    newest: u32,
    oldest: u32,
    capacity: usize,
    evictions: u64,
}

impl<M: Meter + Default> Registry<M> {
    /// A registry whose breakers use `config`, holding at most `capacity`.
    pub fn new(config: Config, capacity: usize) -> Result<Self, RegistryError> {
        config.validate()?;
        if capacity == 0 || capacity >= NIL as usize {
            return Err(RegistryError::Capacity);
        }
        Ok(Registry {
            config: Arc::new(config),
            overrides: Vec::new(),
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            newest: NIL,
            oldest: NIL,
            capacity,
            evictions: 0,
        })
    }

    /// Gives `name` its own configuration, from now on and after eviction.
    /// A breaker `name` already has is replaced by a new one.
    pub fn configure(&mut self, name: &str, config: Config) -> Result<(), RegistryError> {
        config.validate()?;
        let config = Arc::new(config);
        match self.overrides.iter_mut().find(|(n, _)| &**n == name) {
            Some((_, c)) => *c = config.clone(),
            None => self.overrides.push((name.into(), config.clone())),
        }
        if let Some(i) = self.find(name) {
            self.entries[i as usize].breaker = Breaker::with_meter(config, M::default())?;
        }
        Ok(())
    }

    /// The breaker for `name`, made on first use (which, at capacity, evicts
    /// the least recently used idle breaker as of `now`). Marks it most
    /// recently used.
    pub fn get(&mut self, name: &str, now: Instant) -> Result<&mut Keyed<M>, RegistryError> {
        let i = match self.find(name) {
            Some(i) => {
                self.unlink(i);
                i
            }
            None => self.insert(name, now)?,
        };
        self.link_newest(i);
        Ok(&mut self.entries[i as usize].breaker)
    }

    /// The breaker for `name` if there is one; does not change recency.
    pub fn peek(&self, name: &str) -> Option<&Keyed<M>> {
        self.find(name).map(|i| &self.entries[i as usize].breaker)
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

    /// Every `(name, breaker)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Keyed<M>)> {
        self.entries.iter().map(|e| (&*e.name, &e.breaker))
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
        self.index.find(self.hash(name), |&i| &*entries[i as usize].name == name).copied()
    }

    fn config_for(&self, name: &str) -> Arc<Config> {
        let own = self.overrides.iter().find(|(n, _)| &**n == name);
        own.map_or_else(|| self.config.clone(), |(_, c)| c.clone())
    }

    /// Makes the breaker for `name` (evicting an idle one at capacity) and
    /// returns its index, not yet linked into the recency list.
    fn insert(&mut self, name: &str, now: Instant) -> Result<u32, RegistryError> {
        let breaker = Breaker::with_meter(self.config_for(name), M::default())?;
        let entry = Entry { name: name.into(), breaker, newer: NIL, older: NIL };
        let i = if self.entries.len() < self.capacity {
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        } else {
            let victim = self.find_idle(now).ok_or(RegistryError::Full { capacity: self.capacity })?;
            self.unlink(victim);
            let old = core::mem::replace(&mut self.entries[victim as usize], entry);
            let hash = self.hash(&old.name);
            if let Ok(slot) = self.index.find_entry(hash, |&j| j == victim) {
                slot.remove();
            }
            self.evictions += 1;
            victim
        };
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index.insert_unique(self.hash(name), i, |&j| hasher.hash_one(&*entries[j as usize].name));
        Ok(i)
    }

    /// An idle breaker among the least recently used; busy ones passed
    /// over are marked used, so the next search starts past them.
    fn find_idle(&mut self, now: Instant) -> Option<u32> {
        for _ in 0..EVICTION_SCAN.min(self.entries.len()) {
            let i = self.oldest;
            let b = &self.entries[i as usize].breaker;
            let counts = b.counts(now);
            let run_matters = b.config().consecutive_failures.is_some();
            let idle = b.state(now) == State::Closed
                && b.mode(now) == Mode::Normal
                && !(run_matters && counts.consecutive_failures > 0)
                && counts.window.failures == 0;
            if idle {
                return Some(i);
            }
            self.unlink(i);
            self.link_newest(i);
        }
        None
    }

    fn unlink(&mut self, i: u32) {
        let (newer, older) = (self.entries[i as usize].newer, self.entries[i as usize].older);
        match newer {
            NIL => self.newest = older,
            n => self.entries[n as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.entries[o as usize].newer = newer,
        }
        self.entries[i as usize].newer = NIL;
        self.entries[i as usize].older = NIL;
    }

    fn link_newest(&mut self, i: u32) {
        self.entries[i as usize].older = self.newest;
        self.entries[i as usize].newer = NIL;
        match self.newest {
            NIL => self.oldest = i,
            n => self.entries[n as usize].newer = i,
        }
        self.newest = i;
    }
}
