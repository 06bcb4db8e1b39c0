//! The group store on Redis: the script, its keys, what a request passes it
//! and how its reply reads. Every binding's Redis driver uses these, so the
//! layout is written once. The script (`store.lua`) does what
//! [`MemoryStore`] does.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::GroupConfig;
use super::MemoryStore;
use super::protocol::{Answer, GroupLimit, GroupPhase, LimitReport, Proposal, Proposed, Register, Request};
use crate::breaker::Tally;
use crate::config::Config;
use crate::state::Reason;
use crate::time::Duration;
use crate::window::{TIME_BUCKETS, Window, WindowCounts};

/// The store script, for Redis `EVAL` / `EVALSHA` (Redis 7: it reads the
/// server's `TIME`).
pub const SCRIPT: &str = include_str!("store.lua");

/// The keys of group `name`, as the script takes them: one, a hash
/// holding the whole group (see `store.lua`). Versioned (`halfopen:v2:`;
/// v1 was a layout of eight keys), so that a later layout never reads this
/// one's; `{name}` is the hash tag (Redis Cluster). A name with a brace
/// would end the tag early: it is refused, as is an empty one and one
/// longer than [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) (each exchange
/// sends the key).
pub fn keys(name: &str) -> Result<[String; 1], BadName> {
    if name.is_empty() || name.len() > crate::MAX_NAME_BYTES || name.contains(['{', '}']) {
        return Err(BadName);
    }
    Ok([format!("halfopen:v2:{{{name}}}")])
}

/// The keys of `name`'s group in registry group `group`, as [`keys`]: the
/// registry's hash tag (`{group}`, checked as there), then `:k:` and the
/// name (any registry name: after the tag, a brace in it changes nothing).
/// Every name of a registry is in one Redis Cluster slot, so that one
/// script call carries many.
pub fn keyed_keys(group: &str, name: &str) -> Result<[String; 1], BadName> {
    keys(group)?;
    Ok([format!("halfopen:v2:{{{group}}}:k:{name}")])
}

/// A group name that cannot be a Redis hash tag: empty, or with a brace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadName;

pub use super::protocol::MAX_PERIOD_US;

/// How long a group's keys outlive its last exchange: its longest period
/// (the window, the longest open period, the lease) plus the member TTL.
pub fn key_ttl(breaker: &Config, group: &GroupConfig) -> Duration {
    let window = match breaker.window {
        Window::Time(span) => span,
        Window::Count(_) => Duration::ZERO,
    };
    let longest = window.max(breaker.open_timeout_cap()).max(group.lease_for(breaker));
    Duration::from_micros(longest.as_micros().saturating_add(group.member_ttl().as_micros()))
}

/// The script's arguments for `request`, in order (see `store.lua`).
pub fn args(request: &Request, key_ttl: Duration) -> Vec<String> {
    let r = request;
    let (kind, epoch, period, open_for, reason) = match r.proposal {
        None => (0, 0, 0, 0, ""),
        Some(p) => match p.to {
            Proposed::Open { for_us, open_for_us, reason } => (1, p.epoch, for_us, open_for_us, reason.name()),
            Proposed::HalfOpen { lease_us, open_for_us, reason } => (2, p.epoch, lease_us, open_for_us, reason.name()),
            Proposed::Closed { reason } => (3, p.epoch, 0, 0, reason.name()),
        },
    };
    let numbers = [
        r.member,
        r.tally.calls,
        r.tally.failures,
        r.tally.slow,
        u64::from(r.consecutive),
        r.bucket_us,
        r.window_us,
        r.member_ttl_us,
        key_ttl.as_millis().max(1),
        u64::from(TIME_BUCKETS),
        kind,
        epoch,
        period,
        open_for,
    ];
    let mut out: Vec<String> = numbers.iter().map(u64::to_string).collect();
    out.push(reason.to_string());
    // The limit's report: 0 (none) or 1, its epoch, steps, the limit and
    // threshold set (0: none), whether the member is active.
    let (has, epoch, steps, (set, threshold), active, busy) = match r.limit {
        None => (0, 0, 0, (0, 0), false, 0),
        Some(l) => (1, l.epoch, l.steps, l.set.unwrap_or((0, 0)), l.active, l.busy),
    };
    let limit = [has, epoch, u64::from(steps), u64::from(set), u64::from(threshold), u64::from(active)];
    out.extend(limit.iter().map(u64::to_string));
    out.push(r.deadline_us.to_string());
    out.push(busy.to_string());
    out
}

