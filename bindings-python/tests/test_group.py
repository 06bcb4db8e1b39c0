"""The ``group=`` option against a real redis-server: breakers of one group
(members, as several processes would be; some tests run them in child
processes, Node ones among them) trip together on failures spread among
them, probe once for the group, close together; a killed Redis leaves each
deciding alone (no call waits or fails), and a restarted one is adopted
again; a fork's child rejoins as a new member. Every wait is for the
system's own answer (a state, a callback), never a margin."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest
import redis
import redis.asyncio

import halfopen
from halfopen import CircuitBreaker, CircuitBreakerError, RedisGroup, State

ROOT = Path(__file__).resolve().parents[2]
NODE_MEMBER = ROOT / "bindings-node" / "test" / "support" / "group-member.js"

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (make setup-redis)")

OPTIONS: dict[str, Any] = dict(
    failure_threshold=5, window=60.0, open_timeout=0.4, half_open_max_attempts=2, probe_timeout=1.0
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A redis-server on loopback (with `extra` options), killed and restarted at will."""

    def __init__(self, *extra: str) -> None:
        self.port = free_port()
        self.extra = extra  # options after the defaults (later ones win)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *self.extra]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if b"Ready to accept" in line:
                break
        # Keep reading its output, so that it never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2.0, socket_connect_timeout=0.5)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.kill()


def until(check: Callable[[], bool], what: str = "the condition", limit: float = 20.0) -> None:
    """Waits for `check()` (the system's own answer); the limit only ends a broken test."""
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def member(server: Server, name: str, *, options: Any = None, **group: Any) -> CircuitBreaker:
    g = RedisGroup(server.client(), name, flush_interval=0.05, store_timeout=0.04, quorum=2, **group)
    return CircuitBreaker("wa", group=g, **OPTIONS, **(options or {}))


def fail(b: CircuitBreaker) -> None:
    def down() -> None:
        raise ConnectionError("upstream down")

    with pytest.raises((ConnectionError, CircuitBreakerError)):
        b.call(down)


def joined(*breakers: CircuitBreaker) -> None:
    until(lambda: all((s := b.group_status()) is not None and s.phase == "closed" for b in breakers), "joined")


def test_the_group_option_is_checked_and_names_what_is_wrong(server: Server) -> None:
    client = server.client()
    with pytest.raises(TypeError) as e:
        CircuitBreaker("x", group={"redis": client})  # type: ignore[arg-type]
    assert e.value.option == "group"  # type: ignore[attr-defined]
    with pytest.raises(TypeError) as e:
        RedisGroup(object(), "g")
    assert e.value.option == "group.client"  # type: ignore[attr-defined]
    for bad in ["", "a{b", "}"]:
        with pytest.raises(ValueError) as e:
            RedisGroup(client, bad)
        assert e.value.option == "group.name"  # type: ignore[attr-defined]
    with pytest.raises(TypeError) as e:
        RedisGroup(client, 7)  # type: ignore[arg-type]
    assert e.value.option == "group.name"  # type: ignore[attr-defined]
    for option, value, problem in [
        ("flush_interval", 0.001, "too_small"),
        ("flush_interval", float("nan"), "not_finite"),
        ("store_timeout", -1.0, "out_of_range"),
        ("quorum", 0, "zero"),
        ("lease", 10.0**30, "too_large"),
    ]:
        with pytest.raises(ValueError) as e:
            CircuitBreaker("x", group=RedisGroup(client, "g", **{option: value}))
        assert e.value.option == f"group.{option}", (option, e.value)  # type: ignore[attr-defined]
        assert e.value.problem == problem, (option, e.value)  # type: ignore[attr-defined]
    with pytest.raises(TypeError) as e:
        CircuitBreaker("x", group=RedisGroup(client, "g", quorum=2.5))  # type: ignore[arg-type]
    assert e.value.option == "group.quorum"  # type: ignore[attr-defined]
    with pytest.raises(TypeError) as e:
        RedisGroup(client, "g", on_degraded=3)  # type: ignore[arg-type]
    assert e.value.option == "group.on_degraded"  # type: ignore[attr-defined]
    # An asyncio client needs the loop the exchanges will run on.
    with pytest.raises(TypeError) as e:
        CircuitBreaker("x", group=RedisGroup(redis.asyncio.Redis(port=server.port), "g"))
    assert e.value.option == "group.client"  # type: ignore[attr-defined]


