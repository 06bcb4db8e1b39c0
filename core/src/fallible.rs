//! Outputs whose size the caller does not bound (the exposition of a registry
//! of many names, a snapshot) built with fallible allocation: running out of
//! memory is an [`OutOfMemory`] error, not an abort (which in WebAssembly is
//! a trap that can take the whole instance with it). What was built so far
//! is freed; the breakers are not touched.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The memory ran out while an output was built; nothing else changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutOfMemory;

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of memory")
    }
}

#[cfg(feature = "std")]
impl std::error::Error for OutOfMemory {}

/// Text that stops growing when the allocator refuses (then every later
/// write is refused too, and [`finish`](Self::finish) says so). A
/// [`fmt::Write`]: pass it to
/// [`render_prometheus`](crate::Registry::render_prometheus) and the like.
#[derive(Debug, Default)]
pub struct TryString {
    text: String,
    failed: bool,
}

impl TryString {
    /// Empty.
    pub const fn new() -> Self {
        TryString { text: String::new(), failed: false }
    }

    /// Appends `s`, unless the memory ran out (now or before).
    #[inline]
    pub fn push_str(&mut self, s: &str) {
        if self.failed || self.text.try_reserve(s.len()).is_err() {
            self.failed = true;
            return;
        }
        self.text.push_str(s);
    }

    /// Appends `c`, unless the memory ran out (now or before).
    #[inline]
    pub fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }

    /// The text, or [`OutOfMemory`] if any write was refused.
    pub fn finish(self) -> Result<String, OutOfMemory> {
        if self.failed { Err(OutOfMemory) } else { Ok(self.text) }
    }
}

impl fmt::Write for TryString {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_str(s);
        if self.failed { Err(fmt::Error) } else { Ok(()) }
    }
}

/// Bytes that stop growing when the allocator refuses (as [`TryString`]).
#[cfg(feature = "snapshot")]
#[derive(Debug, Default)]
pub(crate) struct TryBytes {
    bytes: Vec<u8>,
    failed: bool,
}

#[cfg(feature = "snapshot")]
impl TryBytes {
    /// Appends `bytes`, unless the memory ran out (now or before). When it
    /// runs out, what was written is freed at once.
    #[inline]
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.failed || self.bytes.try_reserve(bytes.len()).is_err() {
            self.failed = true;
            self.bytes = Vec::new();
            return;
        }
        self.bytes.extend_from_slice(bytes);
    }

    /// The bytes, or [`OutOfMemory`] if any write was refused.
    pub(crate) fn finish(self) -> Result<Vec<u8>, OutOfMemory> {
        if self.failed { Err(OutOfMemory) } else { Ok(self.bytes) }
    }
}

/// postcard writes a snapshot's compact bytes into it: a refused allocation
/// ends the write with an error.
#[cfg(feature = "snapshot")]
impl postcard::ser_flavors::Flavor for TryBytes {
    type Output = Vec<u8>;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.extend_from_slice(data);
        if self.failed { Err(postcard::Error::SerializeBufferFull) } else { Ok(()) }
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.try_extend(&[data])
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        self.finish().map_err(|_| postcard::Error::SerializeBufferFull)
    }
}

/// serde_json writes a snapshot's JSON text into it. A refused allocation
/// is not an error to serde_json (which would box one, and that allocation
/// could fail too): the rest of the text is dropped, and
/// [`finish`](TryBytes::finish) says so.
#[cfg(all(feature = "snapshot", feature = "std"))]
impl std::io::Write for TryBytes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `s` copied, or [`OutOfMemory`].
pub fn try_to_string(s: &str) -> Result<String, OutOfMemory> {
    let mut copy = String::new();
    copy.try_reserve_exact(s.len()).map_err(|_| OutOfMemory)?;
    copy.push_str(s);
    Ok(copy)
}

/// The items (each made fallibly) in a vector, or [`OutOfMemory`] (a list
/// of every name of a registry, say).
pub fn try_collect<T>(items: impl Iterator<Item = Result<T, OutOfMemory>>) -> Result<Vec<T>, OutOfMemory> {
    let mut out = Vec::new();
    out.try_reserve_exact(items.size_hint().0).map_err(|_| OutOfMemory)?;
    for item in items {
        out.try_reserve(1).map_err(|_| OutOfMemory)?;
        out.push(item?);
    }
    Ok(out)
}

/// What an infallible allocation does when the memory runs out: abort.
#[cfg(feature = "snapshot")]
pub(crate) fn out_of_memory() -> ! {
    alloc::alloc::handle_alloc_error(core::alloc::Layout::new::<u8>())
}

/// Runs `render` into a [`TryString`]: its text, or [`OutOfMemory`]. (A
/// `fmt::Error` can only come from the writer: the renderers raise none.)
pub fn try_render(render: impl FnOnce(&mut TryString) -> fmt::Result) -> Result<String, OutOfMemory> {
    let mut out = TryString::new();
    let _ = render(&mut out);
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn text_builds_until_the_memory_runs_out() {
        assert_eq!(try_render(|out| write!(out, "a{}", 1)), Ok(String::from("a1")));
        let mut out = TryString::new();
        out.push('é');
        out.failed = true; // what a refused reservation leaves
        out.push_str("more");
        assert!(out.write_str("x").is_err());
        assert_eq!(out.finish(), Err(OutOfMemory));
    }

    #[test]
    fn a_collection_is_whole_or_out_of_memory() {
        let names = ["a", "bc"];
        assert_eq!(
            try_collect(names.iter().map(|n| try_to_string(n))),
            Ok(alloc::vec![String::from("a"), String::from("bc")])
        );
        let failing = [Ok(1), Err(OutOfMemory), Ok(3)];
        assert_eq!(try_collect(failing.into_iter()), Err(OutOfMemory));
    }
}