/// Script arguments that no [`args`] call gave (too few, not numbers, an
/// unknown proposal or reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadArgs;

/// Arguments per request (see `store.lua`).
pub const ARGS_PER_REQUEST: usize = 23;

/// The request that [`args`] wrote (its inverse; the key TTL, checked, is
/// the store's business and not part of a [`Request`]).
pub fn request<S: AsRef<str>>(args: &[S]) -> Result<Request, BadArgs> {
    let [
        member,
        calls,
        failures,
        slow,
        consecutive,
        bucket_us,
        window_us,
        member_ttl_us,
        key_ttl,
        buckets,
        kind,
        epoch,
        period,
        open_for,
        reason,
        has_limit,
        limit_epoch,
        steps,
        set,
        threshold,
        active,
        deadline_us,
        busy,
    ] = args
    else {
        return Err(BadArgs);
    };
    let n = |v: &S| v.as_ref().parse::<u64>().map_err(|_| BadArgs);
    let small = |v: &S| v.as_ref().parse::<u32>().map_err(|_| BadArgs);
    let flag = |v: &S| match v.as_ref() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(BadArgs),
    };
    // (The key's TTL is the script's `PEXPIRE`: a number of ms from 1.)
    if n(key_ttl)? == 0 || n(buckets)? != u64::from(TIME_BUCKETS) {
        return Err(BadArgs);
    }
    let why = || Reason::from_name(reason.as_ref()).ok_or(BadArgs);
    let epoch = n(epoch)?;
    let to = match n(kind)? {
        0 => None,
        1 => Some(Proposed::Open { for_us: n(period)?, open_for_us: n(open_for)?, reason: why()? }),
        2 => Some(Proposed::HalfOpen { lease_us: n(period)?, open_for_us: n(open_for)?, reason: why()? }),
        3 => Some(Proposed::Closed { reason: why()? }),
        _ => return Err(BadArgs),
    };
    let limit = match flag(has_limit)? {
        false => None,
        true => Some(LimitReport {
            epoch: n(limit_epoch)?,
            steps: small(steps)?,
            set: match small(set)? {
                0 => None,
                set => Some((set, small(threshold)?)),
            },
            active: flag(active)?,
            busy: small(busy)?,
        }),
    };
    Ok(Request {
        member: n(member)?,
        tally: Tally { calls: n(calls)?, failures: n(failures)?, slow: n(slow)?, rejected: 0 },
        consecutive: small(consecutive)?,
        bucket_us: n(bucket_us)?,
        window_us: n(window_us)?,
        member_ttl_us: n(member_ttl_us)?,
        proposal: to.map(|to| Proposal { epoch, to }),
        limit,
        deadline_us: n(deadline_us)?,
    })
}

/// The script's reply for `answer` (the inverse of [`answer`]).
pub fn reply(answer: &Answer) -> Vec<String> {
    let a = answer;
    let (until, open_for, why, lease, lease_until) = match a.register.phase {
        GroupPhase::Closed => (0, 0, a.register.closed_by.map_or("", Reason::name), 0, 0),
        GroupPhase::Open { until_us, open_for_us, reason } => (until_us, open_for_us, reason.name(), 0, 0),
        GroupPhase::HalfOpen { lease, lease_until_us, open_for_us, reason } => {
            (0, open_for_us, reason.name(), lease, lease_until_us)
        }
    };
    let rank = a.rank.map_or(String::new(), |r| r.to_string());
    let mut out: Vec<String> = [a.now_us, a.register.epoch].iter().map(u64::to_string).collect();
    out.push(a.register.phase.name().to_string());
    out.extend([until, open_for].iter().map(u64::to_string));
    out.push(why.to_string());
    out.extend([lease, lease_until].iter().map(u64::to_string));
    let counts = [a.totals.calls, a.totals.failures, a.totals.slow, a.run, a.live, a.failing];
    out.extend(counts.iter().map(u32::to_string));
    out.push(a.limit.epoch.to_string());
    out.extend([a.limit.limit, a.limit.threshold, a.active].iter().map(u32::to_string));
    out.push(rank);
    out.push(a.busy.to_string());
    out
}

