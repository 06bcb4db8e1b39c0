//! Errors thrown to JavaScript: the translation's, and the one of an object
//! poisoned by a call that did not return (see the crate's documentation).

use std::cell::{RefCell, RefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use halfopen_node::PlainError;
use wasm_bindgen::prelude::*;

thread_local! {
    /// The message of the latest panic, kept by the panic hook. Only ever
    /// `try_borrow`ed: a call interrupted while holding it (the stack running
    /// out) must not make every later message panic, as a lock would.
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Installs the hook that keeps a panic's message (once).
pub(crate) fn keep_panics() {
    static HOOKED: AtomicBool = AtomicBool::new(false);
    if !HOOKED.swap(true, Ordering::Relaxed) {
        std::panic::set_hook(Box::new(|info| {
            LAST_PANIC.with(|last| {
                if let Ok(mut last) = last.try_borrow_mut() {
                    *last = info.to_string();
                }
            });
        }));
    }
}

/// The object inside `cell`, or the error saying it is poisoned: an earlier
/// call on it never came back (a panic, or the JavaScript stack running out
/// while it ran), so its state may be half-updated.
pub(crate) fn open<T>(cell: &RefCell<T>) -> Result<RefMut<'_, T>, JsError> {
    cell.try_borrow_mut().map_err(|_| {
        let panic = LAST_PANIC.with(|p| p.try_borrow().map(|p| p.clone()).unwrap_or_default());
        let panic = if panic.is_empty() { String::new() } else { format!(" The module's latest panic: {panic}.") };
        JsError::new(&format!(
            "halfopen-wasm: this object is poisoned: an earlier call on it did not finish (a Rust panic, or the \
             JavaScript stack running out inside it), so its state may be half-updated. Make a new one (from its \
             latest snapshot to keep its state); other objects are unaffected.{panic}"
        ))
    })
}

/// The JavaScript error for the translation's structured error.
pub(crate) fn thrown(e: PlainError) -> JsError {
    JsError::new(&e.message)
}
