//! One [`Config`] shared by every breaker built from equal options (with
//! `std`): a process with many breakers (one per upstream) holds each
//! configuration once, and each breaker a pointer to it
//! (`Breaker<Arc<Config>, _>`). For the bindings; made at construction,
//! never on the hot path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::config::Config;

/// Configurations alive, by fingerprint, and how many were added since the
/// dead ones were last swept.
static CONFIGS: Mutex<(Option<HashMap<u64, Vec<Weak<Config>>>>, u32)> = Mutex::new((None, 0));

/// The shared `Arc` for `config`: the one a live breaker with an equal
/// configuration uses, or a new one.
pub fn shared_config(config: Config) -> Arc<Config> {
    let mut guard = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
    let (configs, added) = &mut *guard;
    let configs = configs.get_or_insert_with(HashMap::new);
    let same = configs.entry(config.fingerprint()).or_default();
    if let Some(found) = same.iter().find_map(|w| w.upgrade().filter(|c| **c == config)) {
        return found;
    }
    let fresh = Arc::new(config);
    same.retain(|w| w.strong_count() > 0);
    same.push(Arc::downgrade(&fresh));
    *added = added.wrapping_add(1);
    if added.is_multiple_of(1024) {
        configs.retain(|_, list| {
            list.retain(|w| w.strong_count() > 0);
            !list.is_empty()
        });
    }
    fresh
}