def test_failures_spread_over_members_open_the_group_one_probe_round_closes_it(server: Server) -> None:
    breakers = [member(server, "spread") for _ in range(3)]
    joined(*breakers)
    # Two failures each: no member sees five, the group sees six.
    for b in breakers:
        fail(b)
        fail(b)
    until(lambda: all(b.state is State.OPEN for b in breakers), "every member open")
    assert {b.group_status().phase for b in breakers} <= {"open", "half_open"}  # type: ignore[union-attr]
    # Calls keep coming and are refused (a probe would serve them); after
    # the open period one member takes the lease: 2 probes for the group.
    for b in breakers:
        with pytest.raises(CircuitBreakerError):
            b.try_acquire()
    until(lambda: any(b.group_status().phase == "half_open" for b in breakers), "half-open")  # type: ignore[union-attr]
    permits: List[Any] = []
    until(lambda: _probe(breakers, permits) >= 1, "a probe admitted")
    for _ in range(5):
        _probe(breakers, permits)
    assert len(permits) == 2, f"probes for the group: {len(permits)}"
    for b, p in permits:
        b.record(p, "success")
    until(lambda: all(b.state is State.CLOSED for b in breakers), "every member closed")
    for b in breakers:
        b.leave_group()
        assert b.group_status() is None


def _probe(breakers: List[CircuitBreaker], permits: List[Any]) -> int:
    for b in breakers:
        try:
            permits.append((b, b.try_acquire()))
        except CircuitBreakerError:
            pass
    return len(permits)


def test_one_member_whose_calls_fail_does_not_open_the_group(server: Server) -> None:
    poisoned, *others = [member(server, "poison") for _ in range(3)]
    joined(poisoned, *others)
    for _ in range(6):
        fail(poisoned)
        for b in others:
            assert b.call(lambda: "ok") == "ok"
    until(lambda: poisoned.state is State.OPEN, "the poisoned member open")
    # Several exchanges later the group is still closed.
    seen = [0]

    def exchanged() -> bool:
        seen[0] += 1
        return seen[0] > 30 and all(b.group_status().phase == "closed" for b in others)  # type: ignore[union-attr]

    until(exchanged, "exchanges")
    assert all(b.state is State.CLOSED for b in others)


def test_a_killed_redis_leaves_each_member_alone_and_a_restarted_one_is_adopted(server: Server) -> None:
    events: List[str] = []
    lock = threading.Lock()

    def note(what: str) -> Callable[..., None]:
        def callback(*_: Any) -> None:
            with lock:
                events.append(what)

        return callback

    a, b = (member(server, "outage", on_degraded=note("down"), on_recovered=note("up")) for _ in range(2))
    joined(a, b)
    server.kill()
    until(lambda: events.count("down") == 2, "both degraded")
    assert a.group_status().degraded and b.group_status().degraded  # type: ignore[union-attr]
    # Calls neither wait nor fail for it; alone, a member still trips.
    started = time.monotonic()
    assert a.call(lambda: "ok") == "ok"
    for _ in range(5):
        fail(a)
    assert time.monotonic() - started < 1.0
    assert a.state is State.OPEN and b.state is State.CLOSED
    server.start()
    until(lambda: events.count("up") == 2, "both recovered")
    # Restarted empty: the group starts afresh, without a false open.
    until(lambda: b.group_status().phase == "closed", "b follows the group")  # type: ignore[union-attr]
    assert b.state is State.CLOSED
    for x in (a, b):
        x.leave_group()


def test_a_full_redis_is_an_outage_until_its_writes_fit_again() -> None:
    """Redis at maxmemory with noeviction refuses the script's writes: each
    member decides alone (said once, with Redis's OOM error) until there is
    room again, then says it has recovered, once."""
    full = Server()
    admin = full.client()
    events: List[Any] = []
    try:
        b = CircuitBreaker(
            "wa",
            group=RedisGroup(
                full.client(),
                "full",
                flush_interval=0.05,
                store_timeout=0.04,
                on_degraded=lambda e: events.append(("down", e)),
                on_recovered=lambda: events.append(("up", None)),
            ),
            **OPTIONS,
        )
        joined(b)
        # Well past its limit (1 MB of data held, a limit far below it): every write is refused.
        admin.config_set("maxmemory-policy", "noeviction")
        for i in range(10):
            admin.set(f"filler:{i}", "x" * 100_000)
        admin.config_set("maxmemory", "100kb")
        until(lambda: len(events) > 0, "degraded")
        assert events[0][0] == "down" and isinstance(events[0][1], redis.exceptions.OutOfMemoryError), events

        # Redis's own count of the scripts it refused: three more, and the member stayed alone.
        def refused() -> int:
            stats: Any = admin.info("commandstats")
            return int(stats.get("cmdstat_evalsha", {}).get("failed_calls", 0))

        seen = refused()
        until(lambda: refused() >= seen + 3, "three refused exchanges")
        assert [e[0] for e in events] == ["down"], events
        assert b.group_status().degraded  # type: ignore[union-attr]
        # Alone, the member still trips.
        assert b.call(lambda: "ok") == "ok"
        for _ in range(5):
            fail(b)
        assert b.state is State.OPEN
        admin.config_set("maxmemory", "0")
        until(lambda: len(events) == 2, "recovered")
        assert [e[0] for e in events] == ["down", "up"], events
        b.leave_group()
    finally:
        admin.close()
        full.kill()


