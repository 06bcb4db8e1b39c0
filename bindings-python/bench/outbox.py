"""The Outbox (issue 24) in Python, against a local redis-server with AOF
(``appendfsync everysec``), as ``bindings-node/bench/outbox.js`` measures
Node's: events stored per second by one process and by three at once
(submits of 1,000 at a time, awaited; nobody delivering), events delivered
per second from a backlog of 100,000 by the holder (a send that does
nothing: the outbox's own cost), and a restart into a backlog of 1,000,000:
the first 100,000 delivered, the event loop's longest lag meanwhile (a
1 ms ticker's lateness) and the RSS growth. Medians of 3 runs for the rates.
Part of ``make bench``:

    .venv/bin/python bindings-python/bench/outbox.py
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, List

import redis.asyncio

from halfopen import Outbox

RUNS = 3
EVENTS = int(os.environ.get("EVENTS", "100000"))
BACKLOG = int(os.environ.get("BACKLOG", "1000000"))
BODY = "order confirmed: #12345, total 99.90"


async def nothing(event: Any, *, key: str, epoch: int) -> None:
    pass


def log(partner: str) -> str:
    return f"halfopen:outbox:v1:{{{partner}}}:log"


async def hold_lease(client: Any, partner: str) -> None:
    """Another process holds ``partner``'s lease for an hour: submitting alone, nobody delivers."""
    await client.set(f"halfopen:outbox:v1:{{{partner}}}:lease", "elsewhere 1", px=3_600_000)


async def submit_all(outbox: Outbox[Any], n: int) -> None:
    for i in range(0, n, 1_000):
        await asyncio.gather(*(outbox.submit({"n": j, "body": BODY}) for j in range(i, min(n, i + 1_000))))


async def fill(client: Any, partner: str, n: int) -> None:
    """``n`` events in ``partner``'s log, as an outbox writes them (one script call per 100,000: the fill is not measured)."""
    script = "for i = 1, tonumber(ARGV[2]) do redis.call('XADD', KEYS[1], '*', 'p', '{\"n\":' .. (tonumber(ARGV[1]) + i - 1) .. '}') end"
    for start in range(0, n, 100_000):
        await client.eval(script, 1, log(partner), start, min(100_000, n - start))


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def until_removed(outbox: Outbox[Any], n: int) -> None:
    while outbox.stats()["removed"] < n:
        await asyncio.sleep(0.005)


async def submitter(port: int, partner: str, start_at: float) -> None:
    """A child process: submits EVENTS from ``start_at`` (wall clock), then prints when it finished."""
    client = redis.asyncio.Redis(host="127.0.0.1", port=port)
    outbox: Outbox[Any] = await Outbox.open(client, partner, nothing, concurrency_limit=1)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    await submit_all(outbox, EVENTS)
    print(time.time(), flush=True)
    await outbox.aclose()
    await client.aclose()


async def main(port: int) -> List[List[str]]:
    client = redis.asyncio.Redis(host="127.0.0.1", port=port)
    rows: List[List[str]] = []
    one = []
    for run in range(RUNS):
        partner = f"submit-{run}"
        await hold_lease(client, partner)
        outbox: Outbox[Any] = await Outbox.open(client, partner, nothing, concurrency_limit=1)
        started = time.perf_counter()
        await submit_all(outbox, EVENTS)
        one.append(EVENTS / (time.perf_counter() - started))
        await outbox.aclose()
        await client.delete(log(partner))
    rows.append(["submit, 1 process", f"{statistics.median(one):,.0f} events/s"])

    three = []
    for run in range(RUNS):
        partner = f"three-{run}"
        await hold_lease(client, partner)
        start_at = time.time() + 2.0
        children = [
            subprocess.Popen([sys.executable, __file__, "submitter", str(port), partner, repr(start_at)], stdout=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        ends = [float(c.communicate()[0].split()[-1]) for c in children]
        three.append(3 * EVENTS / (max(ends) - start_at))
        await client.delete(log(partner))
    rows.append(["submit, 3 processes together", f"{statistics.median(three):,.0f} events/s"])

    for limit in (1, 64):
        rates = []
        for run in range(RUNS):
            partner = f"deliver-{limit}-{run}"
            await fill(client, partner, EVENTS)
            started = time.perf_counter()
            outbox = await Outbox.open(client, partner, nothing, concurrency_limit=limit)
            await until_removed(outbox, EVENTS)
            rates.append(EVENTS / (time.perf_counter() - started))
            await outbox.aclose()
        rows.append([f"deliver from a backlog, concurrency_limit {limit}", f"{statistics.median(rates):,.0f} events/s"])

    await fill(client, "restart", BACKLOG)
    before = rss()
    peak = before
    lag = 0.0
    ticking = True

    async def ticker() -> None:
        nonlocal lag, peak
        while ticking:
            at = time.perf_counter()
            await asyncio.sleep(0.001)
            lag = max(lag, time.perf_counter() - at - 0.001)
            peak = max(peak, rss())

    tick = asyncio.ensure_future(ticker())
    started = time.perf_counter()
    outbox = await Outbox.open(client, "restart", nothing, concurrency_limit=64)
    first = min(100_000, BACKLOG)
    await until_removed(outbox, first)
    ms = (time.perf_counter() - started) * 1000
    ticking = False
    await tick
    await outbox.aclose()
    rows.append([f"restart into {BACKLOG:,} stored: first {first:,} delivered", f"{ms:,.0f} ms"])
    rows.append(["  the event loop's longest lag meanwhile", f"{lag * 1000:.1f} ms"])
    rows.append(["  RSS growth meanwhile (max)", f"{(peak - before) / 1e6:.1f} MB"])
    await client.aclose()
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run() -> None:
    port = free_port()
    folder = tempfile.mkdtemp(prefix="halfopen-bench-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)
        rows = asyncio.run(main(port))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"Outbox on a local redis-server (AOF everysec), Python {sys.version.split()[0]}, {os.cpu_count()} cores; medians of {RUNS}")
    print("| what | figure |\n|---|---|")
    for what, figure in rows:
        print(f"| {what} | {figure} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["submitter"]:
        asyncio.run(submitter(int(sys.argv[2]), sys.argv[3], float(sys.argv[4])))
    else:
        run()
