//! The breaker's state across a takeover (feature `snapshot`). The holder
//! leaves its breaker's state in the store with every renewal of its
//! lease, and when it gives the lease up ([`left`]); the next holder
//! resumes from it ([`resume`]), aged by the time the store's clock says
//! passed since it was left, when its breaker is configured the same (the
//! snapshot's fingerprint); otherwise it starts afresh, and the caller
//! warns. So a partner that is down costs the fleet one trip, not one per
//! holder. Metrics are not carried: they are each process's own.

use core::borrow::Borrow;

use crate::metrics::Persist;
use crate::time::{Duration, Instant};
use crate::{Breaker, Config, Elapsed, Meter, Snapshot, SnapshotError};

/// The state `breaker` leaves at `now`: its snapshot, without its metrics.
pub fn left<C: Borrow<Config>, M: Meter + Persist>(breaker: &Breaker<C, M>, now: Instant) -> Snapshot {
    let mut state = breaker.snapshot(now);
    state.metrics = None;
    state
}

/// Resumes `breaker` at `now` from `state`, left `age` ago (by the store's
/// clock: the restoring process's clock has another origin). An open
/// period that ended meanwhile has ended; window buckets and the limit's
/// counting have aged. Calls `breaker` admitted before are stale (a new
/// generation); its meter stays its own. On error (another configuration,
/// a state no breaker can have) nothing changes.
pub fn resume<C: Borrow<Config> + Clone, M: Meter + Persist>(
    breaker: &mut Breaker<C, M>,
    state: &Snapshot,
    now: Instant,
    age: Duration,
) -> Result<(), SnapshotError> {
    // The state as it would have been left `age` later, had nothing
    // happened meanwhile (never earlier than the origin, as `now` may be).
    let aged = Breaker::<Config>::restore(*breaker.config(), state, Instant::ZERO, Elapsed::Ignored)?
        .snapshot(Instant::ZERO + age);
    breaker.load_state(&aged, now, Elapsed::Ignored)
}
