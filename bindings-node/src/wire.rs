//! The wire: every number that crosses to JavaScript with a meaning, written
//! once, here. `lib/wire.js` is the one decoder on the JavaScript side: it
//! mirrors these codes and layouts (no other file in `lib/` knows one), and
//! `test/wire.test.js` checks its codes against `wireCodes()` of the addon
//! and of the wasm module, and its decoding against real calls. Objects cross
//! as napi objects (`NativeLicence`, `NativeMetrics`, ...); numbers are
//! packed only on the call path, where one `f64` saves an object per call
//! (measured for `submit`: an object `{ status, seq, events }` instead made
//! the retention queue 1.3× slower per message closed and 2× retained,
//! BENCHMARKS.md "Structure"; `report`, once per message too, has the same
//! shape and stays packed for the same reason):
//!
//! - **`acquire`** (a breaker's or a registry name's; the hot path): a
//!   permit's generation (0 ≤ g < 2^32), plus [`TRANSITION_PENDING`] (2^32)
//!   when a transition waits in `takeTransitions`; a rejection is
//!   `-1 - retryAfterMs` (below 0; `-Infinity`: held open until released;
//!   the reason is read only when needed, `refusalReason`); a registry too
//!   full for a new name answers [`REGISTRY_FULL`].
//! - **a registry name's rejection** (`acquire`): everything the refusal
//!   needs in the one crossing, `-1 - (32 × µs + 16 × pending + 4 × reason
//!   + gauge)`: µs the retry time in whole microseconds ([`HELD_US`] when
//!   held open until released, [`LONG_US`] from 2^47 µs on: 4.46 years,
//!   past what the code holds exactly, asked for with `retryAfter`), reason
//!   the index in [`REFUSAL_REASONS`],
//!   gauge the breaker's state (0 closed, 1 half-open, 2 open), pending
//!   whether transitions wait in `takeTransitions`. Exact: below 2^52.
//! - **outcomes** (`record`, `report`): the index in [`OUTCOMES`].
//! - **licence kinds** (`NativeLicence.kind`): the index in [`LICENCE_KINDS`];
//!   under "reject", why (`NativeLicence.refusal`): the index in
//!   [`REFUSAL_REASONS`].
//! - **`submit`** (a retention queue's, once per message): `4 × seq + 2 ×
//!   retained + events` (`retained`: held for later, else send now; `events`:
//!   `takeEvents` has something), or `-1 - events` when refused (a bound is
//!   full). Exact: every `seq` is below the core's `retention::MAX_SEQ`
//!   (2^51).
//! - **`next`**: the sequence numbers to send now, oldest first, then
//!   [`EVENTS_WAIT_IN_LIST`] if `takeEvents` has something.
//! - **`report`**: the index in [`REPORTED`], plus [`EVENTS_WAIT`] if
//!   `takeEvents` has something.

use halfopen::retention::{Reported, Submitted};
use halfopen::{Admission, Outcome};

use crate::time::ms;

/// Added to an admission's generation when a transition waits.
pub(crate) const TRANSITION_PENDING: f64 = 4_294_967_296.0;

/// What a registry's `acquire` answers when it is full (no idle breaker to evict).
pub(crate) const REGISTRY_FULL: f64 = -0.5;

/// A registry name's rejection's retry time when it is held open until
/// released (2^47 µs).
pub(crate) const HELD_US: f64 = 140_737_488_355_328.0;
/// A registry name's rejection's retry time when it is 2^47 µs or more
/// (4.46 years): the caller asks for it (`retryAfter`).
pub(crate) const LONG_US: f64 = HELD_US + 1.0;

/// The outcomes, by code.
pub(crate) const OUTCOMES: [Outcome; 4] = Outcome::ALL;

/// The licence kinds, by code.
pub(crate) const LICENCE_KINDS: [&str; 3] = ["ask", "admit", "reject"];

/// Why a call was refused (`Wait::reason`), by code: a licence's
/// `refusal` under "reject".
pub(crate) const REFUSAL_REASONS: [&str; 4] = ["open", "probes_busy", "limit_full", "held"];

/// A refusal reason's code (0, "open", for none).
pub(crate) fn refusal_reason(reason: Option<&str>) -> u32 {
    reason.and_then(|r| REFUSAL_REASONS.iter().position(|known| *known == r)).unwrap_or(0) as u32
}

