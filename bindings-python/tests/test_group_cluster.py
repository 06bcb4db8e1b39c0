"""The ``group=`` option on a Redis Cluster of three masters on loopback
(a group's keys, and a registry's names, share one hash slot), through
redis-py's ``RedisCluster``: breakers open together on failures spread
over them and one probe round closes them; a registry's name opens in
every registry. And an ``Outbox`` on the same cluster (its keys share one
slot too), through ``redis.asyncio``'s ``RedisCluster``. Every wait is for
the system's own answer."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest
from redis.cluster import RedisCluster

import asyncio
import warnings

import redis.asyncio.cluster

from halfopen import CircuitBreaker, CircuitBreakerError, Outbox, OutboxEvent, PersistenceWarning, RedisGroup, Registry, State
from test_group import OPTIONS, _probe, fail, free_port, until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (make setup-redis)")


def cluster_port() -> int:
    """A free port whose cluster bus port (10000 above) is a port, and free."""
    while True:
        port = free_port()
        if port + 10_000 < 65_536:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10_000))
                except OSError:
                    continue
            return port


@pytest.fixture(scope="module")
def cluster() -> Iterator[int]:
    """Three masters; yields one's port."""
    servers: List[subprocess.Popen[bytes]] = []
    ports = [cluster_port() for _ in range(3)]
    with tempfile.TemporaryDirectory() as root:
        for port in ports:
            cwd = Path(root) / str(port)
            cwd.mkdir()
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"]
            args += ["--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no"]
            server = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert server.stdout is not None
            for line in server.stdout:
                if b"Ready to accept" in line:
                    break
            threading.Thread(target=server.stdout.read, daemon=True).start()
            servers.append(server)
        nodes = [f"127.0.0.1:{p}" for p in ports]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
        )
        # The cluster's own word that every slot is served.
        while b"cluster_state:ok" not in subprocess.run(
            ["redis-cli", "-p", str(ports[0]), "cluster", "info"], capture_output=True, check=True
        ).stdout:
            time.sleep(0.02)
        yield ports[0]
        for s in servers:
            s.kill()
            s.wait()


def client(port: int) -> Any:
    return RedisCluster(host="127.0.0.1", port=port, socket_timeout=2.0)


def test_on_a_cluster_members_open_together_and_one_probe_round_closes_them(cluster: int) -> None:
    breakers = [
        CircuitBreaker("wa", group=RedisGroup(client(cluster), "on-cluster", flush_interval=0.05, store_timeout=0.04), **OPTIONS)
        for _ in range(3)
    ]
    until(lambda: all((s := b.group_status()) is not None and s.phase == "closed" for b in breakers), "joined")
    for b in breakers:
        fail(b)
        fail(b)
    until(lambda: all(b.state is State.OPEN for b in breakers), "every member open")
    # Calls wait (refused): after the open period, the first to ask probes
    # (two calls for the group).
    for b in breakers:
        with pytest.raises(CircuitBreakerError):
            b.try_acquire()
    until(lambda: any(b.group_status().phase == "half_open" for b in breakers), "half-open")  # type: ignore[union-attr]
    admitted: List[Any] = []
    until(lambda: _probe(breakers, admitted) >= 1, "a probe admitted")
    for _ in range(5):
        _probe(breakers, admitted)
    assert len(admitted) == 2 and len({id(b) for b, _ in admitted}) == 1, "one process probes for the group"
    for b, p in admitted:
        b.record(p, "success")
    until(lambda: all(b.state is State.CLOSED for b in breakers), "every member closed")
    for b in breakers:
        b.leave_group()


def test_on_a_cluster_a_registry_name_opens_in_every_registry(cluster: int) -> None:
    registries = [
        Registry(group=RedisGroup(client(cluster), "names-on-cluster", flush_interval=0.05, store_timeout=0.04), **OPTIONS)
        for _ in range(3)
    ]
    for r in registries:
        for name in ("a", "b"):
            r.call(name, lambda: 1)
    until(lambda: all((s := r.group_status()) is not None and s.answered == 2 for r in registries), "answered")

    def down() -> None:
        raise ConnectionError("upstream down")

    for r in registries:
        for _ in range(2):
            with pytest.raises(Exception):  # noqa: B017 - failed or refused: both are what is wanted
                r.call("a", down)
    until(lambda: all(r.state_name("a") == "OPEN" for r in registries), "a open everywhere")
    assert all(r.state_name("b") == "CLOSED" for r in registries)
    for r in registries:
        r.leave_group()


def test_an_outbox_on_a_cluster_delivers_in_order_keeps_a_dead_letter_and_hands_over(cluster: int) -> None:
    async def main() -> None:
        first = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster)
        second = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster)
        got: List[int] = []

        async def send(event: Any, *, key: str, epoch: int) -> None:
            if event["n"] == 7:
                raise ValueError("refused")
            got.append(event["n"])

        options: Any = dict(
            concurrency_limit=1, timeout=0.2, store_timeout=0.5, poll_interval=0.02, exclude=(ValueError,)
        )
        acquired = [asyncio.Event(), asyncio.Event()]

        def heard(i: int) -> Any:
            return lambda e: e.kind == "acquired" and acquired[i].set()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PersistenceWarning)  # the cluster runs without AOF
            a: Outbox[Any] = await Outbox.open(first, "clustered", send, on_event=heard(0), **options)
            await asyncio.wait_for(acquired[0].wait(), 5)
            b: Outbox[Any] = await Outbox.open(second, "clustered", send, on_event=heard(1), **options)
        for n in range(200):
            await (a if n % 2 == 0 else b).submit({"n": n}, key=f"k{n}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(got) < 199 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert got == [n for n in range(200) if n != 7]
        assert (await a.aclose())["unremoved"] == 0
        await asyncio.wait_for(acquired[1].wait(), 10)
        await b.submit({"n": 200})
        while len(got) < 200 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert got[-1] == 200
        await b.aclose()
        assert await first.xlen("halfopen:outbox:v1:{clustered}:log") == 0
        dead = await first.xrange("halfopen:outbox:v1:{clustered}:dead")
        assert [(fields[b"k"], fields[b"r"]) for _, fields in dead] == [(b"k7", b"refused")]
        for c in (first, second):
            await c.aclose()

    asyncio.run(main())
