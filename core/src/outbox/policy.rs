//! Every rule an outbox's deliverer decides by, as pure functions: how long
//! a lease must last, when it is renewed, when its holder stops starting
//! sends, when a page is read, how failed store calls are retried.

use super::OutboxConfig;
use crate::time::{Duration, Instant};

/// The shortest lease that fits the sends: a holder stops starting sends
/// twice the send timeout before its lease ends (a send is failed by then,
/// even one that ignores its abort), and renews it every quarter of its
/// length; between a renewal and that stop there is room for a store
/// timeout and retries. Four send timeouts and two store timeouts.
pub(crate) fn shortest_lease(c: &OutboxConfig) -> Duration {
    let send = c.send_timeout.as_micros().saturating_mul(4);
    Duration::from_micros(send.saturating_add(c.store_timeout.as_micros().saturating_mul(2)))
}

/// When a holder whose lease call was sent at `sent` renews it: a quarter
/// of the lease later.
pub(crate) fn renew_at(c: &OutboxConfig, sent: Instant) -> Instant {
    sent + Duration::from_micros(c.lease().as_micros() / 4)
}

/// Until when a lease asked for at `sent` is held: the store counts its
/// length from when it received the call, never earlier than `sent`.
pub(crate) fn held_until(c: &OutboxConfig, sent: Instant) -> Instant {
    sent + c.lease()
}

/// The last moment a holder whose lease ends at `until` starts a send: a
/// send started then is over (failed, if need be) when the lease ends, so
/// that two processes never send the same partner's events at once.
pub(crate) fn stop_sending_at(c: &OutboxConfig, until: Instant) -> Instant {
    Instant::from_micros(until.as_micros().saturating_sub(sends_over_at(c, Instant::ZERO).as_micros()))
}

/// When every send started by `now` is over: twice the send timeout later
/// (a send that ignores its abort is failed then).
pub(crate) fn sends_over_at(c: &OutboxConfig, now: Instant) -> Instant {
    now + Duration::from_micros(c.send_timeout.as_micros().saturating_mul(2))
}

/// When a holder whose breaker changed state at `now` renews its lease, to
/// carry that state: at once, or a poll interval after its last lease call
/// (`asked_at`), so that a breaker that flaps does not hammer the store.
pub(crate) fn carry_at(c: &OutboxConfig, asked_at: Option<Instant>, now: Instant) -> Instant {
    asked_at.map_or(now, |at| now.max(at + c.poll_interval))
}

/// How often a process that does not hold the lease asks for it: a third
/// of the lease, at most a second (a dead holder's successor takes over at
/// most this long after the lease ended).
pub(crate) fn acquire_every(c: &OutboxConfig) -> Duration {
    Duration::from_micros((c.lease().as_micros() / 3).min(1_000_000))
}

/// How long after its `failures`-th failure in a row a store call is tried
/// again: the poll interval doubled each time, up to `cap`, less up to a
/// fifth drawn from `seed` (processes do not retry together).
pub(crate) fn retry_after(c: &OutboxConfig, failures: u32, seed: u64, cap: Duration) -> Duration {
    let doubled = c.poll_interval.as_micros().saturating_mul(1u64 << failures.saturating_sub(1).min(20));
    let base = Duration::from_micros(doubled).min(cap.max(c.poll_interval));
    crate::jitter::shorten(base, 0.2, seed, failures)
}

/// The longest wait between retries of a store call: 30 s; while the
/// process holds the lease, a tenth of it (it tries several times between
/// a renewal and the moment it must stop sending).
pub(crate) fn retry_cap(c: &OutboxConfig, holding: bool) -> Duration {
    if holding { Duration::from_micros(c.lease().as_micros() / 10) } else { Duration::from_secs(30) }
}

/// How many times a closing process tries its last removals, at most:
/// close then ends within four store timeouts and three backoffs of the
/// poll interval (about 6 s by default), well inside a shutdown's grace
/// period, and rides out a stall of the store (an fsync) of a few seconds.
pub(crate) const CLOSING_TRIES: u32 = 4;

/// Whether a process that is closing, after `failed` failed tries of its
/// last removals, tries again at `at`, its lease (the one it held, renewed
/// as it closed if the store confirmed it) ending at `until`: only within
/// [`CLOSING_TRIES`], and if the try is over before then (a store timeout
/// later). Removed before the lease ends, a delivered event is not sent
/// again by the next holder; after, the retry would race it.
pub(crate) fn closing_retry(c: &OutboxConfig, failed: u32, at: Instant, until: Instant) -> bool {
    failed < CLOSING_TRIES && at + c.store_timeout <= until
}

/// Whether a holder with `held` events in its dispatcher and `unremoved`
/// delivered (or dead) whose removal Redis has not confirmed reads another
/// page of `page`: only with at most two pages (and `max_messages`) held,
/// and four read and not out of the log, so that memory is bounded by the
/// page, never by the log, and what a holder that dies leaves delivered and
/// not removed (to be sent again) is four pages at most, however slow its
/// removals. (Two would stall reads on every removal's round trip: a
/// delivery 15 % slower in Node, 2.4 times in Python.)
pub(crate) fn reads_page(held: u32, unremoved: u32, page: u32, max_messages: Option<u32>) -> bool {
    let cap = max_messages.unwrap_or(u32::MAX).min(page.saturating_mul(2));
    held.saturating_add(page) <= cap && held.saturating_add(unremoved).saturating_add(page) <= page.saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> OutboxConfig {
        OutboxConfig::new(Duration::from_secs(10))
    }

    #[test]
    fn the_derived_lease_outlasts_every_send_and_leaves_room_for_retries() {
        let c = config();
        assert_eq!(c.lease(), Duration::from_secs(42));
        let until = held_until(&c, Instant::ZERO);
        // A renewal that times out, then two retries at their longest,
        // all before the holder must stop.
        let mut at = renew_at(&c, Instant::ZERO) + c.store_timeout;
        for _ in 0..2 {
            at = at + retry_cap(&c, true) + c.store_timeout;
        }
        assert!(at <= stop_sending_at(&c, until), "{at:?}");
        // A send started at the last moment is failed (twice its timeout) as the lease ends.
        assert_eq!(stop_sending_at(&c, until) + Duration::from_secs(20), until);
    }

    #[test]
    fn pages_fit_the_bound_and_at_most_two_are_held() {
        assert!(reads_page(0, 0, 500, None));
        assert!(reads_page(500, 0, 500, None));
        assert!(!reads_page(501, 0, 500, None));
        assert!(reads_page(0, 0, 100, Some(100)));
        assert!(!reads_page(1, 0, 100, Some(100)));
        assert!(!reads_page(u32::MAX, 0, 1, None));
        // Delivered and not yet removed counts too: four pages in all.
        assert!(reads_page(64, 128, 64, None));
        assert!(!reads_page(64, 129, 64, None));
        assert!(!reads_page(0, u32::MAX, 64, None));
    }

    #[test]
    fn retries_back_off_to_their_cap_and_spread() {
        let c = config();
        assert!(retry_after(&c, 1, 7, Duration::from_secs(30)) <= c.poll_interval);
        assert!(retry_after(&c, 1, 7, Duration::from_secs(30)) > Duration::from_millis(199));
        assert!(retry_after(&c, 40, 7, Duration::from_secs(30)) <= Duration::from_secs(30));
        let holding = retry_cap(&c, true);
        assert!(retry_after(&c, 40, 7, holding) <= holding);
        assert_ne!(retry_after(&c, 3, 1, holding), retry_after(&c, 3, 2, holding));
    }
}
