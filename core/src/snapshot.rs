//! Versioned snapshots of a breaker's or a registry's complete state, to
//! persist it (between edge-worker isolates, across restarts) and restore a
//! breaker that behaves identically from then on.
//!
//! **Time.** A snapshot holds no instants, only ages and remaining times
//! relative to the `now` it was taken at; restoring adds them to the `now` of
//! the restoring process. So a snapshot survives a move to a clock with another
//! origin (a fresh isolate whose clock starts at zero). Permits outstanding
//! when a snapshot was taken stay valid for the restored breaker (the
//! generation is kept), but their slowness is only measured right if both
//! clocks share an origin.
//!
//! **Checks.** Restoring validates everything: the format version, the
//! configuration (a fingerprint of the one the snapshot was taken with), and
//! every field against it (probes within limits, counts that add up, states
//! that exist). Any problem is a [`SnapshotError`], never a panic.
//!
//! **Encodings.** JSON (`to_json` / `from_json`; every number in it is an
//! integer below 2^53 for any realistic state, so it survives a JavaScript
//! `JSON.parse`), and a compact binary form, postcard (`to_bytes` /
//! `from_bytes`). The latency histogram is not saved:
//! a restored breaker's latency quantiles start afresh.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::metrics::{Counters, Metrics};
use crate::time::Instant;

/// The snapshot format this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// The bytes or text are not a snapshot (truncated, garbled, wrong shape).
    Malformed(String),
    /// Written by a newer format than this build reads.
    NewerVersion {
        /// The snapshot's version.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// Taken with another configuration than the one restoring it.
    ConfigMismatch,
    /// Well-formed, but a field holds a value no breaker can have.
    Corrupt(&'static str),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Malformed(why) => write!(f, "malformed snapshot: {why}"),
            SnapshotError::NewerVersion { found, supported } => {
                write!(f, "snapshot version {found} is newer than the supported {supported}")
            }
            SnapshotError::ConfigMismatch => f.write_str("snapshot was taken with a different configuration"),
            SnapshotError::Corrupt(what) => write!(f, "corrupt snapshot: {what}"),
        }
    }
}

impl core::error::Error for SnapshotError {}

/// The state of one breaker. Build it with
/// [`Breaker::snapshot`](crate::Breaker::snapshot); restore it with
/// [`Breaker::restore`](crate::Breaker::restore).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// [`SNAPSHOT_VERSION`] when written.
    pub version: u32,
    /// Fingerprint of the configuration.
    pub config: u64,
    pub(crate) phase: SavedPhase,
    pub(crate) generation: u32,
    /// Open / forced open: time left; half-open: time until in-flight probes are given up.
    pub(crate) deadline_in_us: u64,
    pub(crate) open_for_us: u64,
    pub(crate) consecutive: u32,
    pub(crate) probes_in_flight: u16,
    pub(crate) probe_successes: u16,
    pub(crate) window: SavedWindow,
    pub(crate) metrics: Option<SavedMetrics>,
}

/// Where a breaker is (its phase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SavedPhase {
    Closed,
    Open,
    HalfOpen,
    ForcedOpen,
    HeldOpen,
    Disabled,
}

/// A window's counters, with time relative to the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum SavedWindow {
    Off,
    Time {
        /// Calls, failures, slow calls per bucket, by slot.
        buckets: [[u16; 3]; 8],
        newest_slot: u8,
        /// Time until the newest bucket ends.
        newest_end_in_us: u64,
    },
    Count {
        failed: [u64; 2],
        slow: [u64; 2],
        len: u8,
        next: u8,
    },
}

/// What [`Metrics`](crate::Metrics) keeps, with time relative to the
/// snapshot (opaque: read it through a restored breaker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedMetrics {
    pub(crate) counters: SavedCounters,
    /// Opens per hour, the newest hour first.
    pub(crate) opens_by_hour: [u16; 24],
    /// Time in closed, half-open, open, up to the snapshot.
    pub(crate) time_in_us: [u64; 3],
    /// The state as of the last transition: 0 closed, 1 half-open, 2 open.
    pub(crate) state: u8,
    /// Whether the breaker had been used.
    pub(crate) used: bool,
}

/// [`Counters`], field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SavedCounters {
    admitted: u64,
    successes: u64,
    failures: u64,
    slow: u64,
    rejections: u64,
    ignored: u64,
    cancelled: u64,
    stale: u64,
    opens: u64,
}

