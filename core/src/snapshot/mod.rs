//! Versioned snapshots of a breaker's or a registry's complete state, to
//! persist it (between edge-worker isolates, across restarts) and restore a
//! breaker that behaves identically from then on. Each module owns its saved
//! form ([`Snapshot`](crate::Snapshot) beside the breaker,
//! [`RegistrySnapshot`](crate::RegistrySnapshot) beside the registry, the
//! window's and the metrics' beside them) and describes its fields once, as a
//! [`Saved`] visit; this module holds the format version and the two
//! encodings that visit walks.
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
//! **Encodings** (written here, not by a serialization framework: the
//! WebAssembly builds must stay small, and every runtime then reads a
//! snapshot with the same code):
//! - JSON (`to_json` / `from_json`): records as objects in field order,
//!   unit variants as strings, other variants as `{"name": {…}}`, absent
//!   values as `null`. Every number in it is an integer below 2^53, so it
//!   survives a JavaScript `JSON.parse` (times too long for that are
//!   saved as 2^53 − 1 µs, 285 years, and larger ones refused as corrupt).
//!   Reading is strict and linear in the text: an unknown, duplicate or
//!   missing field (but an optional one), an object with more than 32
//!   fields, a number with a fraction or exponent, one out of its field's
//!   range, a second value or nesting deeper than 128 levels is malformed.
//! - Compact bytes (`to_bytes` / `from_bytes`), postcard's wire format:
//!   fields in order without names, unsigned integers as LEB128 varints
//!   (bytes as themselves), booleans and option tags as one byte 0/1,
//!   variants as their index, lists and text prefixed by their length.
//!   Bytes after the snapshot are malformed.
//!
//! The latency histogram is not saved: a restored breaker's latency
//! quantiles start afresh.

mod compact;
mod json;

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::SnapshotError;
use crate::fallible::OutOfMemory;

/// The snapshot format this build writes, and the newest it reads. It also
/// reads format 2 (the same fields but `taken_at`) in both encodings, and
/// format 1 (without the concurrency limit's field as well) in JSON; in the
/// compact form, whose fields have no names, it cannot tell where format 1's
/// missing field was, and refuses it as malformed.
pub const SNAPSHOT_VERSION: u32 = 3;

/// The first format whose breaker snapshots hold `taken_at`.
pub(crate) const TAKEN_AT_VERSION: u32 = 3;

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

/// The oldest format this build reads (in JSON).
const OLDEST_VERSION: u32 = 1;

/// Whether this build reads snapshots of format `version`.
pub(crate) fn check_version(version: u32) -> Result<(), SnapshotError> {
    match version {
        OLDEST_VERSION..=SNAPSHOT_VERSION => Ok(()),
        v if v > SNAPSHOT_VERSION => Err(SnapshotError::NewerVersion { found: v, supported: SNAPSHOT_VERSION }),
        _ => Err(SnapshotError::Corrupt("version")),
    }
}

/// Where every saved form starts: the version, checked as soon as it is read
/// (before the rest, so that a newer snapshot is reported as such rather
/// than as malformed). The compact form reads only the current format.
pub(crate) fn visit_version<P: Pass>(p: &mut P, version: &mut u32) -> Result<(), SnapshotError> {
    p.field("version", &mut |p| p.uint(version))?;
    if !P::READS {
        return Ok(());
    }
    check_version(*version)?;
    if P::COMPACT && *version < 2 {
        return Err(malformed(alloc::format!(
            "a version {version} snapshot in the compact form cannot be read by this build (its JSON form can)"
        )));
    }
    Ok(())
}

pub(crate) fn malformed(why: impl Into<String>) -> SnapshotError {
    SnapshotError::Malformed(why.into())
}

/// An unsigned integer field of a saved form.
pub(crate) trait Uint: Copy {
    /// Bytes the compact form's varint may take (0: the byte itself).
    const VARINT_BYTES: usize;
    fn get(self) -> u64;
    fn from_u64(v: u64) -> Option<Self>;
}

macro_rules! uint {
    ($($t:ty => $bytes:expr),*) => {$(
        impl Uint for $t {
            const VARINT_BYTES: usize = $bytes;
            fn get(self) -> u64 {
                self.into()
            }
            fn from_u64(v: u64) -> Option<Self> {
                Self::try_from(v).ok()
            }
        }
    )*};
}
uint!(u8 => 0, u16 => 3, u32 => 5, u64 => 10);

