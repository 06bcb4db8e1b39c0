//! What a `fork()` leaves wrong in the child, and how it is set right.
//!
//! The child has one thread, the one that forked; it inherits everything else
//! as it was. The package's `os.register_at_fork` hooks (`_support.py`) call
//! [`forked`] in the child with the frames that were running on the other
//! threads: those threads do not exist there, so those frames never run
//! again. Then:
//! - a listener delivery another thread was making is over: the flag saying
//!   so carries the [`generation`] it was set in, and a child's is newer
//!   (`host.rs`);
//! - a `with` block entered by one of those frames is never left: each
//!   breaker and registry reports such blocks' permits as cancelled, once,
//!   at its first operation in the child (`Host::orphans`).
//!
//! The mutexes need nothing: each is taken and released with the GIL held
//! and no Python code run in between, and the thread that forks holds the
//! GIL, so no other thread holds one at the fork.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

/// Forks this process is removed from its first ancestor by (0: not a
/// fork's child).
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Frames that were running on threads a fork left behind: their addresses,
/// and the frames themselves, held so that no new frame can take an address.
static ORPHANED: Mutex<(BTreeSet<usize>, Vec<Py<PyAny>>)> = Mutex::new((BTreeSet::new(), Vec::new()));

/// This process's fork generation: it changes in a fork's child.
pub(crate) fn generation() -> u64 {
    FORKS.load(Ordering::Acquire)
}

/// Whether `frame` was running on a thread that a fork left behind.
pub(crate) fn orphaned(frame: &Py<PyAny>) -> bool {
    ORPHANED.lock().unwrap_or_else(|e| e.into_inner()).0.contains(&(frame.as_ptr() as usize))
}

/// Called in a fork's child (only there) with the frames that were running
/// on the other threads of its parent.
#[pyfunction]
pub(crate) fn _forked(frames: Vec<Py<PyAny>>) {
    {
        let mut orphaned = ORPHANED.lock().unwrap_or_else(|e| e.into_inner());
        let (addresses, held) = &mut *orphaned;
        addresses.extend(frames.iter().map(|f| f.as_ptr() as usize));
        held.extend(frames);
    }
    FORKS.fetch_add(1, Ordering::AcqRel);
}