impl From<Counters> for SavedCounters {
    fn from(c: Counters) -> Self {
        let Counters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens } = c;
        SavedCounters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens }
    }
}

impl From<SavedCounters> for Counters {
    fn from(c: SavedCounters) -> Self {
        let SavedCounters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens } = c;
        Counters { admitted, successes, failures, slow, rejections, ignored, cancelled, stale, opens }
    }
}

/// The state of a registry: every breaker by name, and its eviction count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySnapshot {
    /// [`SNAPSHOT_VERSION`] when written.
    pub version: u32,
    /// Idle breakers evicted so far.
    pub evictions: u64,
    /// Each breaker's name and state.
    pub breakers: Vec<(String, Snapshot)>,
}

/// The JSON and compact encodings, shared by both snapshot kinds.
macro_rules! encodings {
    ($t:ty) => {
        impl $t {
            /// As JSON text.
            pub fn to_json(&self) -> String {
                serde_json::to_string(self).expect("a snapshot always serializes")
            }

            /// From JSON text; checks the version.
            pub fn from_json(text: &str) -> Result<Self, SnapshotError> {
                decode(serde_json::from_str::<serde_json::Value>(text).map_err(malformed)?, |v| {
                    serde_json::from_value(v).map_err(malformed)
                })
            }

            /// As compact bytes (postcard).
            pub fn to_bytes(&self) -> Vec<u8> {
                postcard::to_allocvec(self).expect("a snapshot always serializes")
            }

            /// From compact bytes; checks the version.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, SnapshotError> {
                let (version, _) = postcard::take_from_bytes::<u32>(bytes).map_err(malformed)?;
                check_version(version)?;
                postcard::from_bytes(bytes).map_err(malformed)
            }
        }
    };
}

encodings!(Snapshot);
encodings!(RegistrySnapshot);

fn malformed(e: impl fmt::Display) -> SnapshotError {
    SnapshotError::Malformed(alloc::format!("{e}"))
}

fn check_version(version: u32) -> Result<(), SnapshotError> {
    match version {
        SNAPSHOT_VERSION => Ok(()),
        v if v > SNAPSHOT_VERSION => Err(SnapshotError::NewerVersion { found: v, supported: SNAPSHOT_VERSION }),
        _ => Err(SnapshotError::Corrupt("version")),
    }
}

/// Reads the version first, so a newer snapshot is reported as such rather
/// than as malformed.
fn decode<T: DeserializeOwned>(
    value: serde_json::Value,
    parse: impl FnOnce(serde_json::Value) -> Result<T, SnapshotError>,
) -> Result<T, SnapshotError> {
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    let version = version.ok_or_else(|| SnapshotError::Malformed("no version number".into()))?;
    check_version(u32::try_from(version).map_err(|_| SnapshotError::Corrupt("version"))?)?;
    parse(value)
}

/// Meters whose state a [`Snapshot`] can carry: `()` carries nothing;
/// [`Metrics`] its counters, opens and times (with or without a latency
/// histogram, which is not saved).
pub trait Persist: Sized {
    /// The state to save at `now`, if any.
    fn save(&self, now: Instant) -> Option<SavedMetrics>;
    /// The meter to restore at `now` from what was saved (fresh if nothing was).
    fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, SnapshotError>;
}

impl Persist for () {
    fn save(&self, _: Instant) -> Option<SavedMetrics> {
        None
    }
    fn load(_: Option<&SavedMetrics>, _: Instant) -> Result<Self, SnapshotError> {
        Ok(())
    }
}

impl Persist for Metrics {
    fn save(&self, now: Instant) -> Option<SavedMetrics> {
        Some(Metrics::save(self, now))
    }
    fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, SnapshotError> {
        saved.map_or(Ok(Metrics::default()), |s| Metrics::load(s, now))
    }
}

impl<H: Default> Persist for (Metrics, H) {
    fn save(&self, now: Instant) -> Option<SavedMetrics> {
        Some(self.0.save(now))
    }
    fn load(saved: Option<&SavedMetrics>, now: Instant) -> Result<Self, SnapshotError> {
        Ok((<Metrics as Persist>::load(saved, now)?, H::default()))
    }
}
