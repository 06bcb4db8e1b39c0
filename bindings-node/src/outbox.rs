//! An outbox (retention across processes, issue 24): the core's
//! `outbox::Deliverer` (when to ask for the lease, whether a send may
//! start, when to read a page, when to retry a removal) and the Redis
//! layout, all from the core (`halfopen::outbox`). The I/O (the lease
//! script, `XADD`, `XRANGE`, `XDEL` through the user's ioredis client) is
//! `lib/outbox.js`'s. Node only: the wasm package has no outbox.

use halfopen::outbox::{Deliverer, LeaseCall, OutboxConfig, OutboxEvent, redis};
use napi_derive::napi;

use crate::error::{Result, config, structured};
use crate::time::{duration, instant, ms, ms_at};
use halfopen::{Duration, Instant};

/// An outbox's options, as given (absent: the core's default).
#[napi(object)]
pub struct NativeOutboxOptions {
    /// Spreads this process's retries from the others': 16 hex digits.
    pub seed: String,
    /// The dispatcher's send timeout (required: the lease must outlast it).
    pub send_timeout_ms: f64,
    /// The dispatcher's bound, if any.
    pub max_messages: Option<u32>,
    pub lease_ms: Option<f64>,
    pub page_size: Option<u32>,
    pub poll_interval_ms: Option<f64>,
    pub store_timeout_ms: Option<f64>,
}

/// A change of role (`OutboxEvent`): `kind` "acquired" (with `epoch`) or
/// "lost" (with `reason`: "taken", "expired", "released").
#[napi(object)]
pub struct NativeOutboxEvent {
    pub kind: String,
    pub epoch: Option<f64>,
    pub reason: Option<String>,
}

/// The breaker state the last holder left, handed on with a grant: its
/// JSON and its age now, in ms.
#[napi(object)]
pub struct NativeLeftState {
    pub state: String,
    pub age_ms: f64,
}

/// One process's deliverer of an outbox.
#[napi]
pub struct NativeOutbox {
    deliverer: Deliverer,
    /// The state a grant handed on: its JSON, its age then, and when.
    left: Option<(String, Duration, Instant)>,
}

#[napi]
impl NativeOutbox {
    /// A deliverer asking for the lease at once; throws a structured error
    /// for an invalid option (its field, its problem's code).
    #[napi(constructor)]
    pub fn new(options: NativeOutboxOptions, now: f64) -> Result<Self> {
        let seed = u64::from_str_radix(&options.seed, 16)
            .map_err(|_| structured("config", Some("seed"), Some("out_of_range"), "seed: 16 hex digits"))?;
        let defaults = OutboxConfig::new(duration(options.send_timeout_ms));
        let c = OutboxConfig {
            lease: options.lease_ms.map(duration),
            page: options.page_size,
            poll_interval: options.poll_interval_ms.map_or(defaults.poll_interval, duration),
            store_timeout: options.store_timeout_ms.map_or(defaults.store_timeout, duration),
            ..defaults
        };
        let deliverer = Deliverer::new(c, options.max_messages, seed, instant(now))
            .map_err(|e| config(e.field.name(), e.problem, e.problem.describe()))?;
        Ok(NativeOutbox { deliverer, left: None })
    }

    /// The lease script's arguments (`redis::lease_args`): a renewal (or,
    /// with `release`, giving it up) by `token`, carrying breaker `state`
    /// ("": none), from a process that knows it holds grant `epoch`.
    #[napi]
    pub fn lease_args(&self, token: String, state: String, epoch: Option<f64>, release: bool) -> Vec<String> {
        let lease = (!release).then(|| self.deliverer.lease());
        redis::lease_args(&token, lease, &state, epoch.map(|e| e as u64)).to_vec()
    }

    /// How many events one read takes.
    #[napi]
    pub fn page_size(&self) -> u32 {
        self.deliverer.page()
    }

    /// At most how many events are handed on, or sends started, in one turn of the event loop.
    #[napi]
    pub fn turn_events(&self) -> u32 {
        halfopen::outbox::TURN_EVENTS
    }

    /// How long a store call may take, in ms.
    #[napi]
    pub fn store_timeout_ms(&self) -> f64 {
        ms(self.deliverer.config().store_timeout)
    }

    /// The lease call due now ("acquire" or "renew"), or null.
    #[napi]
    pub fn lease_call(&mut self, now: f64) -> Option<String> {
        self.deliverer.lease_call(instant(now)).map(|c| {
            match c {
                LeaseCall::Acquire => "acquire",
                LeaseCall::Renew => "renew",
            }
            .to_owned()
        })
    }

    /// The lease script's reply: its two numbers, and on a new grant the
    /// breaker state left (null: none) and its age in ms. `false` if it
    /// cannot be the script's (the call then counts as failed).
    #[napi]
    pub fn lease_answered(&mut self, now: f64, reply: Vec<i64>, state: Option<String>, age_ms: Option<i64>) -> bool {
        let age = age_ms.map(redis::left_age).transpose();
        match (redis::lease_reply(&reply), age) {
            (Ok((holds, epoch)), Ok(age)) => {
                let before = self.deliverer.epoch();
                self.deliverer.lease_answered(instant(now), holds, epoch);
                if self.deliverer.epoch() != before {
                    // A new grant: what it handed on (or nothing) replaces what an earlier one did.
                    self.left = state.map(|s| (s, age.unwrap_or(Duration::ZERO), instant(now)));
                }
                true
            }
            _ => {
                self.deliverer.lease_failed(instant(now));
                false
            }
        }
    }

