//! The sends handed out and not yet reported, by sequence number: a deque
//! kept in order (a few sends in flight at a time, bounded by the breaker's
//! limit or the release rate, mostly reported oldest first, which a deque
//! removes without moving the rest; smaller code than a tree, which matters
//! in the wasm module).

use alloc::collections::VecDeque;

use super::Held;
use crate::permit::Permit;

#[derive(Debug)]
pub(super) struct InFlight<M>(VecDeque<(Held<M>, Permit)>);

impl<M> InFlight<M> {
    pub(super) const fn new() -> Self {
        InFlight(VecDeque::new())
    }

    fn find(&self, seq: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&seq, |(held, _)| held.seq)
    }

    /// Adds a send (its sequence number is not in flight: it was retained).
    pub(super) fn insert(&mut self, held: Held<M>, permit: Permit) {
        let at = self.find(held.seq).unwrap_or_else(|at| at);
        self.0.insert(at, (held, permit));
    }

    pub(super) fn remove(&mut self, seq: u64) -> Option<(Held<M>, Permit)> {
        self.find(seq).ok().and_then(|at| self.0.remove(at))
    }

    pub(super) fn get(&self, seq: u64) -> Option<&Held<M>> {
        self.find(seq).ok().map(|at| &self.0[at].0)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The messages in flight, by sequence number.
    pub(super) fn held(&self) -> impl Iterator<Item = &Held<M>> {
        self.0.iter().map(|(held, _)| held)
    }
}
