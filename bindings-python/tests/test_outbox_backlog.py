"""A restart into a backlog of 1,000,000 stored events (issue 24), in
Python: the process opens at once and streams the log in pages, so the
event loop is never held for long and memory does not grow with the
backlog, while it delivers the first 100,000 in the log's order.

"Held" is the CPU time the main thread used between two ticks of a 1 ms
ticker (``time.thread_time``): a wait for a core on a loaded machine is
not the outbox holding the loop. It includes the garbage collector's
collections; the heap the test runner built before (pytest, the other test
modules: a full collection of it alone takes tens of ms, whatever the
outbox does) is frozen first, as CPython advises long-lived processes to
(``gc.freeze()``; BENCHMARKS.md has the figures with and without). The
wall-clock lag is printed, and measured on a quiet machine in
BENCHMARKS.md (``bindings-python/bench/outbox.py``)."""

from __future__ import annotations

import asyncio
import gc
import shutil
import time
from typing import Any

import pytest

from halfopen import Outbox
from test_outbox import AofServer, server  # noqa: F401 - the module's redis-server

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (make setup-redis)")

BACKLOG = 1_000_000
FIRST = 100_000


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_a_restart_into_a_million_never_holds_the_loop_over_50_ms_and_sends_in_order(server: AofServer) -> None:
    async def main() -> None:
        client = server.client()
        script = "for i = 1, tonumber(ARGV[2]) do redis.call('XADD', KEYS[1], '*', 'p', '{\"n\":' .. (tonumber(ARGV[1]) + i - 1) .. '}') end"
        log = "halfopen:outbox:v1:{backlog}:log"
        for start in range(0, BACKLOG, 100_000):
            await client.eval(script, 1, log, start, min(100_000, BACKLOG - start))  # type: ignore[misc]
        assert await client.xlen(log) == BACKLOG

        held = lag = 0.0
        most = 0
        before = peak = rss()
        ticking = True
        outbox: "Outbox[Any] | None" = None

        async def ticker() -> None:
            nonlocal held, lag, most, peak
            cpu = time.thread_time()
            while ticking:
                at = time.perf_counter()
                await asyncio.sleep(0.001)
                now = time.thread_time()
                held = max(held, now - cpu)
                cpu = now
                lag = max(lag, time.perf_counter() - at - 0.001)
                if outbox is not None:
                    most = max(most, outbox.stats()["held"])
                peak = max(peak, rss())

        expected = 0
        out_of_order = 0

        async def send(event: Any, *, key: str, epoch: int) -> None:
            nonlocal expected, out_of_order
            if event["n"] != expected:
                out_of_order += 1
            expected = event["n"] + 1

        tick = asyncio.ensure_future(ticker())
        started = time.perf_counter()
        outbox = await Outbox.open(client, "backlog", send, concurrency_limit=64)
        opened = time.perf_counter() - started
        while outbox.stats()["removed"] < FIRST:
            await asyncio.sleep(0.01)
        took = time.perf_counter() - started
        ticking = False
        await tick
        await outbox.aclose()
        print(
            f"open {opened * 1000:.1f} ms; first {FIRST:,} of {BACKLOG:,} in {took * 1000:,.0f} ms; the loop held at most "
            f"{held * 1000:.1f} ms (wall-clock lag {lag * 1000:.1f} ms); at most {most} events held; RSS growth {(peak - before) / 1e6:.1f} MB"
        )
        assert out_of_order == 0, "sends start in the log's order"
        assert held <= 0.050, f"the event loop was held {held * 1000:.1f} ms"
        # At most two pages (of 64, the default) held; memory does not grow with the backlog.
        assert most <= 128, f"{most} events held"
        assert peak - before <= 64e6, f"RSS grew {(peak - before) / 1e6:.1f} MB"
        assert await client.xlen(log) == BACKLOG - outbox.stats()["removed"]
        await client.aclose()

    gc.freeze()
    try:
        asyncio.run(main())
    finally:
        gc.unfreeze()
