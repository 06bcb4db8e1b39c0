//! Versioned snapshots of a breaker's or a registry's complete state, to
//! persist it (between edge-worker isolates, across restarts) and restore a
//! breaker that behaves identically from then on. Each module owns its saved
//! form ([`Snapshot`](crate::Snapshot) beside the breaker,
//! [`RegistrySnapshot`](crate::RegistrySnapshot) beside the registry, the
//! window's and the metrics' beside them); this one holds the format
//! version and the encodings.
//!
//! **Time.** A snapshot holds no instants, only ages and remaining times
//! relative to the `now` it was taken at; restoring adds them to the `now` of
//! the restoring process. So a snapshot survives a move to a clock with another
//! origin (a fresh isolate whose clock starts at zero). Calls in flight when a
//! snapshot was taken can never report to the restored breaker: it starts a
//! new generation, so their permits are stale, and half-open probes are
//! given up at once.
//!
//! **Checks.** Restoring validates everything: the format version, the
//! configuration (a fingerprint of the one the snapshot was taken with), and
//! every field against it (probes within limits, counts that add up and fit
//! 2^53, states that exist). Any problem is a [`SnapshotError`], never a panic.
//!
//! **Encodings.** JSON (`to_json` / `from_json`; every number in it is an
//! integer below 2^53, so it survives a JavaScript `JSON.parse`), and a
//! compact binary form, postcard (`to_bytes` / `from_bytes`). Both decode
//! straight into the snapshot's types (no intermediate tree). The latency
//! histogram is not saved: a restored breaker's latency quantiles start afresh.

use core::fmt;

use crate::error::SnapshotError;

/// The snapshot format this build writes, and the newest it reads. It also
/// reads format 1 (before the concurrency limit: the same fields but the
/// limit's) in JSON; in the compact form, whose fields have no names, it
/// cannot tell where the missing one was, and refuses it as malformed.
pub const SNAPSHOT_VERSION: u32 = 2;

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

/// [`check_version`] for the compact form, which reads only the current format.
pub(crate) fn check_compact_version(version: u32) -> Result<(), SnapshotError> {
    check_version(version)?;
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Malformed(alloc::format!(
            "a version {version} snapshot in the compact form cannot be read by this build (its JSON form can)"
        )));
    }
    Ok(())
}

pub(crate) fn malformed(e: impl fmt::Display) -> SnapshotError {
    SnapshotError::Malformed(alloc::format!("{e}"))
}

/// Just the version, read first so that a newer snapshot is reported as
/// such rather than as malformed.
#[derive(serde::Deserialize)]
pub(crate) struct VersionOnly {
    pub(crate) version: u64,
}

/// The JSON and compact encodings of a snapshot type.
macro_rules! encodings {
    ($t:ty) => {
        impl $t {
            /// As JSON text.
            pub fn to_json(&self) -> alloc::string::String {
                serde_json::to_string(self).expect("a snapshot always serializes")
            }

            /// From JSON text; checks the version first.
            pub fn from_json(text: &str) -> Result<Self, $crate::SnapshotError> {
                use $crate::snapshot::{VersionOnly, check_version, malformed};
                let head: VersionOnly = serde_json::from_str(text).map_err(malformed)?;
                check_version(u32::try_from(head.version).map_err(|_| $crate::SnapshotError::Corrupt("version"))?)?;
                serde_json::from_str(text).map_err(malformed)
            }

            /// As compact bytes (postcard).
            pub fn to_bytes(&self) -> alloc::vec::Vec<u8> {
                postcard::to_allocvec(self).expect("a snapshot always serializes")
            }

            /// From compact bytes; checks the version first.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, $crate::SnapshotError> {
                use $crate::snapshot::{check_compact_version, malformed};
                let (version, _) = postcard::take_from_bytes::<u32>(bytes).map_err(malformed)?;
                check_compact_version(version)?;
                postcard::from_bytes(bytes).map_err(malformed)
            }
        }
    };
}
pub(crate) use encodings;
