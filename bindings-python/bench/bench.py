"""The Python package beside its peers, in one run (part of `make bench`):
closed-state overhead per call over a raw call (sync and asyncio), a
rejection while open, and memory per breaker. Rounds interleave the
contenders; the tables give medians of ROUNDS.

    .venv/bin/python bindings-python/bench/bench.py
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import socket
import statistics
import subprocess
import time
import tracemalloc
from datetime import timedelta
from typing import Any, Callable, Dict, List

import aiobreaker
import circuitbreaker
import purgatory
import pybreaker

import halfopen
import redis

CALLS = 100_000
ROUNDS = 7
BREAKERS = 10_000


def fn() -> int:
    return 1


def boom() -> None:
    raise RuntimeError("down")


async def afn() -> int:
    return 1


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter_ns()
    run()
    return (time.perf_counter_ns() - start) / CALLS


def redis_server() -> int:
    """A redis-server on a free port for the group contender (stopped at exit)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert server.stdout is not None
    for line in server.stdout:
        if b"Ready to accept" in line:
            break
    atexit.register(server.kill)
    return port


def sync_closed() -> Dict[str, Callable[[], None]]:
    ho = halfopen.CircuitBreaker("bench", failure_threshold=5, window=60.0, open_timeout=30.0)
    # In a group: the call path is the same; its exchanges (a thread, one a
    # second) run beside it.
    group = halfopen.RedisGroup(redis.Redis(port=redis_server()), "bench")
    hog = halfopen.CircuitBreaker("bench", failure_threshold=5, window=60.0, open_timeout=30.0, group=group)
    pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    # circuitbreaker's decorator: its `call()` does not look at the state
    # (2.1 runs the function even while open), so it is not the protected path.
    cb = circuitbreaker.CircuitBreaker(failure_threshold=5, recovery_timeout=30)(fn)
    pf = purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)

    def loop(call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(CALLS):
                call()

        return run

    def purgatory_run() -> None:
        for _ in range(CALLS):
            with pf.get_breaker("bench"):
                fn()

    return {
        "raw fn()": loop(fn),
        "halfopen call(fn)": loop(lambda: ho.call(fn)),
        "halfopen call(fn), in a group (Redis)": loop(lambda: hog.call(fn)),
        "halfopen `with breaker:`": loop(lambda: _with(ho)),
        "pybreaker 1.4 call(fn)": loop(lambda: pb.call(fn)),
        "circuitbreaker 2.1 `@circuit` fn()": loop(lambda: cb()),
        "purgatory 3 `with get_breaker()`": purgatory_run,
    }


def _with(b: halfopen.CircuitBreaker) -> None:
    with b:
        fn()


def sync_open() -> Dict[str, Callable[[], None]]:
    ho = halfopen.CircuitBreaker("bench", failure_threshold=5, open_timeout=3600.0)
    ho.force_open()
    assert ho.state is halfopen.State.OPEN
    hof = halfopen.CircuitBreaker("bench", failure_threshold=5, open_timeout=3600.0, fallback=busy)
    hof.force_open()
    pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    pb.open()
    cb = circuitbreaker.CircuitBreaker(failure_threshold=1, recovery_timeout=3600)
    cbf = circuitbreaker.CircuitBreaker(failure_threshold=1, recovery_timeout=3600, fallback_function=busy)
    for breaker in (cb, cbf):
        try:
            breaker(boom)()
        except RuntimeError:
            pass
    cb_fn, cbf_fn = cb(fn), cbf(fn)
    pf = purgatory.SyncCircuitBreakerFactory(default_threshold=1, default_ttl=3600)
    try:
        with pf.get_breaker("bench"):
            boom()
    except RuntimeError:
        pass

    def loop(call: Callable[[], Any], errors: Any) -> Callable[[], None]:
        # Each contender must refuse (a breaker that runs fn is not measured).
        try:
            answer = call()
        except errors:
            answer = None
        assert answer in (None, busy()), f"{call} was not refused"

        def run() -> None:
            for _ in range(CALLS):
                try:
                    call()
                except errors:
                    pass

        return run

    def purgatory_call() -> None:
        with pf.get_breaker("bench"):
            fn()

    empty: Dict[int, int] = {}
    return {
        RAISED + "halfopen": loop(lambda: ho.call(fn), halfopen.CircuitBreakerError),
        RAISED + "pybreaker 1.4": loop(lambda: pb.call(fn), pybreaker.CircuitBreakerError),
        RAISED + "circuitbreaker 2.1 `@circuit`": loop(lambda: cb_fn(), circuitbreaker.CircuitBreakerError),
        RAISED + "purgatory 3": loop(purgatory_call, Exception),
        FLOOR: loop(lambda: empty[0], KeyError),
        FALLBACK + "halfopen `fallback=`": loop(lambda: hof.call(fn), ()),
        FALLBACK + "circuitbreaker 2.1 `@circuit(fallback_function=)`": loop(lambda: cbf_fn(), ()),
    }


RAISED = "raised and caught: "
FALLBACK = "fallback returned: "
#: Not a breaker: what raising any exception from C and catching it costs here.
FLOOR = "reference (no breaker): `{}[0]` raises KeyError in C, caught"


def busy() -> str:
    return "high volume, we'll get back to you"


def async_closed() -> Dict[str, Callable[[], None]]:
    ho = halfopen.CircuitBreaker("bench", failure_threshold=5, window=60.0, open_timeout=30.0)
    ab = aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=timedelta(seconds=30))
    pf = purgatory.AsyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)

    def run_async(body: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            asyncio.run(body())

        return run

    async def raw() -> None:
        for _ in range(CALLS):
            await afn()

    async def with_halfopen() -> None:
        for _ in range(CALLS):
            await ho.call_async(afn)

    async def with_aiobreaker() -> None:
        for _ in range(CALLS):
            await ab.call_async(afn)

    async def with_purgatory() -> None:
        for _ in range(CALLS):
            async with await pf.get_breaker("bench"):
                await afn()

    return {
        "raw await afn()": run_async(raw),
        "halfopen await call_async(afn)": run_async(with_halfopen),
        "aiobreaker 1.2 await call_async(afn)": run_async(with_aiobreaker),
        "purgatory 3 `async with`": run_async(with_purgatory),
    }


def measure(contenders: Dict[str, Callable[[], None]]) -> Dict[str, float]:
    runs: Dict[str, List[float]] = {name: [] for name in contenders}
    for _ in range(ROUNDS):
        for name, run in contenders.items():
            gc.collect()
            runs[name].append(timed(run))
    return {name: statistics.median(v) for name, v in runs.items()}


def overhead_table(title: str, medians: Dict[str, float], raw: str, reference: str) -> None:
    base = medians[raw]
    ref = medians[reference] - base
    print(f"\n### {title}\n")
    print(f"| contender | ns/call | overhead over {raw} | × {reference.split(' ')[0]} overhead |")
    print("|---|---:|---:|---:|")
    for name, ns in medians.items():
        if name == raw:
            print(f"| {name} | {ns:.0f} |  |  |")
        else:
            print(f"| {name} | {ns:.0f} | {ns - base:.0f} | {(ns - base) / ref:.2f} |")


def memory() -> None:
    makers: Dict[str, Callable[[], Any]] = {
        # Every byte is Python's: the configuration is shared, the name is the
        # caller's str, and nothing else is allocated by default.
        "halfopen (seed 000 options)": lambda: halfopen.CircuitBreaker("bench"),
        "pybreaker 1.4": lambda: pybreaker.CircuitBreaker(),
        "circuitbreaker 2.1": lambda: circuitbreaker.CircuitBreaker(),
        "aiobreaker 1.2": lambda: aiobreaker.CircuitBreaker(),
    }
    print(f"\n### Memory per breaker ({BREAKERS} breakers, tracemalloc)\n")
    print("| contender | bytes per breaker |")
    print("|---|---:|")
    for name, make in makers.items():
        gc.collect()
        tracemalloc.start()
        held = [make() for _ in range(BREAKERS)]
        size, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del held
        print(f"| {name} | {size / BREAKERS:.0f} |")


def main() -> None:
    print(f"python bench: {CALLS} calls per round, {ROUNDS} rounds, medians")
    overhead_table("Closed state, sync", measure(sync_closed()), "raw fn()", "purgatory 3 `with get_breaker()`")
    closed_async = measure(async_closed())
    overhead_table("Closed state, asyncio", closed_async, "raw await afn()", "purgatory 3 `async with`")
    rejections = measure(sync_open())
    print("\n### Open state: a rejection\n")
    print("| contender | ns/call | × best peer of the same form |")
    print("|---|---:|---:|")
    for form in (RAISED, FALLBACK):
        peers = [v for k, v in rejections.items() if k.startswith(form) and "halfopen" not in k]
        for name, ns in rejections.items():
            if name.startswith(form):
                print(f"| {name} | {ns:.0f} | {ns / min(peers):.2f} |")
    print(f"| {FLOOR} | {rejections[FLOOR]:.0f} |  |")
    memory()


if __name__ == "__main__":
    main()
