//! One `Config` shared by every breaker built from the same options, so a
//! process with many breakers (one per WhatsApp instance) holds each
//! configuration once.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use halfopen::Config;

thread_local! {
    /// Configurations alive, by fingerprint.
    static CONFIGS: RefCell<HashMap<u64, Vec<Weak<Config>>>> = RefCell::new(HashMap::new());
    static INSERTS: Cell<u32> = const { Cell::new(0) };
}

/// The shared `Arc` for `config`: an existing one if a breaker alive uses an
/// equal configuration, a new one otherwise.
pub(crate) fn shared(config: Config) -> Arc<Config> {
    CONFIGS.with(|configs| {
        let mut configs = configs.borrow_mut();
        let same = configs.entry(config.fingerprint()).or_default();
        if let Some(found) = same.iter().find_map(|w| w.upgrade().filter(|c| **c == config)) {
            return found;
        }
        let fresh = Arc::new(config);
        same.retain(|w| w.strong_count() > 0);
        same.push(Arc::downgrade(&fresh));
        // Now and then, forget the configurations no breaker uses any more.
        let inserts = INSERTS.with(|n| {
            n.set(n.get().wrapping_add(1));
            n.get()
        });
        if inserts.is_multiple_of(1024) {
            configs.retain(|_, list| {
                list.retain(|w| w.strong_count() > 0);
                !list.is_empty()
            });
        }
        fresh
    })
}
