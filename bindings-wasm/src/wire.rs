//! The Node package's wire codes (`halfopen_node::wire_codes`), handed to
//! JavaScript as the same object the addon's `wireCodes()` returns, built
//! here with `js-sys`, for `test/wire.test.js`, which checks that
//! `lib/wire.js` (their one mirror in JavaScript) decodes with the same.

use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

/// `{transitionPending, registryFull, heldUs, longUs, outcomes, licenceKinds, refusalReasons, reported, eventsWait, eventsWaitInList}`.
#[wasm_bindgen(js_name = wireCodes)]
pub fn wire_codes() -> Result<Object, JsValue> {
    let codes = halfopen_node::wire_codes();
    let names = |list: &[String]| list.iter().map(|s| JsValue::from_str(s)).collect::<Array>();
    let object = Object::new();
    let fields: [(&str, JsValue); 10] = [
        ("transitionPending", codes.transition_pending.into()),
        ("registryFull", codes.registry_full.into()),
        ("heldUs", codes.held_us.into()),
        ("longUs", codes.long_us.into()),
        ("outcomes", names(&codes.outcomes).into()),
        ("licenceKinds", names(&codes.licence_kinds).into()),
        ("refusalReasons", names(&codes.refusal_reasons).into()),
        ("reported", names(&codes.reported).into()),
        ("eventsWait", codes.events_wait.into()),
        ("eventsWaitInList", codes.events_wait_in_list.into()),
    ];
    for (name, value) in fields {
        Reflect::set(&object, &JsValue::from_str(name), &value)?;
    }
    Ok(object)
}
