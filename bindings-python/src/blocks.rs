//! `with breaker:` blocks: each block's permit, found again when it is left.
//!
//! A context variable holds the blocks entered in the current context (a
//! thread, an asyncio task) as an immutable list, innermost first, so that
//! nested and concurrent blocks each report their own permit (a slow-call
//! verdict depends on when its block was entered). Each breaker or registry
//! also keeps the permits of its blocks entered and not yet left, in every
//! context ([`Blocks`]): a block left in another context than it was entered
//! in (an exit stack closed by another task) reports one of those, so every
//! permit is still reported exactly once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use halfopen::Permit as CorePermit;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// A block entered and not yet left: its id (unique in the process), the
/// registry name it was entered for (`None` for a single breaker), its permit.
pub(crate) type Block = (u64, Option<String>, CorePermit);

/// The blocks of one breaker or registry entered and not yet left, in every context.
pub(crate) type Blocks = Mutex<Vec<Block>>;

/// One block entered in this context (its owner's id and its block id), and
/// the blocks it is nested in.
#[pyclass(frozen, module = "halfopen._native")]
struct Entered {
    owner: u64,
    block: u64,
    name: Option<String>,
    outer: Option<Py<Entered>>,
}

/// The bound `get` and `set` of the context variable `halfopen_entered`
/// (default `None`: no block), looked up once.
fn entered(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    static VAR: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();
    VAR.get_or_try_init(py, || {
        let kwargs = PyDict::new(py);
        kwargs.set_item("default", py.None())?;
        let var = py.import("contextvars")?.getattr("ContextVar")?.call(("halfopen_entered",), Some(&kwargs))?;
        Ok((var.getattr("get")?.unbind(), var.getattr("set")?.unbind()))
    })
}

/// The innermost block entered in this context, if any.
fn innermost<'py>(py: Python<'py>, get: &Py<PyAny>) -> PyResult<Option<Bound<'py, Entered>>> {
    let head = get.bind(py).call0()?;
    if head.is_none() { Ok(None) } else { Ok(Some(head.cast_into::<Entered>()?)) }
}

/// Notes a block of `owner` entered with `permit`, or hands the permit back
/// with the error (the caller reports it as cancelled).
pub(crate) fn enter(
    py: Python<'_>,
    blocks: &Blocks,
    owner: u64,
    name: Option<String>,
    permit: CorePermit,
) -> Result<(), (PyErr, CorePermit)> {
    static IDS: AtomicU64 = AtomicU64::new(1);
    let block = IDS.fetch_add(1, Ordering::Relaxed);
    let noted = entered(py).and_then(|(get, set)| {
        let outer = innermost(py, get)?.map(Bound::unbind);
        set.bind(py).call1((Entered { owner, block, name: name.clone(), outer },)).map(drop)
    });
    match noted {
        Ok(()) => {
            blocks.lock().unwrap_or_else(|e| e.into_inner()).push((block, name, permit));
            Ok(())
        }
        Err(e) => Err((e, permit)),
    }
}

/// The permit of the block of `owner` (and, in a registry, `name`) being
/// left: the innermost one entered in this context, or, if this context
/// entered none still held, one entered elsewhere.
pub(crate) fn leave(py: Python<'_>, blocks: &Blocks, owner: u64, name: Option<&str>) -> PyResult<CorePermit> {
    let (get, set) = entered(py)?;
    let mut inner: Vec<Bound<'_, Entered>> = Vec::new();
    let mut node = innermost(py, get)?;
    let found = loop {
        let Some(n) = node else { break None };
        let e = n.get();
        if e.owner == owner && e.name.as_deref() == name {
            break Some(n);
        }
        node = e.outer.as_ref().map(|o| o.bind(py).clone());
        inner.push(n);
    };
    let mine = match found {
        Some(found) => {
            // The list without it: the blocks inside it (rare) are made again.
            let mut rest = found.get().outer.as_ref().map(|o| o.clone_ref(py));
            for n in inner.iter().rev() {
                let e = n.get();
                let copy = Entered { owner: e.owner, block: e.block, name: e.name.clone(), outer: rest };
                rest = Some(Py::new(py, copy)?);
            }
            set.bind(py).call1((rest,))?;
            Some(found.get().block)
        }
        None => None,
    };
    let mut held = blocks.lock().unwrap_or_else(|e| e.into_inner());
    let at = mine
        .and_then(|m| held.iter().position(|b| b.0 == m))
        .or_else(|| held.iter().position(|b| b.1.as_deref() == name));
    match at {
        Some(i) => Ok(held.remove(i).2),
        None => Err(PyRuntimeError::new_err("a with block was left more times than it was entered")),
    }
}
