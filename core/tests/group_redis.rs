//! The group store's Lua script on a real redis-server does what the
//! reference `MemoryStore` does: the same requests (several members, their
//! running totals, proposals at current and stale epochs, members that go
//! silent) through both, at the server's time, give the same answers.
//! Needs `redis-server` on the PATH (`make setup-redis`).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration as StdDuration;

use halfopen::group::{ANY_EPOCH, LimitReport, MemoryStore, Proposal, Proposed, Request, Tally, redis};
use halfopen::{Config, Duration, Reason};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start() -> (Server, TcpStream) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on the PATH (make setup-redis)");
    let server = Server(child);
    // Its own answer says when it is up: a PING that gets PONG.
    for _ in 0..500 {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port))
            && let Ok(reply) = call(&mut s, &["PING"])
        {
            assert_eq!(reply, vec!["PONG".to_string()]);
            return (server, s);
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
    panic!("redis-server did not answer");
}

/// Sends a command; its reply as text (an array's items, or the one value).
fn call(s: &mut TcpStream, args: &[&str]) -> std::io::Result<Vec<String>> {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes())?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let (kind, rest) = line.trim_end().split_at(1);
    let one = |r: &mut BufReader<TcpStream>, kind: &str, rest: &str| -> std::io::Result<String> {
        match kind {
            "+" | ":" => Ok(rest.to_string()),
            "$" => {
                let len: usize = rest.parse().unwrap();
                let mut buf = vec![0; len + 2];
                std::io::Read::read_exact(r, &mut buf)?;
                Ok(String::from_utf8(buf[..len].to_vec()).unwrap())
            }
            _ => panic!("reply {kind}{rest}"),
        }
    };
    if kind == "*" {
        let n: usize = rest.parse().unwrap();
        (0..n)
            .map(|_| {
                let mut item = String::new();
                r.read_line(&mut item)?;
                let (k, v) = item.trim_end().split_at(1);
                one(&mut r, k, v)
            })
            .collect()
    } else {
        Ok(vec![one(&mut r, kind, rest)?])
    }
}

/// The server's clock (`TIME`), µs.
fn server_time(s: &mut TcpStream) -> u64 {
    let t = call(s, &["TIME"]).unwrap();
    t[0].parse::<u64>().unwrap() * 1_000_000 + t[1].parse::<u64>().unwrap()
}

/// A small xorshift for the scenario.
struct Draw(u64);