    /// The breaker state the current grant handed on, once, with its age now.
    #[napi]
    pub fn take_left(&mut self, now: f64) -> Option<NativeLeftState> {
        let (state, age, at) = self.left.take()?;
        let age = Duration::from_micros(age.as_micros().saturating_add(instant(now).saturating_since(at).as_micros()));
        Some(NativeLeftState { state, age_ms: ms(age) })
    }

    /// The holder's breaker changed state: the renewal that carries it comes soon.
    #[napi]
    pub fn breaker_changed(&mut self, now: f64) {
        self.deliverer.breaker_changed(instant(now));
    }

    /// The lease call failed (an error or no answer in time).
    #[napi]
    pub fn lease_failed(&mut self, now: f64) {
        self.deliverer.lease_failed(instant(now));
    }

    /// Applies what is due at `now`.
    #[napi]
    pub fn handle_timeout(&mut self, now: f64) {
        self.deliverer.handle_timeout(instant(now));
    }

    /// When something is next due (ms on the caller's clock), or null.
    #[napi]
    pub fn next_timeout_ms(&self) -> Option<f64> {
        self.deliverer.next_timeout().map(ms_at)
    }

    /// The next change of role, or null.
    #[napi]
    pub fn poll_event(&mut self) -> Option<NativeOutboxEvent> {
        self.deliverer.poll_event().map(|e| match e {
            OutboxEvent::Acquired { epoch } => {
                NativeOutboxEvent { kind: "acquired".into(), epoch: Some(epoch as f64), reason: None }
            }
            OutboxEvent::Lost { reason } => {
                NativeOutboxEvent { kind: "lost".into(), epoch: None, reason: Some(reason.code().into()) }
            }
        })
    }

    /// Whether a send may start now.
    #[napi]
    pub fn may_send(&self, now: f64) -> bool {
        self.deliverer.may_send(instant(now))
    }

    /// The epoch of the lease held, or null.
    #[napi]
    pub fn epoch(&self) -> Option<f64> {
        self.deliverer.epoch().map(|e| e as f64)
    }

    /// Gives the lease up: `true` if the store should be told.
    #[napi]
    pub fn release(&mut self, now: f64) -> bool {
        self.deliverer.release(instant(now))
    }

    /// How many events to read now, with `held` in the dispatcher and `unremoved` awaiting removal, or null.
    #[napi]
    pub fn read_due(&mut self, now: f64, held: u32, unremoved: u32) -> Option<u32> {
        self.deliverer.read_due(instant(now), held, unremoved)
    }

    /// A read made under `epoch` gave `got` events: `false` if it is void.
    #[napi]
    pub fn read_answered(&mut self, now: f64, epoch: f64, got: u32) -> bool {
        self.deliverer.read_answered(instant(now), epoch as u64, got)
    }

    /// A read made under `epoch` failed.
    #[napi]
    pub fn read_failed(&mut self, now: f64, epoch: f64) {
        self.deliverer.read_failed(instant(now), epoch as u64);
    }

    /// This process appended to the log.
    #[napi]
    pub fn appended(&mut self) {
        self.deliverer.appended();
    }

    /// The renewal as it closes is sent now.
    #[napi]
    pub fn close_renewal(&mut self, now: f64) {
        self.deliverer.close_renewal(instant(now));
    }

    /// The store answered the renewal as it closes: whether this process still holds the lease.
    #[napi]
    pub fn close_renewal_answered(&mut self, holds: bool) {
        self.deliverer.close_renewal_answered(holds);
    }

    /// A removal failed: when to retry it (ms on the caller's clock), or
    /// null (closing, and the lease it held leaves no room).
    #[napi]
    pub fn removal_failed(&mut self, now: f64) -> Option<f64> {
        self.deliverer.removal_failed(instant(now)).map(ms_at)
    }

    /// A removal succeeded.
    #[napi]
    pub fn removal_done(&mut self) {
        self.deliverer.removal_done();
    }
}

/// The lease script (Lua).
#[napi]
pub fn outbox_lease_script() -> String {
    redis::LEASE_SCRIPT.into()
}

/// The dead-letter script (Lua).
#[napi]
pub fn outbox_dead_script() -> String {
    redis::DEAD_SCRIPT.into()
}

/// Partner `partner`'s keys: the log, the dead letters, the lease, its
/// epoch counter and the breaker state left (one hash slot); a name with a
/// brace is refused.
#[napi]
pub fn outbox_keys(partner: String) -> Result<Vec<String>> {
    let k = redis::keys(&partner).map_err(|_| {
        structured(
            "config",
            Some("partner"),
            Some("out_of_range"),
            "must be non-empty, hold no { or }, and be at most 1024 bytes of UTF-8",
        )
    })?;
    let [lease, epoch, breaker] = k.lease;
    Ok(vec![k.log, k.dead, lease, epoch, breaker])
}

/// An entry's fields in the streams: key, payload, reason, id.
#[napi]
pub fn outbox_fields() -> Vec<String> {
    [redis::FIELD_KEY, redis::FIELD_PAYLOAD, redis::FIELD_REASON, redis::FIELD_ID].map(String::from).to_vec()
}