def test_a_clock_that_fails_is_a_failed_exchange_and_a_raising_callback_stops_nothing(server: Server) -> None:
    errors: List[BaseException] = []
    reading: List[Callable[[], float]] = [time.monotonic]

    def degraded(error: BaseException) -> None:
        errors.append(error)
        raise RuntimeError("callback bug")

    g = RedisGroup(server.client(), "clock", flush_interval=0.05, store_timeout=0.04, on_degraded=degraded)
    b = CircuitBreaker("wa", group=g, clock=lambda: reading[0](), **OPTIONS)
    joined(b)

    def broken() -> float:
        raise OSError("clock bug")

    # A reading that is not a time: the binding's error naming `clock`; a
    # clock that raises: what it raised.
    for bad, expected in ((lambda: float("nan"), ValueError), (lambda: "soon", TypeError), (broken, OSError)):
        before = len(errors)
        reading[0] = bad  # type: ignore[assignment]
        until(lambda: len(errors) > before, "degraded")
        assert isinstance(errors[-1], expected), errors[-1]
        assert expected is OSError or errors[-1].option == "clock", errors[-1]  # type: ignore[attr-defined]
        reading[0] = time.monotonic
        until(lambda: not b.group_status().degraded, "recovered")  # type: ignore[union-attr]
    b.leave_group()


