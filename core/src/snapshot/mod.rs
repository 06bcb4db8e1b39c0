//! Versioned snapshots of a breaker's or a registry's complete state, to
//! persist it (between edge-worker isolates, across restarts) and restore a
//! breaker that behaves identically from then on. Each module owns its saved
//! form ([`Snapshot`](crate::Snapshot) beside the breaker,
//! [`RegistrySnapshot`](crate::RegistrySnapshot) beside the registry, the
//! window's and the metrics' beside them) and describes its fields once, as
//! serde's derive on the type (a breaker's compact form is read by hand:
//! its layout depends on its version); this module holds the format version
//! and the two encodings.
//!
//! **Time.** A snapshot holds ages and remaining times relative to the `now`
//! it was taken at, and that `now` itself (`taken_at`). A restore says, with
//! [`Elapsed`], whether its clock is the one the snapshot was taken on:
//! - [`Elapsed::Ignored`] (a clock with another origin, such as a fresh
//!   process's monotonic clock, which starts anywhere): the relative times
//!   are added to the restoring `now`, as if no time had passed between;
//! - [`Elapsed::Counted`] (the same clock: wall-clock time, or any clock the
//!   caller knows to be shared, such as `Date.now()` in an edge isolate): the
//!   breaker resumes at `taken_at`, so the time since counts: an open period
//!   that ended meanwhile has ended, window buckets and limit windows have
//!   expired, retained messages have aged. A clock that went back (restoring
//!   `now` earlier than `taken_at`) counts no time, as everywhere else.
//!   A snapshot of format 2 or earlier has no `taken_at` and restores as
//!   `Ignored`; so does one taken past 2^53 − 1 µs (285 years after the
//!   origin), which JSON cannot hold exactly.
//!
//! Calls in flight when a
//! snapshot was taken can never report to the restored breaker: it starts a
//! new generation, so their permits are stale, and half-open probes are
//! given up at once.
//!
//! **Checks.** Restoring validates everything: the format version, the
//! configuration (a fingerprint of the one the snapshot was taken with), and
//! every field against it (probes within limits, counts that add up and fit
//! 2^53, states that exist). Any problem is a [`SnapshotError`], never a panic.
//!
//! **Encodings** (serde's derives on each saved form, written by
//! `serde_json` and `postcard`; every runtime reads a snapshot with this
//! code):
//! - JSON (`to_json` / `from_json`): records as objects in field order,
//!   unit variants as strings, other variants as `{"name": {…}}`, absent
//!   values as `null`. Every number in it is an integer below 2^53, so it
//!   survives a JavaScript `JSON.parse` (times too long for that are
//!   saved as 2^53 − 1 µs, 285 years, and larger ones refused as corrupt).
//!   Reading is strict and linear in the text: an unknown, duplicate or
//!   missing field (but an optional one), a number with a fraction or
//!   exponent, one out of its field's range or a second value is
//!   malformed. Deep nesting is never a stack overflow: `serde_json`
//!   recurses at most 128 levels into what it reads, and skips a value
//!   (while the version is read first) without recursing. Two spellings
//!   that say the same are read as what they say (serde's derive): a unit
//!   variant as `{"name": null}`, a record nested in another as the array of
//!   its fields in order.
//! - Compact bytes (`to_bytes` / `from_bytes`), postcard's wire format:
//!   fields in order without names, unsigned integers as LEB128 varints
//!   (bytes as themselves), booleans and option tags as one byte 0/1,
//!   variants as their index, lists and text prefixed by their length.
//!   Bytes after the snapshot are malformed; a list's length is believed
//!   only as far as the bytes go (a forged one reserves little up front).
//!
//! Both read the version before anything else, so that a newer snapshot is
//! reported as such rather than as malformed, and a registry's breakers can
//! be counted before any is decoded. A breaker inside a registry's or a
//! dispatcher's snapshot has its own version: the compact form's layout
//! follows it, and a newer one is refused (as `NewerVersion` once decoded,
//! as malformed if this build cannot decode it).
//!
//! The latency histogram is not saved: a restored breaker's latency
//! quantiles start afresh.

mod compact;
mod json;

use alloc::string::String;
use alloc::vec::Vec;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::SnapshotError;
use crate::fallible::OutOfMemory;

pub(crate) use json::ListLength;

/// The snapshot format this build writes, and the newest it reads. It also
/// reads format 2 (the same fields but `taken_at`) in both encodings, and
/// format 1 (without the concurrency limit's field as well) in JSON; in the
/// compact form, whose fields have no names, it cannot tell where format 1's
/// missing field was, and refuses it as malformed.
pub const SNAPSHOT_VERSION: u32 = 3;

/// The first format whose breaker snapshots hold `taken_at`.
pub(crate) const TAKEN_AT_VERSION: u32 = 3;

/// The oldest format this build reads (in JSON; 2 in the compact form).
const OLDEST_VERSION: u32 = 1;