/// What a report did with the message, by code.
pub(crate) const REPORTED: [&str; 4] = ["delivered", "retained", "dead", "unknown"];

/// Added to `report`'s code when events wait.
pub(crate) const EVENTS_WAIT: u32 = 4;

/// Last in `next`'s list when events wait.
pub(crate) const EVENTS_WAIT_IN_LIST: f64 = -1.0;

/// The outcome of `code` (an unknown code is a cancellation: it counts nothing).
pub(crate) fn outcome(code: u32) -> Outcome {
    OUTCOMES.get(code as usize).copied().unwrap_or(Outcome::Cancelled)
}

/// `acquire`'s code for `admission`.
pub(crate) fn admission(admission: &Admission) -> f64 {
    match &admission.decision {
        Ok(permit) => {
            f64::from(permit.generation()) + if admission.transition.is_some() { TRANSITION_PENDING } else { 0.0 }
        }
        Err(rejection) => rejection.retry_after().map_or(f64::NEG_INFINITY, |d| -1.0 - ms(d)),
    }
}

/// A registry name's rejection code (see the module's documentation).
pub(crate) fn registry_rejection(
    retry_after: Option<halfopen::Duration>,
    reason: &str,
    gauge: u8,
    pending: bool,
) -> f64 {
    let us =
        retry_after.map_or(HELD_US, |d| if d.as_micros() as f64 >= HELD_US { LONG_US } else { d.as_micros() as f64 });
    let low = 16 * u32::from(pending) + 4 * refusal_reason(Some(reason)) + u32::from(gauge);
    -1.0 - (32.0 * us + f64::from(low))
}

/// A licence kind's code.
pub(crate) fn licence_kind(kind: &str) -> u32 {
    LICENCE_KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u32
}

/// `submit`'s code for `result` (`Ok(Submitted)`, or `Err` when refused).
pub(crate) fn submitted<E>(result: &Result<Submitted, E>, events: bool) -> f64 {
    let events = f64::from(u8::from(events));
    match result {
        Ok(Submitted::Send(seq)) => 4.0 * *seq as f64 + events,
        Ok(Submitted::Retained(seq)) => 4.0 * *seq as f64 + 2.0 + events,
        Err(_) => -1.0 - events,
    }
}

/// `report`'s code for `reported` (`None`: not in flight).
pub(crate) fn reported<M>(reported: Option<&Reported<M>>, events: bool) -> u32 {
    let name = match reported {
        Some(Reported::Delivered(_)) => "delivered",
        Some(Reported::Retained) => "retained",
        Some(Reported::Dead) => "dead",
        None => "unknown",
    };
    let code = REPORTED.iter().position(|r| *r == name).unwrap_or(REPORTED.len() - 1) as u32;
    code + if events { EVENTS_WAIT } else { 0 }
}

/// The codes, for `lib/wire.js`.
#[cfg_attr(feature = "node", napi_derive::napi(object))]
pub struct WireCodes {
    pub transition_pending: f64,
    pub registry_full: f64,
    pub held_us: f64,
    pub long_us: f64,
    /// Outcome names (`"success"`, ...) by code.
    pub outcomes: Vec<String>,
    pub licence_kinds: Vec<String>,
    pub refusal_reasons: Vec<String>,
    pub reported: Vec<String>,
    pub events_wait: u32,
    pub events_wait_in_list: f64,
}

/// The codes every packed value uses.
#[cfg_attr(feature = "node", napi_derive::napi)]
pub fn wire_codes() -> WireCodes {
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    let outcomes: Vec<&str> = OUTCOMES.iter().map(|o| o.name()).collect();
    WireCodes {
        transition_pending: TRANSITION_PENDING,
        registry_full: REGISTRY_FULL,
        held_us: HELD_US,
        long_us: LONG_US,
        outcomes: names(&outcomes),
        licence_kinds: names(&LICENCE_KINDS),
        refusal_reasons: names(&REFUSAL_REASONS),
        reported: names(&REPORTED),
        events_wait: EVENTS_WAIT,
        events_wait_in_list: EVENTS_WAIT_IN_LIST,
    }
}