def test_an_asyncio_client_exchanges_on_the_running_loop(server: Server) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(host="127.0.0.1", port=server.port) for _ in range(2)]
        groups = [RedisGroup(c, "asyncio", flush_interval=0.05, store_timeout=0.04) for c in clients]
        breakers = [CircuitBreaker("wa", group=g, **OPTIONS) for g in groups]
        while not all(b.group_status().phase == "closed" for b in breakers):  # type: ignore[union-attr]
            await asyncio.sleep(0.01)

        async def down() -> None:
            raise ConnectionError("upstream down")

        for b in breakers:
            for _ in range(3):
                with pytest.raises(ConnectionError):
                    await b.call_async(down)
        while not all(b.state is State.OPEN for b in breakers):
            await asyncio.sleep(0.01)
        for b in breakers:
            b.leave_group()
        for c in clients:
            await c.aclose()

    asyncio.run(main())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forks_child_rejoins_as_a_new_member(server: Server) -> None:
    b = member(server, "fork")
    joined(b)
    parent = b.group_status().member  # type: ignore[union-attr]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its member and whether it exchanges
        try:
            os.close(read)
            deadline = time.monotonic() + 10
            status = b.group_status()
            while time.monotonic() < deadline and (status is None or status.phase != "closed"):
                time.sleep(0.01)
                status = b.group_status()
            os.write(write, json.dumps([status.member, status.phase] if status else None).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = json.loads(f.read())
    os.waitpid(pid, 0)
    assert child is not None and child[0] != parent and child[1] == "closed", (parent, child)
    # Two members live: the parent's answers say so.
    r = server.client()
    members = [f[2:] for f in r.hkeys("halfopen:v2:{fork}") if f.startswith(b"m:")]
    assert {m.decode() for m in members} >= {str(int(parent, 16)), str(int(child[0], 16))}
    b.leave_group()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_node_and_python_processes_are_one_group(server: Server) -> None:
    if not (ROOT / "bindings-node" / "halfopen.linux-x64-gnu.node").exists() and not list(
        (ROOT / "bindings-node").glob("*.node")
    ):
        pytest.skip("needs the Node addon (make node-build)")
    nodes = [
        subprocess.Popen(
            ["node", str(NODE_MEMBER), str(server.port), "mixed"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        said = [_lines(n) for n in nodes]
        for lines in said:
            assert next(lines) == "joined"
        pythons = [member(server, "mixed") for _ in range(2)]
        joined(*pythons)
        # Two failures in each of the four processes: the group opens.
        for n in nodes:
            _send(n, "fail 2")
        for b in pythons:
            fail(b)
            fail(b)
        for lines in said:
            assert next(lines) == "open"
        until(lambda: all(b.state is State.OPEN for b in pythons), "the Python members open")
        for b in pythons:
            with pytest.raises(CircuitBreakerError):
                b.try_acquire()
        # The probe round: 2 probes in all, wherever they are taken.
        until(lambda: all(b.group_status().phase == "half_open" for b in pythons), "half-open")  # type: ignore[union-attr]
        permits: List[Any] = []
        for _ in range(3):
            _probe(pythons, permits)
        admitted = len(permits)
        for n, lines in zip(nodes, said):
            _send(n, "probe 3")
            admitted += int(next(lines).split()[1])
        assert admitted == 2, f"probes for the group: {admitted}"
        for b, p in permits:
            b.record(p, "success")
        for n in nodes:
            _send(n, "report")
        until(lambda: all(b.state is State.CLOSED for b in pythons), "the Python members closed")
        for lines in said:
            assert next(lines) == "close"
        for b in pythons:
            b.leave_group()
    finally:
        for n in nodes:
            n.kill()
            n.wait()


def _send(process: "subprocess.Popen[str]", line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def _lines(process: "subprocess.Popen[str]") -> Iterator[str]:
    assert process.stdout is not None
    for line in process.stdout:
        yield line.strip()
    raise AssertionError(f"the Node member exited ({process.poll()})")


def test_review_regressions_options(server: Server) -> None:
    client = server.client()

    async def callback(_: BaseException) -> None:
        pass

    with pytest.raises(TypeError) as e:
        RedisGroup(client, "g", on_degraded=callback)
    assert e.value.option == "group.on_degraded"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as e:
        RedisGroup(client, "n" * 1025)
    assert e.value.option == "group.name"  # type: ignore[attr-defined]
    RedisGroup(client, "n" * 1024)


async def asyncio_member(server: Server, name: str) -> CircuitBreaker:
    """A member with an asyncio client and an adaptive limit, once it has joined."""
    g = RedisGroup(redis.asyncio.Redis(host="127.0.0.1", port=server.port), name, flush_interval=0.05)
    b = CircuitBreaker("wa", group=g, adaptive_limit=(1, 2), **OPTIONS)
    while b.group_status() is None or b.group_status().phase != "closed":  # type: ignore[union-attr]
        await asyncio.sleep(0.01)
    return b


def test_an_asyncio_breaker_whose_loop_ended_decides_alone(server: Server) -> None:
    # Others in the group hold the limit: this one's share may be none.
    others = [member(server, "ended", options={"adaptive_limit": (1, 2)}) for _ in range(3)]
    b = asyncio.run(asyncio_member(server, "ended"))
    assert b.group_status() is None, "it left the group with its loop"
    assert b.call(lambda: "ok") == "ok", "its own limit admits"
    for x in others:
        x.leave_group()


def test_a_garbage_collected_breaker_leaves_no_thread(server: Server) -> None:
    import gc

    def threads() -> int:
        return sum(t.name.startswith("halfopen-group") and "gc-" in t.name for t in threading.enumerate())

    group = RedisGroup(server.client(), "gc-leak", flush_interval=0.05)
    for _ in range(20):
        CircuitBreaker("wa", group=group)
    gc.collect()
    until(lambda: threads() == 0, "every link's threads ended")


def test_a_breaker_collected_after_a_failed_exchange_leaves(server: Server) -> None:
    import gc
    import weakref

    events: List[str] = []
    group = RedisGroup(
        server.client(),
        "gc-failed",
        flush_interval=0.05,
        store_timeout=0.04,
        on_degraded=lambda _e: events.append("down"),
        on_recovered=lambda: events.append("up"),
    )
    b = CircuitBreaker("wa", group=group)
    joined(b)
    server.client().execute_command("CLIENT", "PAUSE", "300", "ALL")
    until(lambda: "up" in events, "a failed exchange, then an answer")
    ref = weakref.ref(b)
    del b
    gc.collect()
    until(lambda: ref() is None, "the breaker collected")
    until(
        lambda: not any(t.name.endswith("gc-failed") for t in threading.enumerate()),
        "its threads ended",
    )


def test_an_asyncio_breaker_whose_loop_was_closed_decides_alone(server: Server) -> None:
    others = [member(server, "closed-loop", options={"adaptive_limit": (1, 2)}) for _ in range(3)]
    loop = asyncio.new_event_loop()
    b = loop.run_until_complete(asyncio_member(server, "closed-loop"))
    loop.close()  # its task is never cancelled
    admitted = [0]

    def admits() -> bool:
        try:
            with b:
                admitted[0] += 1
        except CircuitBreakerError:
            pass
        return admitted[0] > 0

    # Its share lapses (no exchange renews it), and its own limit admits.
    until(admits, "a call admitted")
    assert b.group_status() is None, "it left the group with its loop"
    for x in others:
        x.leave_group()


def test_a_store_that_lost_the_limit_starts_it_again(server: Server) -> None:
    breakers = [member(server, "lost-limit", options={"adaptive_limit": (1, 2)}) for _ in range(3)]
    joined(*breakers)
    r = server.client()
    until(lambda: r.hget("halfopen:v2:{lost-limit}", "limit") is not None, "a limit")
    r.delete("halfopen:v2:{lost-limit}")
    # Every breaker keeps trying: the group's limit comes back, and calls go
    # through (no process holds on to a share of a limit that is gone).
    admitted = [0, 0, 0]

    def calls() -> bool:
        for i, b in enumerate(breakers):
            try:
                with b:
                    admitted[i] += 1
            except CircuitBreakerError:
                pass
        return min(admitted) >= 3 and r.hget("halfopen:v2:{lost-limit}", "limit") is not None

    until(calls, "calls admitted again in every breaker")
    for b in breakers:
        b.leave_group()


def test_a_force_open_received_by_one_process_opens_the_whole_group(server: Server) -> None:
    breakers = [member(server, "forced") for _ in range(3)]
    joined(*breakers)
    reasons: List[str] = []
    breakers[2].on_state_change(lambda change: reasons.append(change.reason))
    with pytest.raises(ValueError) as e:
        breakers[0].group_force_open(float("nan"))
    assert e.value.option == "seconds"  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        CircuitBreaker("alone").group_force_open(10.0)
    breakers[0].group_force_open(60.0)
    assert breakers[0].state is State.OPEN, "this one at once"
    until(lambda: all(b.state is State.OPEN for b in breakers), "every member open")
    assert reasons == ["forced_open"], reasons
    with pytest.raises(CircuitBreakerError):
        breakers[1].call(lambda: "ok")
    for b in breakers:
        b.leave_group()


@pytest.mark.parametrize("method,reason", [("group_force_close", "forced_close"), ("group_reset", "reset")])
def test_a_force_close_or_reset_received_by_one_process_closes_the_whole_group(
    server: Server, method: str, reason: str
) -> None:
    breakers = [member(server, f"closed-{reason}") for _ in range(3)]
    joined(*breakers)
    with pytest.raises(TypeError):
        getattr(CircuitBreaker("alone"), method)()
    breakers[0].group_force_open(600.0)
    until(lambda: all(b.state is State.OPEN for b in breakers), "every member open")
    reasons: List[str] = []
    breakers[2].on_state_change(lambda change: reasons.append(change.reason))
    getattr(breakers[1], method)()
    assert breakers[1].state is State.CLOSED, "this one at once"
    until(lambda: all(b.state is State.CLOSED for b in breakers), "every member closed")
    assert reasons == [reason], reasons
    assert breakers[0].call(lambda: "ok") == "ok"
    for b in breakers:
        b.leave_group()


def test_anything_that_stops_an_exchange_fails_it_and_on_degraded_gets_the_error(server: Server) -> None:
    errors: List[BaseException] = []
    g = RedisGroup(server.client(), "stopped", flush_interval=0.05, store_timeout=0.04, on_degraded=errors.append)
    b = CircuitBreaker("wa", group=g, **OPTIONS)
    joined(b)
    script = g._script

    def interrupted(**_: Any) -> Any:
        raise SystemExit("the script was interrupted")

    g._script = interrupted
    until(lambda: len(errors) >= 1, "degraded")
    assert isinstance(errors[0], SystemExit), errors
    g._script = script
    until(lambda: not b.group_status().degraded, "recovered")  # type: ignore[union-attr]
    b.leave_group()


def test_the_package_exports_the_group_api() -> None:
    assert halfopen.RedisGroup is RedisGroup
    assert "RedisGroup" in halfopen.__all__ and "GroupStatus" in halfopen.__all__
    assert sys.modules["halfopen.group"].__doc__
