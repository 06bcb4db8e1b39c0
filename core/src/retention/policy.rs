//! Every rule a [`RetentionQueue`](super::RetentionQueue) decides by, as pure
//! functions: how many sends it may have out, when the retained wait for a
//! new message to probe (seed 001's rule), what a report does with the
//! message, and what fits within the bounds. The dispatcher applies them.

use super::DeadReason;
use super::config::{Overflow, Probe, RetentionConfig};
use crate::permit::Outcome;
use crate::state::State;

/// The most bytes a dispatcher holds (2^53 − 1, what a snapshot holds and a
/// JavaScript number carries exactly).
pub(crate) const MAX_SAVED_BYTES: u64 = crate::MAX_SAVED_COUNTER;

/// Sequence numbers stay below this (2^51): each is exact as a JavaScript
/// number with room to spare, so every binding names a message the same
/// way. A queue that has given out the last one refuses new messages, as a
/// full one does (after 2^51 of them: 71 years at a million a second); a
/// snapshot whose next one is beyond is corrupt.
pub const MAX_SEQ: u64 = 1 << 51;

/// Whether a queue whose next sequence number is `next_seq` may take one
/// more message.
pub(crate) fn seq_available(next_seq: u64) -> bool {
    next_seq < MAX_SEQ
}

/// How many sends of its own a dispatcher may have out in `state`: no more
/// than the breaker allows at once — its probes while half-open (and never
/// more than its concurrency limit), its concurrency limit otherwise (`None`:
/// no bound). Every send not yet reported counts, also one the breaker gave
/// up on: it is still the dispatcher's until reported.
pub(crate) fn send_cap(state: State, half_open_max_attempts: u16, limit: Option<u32>) -> Option<u32> {
    match state {
        State::HalfOpen => {
            let probes = u32::from(half_open_max_attempts);
            Some(limit.map_or(probes, |limit| limit.min(probes)))
        }
        _ => limit,
    }
}

/// Whether a new message probes ahead of the retained ones (seed 001's
/// rule, [`Probe::NewMessage`]): half-open, before any probe has succeeded.
pub(crate) fn new_message_probes(probe: Probe, state: State, probe_successes: u16) -> bool {
    probe == Probe::NewMessage && state == State::HalfOpen && probe_successes == 0
}

/// Whether the retained messages wait for a new one to probe: with seed
/// 001's rule, while not closed — unless a new message came that could not
/// (yet) be sent (`probe_owed`), or a probe has succeeded already (the rest
/// of the probes are theirs: with no new message they would wait forever on
/// a healthy partner). With [`Probe::Oldest`], never.
pub(crate) fn retained_wait(probe: Probe, state: State, probe_owed: bool, probe_successes: u16) -> bool {
    probe == Probe::NewMessage
        && state != State::Closed
        && !(state == State::HalfOpen && (probe_owed || probe_successes > 0))
}

/// What a report does with the message it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Delivered: it leaves the dispatcher, back to the caller.
    Delivered,
    /// Back to its place in the queue (`attempt`: the send counts as one).
    Retained { attempt: bool },
    /// Given up, as a dead letter (the send counts as an attempt).
    Dead(DeadReason),
}

/// The fate of a message whose send ended with `outcome`, after `attempts`
/// sends before this one: delivered on a success; back without counting an
/// attempt when cancelled; dead at once when ignored (the upstream refused
/// the message itself: sending it again cannot help); on a failure, dead
/// after `max_attempts`, or if it has aged out (`expired`), else back.
pub(crate) fn fate(c: &RetentionConfig, outcome: Outcome, attempts: u32, expired: bool) -> Fate {
    match outcome {
        Outcome::Success => Fate::Delivered,
        Outcome::Cancelled => Fate::Retained { attempt: false },
        Outcome::Ignored => Fate::Dead(DeadReason::Refused),
        Outcome::Failure if c.max_attempts.is_some_and(|max| attempts.saturating_add(1) >= max) => {
            Fate::Dead(DeadReason::Attempts)
        }
        Outcome::Failure if expired => Fate::Dead(DeadReason::Age),
        Outcome::Failure => Fate::Retained { attempt: true },
    }
}

