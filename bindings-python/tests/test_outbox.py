"""``Outbox`` against a real redis-server (issue 24): what ``submit``
promises (stored, or a typed error: never an acceptance that is not
stored), delivery in the log's order with removal, dead letters with their
reason, a Redis down or full, a closed process handing the log over, a
Redis killed and restarted with AOF, options checked, and one log shared
with a Node process (Python submits, Node delivers; then the other way).
Every wait is for the outbox's own word, Redis's or the partner's."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Set, Tuple

import pytest
import redis.asyncio
import redis.exceptions

from halfopen import Outbox, OutboxEvent, PersistenceWarning, RetentionFullError, StateNotResumedWarning, StoreUnavailableError
from test_group import Server, free_port

ROOT = Path(__file__).resolve().parents[2]
NODE_SENDER = ROOT / "bindings-node" / "test" / "support" / "outbox-sender.js"

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (make setup-redis)")

FAST: Dict[str, Any] = dict(
    concurrency_limit=1, timeout=0.2, store_timeout=0.5, poll_interval=0.02, failure_threshold=3, open_timeout=0.1, max_open_timeout=0.1
)


#: The breaker options of the Node sender (test/support/outbox-sender.js), as Python spells them.
NODE_SENDER_OPTIONS: Dict[str, Any] = dict(
    concurrency_limit=1, failure_threshold=5, open_timeout=0.2, max_open_timeout=0.2, timeout=0.3, store_timeout=0.5, poll_interval=0.05, page_size=200
)


class AofServer(Server):
    """A redis-server with AOF (``appendfsync always``) in a directory of its own, killed and restarted at will."""

    def __init__(self, *extra: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="halfopen-outbox-")
        super().__init__("--appendonly", "yes", "--appendfsync", "always", "--dir", self.dir, *extra)

    def client(self) -> "redis.asyncio.Redis[bytes]":  # type: ignore[override]
        return redis.asyncio.Redis(host="127.0.0.1", port=self.port, socket_timeout=2.0, socket_connect_timeout=0.5)


@contextlib.contextmanager
def full_redis() -> Iterator[AofServer]:
    """A redis-server of its own that refuses writes past ``maxmemory`` (``noeviction``)."""
    full = AofServer("--maxmemory-policy", "noeviction")
    try:
        yield full
    finally:
        full.kill()
        shutil.rmtree(full.dir, ignore_errors=True)


async def overfill(admin: "redis.asyncio.Redis[bytes]") -> None:
    """Well past its limit: 1 MB held, a limit of 100 kB."""
    for i in range(10):
        await admin.set(f"filler:{i}", "x" * 100_000)
    await admin.config_set("maxmemory", "100kb")


@pytest.fixture(scope="module")
def server() -> Iterator[AofServer]:
    s = AofServer()
    yield s
    s.kill()
    shutil.rmtree(s.dir, ignore_errors=True)


async def until(check: Callable[[], Any], what: str, limit: float = 30.0) -> None:
    """Waits for `check()` (the system's own answer); the limit only ends a broken test."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not await _value(check()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _value(v: Any) -> Any:
    return await v if asyncio.iscoroutine(v) else v


def log_key(partner: str) -> str:
    return f"halfopen:outbox:v1:{{{partner}}}:log"


def test_options_and_events_are_checked_and_nothing_refused_reaches_redis(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        base: Dict[str, Any] = dict(concurrency_limit=1)

        def wrong(exc: type, option: str, *args: Any, **options: Any) -> None:
            given = args or (client, "checked", send)
            with pytest.raises(exc) as e:
                Outbox(*given, **{**base, **options})
            assert getattr(e.value, "option", None) == option, e.value

        wrong(TypeError, "redis", object(), "p", send)
        wrong(ValueError, "partner", client, "a{b", send)
        wrong(TypeError, "partner", client, 7, send)
        wrong(TypeError, "send", client, "p", 1)
        wrong(TypeError, "max_bytes", max_bytes=10)
        wrong(TypeError, "overflow", overflow="drop_oldest")
        wrong(TypeError, "group", group=object())
        wrong(TypeError, "timeout", timeout=None)
        wrong(TypeError, "serializer", serializer=object())
        wrong(ValueError, "page_size", page_size=11, max_messages=10)
        wrong(ValueError, "page_size", page_size=0)
        wrong(TypeError, "page_size", page_size=1.5)
        wrong(ValueError, "lease", lease=1.0, timeout=1.0)
        wrong(ValueError, "poll_interval", poll_interval=float("nan"))
        wrong(ValueError, "poll_interval", poll_interval=0.005)
        wrong(TypeError, "store_timeout", store_timeout="1")
        outbox: Outbox[Any] = Outbox(client, "events", send, concurrency_limit=1)
        for event in (lambda: 1, {1, 2}, b"x", float("nan"), object()):
            with pytest.raises(TypeError) as e:
                await outbox.submit(event)
            assert getattr(e.value, "option", None) == "serializer"
        # As deep as JSON itself goes (the check is no deeper than json.dumps).
        deep: Any = {"n": 1}
        for _ in range(900):
            deep = [deep]
        deep_box: Outbox[Any] = Outbox(client, "deep", send, concurrency_limit=1)
        await deep_box.submit(deep)
        await deep_box.aclose()
        await client.delete(log_key("deep"))
        for key in ("", 1):
            with pytest.raises(TypeError) as e:
                await outbox.submit({}, key=key)  # type: ignore[arg-type]
            assert getattr(e.value, "option", None) == "key"

        class Bad:
            @staticmethod
            def encode(event: Any) -> Any:
                return 1

            @staticmethod
            def decode(text: str) -> Any:
                return text

        with pytest.raises(TypeError):
            await Outbox(client, "events", send, concurrency_limit=1, serializer=Bad).submit({})
        assert await outbox.aclose() == {"unremoved": 0, "lapsed": False}
        assert await client.exists(log_key("events")) == 0
        await client.aclose()

    asyncio.run(main())


def test_submit_returns_once_stored_and_the_holder_delivers_in_order_and_removes(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        sent: List[Any] = []
        events: List[OutboxEvent] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            sent.append((event["n"], key, epoch))

        outbox: Outbox[Any] = await Outbox.open(client, "ordered", send, on_event=events.append, **FAST)
        receipts = await asyncio.gather(*(outbox.submit({"n": n}, key="seven" if n == 7 else None) for n in range(50)))
        stored = {e[0].decode() for e in await client.xrange(log_key("ordered"))}
        assert stored <= {r.id for r in receipts}
        assert receipts[7].key == "seven" and receipts[8].key == receipts[8].id
        await until(lambda: outbox.stats()["removed"] == 50, "every event removed")
        epoch = next(e.epoch for e in events if e.kind == "acquired")
        assert sent == [(n, r.key, epoch) for n, r in enumerate(receipts)]
        assert [e.id for e in events if e.kind == "delivered"] == [r.id for r in receipts]
        assert await client.xlen(log_key("ordered")) == 0
        assert await outbox.aclose() == {"unremoved": 0, "lapsed": False}
        await client.aclose()

    asyncio.run(main())


def test_an_event_given_up_goes_to_the_dead_letters_and_one_that_cannot_be_read_too(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        events: List[OutboxEvent] = []

        class Refused(Exception):
            pass

        async def send(event: Any, *, key: str, epoch: int) -> None:
            if event["bad"]:
                raise Refused("400")

        outbox: Outbox[Any] = await Outbox.open(client, "dead", send, exclude=Refused, on_event=events.append, **FAST)
        good, bad = await asyncio.gather(outbox.submit({"bad": False}), outbox.submit({"bad": True}, key="bad-one"))
        garbled = (await client.xadd(log_key("dead"), {"p": "{not json"})).decode()
        await until(lambda: outbox.stats()["removed"] == 3, "all three out of the log")
        dead = [(e.id, e.key, e.reason) for e in events if e.kind == "dead"]
        assert dead == [(bad.id, "bad-one", "refused"), (garbled, garbled, "undecodable")]
        letters = [{k.decode(): v.decode() for k, v in f.items()} for _, f in await client.xrange("halfopen:outbox:v1:{dead}:dead")]
        assert [(f.get("k"), f["r"], f["i"]) for f in letters] == [("bad-one", "refused", bad.id), (None, "undecodable", garbled)]
        assert json.loads(letters[0]["p"]) == {"bad": True}
        assert good.id < bad.id
        await outbox.aclose()
        await client.aclose()

    asyncio.run(main())


def test_redis_down_or_full_submit_raises_store_unavailable_never_accepts() -> None:
    async def main(full: AofServer) -> None:
        client = full.client()
        admin = full.client()

        async def hang(event: Any, *, key: str, epoch: int) -> None:
            await asyncio.Event().wait()

        outbox: Outbox[Any] = await Outbox.open(client, "full", hang, **FAST)
        assert (await outbox.submit({"n": 0})).id
        await overfill(admin)
        with pytest.raises(StoreUnavailableError) as e:
            await outbox.submit({"n": 1})
        assert e.value.ambiguous is False and e.value.code == "HALFOPEN_STORE_UNAVAILABLE"
        assert isinstance(e.value.__cause__, redis.exceptions.OutOfMemoryError)
        await admin.config_set("maxmemory", "0")
        assert (await outbox.submit({"n": 2})).id
        full.kill()
        results = await asyncio.gather(outbox.submit({"n": 3}), outbox.submit({"n": 4}), return_exceptions=True)
        assert all(isinstance(r, StoreUnavailableError) for r in results), results
        await outbox.aclose()

    with full_redis() as full:
        asyncio.run(main(full))


def test_a_closed_process_hands_the_log_over_and_an_aof_restart_keeps_every_accepted_event() -> None:
    restart = AofServer()

    async def main() -> None:
        async def down(event: Any, *, key: str, epoch: int) -> None:
            raise ConnectionError("partner down")

        a: Outbox[Any] = await Outbox.open(restart.client(), "handover", down, **FAST)
        accepted = [await a.submit({"n": n}) for n in range(100)]
        await a.aclose()
        restart.kill()
        restart.start()
        got: List[Any] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            got.append((event["n"], key))

        b: Outbox[Any] = await Outbox.open(restart.client(), "handover", send, **FAST)
        await until(lambda: b.stats()["removed"] == 100, "every event delivered and removed")
        assert got == [(n, r.key) for n, r in enumerate(accepted)]
        await b.aclose()

    try:
        asyncio.run(main())
    finally:
        restart.kill()
        shutil.rmtree(restart.dir, ignore_errors=True)


def test_redis_without_aof_is_warned_once_with_the_fix() -> None:
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], stdout=subprocess.PIPE)
    assert p.stdout is not None
    for line in p.stdout:
        if b"Ready to accept" in line:
            break

    async def main() -> None:
        client = redis.asyncio.Redis(port=port)

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        with pytest.warns(PersistenceWarning, match="appendonly yes"):
            first: Outbox[Any] = await Outbox.open(client, "volatile", send, concurrency_limit=1)
        await first.aclose()
        await client.aclose()

    try:
        asyncio.run(main())
    finally:
        p.kill()
        p.wait()


class _Partner(http.server.ThreadingHTTPServer):
    """A partner recording every event it accepts, with who sent it."""

    def __init__(self) -> None:
        self.delivered: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        partner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["content-length"]))
                with partner.lock:
                    partner.delivered.append({"key": self.headers["x-key"], "pid": int(self.headers["x-pid"]), "event": json.loads(body)})
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def once(self) -> List[Dict[str, Any]]:
        """What it accepted, each key's first arrival only, in order."""
        with self.lock:
            delivered = list(self.delivered)
        seen: Set[str] = set()
        first = []
        for d in delivered:
            if d["key"] not in seen:
                seen.add(d["key"])
                first.append(d)
        return first

    def repeated(self) -> Set[str]:
        """The keys it accepted more than once."""
        with self.lock:
            keys = [d["key"] for d in self.delivered]
        return {k for k in keys if keys.count(k) > 1}


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_one_log_for_both_languages_python_submits_node_delivers_then_the_other_way(server: AofServer) -> None:
    partner = _Partner()
    node = subprocess.Popen(
        ["node", str(NODE_SENDER), str(server.port), partner.url, "mixed", "0", "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert node.stdin is not None and node.stdout is not None

    # Sends given up at their timeout (they may still arrive: at least once,
    # so a repeat is explained only by one of these), Node's and Python's.
    timed_out: Set[str] = set()

    def heard(what: str) -> Dict[str, Any]:
        assert node.stdout is not None
        for line in node.stdout:
            message: Dict[str, Any] = json.loads(line)
            if message["what"] == "timedOut":
                timed_out.add(message["key"])
            if message["what"] == what:
                return message
        raise AssertionError(f"node ended before saying {what}")

    async def main() -> None:
        heard("acquired")
        acquired = asyncio.Event()

        async def send(event: Any, *, key: str, epoch: int) -> None:
            def post() -> None:
                request = urllib.request.Request(partner.url, data=json.dumps(event).encode(), headers={"x-key": key, "x-pid": str(os.getpid())})
                urllib.request.urlopen(request, timeout=5).read()

            try:
                await asyncio.to_thread(post)
            except asyncio.CancelledError:
                timed_out.add(key)
                raise

        resumed: List[Any] = []

        def on_event(e: OutboxEvent) -> None:
            if e.kind == "acquired":
                resumed.append(e.breaker)
                acquired.set()

        outbox: Outbox[Any] = await Outbox.open(server.client(), "mixed", send, on_event=on_event, **NODE_SENDER_OPTIONS)
        receipts = [await outbox.submit({"from": "python", "n": n, "text": "olá 🎉"}) for n in range(300)]
        # Node holds the lease: it delivers what Python submitted, in order.
        await until(lambda: len(partner.once()) >= 300, "Node delivered Python's events")
        assert [d["event"]["n"] for d in partner.once()] == list(range(300))
        assert {d["pid"] for d in partner.delivered} == {node.pid}
        assert [d["key"] for d in partner.once()] == [r.key for r in receipts]
        assert partner.delivered[0]["event"]["text"] == "olá 🎉"
        # Node closes: Python takes the lease over and delivers from here.
        assert node.stdin is not None
        node.stdin.write(json.dumps({"what": "close"}) + "\n")
        node.stdin.flush()
        assert heard("closed")["unremoved"] == 0
        await asyncio.wait_for(acquired.wait(), 30)
        # The breaker state Node left is resumed here: one configuration, one fingerprint.
        assert resumed == ["resumed"]
        for n in range(300, 350):
            await outbox.submit({"from": "python", "n": n})
        await until(lambda: len(partner.once()) >= 350, "Python delivered its own events")
        await outbox.aclose()
        assert [d["event"]["n"] for d in partner.once()] == list(range(350))
        assert {d["pid"] for d in partner.once()[300:]} == {os.getpid()}
        assert partner.repeated() <= timed_out, "every repeat is of a send given up at its timeout"


    try:
        asyncio.run(main())
    finally:
        node.kill()
        node.wait()
        partner.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_copy_refuses_to_submit(server: AofServer) -> None:
    async def send(event: Any, *, key: str, epoch: int) -> None:
        pass

    async def made() -> "Outbox[Any]":
        return Outbox(server.client(), "forked", send, concurrency_limit=1)

    outbox = asyncio.run(made())
    pid = os.fork()
    if pid == 0:  # the child: its copy (and its lease, if it held one) is not its own
        try:
            asyncio.run(outbox.submit({"n": 1}))
        except RuntimeError as err:
            os._exit(0 if "after the fork" in str(err) else 2)
        except BaseException:  # noqa: BLE001
            os._exit(3)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# Regressions from the hostile review of the Node package, checked here too.


def test_fractions_of_a_millisecond_still_deliver_and_the_epoch_counter_is_kept(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        sent: List[int] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            sent.append(event["n"])

        outbox: Outbox[Any] = await Outbox.open(client, "fractions", send, concurrency_limit=1, timeout=0.2503, store_timeout=0.3333, lease=3.0005)
        await outbox.submit({"n": 1})
        await until(lambda: outbox.stats()["removed"] == 1, "delivered")
        assert sent == [1] and outbox.stats()["store_errors"] == 0
        assert await client.pttl("halfopen:outbox:v1:{fractions}:epoch") == -1
        await outbox.aclose()
        await client.aclose()

    asyncio.run(main())


def test_close_waits_for_the_sends_of_every_grant_and_a_successor_never_overlaps(server: AofServer) -> None:
    async def main() -> None:
        admin = server.client()
        running: set[str] = set()
        overlaps: List[str] = []
        events: List[OutboxEvent] = []

        def sender(name: str, seconds: float) -> Callable[..., Any]:
            async def send(event: Any, *, key: str, epoch: int) -> None:
                overlaps.extend(f"{name}:{event['n']} while {o}" for o in running if not o.startswith(name))
                running.add(f"{name}:{event['n']}")
                try:
                    await asyncio.sleep(seconds)
                finally:
                    running.discard(f"{name}:{event['n']}")

            return send

        options = dict(concurrency_limit=1, timeout=0.6, store_timeout=0.2, poll_interval=0.02)
        a: Outbox[Any] = await Outbox.open(server.client(), "regrant", sender("A", 0.55), on_event=events.append, **options)
        await until(a.is_deliverer, "A delivers")
        for n in range(8):
            await a.submit({"n": n})
        await until(lambda: running, "a send runs")
        await admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
        await until(lambda: any(e.kind == "lost" for e in events), "A lost its lease")
        assert running, "a send of the lost grant runs on"
        await admin.execute_command("CLIENT", "UNPAUSE")
        await until(lambda: [e.kind for e in events].count("acquired") == 2, "A holds it again")
        b: Outbox[Any] = await Outbox.open(server.client(), "regrant", sender("B", 0.005), **options)
        await a.aclose()
        assert not running, "aclose returned after every send it started"
        await until(lambda: b.stats()["removed"] > 0 and not running, "B delivers")
        assert overlaps == []
        await b.aclose()
        await admin.aclose()

    asyncio.run(main())


def test_a_full_redis_is_drained_by_its_holder() -> None:
    async def main(full: AofServer) -> None:
        admin = full.client()
        up = False

        async def send(event: Any, *, key: str, epoch: int) -> None:
            if not up:
                raise ConnectionError("partner down")

        outbox: Outbox[Any] = await Outbox.open(full.client(), "drained", send, **FAST)
        for n in range(200):
            await outbox.submit({"n": n})
        await overfill(admin)
        with pytest.raises(StoreUnavailableError):
            await outbox.submit({"n": 200})
        up = True
        await until(lambda: outbox.stats()["removed"] == 200, "the backlog delivered and removed")
        assert await admin.xlen(log_key("drained")) == 0
        assert outbox.is_deliverer()
        await outbox.aclose()

    with full_redis() as full:
        asyncio.run(main(full))


def test_a_grant_while_closing_is_given_back_and_close_waits_for_a_pipeline_sent(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        a: Outbox[Any] = await Outbox.open(client, "brief", send, **FAST)
        await asyncio.sleep(0)
        submitted = asyncio.ensure_future(a.submit({"n": 1}))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert await a.aclose() == {"unremoved": 0, "lapsed": False}
        assert submitted.done(), "the submit out settled before aclose returned"
        assert await client.exists("halfopen:outbox:v1:{brief}:lease") == 0
        got = asyncio.Event()
        b: Outbox[Any] = await Outbox.open(client, "brief", send, on_event=lambda e: e.kind == "acquired" and got.set(), **FAST)
        await asyncio.wait_for(got.wait(), 5)
        await b.aclose()
        await client.aclose()

    asyncio.run(main())


def test_a_holder_that_closes_removes_what_it_delivered_before_it_gives_the_lease_back(server: AofServer) -> None:
    async def main() -> None:
        client, admin = server.client(), server.client()
        sent: List[int] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            sent.append(event["n"])

        closing: List["asyncio.Future[Dict[str, int]]"] = []

        def on_event(e: OutboxEvent) -> None:
            if e.kind == "store_error" and e.operation == "remove" and not closing:
                closing.append(asyncio.ensure_future(a.aclose()))

        a: Outbox[Any] = await Outbox.open(client, "handback", send, on_event=on_event, **FAST)
        # What the log holds when the lease goes back (the lease script with TTL 0).
        at_release: List[int] = []
        lease = a._lease_script

        async def watched(*, keys: Any, args: Any) -> Any:
            if args[1] == "0":
                at_release.append(await admin.xlen(log_key("handback")))
            return await lease(keys=keys, args=args)

        a._lease_script = watched  # type: ignore[assignment]
        # The first removal fails (its retry is then pending), and the holder closes at once.
        xdel = client.xdel

        async def lost_once(*args: Any) -> Any:
            if not closing:
                raise redis.exceptions.ConnectionError("the removal is lost")
            return await xdel(*args)

        client.xdel = lost_once  # type: ignore[method-assign]
        for n in range(50):
            asyncio.ensure_future(a.submit({"n": n}))
        await until(lambda: bool(closing), "the failed removal")
        assert await closing[0] == {"unremoved": 0, "lapsed": False}
        assert sent and sent == list(range(len(sent)))
        assert at_release == [50 - len(sent)], "every delivered event was out of the log before the lease went back"
        again: List[int] = []

        async def send_again(event: Any, *, key: str, epoch: int) -> None:
            again.append(event["n"])

        b: Outbox[Any] = await Outbox.open(admin, "handback", send_again, **FAST)
        await b.submit({"n": 50})
        await until(lambda: 50 in again, "the next holder's delivery")
        assert again == list(range(len(sent), 51)), "the rest, once each"
        await b.aclose()
        for c in (client, admin):
            await c.aclose()

    asyncio.run(main())


def _pause_writes_after_closing_renewal(a: "Outbox[Any]", admin: "redis.asyncio.Redis[bytes]", gate: asyncio.Event) -> None:
    """Once ``a``'s closing renewal is answered, Redis stops taking writes; then ``gate`` opens (the send in flight ends)."""
    lease = a._lease_script

    async def then_paused(*, keys: Any, args: Any) -> Any:
        reply = await lease(keys=keys, args=args)
        if a._closed and args[1] != "0":
            await admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
            gate.set()
        return reply

    a._lease_script = then_paused  # type: ignore[assignment]


def test_a_removal_that_fails_as_the_holder_closes_is_retried_while_the_lease_leaves_room(server: AofServer) -> None:
    async def main() -> None:
        client, admin = server.client(), server.client()
        gate, started = asyncio.Event(), asyncio.Event()
        sent: List[int] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            started.set()
            await gate.wait()
            sent.append(event["n"])

        errors: List[str] = []
        unpaused: List["asyncio.Future[Any]"] = []

        def on_event(e: OutboxEvent) -> None:
            # The first removal failing (writes paused past the store timeout): Redis takes writes again.
            if e.kind == "store_error":
                errors.append(str(e.operation))
                if e.operation == "remove":
                    unpaused.append(asyncio.ensure_future(admin.execute_command("CLIENT", "UNPAUSE")))

        # (A lease of 9 s: room for a failed removal and its retry after the renewal as aclose begins.)
        a: Outbox[Any] = await Outbox.open(client, "closeretry", send, on_event=on_event, **{**FAST, "timeout": 2.0})
        for n in range(5):
            await a.submit({"n": n})
        await asyncio.wait_for(started.wait(), 10)
        # As aclose renews the lease (confirmed), Redis stops taking writes; then the send in flight ends.
        _pause_writes_after_closing_renewal(a, admin, gate)
        assert await a.aclose() == {"unremoved": 0, "lapsed": False}
        await asyncio.gather(*unpaused)
        assert sent == [0]
        assert errors == ["remove"], "one failed removal, then its retry went through"
        left = [json.loads(fields[b"p"])["n"] for _, fields in await admin.xrange(log_key("closeretry"))]
        assert left == [1, 2, 3, 4], "the delivered event is out of the log, the rest is in it"
        for c in (client, admin):
            await c.aclose()

    asyncio.run(main())


async def _closing_holder(server: AofServer, partner: str, gate: asyncio.Event, errors: List[str]) -> "Tuple[Outbox[Any], List[int]]":
    """A holder of three events whose first send waits for ``gate`` (the others stay in the log)."""
    sent: List[int] = []
    started = asyncio.Event()

    async def send(event: Any, *, key: str, epoch: int) -> None:
        started.set()
        await gate.wait()
        sent.append(event["n"])

    def on_event(e: OutboxEvent) -> None:
        if e.kind == "store_error":
            errors.append(str(e.operation))

    # (A lease of 9 s: room for every try.)
    a: Outbox[Any] = await Outbox.open(server.client(), partner, send, on_event=on_event, **{**FAST, "timeout": 2.0})
    for n in range(3):
        await a.submit({"n": n})
    await asyncio.wait_for(started.wait(), 10)
    return a, sent


def test_a_removal_that_keeps_failing_as_the_holder_closes_is_tried_four_times(server: AofServer) -> None:
    async def main() -> None:
        admin = server.client()
        gate = asyncio.Event()
        errors: List[str] = []
        a, sent = await _closing_holder(server, "closefails", gate, errors)
        _pause_writes_after_closing_renewal(a, admin, gate)
        try:
            closed = await a.aclose()
        finally:
            await admin.execute_command("CLIENT", "UNPAUSE")
        assert closed["unremoved"] == 1 and sent == [0]
        assert errors[:4] == ["remove"] * 4 and errors.count("remove") == 4, errors
        await admin.aclose()

    asyncio.run(main())


def test_a_closing_renewal_redis_refuses_stops_the_retries(server: AofServer) -> None:
    async def main() -> None:
        admin = server.client()
        gate = asyncio.Event()
        errors: List[str] = []
        a, sent = await _closing_holder(server, "closetaken", gate, errors)
        lease_key = "halfopen:outbox:v1:{closetaken}:lease"
        lease = a._lease_script

        async def taken(*, keys: Any, args: Any) -> Any:
            if not (a._closed and args[1] != "0"):
                return await lease(keys=keys, args=args)
            # As aclose renews it, the lease has run out and another process holds it.
            await admin.set(lease_key, "elsewhere 99", px=60_000)
            reply = await lease(keys=keys, args=args)
            await admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
            gate.set()
            return reply

        a._lease_script = taken  # type: ignore[assignment]
        try:
            assert await a.aclose() == {"unremoved": 1, "lapsed": True}
        finally:
            await admin.execute_command("CLIENT", "UNPAUSE")
        assert sent == [0]
        assert errors == ["remove", "lease"], "one removal try, then the release (paused too)"
        assert await admin.get(lease_key) == b"elsewhere 99"
        await admin.aclose()

    asyncio.run(main())


def test_one_removal_try_makes_its_dead_letter_calls_at_once(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        a: Outbox[Any] = await Outbox.open(client, "deadonce", send, **{**FAST, "timeout": 2.0})
        await a.submit({"n": 0})
        await until(lambda: a.stats()["removed"] == 1, "the holder's first delivery")
        # Redis never answers a dead-letter call: each try's calls are out together.
        out, most = [0], [0]

        async def unanswered(*, keys: Any, args: Any) -> Any:
            out[0] += 1
            most[0] = max(most[0], out[0])
            try:
                await asyncio.Event().wait()
            finally:
                out[0] -= 1

        a._dead_script = unanswered  # type: ignore[assignment]
        for _ in range(5):
            await client.xadd(log_key("deadonce"), {"p": "{not json"})
        await until(lambda: most[0] == 5, "a try with its five dead letters at once")
        closed = await a.aclose()
        assert closed["unremoved"] == 5
        assert out[0] == 0, "every call of a try ends with it"
        await client.aclose()

    asyncio.run(main())


def test_a_lease_that_ran_out_before_aclose_is_said_and_the_next_holder_keeps_its_lease(server: AofServer) -> None:
    async def main() -> None:
        client, admin = server.client(), server.client()
        lease_key = "halfopen:outbox:v1:{lapsed}:lease"

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        acquired = asyncio.Event()
        a: Outbox[Any] = await Outbox.open(client, "lapsed", send, on_event=lambda e: e.kind == "acquired" and acquired.set(), **FAST)
        await asyncio.wait_for(acquired.wait(), 5)
        # As aclose renews it, the lease has run out and another process holds it.
        lease = a._lease_script
        closing = [False]

        async def taken(*, keys: Any, args: Any) -> Any:
            if closing[0] and args[1] != "0":
                await admin.set(lease_key, "elsewhere 99", px=60_000)
            return await lease(keys=keys, args=args)

        a._lease_script = taken  # type: ignore[assignment]
        closing[0] = True
        assert await a.aclose() == {"unremoved": 0, "lapsed": True}
        assert await admin.get(lease_key) == b"elsewhere 99", "aclose gave back only its own lease"
        # A renewal Redis does not answer: it may lapse, and aclose says so.
        await admin.delete(lease_key)
        acquired.clear()
        errors: List[str] = []

        def on_event(e: OutboxEvent) -> None:
            if e.kind == "acquired":
                acquired.set()
            elif e.kind == "store_error":
                errors.append(str(e.operation))

        b: Outbox[Any] = await Outbox.open(client, "lapsed", send, on_event=on_event, **FAST)
        await asyncio.wait_for(acquired.wait(), 5)
        lease_b = b._lease_script

        async def unanswered(*, keys: Any, args: Any) -> Any:
            if args[1] != "0":
                raise redis.exceptions.ConnectionError("no answer")
            return await lease_b(keys=keys, args=args)

        b._lease_script = unanswered  # type: ignore[assignment]
        assert await b.aclose() == {"unremoved": 0, "lapsed": True}
        assert errors == ["lease"]
        assert await admin.exists(lease_key) == 0
        for c in (client, admin):
            await c.aclose()

    asyncio.run(main())


def test_an_event_its_dispatcher_does_not_take_is_a_dead_letter_full_never_skipped(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        sent: List[int] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            sent.append(event["n"])

        dead: List[Any] = []
        acquired = asyncio.Event()

        def on_event(e: OutboxEvent) -> None:
            if e.kind == "acquired":
                acquired.set()
            elif e.kind == "dead":
                dead.append((e.key, e.reason, isinstance(e.error, RetentionFullError)))

        outbox: Outbox[Any] = await Outbox.open(client, "refusedelse", send, on_event=on_event, **FAST)
        await asyncio.wait_for(acquired.wait(), 5)
        d = outbox._dispatcher
        assert d is not None
        submit = d.submit

        async def refusing(entry: Any) -> None:
            if entry.event["n"] == 3:
                raise RetentionFullError("refusedelse")
            await submit(entry)

        d.submit = refusing  # type: ignore[method-assign]
        for n in range(6):
            await outbox.submit({"n": n}, key=f"e{n}")
        await until(lambda: len(sent) == 5 and len(dead) == 1, "the deliveries and the dead letter")
        assert sent == [0, 1, 2, 4, 5]
        assert dead == [("e3", "full", True)]
        await outbox.aclose()
        letters = await client.xrange("halfopen:outbox:v1:{refusedelse}:dead")
        assert [fields[b"r"] for _, fields in letters] == [b"full"]
        assert await client.xlen(log_key("refusedelse")) == 0
        await client.aclose()

    asyncio.run(main())


def test_a_lease_granted_after_its_call_timed_out_is_given_back_by_aclose(server: AofServer) -> None:
    async def main() -> None:
        client, admin = server.client(), server.client()

        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        # (Wrapped as open returns: its first lease call is at the next iteration.)
        a: Outbox[Any] = await Outbox.open(client, "late", send, **FAST)
        lease = a._lease_script
        granted: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        kept: List["asyncio.Future[Any]"] = []
        calls = [0]

        async def late(*, keys: Any, args: Any) -> Any:
            if args[1] == "0":
                return await lease(keys=keys, args=args)
            # The first call reaches Redis after the store timeout (0.5 s) gave up on it; later ones fail.
            calls[0] += 1
            if calls[0] > 1:
                raise redis.exceptions.ConnectionError("no answer")

            async def landing() -> Any:
                await asyncio.sleep(0.7)
                reply = await lease(keys=keys, args=args)
                granted.set_result(reply)
                return reply

            # (The call is abandoned at its timeout; its landing goes on, as a command sent does.)
            kept.append(asyncio.ensure_future(landing()))
            return await asyncio.shield(kept[-1])

        a._lease_script = late  # type: ignore[assignment]
        reply = await asyncio.wait_for(asyncio.shield(granted), 10)
        assert int(reply[0]) == 1, "Redis granted it"
        assert not a.is_deliverer(), "this process never heard the grant"
        assert await a.aclose() == {"unremoved": 0, "lapsed": False}
        assert await admin.exists("halfopen:outbox:v1:{late}:lease") == 0, "given back: the next process need not wait a lease"
        for c in (client, admin):
            await c.aclose()

    asyncio.run(main())


def test_a_dead_letter_retried_after_a_late_answer_is_written_once_and_serializers(server: AofServer) -> None:
    async def main() -> None:
        client, admin = server.client(), server.client()
        events: List[OutboxEvent] = []

        class Refused(Exception):
            pass

        async def refuse(event: Any, *, key: str, epoch: int) -> None:
            raise Refused("400")

        outbox: Outbox[Any] = await Outbox.open(client, "once", refuse, exclude=Refused, on_event=events.append, **{**FAST, "store_timeout": 0.2})
        await outbox.submit({"n": 1})
        await until(lambda: any(e.kind == "dead" for e in events), "given up")
        await admin.execute_command("CLIENT", "PAUSE", "500", "WRITE")
        await until(lambda: outbox.stats()["removed"] == 1, "out of the log")
        assert await admin.xlen("halfopen:outbox:v1:{once}:dead") == 1
        # JSON would change these: refused; a serializer of its own carries them.
        class Level(enum.IntEnum):
            HIGH = 1

        class Name(str, enum.Enum):
            A = "a"

        deep_enum = {"a": [{"level": Level.HIGH}]}
        for event in ((1, 2), {1: "a"}, {"s": {1}}, Level.HIGH, deep_enum, collections.OrderedDict(a=1), [True, (1,)], {Name.A: 1}):
            with pytest.raises(TypeError) as e:
                await outbox.submit(event)
            assert getattr(e.value, "option", None) == "serializer"
        await outbox.aclose()

        class Sets:
            @staticmethod
            def encode(event: Any) -> str:
                return json.dumps(sorted(event))

            @staticmethod
            def decode(text: str) -> Any:
                return set(json.loads(text))

        got: List[Any] = []

        async def keep(event: Any, *, key: str, epoch: int) -> None:
            got.append(event)

        sets: Outbox[Any] = await Outbox.open(client, "sets", keep, serializer=Sets, **FAST)
        await sets.submit({3, 1})
        await until(lambda: sets.stats()["removed"] == 1, "delivered")
        assert got == [{1, 3}]

        async def listener(e: OutboxEvent) -> None:
            pass

        with pytest.raises(TypeError) as e:
            Outbox(client, "x", keep, concurrency_limit=1, on_event=listener)  # type: ignore[arg-type]
        assert getattr(e.value, "option", None) == "on_event"
        await sets.aclose()
        await client.aclose()
        await admin.aclose()

    asyncio.run(main())


# Regressions from the hostile review of the Python package.


def test_submits_keep_their_order_across_loop_iterations_and_bad_text_is_refused_alone(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()

        def send(event: Any, *, key: str, epoch: int) -> None:  # a plain function: its value is its outcome
            sent.append(event["n"])

        sent: List[int] = []
        outbox: Outbox[Any] = await Outbox.open(client, "in-order", send, **FAST)
        receipts = []
        for n in range(200):
            receipts.append(asyncio.ensure_future(outbox.submit({"n": n})))
            await asyncio.sleep(0)
        ids = [(await r).id for r in receipts]
        assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
        await until(lambda: outbox.stats()["removed"] == 200, "delivered")
        assert sent == list(range(200))
        # A lone surrogate is refused by itself; the others of its iteration are stored.
        results = await asyncio.gather(outbox.submit({"n": 1}), outbox.submit({"s": "\ud800"}), outbox.submit({"n": 2}), return_exceptions=True)
        assert isinstance(results[1], TypeError) and getattr(results[1], "option", None) == "serializer"
        assert all(not isinstance(r, BaseException) for r in (results[0], results[2])), results
        with pytest.raises(TypeError) as e:
            await outbox.submit({}, key="\udc80")
        assert getattr(e.value, "option", None) == "key"
        with pytest.raises(TypeError) as e:
            Outbox(client, "x", send, concurrency_limit=1, size=len)
        assert getattr(e.value, "option", None) == "size"
        await outbox.aclose()
        await client.aclose()

    asyncio.run(main())


def test_aclose_is_one_close_says_released_and_a_foreign_entry_is_a_dead_letter(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        events: List[OutboxEvent] = []

        async def slow(event: Any, *, key: str, epoch: int) -> None:
            await asyncio.sleep(0.1)

        outbox: Outbox[Any] = await Outbox.open(client, "one-close", slow, on_event=events.append, **FAST)
        await client.xadd(log_key("one-close"), {b"p": b"\xff\xfe"})
        await outbox.submit({"n": 1})
        await until(lambda: any(e.kind == "dead" for e in events), "the foreign entry given up")
        assert [e.reason for e in events if e.kind == "dead"] == ["undecodable"]
        await until(lambda: outbox.stats()["held"] == 1, "the send out")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(outbox.aclose(), 0.01)
        first, second = await asyncio.gather(outbox.aclose(), outbox.aclose())
        assert first == second == {"unremoved": 0, "lapsed": False}
        assert await client.exists("halfopen:outbox:v1:{one-close}:lease") == 0
        assert await client.xlen(log_key("one-close")) == 0
        assert [(e.kind, e.reason) for e in events if e.kind == "lost"] == [("lost", "released")]
        assert outbox.stats()["epoch"] is None and outbox.stats()["held"] == 0
        await client.aclose()

    asyncio.run(main())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_copy_leaves_the_lease_alone_and_another_loop_is_refused(server: AofServer) -> None:
    async def send(event: Any, *, key: str, epoch: int) -> None:
        pass

    async def holder() -> "Outbox[Any]":
        outbox: Outbox[Any] = await Outbox.open(server.client(), "fork-lease", send, **FAST)
        await until(outbox.is_deliverer, "it delivers")
        return outbox

    outbox = asyncio.run(holder())
    pid = os.fork()
    if pid == 0:
        try:
            closed = asyncio.run(outbox.aclose())
            os._exit(0 if closed == {"unremoved": 0, "lapsed": False} else 2)
        except BaseException:  # noqa: BLE001
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    async def check() -> None:
        client = server.client()
        assert (await client.get("halfopen:outbox:v1:{fork-lease}:lease")) is not None, "the parent's lease is still there"
        with pytest.raises(RuntimeError, match="another event loop"):
            await outbox.submit({"n": 1})
        await client.aclose()

    asyncio.run(check())


def test_a_client_that_raises_at_once_is_a_store_error_never_a_hung_submit(server: AofServer) -> None:
    class Broken(redis.asyncio.Redis):  # type: ignore[type-arg]
        def pipeline(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.exceptions.ConnectionError("no connection to give")

    async def main() -> None:
        async def send(event: Any, *, key: str, epoch: int) -> None:
            pass

        outbox: Outbox[Any] = await Outbox.open(Broken(host="127.0.0.1", port=server.port), "broken", send, **FAST)
        with pytest.raises(StoreUnavailableError) as e:
            await asyncio.wait_for(outbox.submit({"n": 1}), 5)
        assert e.value.ambiguous and isinstance(e.value.__cause__, redis.exceptions.ConnectionError)
        await outbox.aclose()

    asyncio.run(main())


def test_the_breaker_goes_with_the_lease_and_one_configured_otherwise_starts_closed_with_a_warning(server: AofServer) -> None:
    partner = "carried"
    options = dict(FAST, failure_threshold=3, open_timeout=1.0, max_open_timeout=1.0)

    async def main() -> None:
        client = server.client()
        sent_by_a = 0

        async def down(event: Any, *, key: str, epoch: int) -> None:
            nonlocal sent_by_a
            sent_by_a += 1
            raise ConnectionError("partner down")

        a: Outbox[Any] = await Outbox.open(client, partner, down, **options)
        for n in range(5):
            await a.submit({"n": n})
        await until(lambda: a._dispatcher is not None and a._dispatcher.state.name == "OPEN", "A tripped")

        # The change went to Redis with a renewal, before any close.
        async def left_open() -> bool:
            text = await client.hget(f"halfopen:outbox:v1:{{{partner}}}:breaker", "s")
            return text is not None and json.loads(text)["phase"] == "open"

        await until(left_open, "A's open breaker in Redis")
        await a.aclose()
        assert sent_by_a == 3

        order: List[str] = []
        events_b: List[OutboxEvent] = []

        async def up(event: Any, *, key: str, epoch: int) -> None:
            order.append(f"send {event['n']}")

        def on_b(e: OutboxEvent) -> None:
            events_b.append(e)
            if e.kind == "transition" and e.transition.to_state.name == "HALF_OPEN":
                order.append("half_open")

        b: Outbox[Any] = await Outbox.open(client, partner, up, on_event=on_b, **options)
        await until(lambda: any(e.kind == "acquired" for e in events_b), "B acquired")
        assert [e.breaker for e in events_b if e.kind == "acquired"] == ["resumed"]
        assert b._dispatcher is not None and b._dispatcher.state.name == "OPEN"
        await until(lambda: b.stats()["removed"] == 5, "B delivered all")
        assert order == ["half_open"] + [f"send {n}" for n in range(5)]
        await b.aclose()

        # One configured otherwise does not take it, and a warning says why.
        events_c: List[OutboxEvent] = []
        with pytest.warns(StateNotResumedWarning) as caught:
            c: Outbox[Any] = await Outbox.open(client, partner, up, on_event=events_c.append, **dict(options, failure_threshold=4))
            await until(lambda: any(e.kind == "acquired" for e in events_c), "C acquired")
        assert [e.breaker for e in events_c if e.kind == "acquired"] == ["config_mismatch"]
        assert [getattr(w.message, "kind", None) for w in caught if isinstance(w.message, StateNotResumedWarning)] == ["config_mismatch"]
        assert c._dispatcher is not None and c._dispatcher.state.name == "CLOSED"
        await c.aclose()

        # Garbage in Redis (not even UTF-8): a warning, never a crash.
        await client.hset(f"halfopen:outbox:v1:{{{partner}}}:breaker", mapping={"s": b"\xff{garbage", "t": "0"})
        events_d: List[OutboxEvent] = []
        with pytest.warns(StateNotResumedWarning):
            d: Outbox[Any] = await Outbox.open(client, partner, up, on_event=events_d.append, **options)
            await until(lambda: any(e.kind == "acquired" for e in events_d), "D acquired")
        assert [e.breaker for e in events_d if e.kind == "acquired"] == ["malformed"]
        await d.aclose()
        await client.aclose()

    asyncio.run(main())


def test_a_grant_whose_answer_came_too_late_still_hands_on_the_state_left(server: AofServer) -> None:
    partner = "carried-late"
    options = dict(FAST, failure_threshold=1, open_timeout=60.0, max_open_timeout=60.0)

    async def down(event: Any, *, key: str, epoch: int) -> None:
        raise ConnectionError("partner down")

    async def main() -> None:
        client = server.client()
        a: Outbox[Any] = await Outbox.open(client, partner, down, **options)
        await a.submit({"n": 0})
        await until(lambda: a._dispatcher is not None and a._dispatcher.state.name == "OPEN", "A tripped")
        await a.aclose()
        # B's first lease call is granted, but its answer comes after the store timeout.
        late = server.client()
        register = late.register_script
        first = [True]

        def slowed(text: str) -> Any:
            script = register(text)
            if "fenced register" not in text:
                return script

            async def call(keys: Any, args: Any) -> Any:
                reply = await script(keys=keys, args=args)
                if first[0]:
                    first[0] = False
                    await asyncio.sleep(0.7)
                return reply

            return call

        late.register_script = slowed  # type: ignore[method-assign]
        events: List[OutboxEvent] = []
        b: Outbox[Any] = await Outbox.open(late, partner, down, on_event=events.append, **options)
        await until(lambda: any(e.kind == "acquired" for e in events), "B acquired")
        assert [e.operation for e in events if e.kind == "store_error"] == ["lease"]
        assert [e.breaker for e in events if e.kind == "acquired"] == ["resumed"]
        assert b._dispatcher is not None and b._dispatcher.state.name == "OPEN"
        await b.aclose()
        text = await client.hget(f"halfopen:outbox:v1:{{{partner}}}:breaker", "s")
        assert text is not None and json.loads(text)["phase"] == "open", "what B left is still open"
        await client.aclose()
        await late.aclose()

    asyncio.run(main())