/// One walk over a saved form's values, in order: an encoder reads each
/// value, a decoder fills it in (so a form is described once, for both
/// directions and both encodings).
pub(crate) trait Pass: Sized {
    /// Whether this is the compact encoding (fields have no names).
    const COMPACT: bool;
    /// Whether this pass decodes (fills the values in).
    const READS: bool;
    /// A record; `fields` visits each of its fields with [`Pass::field`], in order.
    fn record(&mut self, fields: &mut dyn FnMut(&mut Self) -> Result<(), SnapshotError>) -> Result<(), SnapshotError>;
    /// The field `name` of the record being visited. A decoder gives
    /// `value` a missing field as absent: only [`Pass::option`] accepts it.
    fn field(
        &mut self,
        name: &'static str,
        value: &mut dyn FnMut(&mut Self) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError>;
    /// An unsigned integer.
    fn uint<T: Uint>(&mut self, v: &mut T) -> Result<(), SnapshotError>;
    /// A boolean.
    fn flag(&mut self, v: &mut bool) -> Result<(), SnapshotError>;
    /// Exactly `len` values (an array or a tuple), each visited by `item`.
    fn tuple(
        &mut self,
        len: usize,
        item: &mut dyn FnMut(&mut Self, usize) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError>;
    /// A list of any length.
    fn list<T: Default>(
        &mut self,
        items: &mut Vec<T>,
        item: &mut dyn FnMut(&mut Self, &mut T) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError>;
    /// A value that may be absent.
    fn option<T: Default>(
        &mut self,
        v: &mut Option<T>,
        some: &mut dyn FnMut(&mut Self, &mut T) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError>;
    /// One of `variants` (its name, and whether it holds data), by index;
    /// `data` visits the chosen one's data (a decoder calls it also for a
    /// variant without data, which it sets).
    fn variant(
        &mut self,
        v: &mut usize,
        variants: &[(&'static str, bool)],
        data: &mut dyn FnMut(&mut Self, usize) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError>;
    /// Text.
    fn text(&mut self, v: &mut String) -> Result<(), SnapshotError>;
}

/// A saved form: its values, in order.
pub(crate) trait Saved: Default + Clone {
    /// Visits every value of `self` with `p`.
    fn visit<P: Pass>(&mut self, p: &mut P) -> Result<(), SnapshotError>;
}

/// An array of unsigned integers.
pub(crate) fn uints<P: Pass, T: Uint>(p: &mut P, values: &mut [T]) -> Result<(), SnapshotError> {
    p.tuple(values.len(), &mut |p, i| p.uint(&mut values[i]))
}

/// `value` as JSON text. (The visitors take `&mut`: a shared value is cloned first.)
pub(crate) fn to_json<T: Saved>(mut value: T) -> Result<String, OutOfMemory> {
    json::write(&mut value)
}

pub(crate) fn from_json<T: Saved>(text: &str) -> Result<T, SnapshotError> {
    json::read(text)
}

/// `value` as compact bytes.
pub(crate) fn to_bytes<T: Saved>(mut value: T) -> Result<Vec<u8>, OutOfMemory> {
    compact::write(&mut value)
}

pub(crate) fn from_bytes<T: Saved>(bytes: &[u8]) -> Result<T, SnapshotError> {
    compact::read(bytes)
}

/// How many items the list in field `name` of a record holds, in JSON text,
/// without decoding any (its version checked first).
pub(crate) fn count_json(text: &str, name: &str) -> Result<usize, SnapshotError> {
    json::count(text, name)
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
                $crate::snapshot::to_json(self.clone()).unwrap_or_else(|_| $crate::fallible::out_of_memory())
            }

            /// As JSON text, or [`OutOfMemory`](crate::OutOfMemory) if the
            /// memory runs out while it is written (no copy of the snapshot
            /// is made).
            pub fn try_into_json(self) -> Result<alloc::string::String, $crate::OutOfMemory> {
                $crate::snapshot::to_json(self)
            }

            /// From JSON text; checks the version first.
            pub fn from_json(text: &str) -> Result<Self, $crate::SnapshotError> {
                $crate::snapshot::from_json(text)
            }

            /// As compact bytes (postcard's wire format). Aborts if the
            /// memory runs out; [`try_into_bytes`](Self::try_into_bytes) does not.
            pub fn to_bytes(&self) -> alloc::vec::Vec<u8> {
                $crate::snapshot::to_bytes(self.clone()).unwrap_or_else(|_| $crate::fallible::out_of_memory())
            }

            /// As compact bytes, or [`OutOfMemory`](crate::OutOfMemory) if
            /// the memory runs out while they are written (no copy of the
            /// snapshot is made).
            pub fn try_into_bytes(self) -> Result<alloc::vec::Vec<u8>, $crate::OutOfMemory> {
                $crate::snapshot::to_bytes(self)
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
