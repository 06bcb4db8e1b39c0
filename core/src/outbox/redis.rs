//! An outbox on Redis: its keys, the lease script, how an event and a dead
//! letter are laid out in their streams. Every binding's Redis driver uses
//! these, so the layout is written once.
//!
//! - `halfopen:outbox:v1:{partner}:log`, a Stream: one entry per event
//!   accepted, fields [`FIELD_KEY`] (its idempotency key) and
//!   [`FIELD_PAYLOAD`] (the serialized event), removed (`XDEL`) once
//!   delivered or dead. It has no TTL: it is the durable log, kept as long
//!   as it holds an event.
//! - `…:dead`, a Stream of the events given up: the same fields, plus
//!   [`FIELD_REASON`] and [`FIELD_ID`] (its id in the log); moved from the
//!   log by one script (`dead.lua`), once however often it is retried.
//! - `…:lease` and `…:epoch`: the lease (`lease.lua`); the epoch counter
//!   is kept (epochs only grow).
//! - `…:breaker`, a Hash: the breaker state the last holder left (`s`, the
//!   JSON of `carried::left`, feature `snapshot`), when, by Redis's clock
//!   (`t`, ms), and the epoch of the grant that wrote it (`e`); the lease
//!   script writes it for a holder only, and hands it with its age to every
//!   caller that holds the lease (taken on a grant the caller did not hold
//!   before). Kept, as the epoch counter is (a few hundred bytes per
//!   partner).
//!
//! Removal is a plain `XDEL`: Redis at `maxmemory` (noeviction) refuses a
//! transaction but not a deletion, so a full Redis can still be drained.
//! Both scripts are flagged `allow-oom` for the same reason (Redis 7).
//!
//! `{partner}` is the hash tag: one outbox's keys are in one Redis Cluster
//! slot (a transaction may write two of them).

use alloc::format;
use alloc::string::{String, ToString};

use crate::group::redis::BadName;
use crate::time::Duration;

/// The lease script, for Redis `EVAL` / `EVALSHA` (Redis 7: its flags).
pub const LEASE_SCRIPT: &str = include_str!("lease.lua");

/// The dead-letter script (Redis 7).
pub const DEAD_SCRIPT: &str = include_str!("dead.lua");

/// An event's field: its idempotency key.
pub const FIELD_KEY: &str = "k";
/// An event's field: its payload, as the serializer wrote it.
pub const FIELD_PAYLOAD: &str = "p";
/// A dead letter's field: why it was given up (a dead letter reason's code).
pub const FIELD_REASON: &str = "r";
/// A dead letter's field: its id in the log.
pub const FIELD_ID: &str = "i";

/// An outbox's keys on Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxKeys {
    /// The log (a Stream).
    pub log: String,
    /// The dead letters (a Stream).
    pub dead: String,
    /// The lease, its epoch counter and the breaker state left, as the
    /// lease script takes them.
    pub lease: [String; 3],
}

/// The keys of partner `partner`'s outbox. Versioned (`halfopen:outbox:v1:`);
/// a name that is empty, longer than [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES)
/// or has a brace (it would end the hash tag early) is refused.
pub fn keys(partner: &str) -> Result<OutboxKeys, BadName> {
    crate::group::redis::keys(partner)?;
    let base = format!("halfopen:outbox:v1:{{{partner}}}");
    Ok(OutboxKeys {
        log: format!("{base}:log"),
        dead: format!("{base}:dead"),
        lease: [format!("{base}:lease"), format!("{base}:epoch"), format!("{base}:breaker")],
    })
}

/// The lease script's arguments: `token`, the lease's length in whole
/// milliseconds, rounded up (Redis's TTL never ends before the lease the
/// holder counts; `None`: give it up, "0"), the breaker state the caller
/// leaves if it holds the lease ("": none), and the epoch it holds, as far
/// as it knows (`None`: "0"; a holder whose grant lapsed, granted again,
/// keeps its own state unless a later grant's holder left one).
pub fn lease_args(token: &str, lease: Option<Duration>, state: &str, known: Option<u64>) -> [String; 4] {
    [token.to_string(), lease.map_or(0, lease_ttl_ms).to_string(), state.to_string(), known.unwrap_or(0).to_string()]
}

/// The lease's TTL in Redis: whole milliseconds, rounded up, at least 1
/// ("0" releases).
pub fn lease_ttl_ms(lease: Duration) -> u64 {
    lease.as_micros().div_ceil(1000).max(1)
}

/// A lease script reply that it cannot have given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadLeaseReply;

/// The lease script's reply read: whether the caller holds the lease, and
/// its epoch.
pub fn lease_reply(reply: &[i64]) -> Result<(bool, u64), BadLeaseReply> {
    match *reply {
        [holds @ (0 | 1), epoch] if epoch >= 0 && (holds == 0 || epoch > 0) => Ok((holds == 1, epoch as u64)),
        _ => Err(BadLeaseReply),
    }
}

/// The age, in ms by Redis's clock, of the breaker state a new grant
/// hands on (the script's fourth reply): a negative one is no reply of its.
pub fn left_age(age_ms: i64) -> Result<Duration, BadLeaseReply> {
    u64::try_from(age_ms).map(Duration::from_millis).map_err(|_| BadLeaseReply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partner_is_one_slot_and_a_brace_is_refused() {
        let k = keys("partner-a").unwrap();
        assert_eq!(k.log, "halfopen:outbox:v1:{partner-a}:log");
        assert_eq!(k.dead, "halfopen:outbox:v1:{partner-a}:dead");
        assert_eq!(k.lease[1], "halfopen:outbox:v1:{partner-a}:epoch");
        assert_eq!(k.lease[2], "halfopen:outbox:v1:{partner-a}:breaker");
        assert_eq!(keys("a}b"), Err(BadName));
        assert_eq!(keys(""), Err(BadName));
    }

    #[test]
    fn the_dead_letter_script_writes_the_fields_named_here() {
        assert!(DEAD_SCRIPT.contains(&format!("'{FIELD_REASON}'")) && DEAD_SCRIPT.contains(&format!("'{FIELD_ID}'")));
        assert!(DEAD_SCRIPT.starts_with("#!lua flags=allow-oom") && LEASE_SCRIPT.starts_with("#!lua flags=allow-oom"));
    }

    #[test]
    fn replies_are_read_strictly() {
        assert_eq!(lease_reply(&[1, 3]), Ok((true, 3)));
        assert_eq!(lease_reply(&[0, 0]), Ok((false, 0)));
        assert_eq!(lease_reply(&[1, 0]), Err(BadLeaseReply));
        assert_eq!(lease_reply(&[2, 1]), Err(BadLeaseReply));
        assert_eq!(lease_reply(&[1]), Err(BadLeaseReply));
        assert_eq!(lease_args("t", None, "", None)[1], "0");
        assert_eq!(lease_args("t", Some(Duration::from_micros(10)), "", None)[1], "1");
        assert_eq!(lease_args("t", Some(Duration::from_micros(3_000_500)), "{}", Some(4)), ["t", "3001", "{}", "4"]);
        assert_eq!(left_age(1500), Ok(Duration::from_millis(1500)));
        assert_eq!(left_age(-1), Err(BadLeaseReply));
    }
}
