//! Errors thrown to JavaScript, and the poisoning of an object a panic left
//! borrowed (see the crate's documentation).

use std::cell::{RefCell, RefMut};
use std::sync::{Mutex, Once};

use halfopen_node::PlainError;
use wasm_bindgen::prelude::*;

/// The message of the latest panic, kept by the panic hook.
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Installs the hook that keeps a panic's message (once).
pub(crate) fn keep_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            if let Ok(mut last) = LAST_PANIC.lock() {
                *last = info.to_string();
            }
        }));
    });
}

/// The object inside `cell`, or the error saying a panic poisoned it.
pub(crate) fn open<T>(cell: &RefCell<T>) -> Result<RefMut<'_, T>, JsError> {
    cell.try_borrow_mut().map_err(|_| {
        let panic = LAST_PANIC.lock().map(|p| p.clone()).unwrap_or_default();
        JsError::new(&format!(
            "halfopen-wasm: this object is poisoned: an earlier call on it hit an internal error ({panic}). \
             Make a new one (restore it from its latest snapshot to keep its state); other objects are unaffected."
        ))
    })
}

/// The JavaScript error for the translation's structured error.
pub(crate) fn thrown(e: PlainError) -> JsError {
    JsError::new(&e.message)
}

/// A value as a plain JavaScript object.
pub(crate) fn to_js<T: serde::Serialize>(value: &T) -> Result<JsValue, JsError> {
    value.serialize(&serde_wasm_bindgen::Serializer::new()).map_err(|e| JsError::new(&e.to_string()))
}