/// What the script does with one call's arguments (any number of
/// requests, [`ARGS_PER_REQUEST`] each), done by `store` at the store's
/// `now_us`: its reply. The conformance suite's store, in every runtime
/// that has the group mode (one group: the keys are the caller's).
pub fn exchange<S: AsRef<str>>(store: &mut MemoryStore, args: &[S], now_us: u64) -> Result<Vec<String>, BadArgs> {
    if args.is_empty() || !args.len().is_multiple_of(ARGS_PER_REQUEST) {
        return Err(BadArgs);
    }
    let requests = args.chunks(ARGS_PER_REQUEST).map(request).collect::<Result<Vec<_>, _>>()?;
    Ok(requests.iter().flat_map(|r| reply(&store.exchange(r, now_us))).collect())
}

/// A reply the script cannot have given (another script under the same
/// keys, a proxy that mangled it): the exchange counts as failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadReply;

/// Values per answer in the script's reply.
pub const REPLY_VALUES: usize = 20;

/// The answers in the reply of a call that carried several requests (20
/// values each, in the requests' order).
pub fn answers<S: AsRef<str>>(reply: &[S]) -> Result<Vec<Answer>, BadReply> {
    if !reply.len().is_multiple_of(REPLY_VALUES) {
        return Err(BadReply);
    }
    reply.chunks(REPLY_VALUES).map(answer).collect()
}

