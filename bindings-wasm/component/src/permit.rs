//! The `permit` resource: a core permit and who issued it. Reporting takes
//! it out; dropping it unreported reports it as cancelled (at the owner's
//! latest time: a `now` of zero counts as the latest the owner has seen).

use alloc::rc::Rc;
use core::cell::{Cell, RefCell};

use halfopen as ho;

use crate::breaker::Native;
use crate::registry::Shared;
use crate::wit;

/// Who issued a permit: a breaker, or a registry for a name (shared with
/// the registry's other permits of that name).
pub(crate) enum Owner {
    Breaker(Rc<RefCell<Native>>),
    Registry(Rc<Shared>, Rc<str>),
}

/// A permit not yet reported.
pub(crate) struct Held {
    pub(crate) owner: Owner,
    /// The core permit, until it is reported.
    pub(crate) permit: Cell<Option<ho::Permit>>,
    issued_at: ho::Instant,
}

impl Held {
    pub(crate) fn handle(owner: Owner, permit: ho::Permit) -> wit::Permit {
        let issued_at = permit.issued_at();
        wit::Permit::new(Held { owner, permit: Cell::new(Some(permit)), issued_at })
    }
}

impl wit::GuestPermit for Held {
    fn issued_at(&self) -> u64 {
        self.issued_at.as_micros()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let unreported = self.permit.take();
        let (outcome, now) = (ho::Outcome::Cancelled, ho::Instant::ZERO);
        // A drop reports no transition: a cancelled call at the latest time
        // seen changes no state.
        match (&self.owner, unreported) {
            (Owner::Breaker(b), Some(permit)) => {
                let _ = b.borrow_mut().record(permit, outcome, now);
            }
            (Owner::Registry(shared, name), permit) => {
                if let Some(permit) = permit {
                    let _ = shared.record(name, permit, outcome, now);
                }
                shared.release(name);
            }
            (Owner::Breaker(_), None) => {}
        }
    }
}