/// Whether one more message of `bytes` fits beside `count` messages holding
/// `held` bytes: `max_messages`, `max_bytes`, and never past 2^53 − 1 bytes
/// (what a snapshot holds).
pub(crate) fn fits(c: &RetentionConfig, count: usize, held: u64, bytes: u64) -> bool {
    let max_bytes = c.max_bytes.map_or(MAX_SAVED_BYTES, |m| m.min(MAX_SAVED_BYTES));
    c.max_messages.is_none_or(|max| count < max as usize) && held.checked_add(bytes).is_some_and(|b| b <= max_bytes)
}

/// Whether the oldest retained messages are dropped to make room for a new
/// one: only with [`Overflow::DropOldest`], and only if dropping every one
/// of them would (`fits_without_retained`): a message that cannot fit
/// beside the sends in flight is refused, and nothing is dropped for it.
pub(crate) fn drops_for_room(c: &RetentionConfig, fits_without_retained: bool) -> bool {
    c.overflow == Overflow::DropOldest && fits_without_retained
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sends_out_at_once() {
        assert_eq!(send_cap(State::Closed, 3, None), None);
        assert_eq!(send_cap(State::Closed, 3, Some(50)), Some(50));
        assert_eq!(send_cap(State::HalfOpen, 3, None), Some(3));
        assert_eq!(send_cap(State::HalfOpen, 3, Some(2)), Some(2));
        assert_eq!(send_cap(State::Open, 3, Some(2)), Some(2));
    }

    #[test]
    fn seed_001s_probe_rule() {
        let new = Probe::NewMessage;
        assert!(new_message_probes(new, State::HalfOpen, 0));
        assert!(!new_message_probes(new, State::HalfOpen, 1));
        assert!(!new_message_probes(Probe::Oldest, State::HalfOpen, 0));
        assert!(retained_wait(new, State::Open, false, 0));
        assert!(retained_wait(new, State::HalfOpen, false, 0));
        assert!(!retained_wait(new, State::HalfOpen, true, 0));
        assert!(!retained_wait(new, State::HalfOpen, false, 1));
        assert!(!retained_wait(new, State::Closed, false, 0));
        assert!(!retained_wait(Probe::Oldest, State::HalfOpen, false, 0));
    }

    #[test]
    fn what_a_report_does_with_the_message() {
        let c = RetentionConfig { max_attempts: Some(3), ..RetentionConfig::default() };
        assert_eq!(fate(&c, Outcome::Success, 2, true), Fate::Delivered);
        assert_eq!(fate(&c, Outcome::Cancelled, 2, true), Fate::Retained { attempt: false });
        assert_eq!(fate(&c, Outcome::Ignored, 0, false), Fate::Dead(DeadReason::Refused));
        assert_eq!(fate(&c, Outcome::Failure, 1, false), Fate::Retained { attempt: true });
        assert_eq!(fate(&c, Outcome::Failure, 2, false), Fate::Dead(DeadReason::Attempts));
        assert_eq!(fate(&c, Outcome::Failure, 0, true), Fate::Dead(DeadReason::Age));
        let unbounded = RetentionConfig { max_attempts: None, ..c };
        assert_eq!(fate(&unbounded, Outcome::Failure, u32::MAX, false), Fate::Retained { attempt: true });
    }

    #[test]
    fn sequence_numbers_end_below_2_to_the_51() {
        assert!(seq_available(0));
        assert!(seq_available(MAX_SEQ - 1));
        assert!(!seq_available(MAX_SEQ));
    }

    #[test]
    fn the_bounds() {
        let c = RetentionConfig { max_messages: Some(2), max_bytes: Some(10), ..RetentionConfig::default() };
        assert!(fits(&c, 1, 5, 5));
        assert!(!fits(&c, 2, 0, 0));
        assert!(!fits(&c, 1, 6, 5));
        let unbounded = RetentionConfig { max_messages: None, max_bytes: None, ..c };
        assert!(fits(&unbounded, usize::MAX - 1, MAX_SAVED_BYTES - 1, 1));
        assert!(!fits(&unbounded, 0, MAX_SAVED_BYTES, 1));
        assert!(!fits(&unbounded, 0, u64::MAX, 1));
        assert!(!drops_for_room(&c, true));
        let dropping = RetentionConfig { overflow: Overflow::DropOldest, ..c };
        assert!(drops_for_room(&dropping, true));
        assert!(!drops_for_room(&dropping, false));
    }
}
