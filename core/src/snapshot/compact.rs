//! The compact encoding: postcard's wire format, by `postcard` (see the
//! module above for the rules).

use alloc::string::ToString;
use alloc::vec::Vec;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Saved, check_version, malformed};
use crate::error::SnapshotError;
use crate::fallible::{OutOfMemory, TryBytes};

/// `value` as compact bytes, or [`OutOfMemory`] (nothing else can fail).
pub(super) fn write<T: Serialize>(value: &T) -> Result<Vec<u8>, OutOfMemory> {
    postcard::serialize_with_flavor(value, TryBytes::default()).map_err(|_| OutOfMemory)
}

/// The value compact `bytes` hold, all of them, its version checked first.
pub(super) fn read<T: Saved>(bytes: &[u8]) -> Result<T, SnapshotError> {
    version(bytes)?;
    whole(bytes)
}

/// The length of the list after the version (checked first, so that a
/// newer snapshot is reported as such) and `skip` more unsigned integers.
pub(super) fn count(bytes: &[u8], skip: usize) -> Result<usize, SnapshotError> {
    version(bytes)?;
    let (_, mut rest) = take::<u32>(bytes)?;
    for _ in 0..skip {
        rest = take::<u64>(rest)?.1;
    }
    usize::try_from(take::<u64>(rest)?.0).map_err(|_| malformed("a length is out of range"))
}

/// The version the bytes start with, if this build reads it (format 2 on).
fn version(bytes: &[u8]) -> Result<u32, SnapshotError> {
    let (version, _) = take::<u32>(bytes)?;
    check_version(version)?;
    if version < 2 {
        return Err(malformed(super::COMPACT_V1));
    }
    Ok(version)
}

fn take<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, &[u8]), SnapshotError> {
    postcard::take_from_bytes(bytes).map_err(|e| malformed(e.to_string()))
}

fn whole<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, SnapshotError> {
    match take(bytes)? {
        (value, []) => Ok(value),
        _ => Err(malformed("bytes after the snapshot")),
    }
}
