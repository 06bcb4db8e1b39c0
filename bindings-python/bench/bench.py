"""The Python package beside its peers, in one run (part of `make bench`):
closed-state overhead per call over a raw call (sync and asyncio), a
rejection while open, and memory per breaker. Rounds interleave the
contenders; the tables give medians of ROUNDS.

    .venv/bin/python bindings-python/bench/bench.py
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from datetime import timedelta
from typing import Any, Callable, Dict, List

import aiobreaker
import circuitbreaker
import purgatory
import pybreaker

import halfopen

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


def sync_closed() -> Dict[str, Callable[[], None]]:
    ho = halfopen.CircuitBreaker("bench", failure_threshold=5, window=60.0, open_timeout=30.0)
    pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    cb = circuitbreaker.CircuitBreaker(failure_threshold=5, recovery_timeout=30)
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
        "halfopen `with breaker:`": loop(lambda: _with(ho)),
        "pybreaker 1.4 call(fn)": loop(lambda: pb.call(fn)),
        "circuitbreaker 2.1 call(fn)": loop(lambda: cb.call(fn)),
        "purgatory 3 `with get_breaker()`": purgatory_run,
    }


def _with(b: halfopen.CircuitBreaker) -> None:
    with b:
        fn()


def sync_open() -> Dict[str, Callable[[], None]]:
    ho = halfopen.CircuitBreaker("bench", failure_threshold=5, open_timeout=3600.0)
    ho.force_open()
    pb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=3600)
    pb.open()
    cb = circuitbreaker.CircuitBreaker(failure_threshold=1, recovery_timeout=3600)
    try:
        cb.call(boom)
    except RuntimeError:
        pass
    pf = purgatory.SyncCircuitBreakerFactory(default_threshold=1, default_ttl=3600)
    try:
        with pf.get_breaker("bench"):
            boom()
    except RuntimeError:
        pass

    def loop(call: Callable[[], Any], errors: Any) -> Callable[[], None]:
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

    return {
        "halfopen": loop(lambda: ho.call(fn), halfopen.CircuitBreakerError),
        "pybreaker 1.4": loop(lambda: pb.call(fn), pybreaker.CircuitBreakerError),
        "circuitbreaker 2.1": loop(lambda: cb.call(fn), circuitbreaker.CircuitBreakerError),
        "purgatory 3": loop(purgatory_call, Exception),
    }


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
    best = min(v for k, v in rejections.items() if k != "halfopen")
    print("\n### Open state: a rejection (raised and caught)\n")
    print("| contender | ns/call | × best peer |")
    print("|---|---:|---:|")
    for name, ns in rejections.items():
        print(f"| {name} | {ns:.0f} | {ns / best:.2f} |")
    memory()


if __name__ == "__main__":
    main()
