//! The JSON encoding, by `serde_json` (see the module above for the rules).

use alloc::string::{String, ToString};

use serde::de::{DeserializeOwned, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::{Saved, check_version, malformed};
use crate::error::SnapshotError;
use crate::fallible::OutOfMemory;

/// `value` as JSON text, or [`OutOfMemory`] (nothing else can fail).
#[cfg(feature = "std")]
pub(super) fn write<T: Serialize>(value: &T) -> Result<String, OutOfMemory> {
    let mut out = crate::fallible::TryBytes::default();
    serde_json::to_writer(&mut out, value).map_err(|_| OutOfMemory)?;
    // serde_json writes UTF-8 only: the check never refuses.
    String::from_utf8(out.finish()?).map_err(|_| OutOfMemory)
}

/// `value` as JSON text (without `std`, `serde_json` allocates as any
/// allocation does: running out of memory aborts).
#[cfg(not(feature = "std"))]
pub(super) fn write<T: Serialize>(value: &T) -> Result<String, OutOfMemory> {
    serde_json::to_string(value).map_err(|_| OutOfMemory)
}

/// A record's version, read before the rest of it (every other field is
/// skipped, checked only as JSON).
#[derive(Deserialize)]
struct Version {
    version: u32,
}

/// The value the JSON `text` holds, its version checked first.
pub(super) fn read<T: Saved>(text: &str) -> Result<T, SnapshotError> {
    check_version(parse::<Version>(text)?.version)?;
    parse(text)
}

/// The length of the list `list` finds in the record `text` holds, after
/// its version is checked (so that a newer snapshot is reported as such,
/// whatever else it holds).
pub(super) fn count<T: DeserializeOwned>(
    text: &str,
    list: impl Fn(&T) -> Option<usize>,
) -> Result<usize, SnapshotError> {
    check_version(parse::<Version>(text)?.version)?;
    list(&parse::<T>(text)?).ok_or_else(|| malformed("missing the list"))
}

fn parse<T: DeserializeOwned>(text: &str) -> Result<T, SnapshotError> {
    serde_json::from_str(text).map_err(|e| malformed(e.to_string()))
}

/// A list read only for its length: its items are checked as JSON and
/// skipped, nothing is kept of them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ListLength(pub(crate) usize);

impl<'de> Deserialize<'de> for ListLength {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = ListLength;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<ListLength, A::Error> {
                let mut n = 0;
                while items.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(ListLength(n))
            }
        }
        d.deserialize_seq(Counter)
    }
}