impl Draw {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[test]
fn the_lua_script_answers_as_the_reference_store() {
    let (_server, mut s) = start();
    let keys = redis::keys("differential").unwrap();
    let ttl = redis::key_ttl(&Config::default(), &Default::default());
    let mut reference = MemoryStore::new();
    let mut totals = [Tally::default(); 5];
    let mut draw = Draw(0x9E37_79B9_7F4A_7C15);
    let reasons = [Reason::FailureThreshold, Reason::ConsecutiveFailures, Reason::ProbeFailed];
    let mut epoch: u64 = 0;
    let mut limit_epoch: u64 = 0;
    let mut ranked = 0;
    let mut late = 0;
    let mut old_buckets = 0;
    let mut fewest_live = u32::MAX;
    for step in 0..600 {
        let m = draw.next(5) as usize;
        // Members 3 and 4 go silent for a while (they leave, then rejoin).
        if (m == 3 || m == 4) && (200..320).contains(&step) {
            continue;
        }
        let t = &mut totals[m];
        let calls = draw.next(4);
        let failures = draw.next(calls + 1);
        t.calls += calls;
        t.failures += failures;
        t.slow += draw.next(failures + 1);
        // Now and then a member restarts with fresh totals.
        if draw.next(50) == 0 {
            *t = Tally::default();
        }
        // Closing (which clears the window) is rare, so that the window fills.
        let to = match draw.next(40) {
            0 => Some(Proposed::Open {
                for_us: 1 + draw.next(300_000),
                open_for_us: 30_000_000,
                reason: reasons[draw.next(3) as usize],
            }),
            1 => Some(Proposed::HalfOpen { lease_us: 100_000, open_for_us: 60_000_000, reason: Reason::FailureRate }),
            2..=4 => Some(Proposed::HalfOpen {
                lease_us: 100_000,
                open_for_us: 60_000_000,
                reason: Reason::ConsecutiveFailures,
            }),
            5 => Some(Proposed::Closed {
                reason: [Reason::ProbesSucceeded, Reason::ForcedClose, Reason::Reset][draw.next(3) as usize],
            }),
            _ => None,
        };
        // Mostly at the current epoch, sometimes a stale one, now and then
        // any (an operator's force-open).
        let at = match draw.next(12) {
            0..=2 => epoch.saturating_sub(1),
            3 => ANY_EPOCH,
            _ => epoch,
        };
        // The limit's report: none (no adaptive limit), steps, a set (a
        // cut, a restart), at its epoch or a stale one; active or not.
        let limit = match draw.next(6) {
            0 => None,
            kind => {
                let at = if draw.next(4) == 0 { limit_epoch.saturating_sub(1) } else { limit_epoch };
                let set = (kind == 1).then(|| (1 + draw.next(50) as u32, 1 + draw.next(1000) as u32));
                let busy = draw.next(5) as u32;
                Some(LimitReport { epoch: at, steps: draw.next(4) as u32, set, active: draw.next(3) > 0, busy })
            }
        };
        let request = Request {
            member: 1_000 + m as u64 * (u64::MAX / 7),
            tally: *t,
            consecutive: draw.next(6) as u32,
            bucket_us: if step % 97 == 0 { 0 } else { 20_000 },
            window_us: 150_000,
            member_ttl_us: 50_000,
            proposal: to.map(|to| Proposal { epoch: at, to }),
            limit,
            deadline_us: 0,
        };
        // Now and then a request that arrives after its deadline (it must
        // change nothing); the deadline is on the server's clock, read first.
        let now_us = server_time(&mut s);
        let request = Request {
            deadline_us: match draw.next(8) {
                0 => now_us - 1,
                1 => now_us + 60_000_000,
                _ => 0,
            },
            ..request
        };
        late += usize::from(request.deadline_us == now_us - 1);
        let args = redis::args(&request, ttl);
        let mut command: Vec<&str> = vec!["EVAL", redis::SCRIPT, "1"];
        command.extend(keys.iter().map(String::as_str));
        command.extend(args.iter().map(String::as_str));
        let reply = call(&mut s, &command).unwrap();
        let lua = redis::answer(&reply).unwrap_or_else(|_| panic!("step {step}: {reply:?}"));
        let expected = reference.exchange(&request, lua.now_us);
        assert_eq!(lua, expected, "step {step}: {request:?}");
        epoch = lua.register.epoch;
        limit_epoch = lua.limit.epoch;
        ranked += usize::from(lua.rank.is_some_and(|r| r > 0));
        old_buckets += usize::from(lua.totals.calls > 0 && step > 100);
        if (260..320).contains(&step) {
            fewest_live = fewest_live.min(lua.live);
        }
        // Time passes: buckets (20 ms) roll over, silent members leave.
        if step % 10 == 0 {
            std::thread::sleep(StdDuration::from_millis(6));
        }
    }
    assert!(epoch > 10, "the register moved: {epoch}");
    assert!(limit_epoch > 10, "the limit moved: {limit_epoch}");
    assert!(ranked > 100, "members ranked among others: {ranked}");
    assert!(late > 30, "late requests: {late}");
    assert!(old_buckets > 100, "the window held counts: {old_buckets}");
    assert!(fewest_live <= 3, "silent members left: {fewest_live} live");
    // Every key carries the TTL.
    for key in &keys {
        let ttl_ms: i64 = call(&mut s, &["PTTL", key]).unwrap()[0].parse().unwrap();
        assert!(ttl_ms > 0 && ttl_ms <= Duration::from_secs(400).as_millis() as i64, "{key}: {ttl_ms}");
    }
}

#[test]
fn one_call_carries_the_requests_of_several_groups_each_answered_as_its_own() {
    let (_server, mut s) = start();
    let ttl = redis::key_ttl(&Config::default(), &Default::default());
    let names = ["a", "b{x}", "c:k:d"];
    let keys: Vec<String> = names.iter().flat_map(|n| redis::keyed_keys("fleet", n).unwrap()).collect();
    let mut references = [MemoryStore::new(), MemoryStore::new(), MemoryStore::new()];
    for round in 0..20u64 {
        let requests: Vec<Request> = (0..3u64)
            .map(|i| Request {
                member: 7 + round % 2,
                tally: Tally { calls: round * (i + 1), failures: round * i, slow: 0, rejected: 0 },
                consecutive: 0,
                bucket_us: 1_000_000,
                window_us: 8_000_000,
                member_ttl_us: 3_000_000,
                proposal: (round == 10 && i == 2).then_some(Proposal {
                    epoch: 0,
                    to: Proposed::Open { for_us: 5_000_000, open_for_us: 5_000_000, reason: Reason::FailureRate },
                }),
                limit: None,
                deadline_us: 0,
            })
            .collect();
        let args: Vec<String> = requests.iter().flat_map(|r| redis::args(r, ttl)).collect();
        let mut command: Vec<&str> = vec!["EVAL", redis::SCRIPT, "3"];
        command.extend(keys.iter().map(String::as_str));
        command.extend(args.iter().map(String::as_str));
        let reply = call(&mut s, &command).unwrap();
        let answers = redis::answers(&reply).unwrap();
        assert_eq!(answers.len(), 3);
        for (i, answer) in answers.iter().enumerate() {
            assert_eq!(*answer, references[i].exchange(&requests[i], answer.now_us), "round {round}, group {i}");
        }
    }
    assert_eq!(references[2].register().epoch, 1, "only the third group opened");
    assert_eq!((references[0].register().epoch, references[1].register().epoch), (0, 0));
}

#[test]
fn a_member_back_after_its_ttl_keeps_the_record_it_sends() {
    // Review: the script swept the returning member's old record after
    // writing its new one (HSET, then HDEL): alone in its group, its next
    // exchange counted nothing.
    let (_server, mut s) = start();
    let keys = redis::keys("returning").unwrap();
    let ttl = redis::key_ttl(&Config::default(), &Default::default());
    let mut reference = MemoryStore::new();
    let mut exchange = |s: &mut TcpStream, calls: u64| {
        let request = Request {
            member: 42,
            tally: Tally { calls, failures: calls, slow: 0, rejected: 0 },
            consecutive: 0,
            bucket_us: 1_000_000,
            window_us: 8_000_000,
            member_ttl_us: 20_000,
            proposal: None,
            limit: None,
            deadline_us: 0,
        };
        let args = redis::args(&request, ttl);
        let mut command: Vec<&str> = vec!["EVAL", redis::SCRIPT, "1", &keys[0]];
        command.extend(args.iter().map(String::as_str));
        let lua = redis::answer(&call(s, &command).unwrap()).unwrap();
        assert_eq!(lua, reference.exchange(&request, lua.now_us), "{calls} calls");
        lua
    };
    exchange(&mut s, 1);
    std::thread::sleep(StdDuration::from_millis(40));
    exchange(&mut s, 2);
    let third = exchange(&mut s, 6);
    assert_eq!((third.totals.failures, third.failing), (4, 1), "its growth counted");
}
