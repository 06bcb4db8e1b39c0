//! One [`Config`] shared by every breaker built from equal options (with
//! `std`): a process with many breakers (one per upstream) holds each
//! configuration once, and each breaker a pointer to it
//! (`Breaker<Arc<Config>, _>`). For the bindings; made at construction,
//! never on the hot path.

use std::sync::{Arc, Mutex, TryLockError, Weak};

// hashbrown's map with the registry's hasher, not std's: one hash table's
// code in a build, not two (the WebAssembly module's size).
use hashbrown::HashMap;

use crate::config::Config;

/// Configurations alive (perhaps), by fingerprint.
type Alive = HashMap<u64, Vec<Weak<Config>>>;

/// The configurations alive, and how many were added since the dead ones
/// were last swept.
static CONFIGS: Mutex<(Option<Alive>, u32)> = Mutex::new((None, 0));

/// The shared `Arc` for `config`: the one a live breaker with an equal
/// configuration uses, or a new one.
///
/// In a WebAssembly module without threads, a call the stack ran out in
/// while it held the table never releases it (the call never returns):
/// then configurations are not shared any more, rather than every later
/// construction trapping.
pub fn shared_config(config: Config) -> Arc<Config> {
    let mut guard = match CONFIGS.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) if cfg!(target_family = "wasm") => return Arc::new(config),
        Err(TryLockError::WouldBlock) => CONFIGS.lock().unwrap_or_else(|e| e.into_inner()),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn equal_configs_share_one_arc_and_different_ones_do_not() {
        let a = shared_config(Config::default());
        let b = shared_config(Config::default());
        assert!(Arc::ptr_eq(&a, &b));
        let other = Config { open_timeout: Duration::from_secs(7), ..Config::default() };
        let c = shared_config(other);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, other);
    }

    #[test]
    fn a_config_no_breaker_holds_is_made_afresh() {
        let config = Config { open_timeout: Duration::from_secs(11), ..Config::default() };
        let first = Arc::downgrade(&shared_config(config));
        assert!(first.upgrade().is_none());
        let again = shared_config(config);
        assert_eq!(*again, config);
    }
}
