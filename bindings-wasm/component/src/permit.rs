//! The `permit` resource: a core permit and who issued it. Reporting takes
//! it out; dropping it unreported reports it as cancelled (at the issuer's
//! latest time: a `now` of zero counts as the latest the issuer has seen).
//! Permits know their issuer only as an [`Issuer`], which the breaker and
//! the registry resources implement: this module imports neither.

use alloc::rc::Rc;
use core::cell::Cell;

use halfopen as ho;

use crate::wit;

/// What issued a permit: a breaker, or a registry (the permit then carries
/// its name, one copy shared with the registry's other permits of it).
pub(crate) trait Issuer {
    /// The permit of `name` was dropped: `permit` (if it was not reported)
    /// is reported as cancelled at the latest time seen, and a registry
    /// forgets its copy of `name` once no permit carries it.
    fn dropped(&self, name: Option<&Rc<str>>, permit: Option<ho::Permit>);
}

/// A permit not yet reported.
pub(crate) struct Held {
    issuer: Rc<dyn Issuer>,
    /// The registry's name the permit is for (none for a breaker's).
    pub(crate) name: Option<Rc<str>>,
    /// The core permit, until it is reported.
    pub(crate) permit: Cell<Option<ho::Permit>>,
    issued_at: ho::Instant,
}

impl Held {
    pub(crate) fn handle(issuer: Rc<dyn Issuer>, name: Option<Rc<str>>, permit: ho::Permit) -> wit::Permit {
        let issued_at = permit.issued_at();
        wit::Permit::new(Held { issuer, name, permit: Cell::new(Some(permit)), issued_at })
    }

    /// Whether `issuer` issued it (the same object, not an equal one).
    pub(crate) fn issued_by<T: Issuer>(&self, issuer: &Rc<T>) -> bool {
        core::ptr::addr_eq(Rc::as_ptr(&self.issuer), Rc::as_ptr(issuer))
    }
}

impl wit::GuestPermit for Held {
    fn issued_at(&self) -> u64 {
        self.issued_at.as_micros()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A drop reports no transition: a cancelled call at the latest time
        // seen changes no state.
        self.issuer.dropped(self.name.as_ref(), self.permit.take());
    }
}