/// Whether the time between taking a snapshot and restoring it counts (see
/// the module's "Time").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Elapsed {
    /// The restoring clock has another origin: the snapshot resumes as if no
    /// time had passed since it was taken.
    #[default]
    Ignored,
    /// The restoring clock is the one the snapshot was taken on: the time
    /// since it was taken counts (none if the clock went back).
    Counted,
}

impl Elapsed {
    /// The instant a snapshot taken at `taken_at` (if known) resumes at, for
    /// a restore at `now`.
    pub(crate) fn resume_at(self, taken_at: Option<u64>, now: crate::Instant) -> crate::Instant {
        match (self, taken_at) {
            (Elapsed::Counted, Some(t)) => now.min(crate::Instant::from_micros(t)),
            _ => now,
        }
    }
}

/// Whether this build reads snapshots of format `version`.
pub(crate) fn check_version(version: u32) -> Result<(), SnapshotError> {
    match version {
        OLDEST_VERSION..=SNAPSHOT_VERSION => Ok(()),
        v if v > SNAPSHOT_VERSION => Err(SnapshotError::NewerVersion { found: v, supported: SNAPSHOT_VERSION }),
        _ => Err(SnapshotError::Corrupt("version")),
    }
}

pub(crate) fn malformed(why: impl Into<String>) -> SnapshotError {
    SnapshotError::Malformed(why.into())
}

/// Why a compact snapshot of format 1 is refused.
pub(crate) const COMPACT_V1: &str =
    "a version 1 snapshot in the compact form cannot be read by this build (its JSON form can)";

/// A saved form whose first field is its version.
pub(crate) trait Saved: Serialize + DeserializeOwned {
    /// What serde's derive does not check, done after reading: the version
    /// of every breaker inside, and `taken_at_us` (format 3 on) not in a
    /// breaker of format 2 or 1 (one of format 3 may leave it out: it is
    /// optional).
    fn settle(&mut self) -> Result<(), SnapshotError>;
}

/// `value` as JSON text.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, OutOfMemory> {
    json::write(value)
}

pub(crate) fn from_json<T: Saved>(text: &str) -> Result<T, SnapshotError> {
    let mut value: T = json::read(text)?;
    value.settle()?;
    Ok(value)
}

/// `value` as compact bytes.
pub(crate) fn to_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, OutOfMemory> {
    compact::write(value)
}

pub(crate) fn from_bytes<T: Saved>(bytes: &[u8]) -> Result<T, SnapshotError> {
    let mut value: T = compact::read(bytes)?;
    value.settle()?;
    Ok(value)
}

/// The list in the field `list` of the record the JSON `text` holds (its
/// version checked first), counted without decoding its items.
pub(crate) fn count_json<T: DeserializeOwned>(
    text: &str,
    list: impl Fn(&T) -> Option<usize>,
) -> Result<usize, SnapshotError> {
    json::count(text, list)
}

/// How many items the list after the version and `skip` more fields
/// (unsigned integers) holds, in compact bytes, without decoding any.
pub(crate) fn count_bytes(bytes: &[u8], skip: usize) -> Result<usize, SnapshotError> {
    compact::count(bytes, skip)
}

/// The JSON and compact encodings of a snapshot type.
macro_rules! encodings {
    ($t:ty) => {
        impl $t {
            /// As JSON text. Aborts if the memory runs out, as an
            /// allocation does; [`try_into_json`](Self::try_into_json) does not.
            pub fn to_json(&self) -> alloc::string::String {
                $crate::snapshot::to_json(self).unwrap_or_else(|_| $crate::fallible::out_of_memory())
            }

            /// As JSON text, or [`OutOfMemory`](crate::OutOfMemory) if the
            /// memory runs out while it is written (with `std`; without it,
            /// `serde_json` allocates as [`to_json`](Self::to_json) does).
            pub fn try_into_json(self) -> Result<alloc::string::String, $crate::OutOfMemory> {
                $crate::snapshot::to_json(&self)
            }

            /// From JSON text; checks the version first.
            pub fn from_json(text: &str) -> Result<Self, $crate::SnapshotError> {
                $crate::snapshot::from_json(text)
            }

            /// As compact bytes (postcard's wire format). Aborts if the
            /// memory runs out; [`try_into_bytes`](Self::try_into_bytes) does not.
            pub fn to_bytes(&self) -> alloc::vec::Vec<u8> {
                $crate::snapshot::to_bytes(self).unwrap_or_else(|_| $crate::fallible::out_of_memory())
            }

            /// As compact bytes, or [`OutOfMemory`](crate::OutOfMemory) if
            /// the memory runs out while they are written.
            pub fn try_into_bytes(self) -> Result<alloc::vec::Vec<u8>, $crate::OutOfMemory> {
                $crate::snapshot::to_bytes(&self)
            }

            /// From compact bytes; checks the version first.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, $crate::SnapshotError> {
                $crate::snapshot::from_bytes(bytes)
            }
        }
    };
}
pub(crate) use encodings;

#[cfg(test)]
mod tests;
