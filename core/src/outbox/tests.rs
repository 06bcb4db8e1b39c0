//! The deliverer against a model of `lease.lua` (a register with a time to
//! live): one process sends at a time, with every send over before the next
//! holder starts; renewals, lost and late calls, a dead holder, pages.

use alloc::vec::Vec;

use super::*;

const SEND: Duration = Duration::from_secs(1);

fn config() -> OutboxConfig {
    OutboxConfig { store_timeout: Duration::from_millis(200), ..OutboxConfig::new(SEND) }
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// `lease.lua`, on the test's clock: (holder token, epoch, expires at).
#[derive(Default)]
struct Store {
    held: Option<(u32, u64, Instant)>,
    epoch: u64,
}

impl Store {
    fn call(&mut self, token: u32, ttl: Option<Duration>, now: Instant) -> (bool, u64) {
        if self.held.is_some_and(|(_, _, until)| now >= until) {
            self.held = None;
        }
        match (self.held, ttl) {
            (Some((t, e, _)), None) if t == token => {
                self.held = None;
                (false, e)
            }
            (Some((t, e, _)), Some(ttl)) if t == token => {
                self.held = Some((t, e, now + ttl));
                (true, e)
            }
            (Some((_, e, _)), _) => (false, e),
            (None, None) => (false, 0),
            (None, Some(ttl)) => {
                self.epoch += 1;
                self.held = Some((token, self.epoch, now + ttl));
                (true, self.epoch)
            }
        }
    }
}

fn events(d: &mut Deliverer) -> Vec<OutboxEvent> {
    core::iter::from_fn(|| d.poll_event()).collect()
}

#[test]
fn the_first_to_ask_delivers_renews_each_quarter_and_stops_before_an_unrenewed_lease_ends() {
    let c = config();
    let lease = c.lease();
    assert_eq!(lease, Duration::from_millis(4_400));
    let mut d = Deliverer::new(c, None, 1, at(0)).unwrap();
    let mut store = Store::default();
    assert_eq!(d.lease_call(at(0)), Some(LeaseCall::Acquire));
    assert_eq!(d.lease_call(at(0)), None, "one call at a time");
    let (holds, epoch) = store.call(1, Some(lease), at(5));
    d.lease_answered(at(10), holds, epoch);
    assert_eq!(events(&mut d), [OutboxEvent::Acquired { epoch: 1 }]);
    assert!(d.may_send(at(10)));
    assert_eq!(d.next_timeout(), Some(at(1_100)));
    assert_eq!(d.lease_call(at(1_099)), None);
    assert_eq!(d.lease_call(at(1_100)), Some(LeaseCall::Renew));
    // The store is gone from here on: every call fails.
    let mut now = at(1_100);
    while d.may_send(now) {
        if d.lease_call(now).is_some() {
            d.lease_failed(now + Duration::from_millis(1));
        }
        now = now + Duration::from_millis(1);
    }
    // It stopped twice the send timeout before the lease it holds ends
    // (counted from the call, at 0), and said so.
    assert_eq!(now, at(4_400 - 2_000));
    d.handle_timeout(now);
    assert_eq!(events(&mut d), [OutboxEvent::Lost { reason: LostReason::Expired }]);
    assert_eq!(d.epoch(), None);
}

#[test]
fn a_late_answer_is_a_failed_call_and_changes_nothing() {
    let mut d = Deliverer::new(config(), None, 1, at(0)).unwrap();
    d.lease_call(at(0)).unwrap();
    d.handle_timeout(at(200));
    d.lease_answered(at(250), true, 1);
    assert_eq!(events(&mut d), []);
    assert!(!d.may_send(at(250)));
    // It asks again after its backoff.
    let retry = d.next_timeout().unwrap();
    assert!(retry > at(200) && retry <= at(450), "{retry:?}");
}

/// Processes that crash, lose calls and answers, around one store: at any
/// time at most one may send, and the last send a holder may start is over
/// before the next holder may start one.
#[test]
fn one_sender_at_a_time_through_lost_calls_and_dead_holders() {
    let c = config();
    for seed in 0..40u64 {
        let mut store = Store::default();
        let mut fleet: Vec<Deliverer> = (0..3).map(|i| Deliverer::new(c, None, seed * 7 + i, at(0)).unwrap()).collect();
        let mut alive = [true; 3];
        // Each holder's sending span: (process, first, last) moment it may send.
        let mut spans: Vec<(usize, Instant, Instant)> = Vec::new();
        let mut draw = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rand = move |n: u64| {
            draw ^= draw << 13;
            draw ^= draw >> 7;
            draw ^= draw << 17;
            draw % n
        };
        for ms in (0..120_000).step_by(10) {
            let now = at(ms);
            if ms % 20_000 == 10_000 {
                // The holder (if any) dies.
                if let Some(i) = (0..3).find(|&i| alive[i] && fleet[i].may_send(now)) {
                    alive[i] = false;
                }
            }
            for i in 0..3 {
                if !alive[i] {
                    continue;
                }
                let d = &mut fleet[i];
                // Lost on the way (10 %), or answered 5 ms later; the
                // answer lost (10 %) or late (5 %).
                if d.lease_call(now).is_some() && rand(10) != 0 {
                    let ttl = Some(d.lease());
                    let (holds, epoch) = store.call(i as u32, ttl, now + Duration::from_millis(5));
                    match rand(20) {
                        0 | 1 => {}
                        2 => d.lease_answered(now + Duration::from_millis(300), holds, epoch),
                        _ => d.lease_answered(now + Duration::from_millis(10), holds, epoch),
                    }
                }
                d.handle_timeout(now);
                if d.may_send(now) {
                    match spans.last_mut() {
                        Some((p, _, last)) if *p == i && now.saturating_since(*last) <= Duration::from_millis(10) => {
                            *last = now
                        }
                        _ => spans.push((i, now, now)),
                    }
                }
            }
            let senders = (0..3).filter(|&i| alive[i] && fleet[i].may_send(now)).count();
            assert!(senders <= 1, "seed {seed}: {senders} senders at {ms} ms");
        }
        for pair in spans.windows(2) {
            let ((_, _, last), (_, first, _)) = (pair[0], pair[1]);
            assert!(
                last + SEND + SEND <= first,
                "seed {seed}: a send started at {last:?} may run into {first:?}: {spans:?}"
            );
        }
        // Two of the holders died; a successor took over each time.
        assert!(spans.len() >= 3, "seed {seed}: {spans:?}");
    }
}

#[test]
fn a_dead_holders_successor_starts_within_a_lease_and_a_second() {
    let c = config();
    let mut store = Store::default();
    let mut a = Deliverer::new(c, None, 1, at(0)).unwrap();
    let mut b = Deliverer::new(c, None, 2, at(0)).unwrap();
    a.lease_call(at(0)).unwrap();
    let (h, e) = store.call(0, Some(c.lease()), at(0));
    a.lease_answered(at(0), h, e);
    b.lease_call(at(1)).unwrap();
    let (h, e) = store.call(1, Some(c.lease()), at(1));
    b.lease_answered(at(1), h, e);
    assert!(a.may_send(at(1)) && !b.may_send(at(1)));
    // a dies at once; b asks every second (a third of 4.4 s is more).
    let mut now = at(1);
    while !b.may_send(now) {
        now = now + Duration::from_millis(1);
        if b.lease_call(now).is_some() {
            let (h, e) = store.call(1, Some(c.lease()), now);
            b.lease_answered(now, h, e);
        }
    }
    assert!(now <= at(4_400 + 1_000), "{now:?}");
    assert_eq!(events(&mut b), [OutboxEvent::Acquired { epoch: 2 }]);
}

#[test]
fn a_regrant_after_a_lapse_is_a_loss_then_a_new_grant() {
    let mut d = Deliverer::new(config(), None, 1, at(0)).unwrap();
    d.lease_call(at(0)).unwrap();
    d.lease_answered(at(1), true, 4);
    assert_eq!(events(&mut d), [OutboxEvent::Acquired { epoch: 4 }]);
    d.lease_call(at(1_100)).unwrap();
    d.lease_answered(at(1_101), true, 6);
    assert_eq!(events(&mut d), [OutboxEvent::Lost { reason: LostReason::Expired }, OutboxEvent::Acquired { epoch: 6 }]);
    // Undrained, a grant then its loss were never acted on: neither is said.
    d.lease_call(at(2_200)).unwrap();
    d.lease_answered(at(2_201), true, 8);
    d.handle_timeout(at(10_000));
    assert_eq!(events(&mut d), [OutboxEvent::Lost { reason: LostReason::Expired }]);
    d.lease_call(at(10_000)).unwrap();
    d.lease_answered(at(10_001), true, 9);
    events(&mut d);
    d.lease_call(at(11_100)).unwrap();
    d.lease_answered(at(11_101), false, 10);
    assert_eq!(events(&mut d), [OutboxEvent::Lost { reason: LostReason::Taken }]);
    assert!(!d.may_send(at(11_101)));
}

#[test]
fn pages_are_read_while_they_fit_a_caught_up_log_each_poll_and_a_void_read_is_dropped() {
    let c = OutboxConfig { page: Some(100), ..config() };
    let mut d = Deliverer::new(c, Some(150), 1, at(0)).unwrap();
    assert_eq!(d.read_due(at(0), 0, 0), None, "not the holder");
    d.lease_call(at(0)).unwrap();
    d.lease_answered(at(0), true, 1);
    assert_eq!(d.read_due(at(0), 0, 0), Some(100));
    assert_eq!(d.read_due(at(0), 0, 0), None, "one read out");
    assert!(d.read_answered(at(1), 1, 100));
    assert_eq!(d.read_due(at(1), 100, 0), None, "150 at most");
    assert_eq!(d.read_due(at(1), 50, 0), Some(100));
    assert!(d.read_answered(at(2), 1, 7));
    assert_eq!(d.read_due(at(2), 0, 0), None, "caught up");
    assert_eq!(d.next_timeout(), Some(at(252)));
    assert_eq!(d.read_due(at(252), 0, 0), Some(100));
    d.read_failed(at(260), 1);
    assert_eq!(d.read_due(at(300), 0, 0), None, "a failed read waits a poll interval");
    d.appended();
    assert_eq!(d.read_due(at(300), 0, 0), Some(100), "its own append is read at once");
    // The lease lost with the read out: its answer is void.
    d.lease_call(at(1_100)).unwrap();
    d.lease_answered(at(1_101), false, 2);
    assert!(!d.read_answered(at(1_102), 1, 100));
}

#[test]
fn a_release_is_said_once_and_ends_the_calls() {
    let mut d = Deliverer::new(config(), None, 1, at(0)).unwrap();
    d.lease_call(at(0)).unwrap();
    d.lease_answered(at(0), true, 1);
    events(&mut d);
    assert!(d.release(at(5)));
    assert_eq!(events(&mut d), [OutboxEvent::Lost { reason: LostReason::Released }]);
    assert!(!d.release(at(6)));
    assert_eq!(d.lease_call(at(10_000)), None);
    assert_eq!(d.next_timeout(), None);
}

#[test]
fn closing_retries_its_removals_a_few_times_while_the_lease_it_held_leaves_room() {
    let holder = |answer: Option<bool>| {
        let mut d = Deliverer::new(config(), None, 1, at(0)).unwrap();
        d.lease_call(at(0)).unwrap();
        d.lease_answered(at(0), true, 1);
        // Failures before the close do not shorten its tries.
        for _ in 0..5 {
            assert!(d.removal_failed(at(500)).is_some(), "while running, always retried");
        }
        assert!(d.release(at(1_000)));
        d.close_renewal(at(1_000));
        if let Some(holds) = answer {
            d.close_renewal_answered(holds);
        }
        d
    };
    // No answer to the renewal: the grant's lease ends at 4,400 ms.
    let mut d = holder(None);
    let retry = d.removal_failed(at(3_000)).expect("room before 4,400 ms");
    assert!(retry > at(3_000) && retry + config().store_timeout <= at(4_400), "{retry:?}");
    assert_eq!(d.removal_failed(at(4_000)), None, "a try past the lease's end is not made");
    // Confirmed: a lease from the renewal (5,400 ms); four tries in all.
    let mut d = holder(Some(true));
    let first = d.removal_failed(at(4_000)).expect("the renewal leaves room");
    assert!(first <= at(4_250) && first + config().store_timeout <= at(5_400), "{first:?}");
    assert!(d.removal_failed(at(1_000)).is_some());
    assert!(d.removal_failed(at(1_000)).is_some());
    assert_eq!(d.removal_failed(at(1_000)), None, "the fourth try failed: no fifth");
    // Refused (another process holds the lease): no retry at all.
    let mut d = holder(Some(false));
    assert_eq!(d.removal_failed(at(1_000)), None);
    // A process that did not hold the lease as it closed tries once.
    let mut d = Deliverer::new(config(), None, 1, at(0)).unwrap();
    assert!(!d.release(at(0)));
    d.close_renewal(at(0));
    d.close_renewal_answered(true);
    assert_eq!(d.removal_failed(at(0)), None);
}

#[test]
fn options_are_checked_against_the_sends_and_the_bound() {
    let c = config();
    let wrong = |c: OutboxConfig, max| c.validate(max).unwrap_err();
    assert_eq!(wrong(OutboxConfig { lease: Some(Duration::from_millis(4_399)), ..c }, None).field, OutboxField::Lease);
    assert_eq!(wrong(OutboxConfig { page: Some(0), ..c }, None).problem, crate::Problem::Zero);
    assert_eq!(wrong(OutboxConfig { page: Some(11), ..c }, Some(10)).problem, crate::Problem::TooLarge);
    assert_eq!(
        wrong(OutboxConfig { poll_interval: Duration::from_millis(9), ..c }, None).problem,
        crate::Problem::TooSmall
    );
    assert_eq!(wrong(OutboxConfig::new(Duration::from_secs(3_000)), None).field, OutboxField::SendTimeout);
    assert_eq!(wrong(OutboxConfig::new(Duration::ZERO), None).field, OutboxField::SendTimeout);
    assert_eq!(c.page(Some(20)), 20);
    assert_eq!(c.page(None), DEFAULT_PAGE);
}

#[test]
fn a_breaker_change_brings_the_renewal_that_carries_it_forward_a_poll_interval_apart() {
    let c = config();
    let mut d = Deliverer::new(c, None, 1, at(0)).unwrap();
    // Not holding: nothing to carry, no call sooner.
    d.lease_call(at(0)).unwrap();
    d.breaker_changed(at(1));
    d.lease_answered(at(10), true, 1);
    assert_eq!(d.next_timeout(), Some(at(1_100)));
    // A change 20 ms after the call: renewed a poll interval (250 ms) after it.
    d.breaker_changed(at(20));
    assert_eq!(d.next_timeout(), Some(at(250)));
    assert_eq!(d.lease_call(at(249)), None);
    assert_eq!(d.lease_call(at(250)), Some(LeaseCall::Renew));
    d.lease_answered(at(260), true, 1);
    // Long after the last call: at once; never later than the renewal due.
    d.breaker_changed(at(900));
    assert_eq!(d.lease_call(at(900)), Some(LeaseCall::Renew));
    d.lease_answered(at(910), true, 1);
    d.breaker_changed(at(910));
    assert_eq!(d.next_timeout(), Some(at(1_150)));
    // A change while a call is out (it carries the state before): the
    // renewal after its answer comes a poll interval after it, not a
    // quarter of the lease later.
    assert_eq!(d.lease_call(at(1_150)), Some(LeaseCall::Renew));
    d.breaker_changed(at(1_160));
    d.lease_answered(at(1_170), true, 1);
    assert_eq!(d.next_timeout(), Some(at(1_400)));
    assert_eq!(d.lease_call(at(1_400)), Some(LeaseCall::Renew));
    d.lease_answered(at(1_410), true, 1);
    assert_eq!(d.next_timeout(), Some(at(2_500)), "carried: the renewals keep their pace");
    // While lease calls fail, a change leaves their backoff alone.
    assert_eq!(d.lease_call(at(2_500)), Some(LeaseCall::Renew));
    d.lease_failed(at(2_510));
    let first_retry = d.next_timeout().unwrap();
    assert_eq!(d.lease_call(first_retry), Some(LeaseCall::Renew));
    d.lease_failed(first_retry);
    let retry = d.next_timeout().unwrap();
    assert!(retry > first_retry + c.poll_interval, "backing off");
    d.breaker_changed(first_retry);
    assert_eq!(d.next_timeout(), Some(retry));
}

#[cfg(feature = "snapshot")]
mod carried_state {
    use super::super::carried::{left, resume};
    use crate::time::{Duration, Instant};
    use crate::{Breaker, Config, Metrics, Outcome, SnapshotError, State};

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    /// Seed 000's breaker, tripped at `t` ms (5 failures: open for 30 s).
    fn tripped(t: u64) -> Breaker<Config, Metrics> {
        let mut b = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
        for _ in 0..5 {
            let permit = b.try_acquire(at(t)).decision.unwrap();
            b.record(permit, Outcome::Failure, at(t));
        }
        assert_eq!(b.state(at(t)), State::Open);
        b
    }

    #[test]
    fn the_next_holder_resumes_the_open_period_less_the_age_the_store_counted() {
        let holder = tripped(1_000);
        let state = left(&holder, at(11_000)); // 20 s of the 30 s left
        // Another process, its clock at 500 ms (an origin of its own), 12 s later.
        let mut next = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
        resume(&mut next, &state, at(500), Duration::from_secs(12)).unwrap();
        assert_eq!(next.state(at(500)), State::Open);
        assert_eq!(next.retry_after(at(500)), Some(Duration::from_secs(8)));
        assert_eq!(next.state(at(8_500)), State::HalfOpen);
        // Its metrics are its own: nothing of the holder's calls.
        assert_eq!(next.meter().counters().failures, 0);
    }

    #[test]
    fn a_state_older_than_its_open_period_resumes_half_open_and_its_window_aged() {
        let holder = tripped(1_000);
        let state = left(&holder, at(1_000));
        let mut next = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
        // 45 s later, past the open period (30 s), within the window (60 s).
        resume(&mut next, &state, at(0), Duration::from_secs(45)).unwrap();
        assert_eq!(next.state(at(0)), State::HalfOpen);
        let mut old = Breaker::with_meter(Config::default(), Metrics::default()).unwrap();
        resume(&mut old, &state, at(0), Duration::from_secs(3_600)).unwrap();
        assert_eq!(old.counts(at(0)).window.failures, 0, "an hour later the window is empty");
    }

    #[test]
    fn another_configuration_starts_afresh_and_changes_nothing() {
        let state = left(&tripped(0), at(0));
        let other = Config { open_timeout: Duration::from_secs(60), ..Config::default() };
        let mut next = Breaker::new(other).unwrap();
        assert_eq!(resume(&mut next, &state, at(0), Duration::ZERO), Err(SnapshotError::ConfigMismatch));
        assert_eq!(next.state(at(0)), State::Closed);
    }
}
