//! `with breaker:` blocks: each block's permit, found again when it is left.
//!
//! A `with` statement calls `__enter__` and `__exit__` from the same frame
//! (a function's, a generator's or a coroutine's, whichever thread or task
//! runs it, however it is suspended in between), so a block is known by the
//! frame that entered it: each breaker or registry keeps its blocks entered
//! and not yet left, with that frame, and an exit takes the latest block its
//! frame entered. A block entered or left by helpers in other frames (an
//! `ExitStack`, a subclass's `__enter__` override) has no such match: its
//! exit takes the latest block of the breaker (and name), so every permit is
//! still reported exactly once, though two blocks open at once can then swap
//! permits.

use std::sync::Mutex;

use halfopen::Permit as CorePermit;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{PyTraverseError, PyVisit};

/// A block entered and not yet left: the frame that entered it (held, so
/// that its identity cannot pass to another frame), the registry name it was
/// entered for (`None` for a single breaker), its permit.
pub(crate) type Block = (Py<PyAny>, Option<String>, CorePermit);

/// The blocks of one breaker or registry entered and not yet left.
pub(crate) type Blocks = Mutex<Vec<Block>>;

/// The frame of the `with` statement: the Python frame calling into the
/// extension now (`sys._getframe(0)`: native calls have no frame of their
/// own), or the one `depth` frames above it when the package's Python code
/// (`__aenter__`, a keyed breaker's methods) calls on the statement's behalf.
fn statement(py: Python<'_>, depth: u32) -> PyResult<Bound<'_, PyAny>> {
    static GETFRAME: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let getframe = GETFRAME.get_or_try_init(py, || py.import("sys")?.getattr("_getframe").map(Bound::unbind))?;
    getframe.bind(py).call1((depth,))
}

/// Notes a block entered with `permit` by the statement `depth` frames up,
/// or hands the permit back with the error (the caller reports it as cancelled).
pub(crate) fn enter(
    py: Python<'_>,
    blocks: &Blocks,
    name: Option<String>,
    permit: CorePermit,
    depth: u32,
) -> Result<(), (PyErr, CorePermit)> {
    match statement(py, depth) {
        Ok(frame) => {
            blocks.lock().unwrap_or_else(|e| e.into_inner()).push((frame.unbind(), name, permit));
            Ok(())
        }
        Err(e) => Err((e, permit)),
    }
}

/// The permit of the block of `name` that the statement `depth` frames up is
/// leaving: the latest it entered, or, if it entered none still held, the
/// latest entered.
pub(crate) fn leave(py: Python<'_>, blocks: &Blocks, name: Option<&str>, depth: u32) -> PyResult<CorePermit> {
    // A frame that cannot be read (the recursion limit, an audit hook) must
    // not keep the block's permit forever: the latest block is taken then.
    let frame = statement(py, depth).ok();
    let block = {
        let mut held = blocks.lock().unwrap_or_else(|e| e.into_inner());
        let ours = |b: &Block| b.1.as_deref() == name;
        let mine = |b: &Block| frame.as_ref().is_some_and(|f| b.0.is(f));
        let at = held.iter().rposition(|b| ours(b) && mine(b)).or_else(|| held.iter().rposition(ours));
        at.map(|i| held.remove(i))
    };
    // Dropped with the lock released: the frame may be the last reference
    // to objects whose finalizers run Python code.
    let (_frame, _, permit) = block.ok_or_else(crate::errors::unbalanced_block)?;
    Ok(permit)
}

/// Takes out the blocks entered by frames that ran on threads a fork left
/// behind (see `fork.rs`).
pub(crate) fn take_orphans(blocks: &Blocks) -> Vec<Block> {
    let mut held = blocks.lock().unwrap_or_else(|e| e.into_inner());
    let (orphans, kept) = std::mem::take(&mut *held).into_iter().partition(|b| crate::fork::orphaned(&b.0));
    *held = kept;
    orphans
}

/// Shows the collector the frames of blocks not yet left (a suspended
/// generator inside a block may refer to the breaker).
pub(crate) fn traverse(blocks: &Blocks, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
    // A lock held elsewhere means a thread is using them: they are alive.
    if let Ok(held) = blocks.try_lock() {
        for (frame, _, _) in held.iter() {
            visit.call(frame)?;
        }
    }
    Ok(())
}