/// The answer in the script's reply (20 values, as text).
pub fn answer<S: AsRef<str>>(reply: &[S]) -> Result<Answer, BadReply> {
    let [
        now,
        epoch,
        phase,
        until,
        open_for,
        why,
        lease,
        lease_until,
        calls,
        failures,
        slow,
        run,
        live,
        failing,
        limit_epoch,
        limit,
        threshold,
        active,
        rank,
        busy,
    ] = reply
    else {
        return Err(BadReply);
    };
    let n = |v: &S| v.as_ref().parse::<u64>().map_err(|_| BadReply);
    let small = |v: &S| n(v).map(|x| u32::try_from(x).unwrap_or(u32::MAX));
    let reason = |v: &S| Reason::from_name(v.as_ref()).ok_or(BadReply);
    let closed_by = match (phase.as_ref(), why.as_ref()) {
        ("closed", "") => None,
        ("closed", _) => Some(reason(why)?),
        _ => None,
    };
    let phase = match phase.as_ref() {
        "closed" => GroupPhase::Closed,
        "open" => GroupPhase::Open { until_us: n(until)?, open_for_us: n(open_for)?, reason: reason(why)? },
        "half_open" => GroupPhase::HalfOpen {
            lease: n(lease)?,
            lease_until_us: n(lease_until)?,
            open_for_us: n(open_for)?,
            reason: reason(why)?,
        },
        _ => return Err(BadReply),
    };
    Ok(Answer {
        now_us: n(now)?,
        register: Register { epoch: n(epoch)?, phase, closed_by },
        totals: WindowCounts { calls: small(calls)?, failures: small(failures)?, slow: small(slow)? },
        run: small(run)?,
        live: small(live)?,
        failing: small(failing)?,
        limit: GroupLimit { epoch: n(limit_epoch)?, limit: small(limit)?, threshold: small(threshold)? },
        active: small(active)?,
        rank: match rank.as_ref() {
            "" => None,
            _ => Some(small(rank)?),
        },
        busy: small(busy)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{LimitReport, Proposal, Tally};

    #[test]
    fn every_key_of_a_group_shares_its_hash_tag() {
        assert_eq!(keys("wa-instance-7").unwrap(), ["halfopen:v2:{wa-instance-7}"]);
        for bad in ["", "}x", "a{b", "a}"] {
            assert_eq!(super::keys(bad), Err(BadName), "{bad}");
        }
        assert!(super::keys(&"n".repeat(crate::MAX_NAME_BYTES)).is_ok());
        assert_eq!(keyed_keys("wa", "inst{7}:x").unwrap(), ["halfopen:v2:{wa}:k:inst{7}:x"]);
        assert_eq!(keyed_keys("w{a", "x"), Err(BadName));
        assert_eq!(super::keys(&"n".repeat(crate::MAX_NAME_BYTES + 1)), Err(BadName));
    }

    #[test]
    fn a_request_and_a_reply_read_as_they_were_meant() {
        let request = Request {
            member: u64::MAX,
            tally: Tally { calls: 10, failures: 4, slow: 1, rejected: 0 },
            consecutive: 2,
            bucket_us: 7_500_000,
            window_us: 60_000_000,
            member_ttl_us: 3_000_000,
            proposal: Some(Proposal {
                epoch: 7,
                to: Proposed::HalfOpen { lease_us: 61_000_000, open_for_us: 30_000_000, reason: Reason::FailureRate },
            }),
            limit: Some(LimitReport { epoch: 4, steps: 2, set: Some((9, 1000)), active: true, busy: 6 }),
            deadline_us: 1_700_000_000_040_000,
        };
        let args = args(&request, Duration::from_secs(400));
        assert_eq!(args[0], "18446744073709551615");
        assert_eq!(
            &args[8..],
            [
                "400000",
                "8",
                "2",
                "7",
                "61000000",
                "30000000",
                "failure_rate",
                "1",
                "4",
                "2",
                "9",
                "1000",
                "1",
                "1700000000040000",
                "6"
            ]
        );
        let reply = [
            "1700000000000000",
            "8",
            "half_open",
            "0",
            "30000000",
            "failure_rate",
            "18446744073709551615",
            "1700000061000000",
            "10",
            "4",
            "1",
            "2",
            "3",
            "1",
            "5",
            "12",
            "1000",
            "3",
            "",
            "7",
        ];
        assert_eq!(super::request(&args), Ok(request));
        assert_eq!(super::request(&args[1..]), Err(BadArgs));
        for (at, bad) in [(8, "0"), (8, "abc"), (10, "4"), (15, "2"), (1, "4294967296x")] {
            let mut wrong = args.clone();
            wrong[at] = bad.into();
            assert_eq!(super::request(&wrong), Err(BadArgs), "{at}: {bad}");
        }
        let a = answer(&reply).unwrap();
        assert_eq!(super::reply(&a), reply, "the reply written is the reply read");
        assert_eq!(a.register.epoch, 8);
        assert_eq!(
            a.register.phase,
            GroupPhase::HalfOpen {
                lease: u64::MAX,
                lease_until_us: 1_700_000_061_000_000,
                open_for_us: 30_000_000,
                reason: Reason::FailureRate
            }
        );
        assert_eq!((a.totals.failures, a.run, a.live, a.failing), (4, 2, 3, 1));
        assert_eq!((a.limit, a.active, a.rank), (GroupLimit { epoch: 5, limit: 12, threshold: 1000 }, 3, None));
        assert_eq!(a.busy, 7);
        assert_eq!(answer(&reply[..19]), Err(BadReply));
        let two: Vec<&str> = reply.iter().chain(reply.iter()).copied().collect();
        assert_eq!(answers(&two).unwrap().len(), 2);
        assert_eq!(answers(&two[..39]), Err(BadReply));
        assert_eq!(answers::<&str>(&[]).unwrap().len(), 0);
        let mut wrong = reply;
        wrong[2] = "ajar";
        assert_eq!(answer(&wrong), Err(BadReply));
        wrong[2] = "open";
        wrong[5] = "because";
        assert_eq!(answer(&wrong), Err(BadReply));
    }
}
