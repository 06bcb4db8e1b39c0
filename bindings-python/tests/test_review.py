"""Regression tests for what a hostile review of the `with` blocks, the
fallback and the listeners found (each test names the defect it pins)."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, List, Tuple

import pytest

import halfopen
from halfopen import CircuitBreaker, State


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_blocks_entered_in_one_thread_and_left_in_another_leave_nothing_behind() -> None:
    # Was: each such block left a node in the entering context; 60,000 of
    # them crashed the interpreter when that context was freed.
    breaker = CircuitBreaker("x")
    entered: "queue.Queue[int]" = queue.Queue()
    left: "queue.Queue[int]" = queue.Queue()
    n = 60_000

    def enterer() -> None:
        for _ in range(n):
            breaker.__enter__()
            entered.put(1)
            left.get()

    t = threading.Thread(target=enterer)
    t.start()
    for _ in range(n):
        entered.get()
        breaker.__exit__(None, None, None)
        left.put(1)
    t.join()
    m = breaker.metrics()
    assert (m["admitted"], m["successes"], m["in_flight"]) == (n, n, 0)


def test_a_thread_that_ends_inside_many_blocks_does_not_crash() -> None:
    breaker = CircuitBreaker("x")

    def enter_many() -> None:
        for _ in range(50_000):
            breaker.__enter__()

    t = threading.Thread(target=enter_many)
    t.start()
    t.join()
    assert breaker.metrics()["in_flight"] == 50_000


def test_a_generators_block_reports_its_own_permit_not_the_probes() -> None:
    # Was: the generator's exit took the probe's permit (the innermost of the
    # caller's context), so the probe's success was lost.
    clock = Clock()
    b = CircuitBreaker(
        "g", failure_threshold=1, open_timeout=1.0, half_open_max_attempts=1, half_open_successes=1, clock=clock
    )

    def gen() -> Any:
        with b:
            yield 1

    g = gen()
    next(g)
    with pytest.raises(ZeroDivisionError):
        b.call(lambda: 1 / 0)
    clock.now = 2.0
    with b:  # the probe
        g.close()  # the generator's block, from before the trip: stale
    assert b.state is State.CLOSED
    m = b.metrics()
    assert (m["successes"], m["stale"], m["in_flight"]) == (1, 1, 0)


def test_call_async_reports_a_result_that_cannot_be_inspected() -> None:
    breaker = CircuitBreaker("a")

    class Evil:
        @property  # type: ignore[misc]
        def __class__(self) -> Any:
            raise RuntimeError("no class")

    async def main() -> None:
        with pytest.raises(RuntimeError):
            await breaker.call_async(lambda: Evil())  # type: ignore[arg-type,return-value]

    asyncio.run(main())
    m = breaker.metrics()
    assert (m["in_flight"], m["cancelled"]) == (0, 1)


def test_a_keyed_breaker_keeps_a_plain_str_of_a_hostile_str_subclass() -> None:
    class Hostile(str):
        def __ne__(self, other: object) -> bool:
            raise RuntimeError("no comparing")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no comparing")

        __hash__ = str.__hash__

    registry = halfopen.Registry()
    keyed = registry.get(Hostile("x"))
    assert type(keyed.name) is str

    async def ok() -> int:
        return 1

    assert asyncio.run(keyed.call_async(ok)) == 1
    with keyed:
        pass
    m = registry.metrics("x")
    assert m is not None and (m["successes"], m["in_flight"]) == (2, 0)


def test_a_listener_that_changes_the_breaker_has_its_events_delivered_after_the_current_one() -> None:
    b = CircuitBreaker("l", failure_threshold=1)
    seen: List[Tuple[str, str]] = []
    b.on_state_change(lambda c: b.force_close() if c.to_state == "OPEN" else None)
    b.on_state_change(lambda c: seen.append((c.from_state, c.to_state)))
    with pytest.raises(ZeroDivisionError):
        b.call(lambda: 1 / 0)
    assert seen == [("CLOSED", "OPEN"), ("OPEN", "CLOSED")]


def test_events_from_many_threads_form_one_chain() -> None:
    b = CircuitBreaker("t", failure_threshold=1, open_timeout=0.001)
    seen: List[Tuple[str, str]] = []
    b.on_state_change(lambda c: seen.append((c.from_state, c.to_state)))

    def churn() -> None:
        for i in range(300):
            if i % 3 == 0:
                b.force_open()
            elif i % 3 == 1:
                b.force_close()
            else:
                try:
                    b.call(lambda: 1 / 0)
                except (ZeroDivisionError, halfopen.CircuitBreakerError):
                    pass

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen, "no event"
    assert seen[0][0] == "CLOSED"
    for (_, to), (frm, _) in zip(seen, seen[1:]):
        assert to == frm, "each event starts where the one before it ended"


def test_an_async_fallback_of_a_sync_call_is_a_type_error() -> None:
    async def later(*_: Any) -> str:
        return "never awaited"

    b = CircuitBreaker("f", fallback=later)
    b.force_open()
    with pytest.raises(TypeError) as raised:
        b.call(len, "x")
    assert raised.value.option == "fallback"  # type: ignore[attr-defined]
    assert asyncio.run(b.call_async(asyncio.sleep, 0)) == "never awaited"


@pytest.mark.parametrize(
    "call",
    [
        lambda r, n: r.state_name(n),
        lambda r, n: r.mode(n),
        lambda r, n: r.retry_after(n),
        lambda r, n: r.metrics(n),
        lambda r, n: r.force_open(n),
        lambda r, n: r.reset(n),
        lambda r, n: r.poll_timeout(n),
        lambda r, n: n in r,
    ],
)
def test_every_registry_method_checks_its_name(call: Any) -> None:
    registry = halfopen.Registry()
    with pytest.raises(TypeError) as raised:
        call(registry, 5)
    assert raised.value.option == "name"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as lone:
        call(registry, "\ud800")
    assert lone.value.option == "name"  # type: ignore[attr-defined]


def test_a_name_with_a_lone_surrogate_is_a_value_error() -> None:
    with pytest.raises(ValueError) as raised:
        CircuitBreaker("\ud800")
    assert raised.value.option == "name"  # type: ignore[attr-defined]


def test_overlapping_async_with_blocks_each_report_their_own_permit() -> None:
    # Each block is known by its statement's frame, also through the
    # package's __aenter__/__aexit__ (one frame above the native call).
    clock = Clock()
    b = CircuitBreaker("a", clock=clock, slow_call_duration=2.0, failure_threshold=None, consecutive_failures=9)
    slow_after_first: List[int] = []

    async def main() -> None:
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with b:  # entered at 0, left at 6: slow
                a_in.set()
                await b_in.wait()
                clock.now = 6.0
            slow_after_first.append(b.metrics()["slow"])
            a_out.set()

        async def second() -> None:
            await a_in.wait()
            clock.now = 5.0
            async with b:  # entered at 5, left at 6.5: not slow
                b_in.set()
                await a_out.wait()
                clock.now = 6.5

        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert slow_after_first == [1], "the first block's own permit (from 0) was reported"
    m = b.metrics()
    assert (m["slow"], m["successes"], m["in_flight"]) == (1, 1, 0)


def test_a_keyed_breakers_with_blocks_in_two_threads_each_report_their_own_permit() -> None:
    clock = Clock()
    registry = halfopen.Registry(clock=clock, slow_call_duration=2.0, failure_threshold=None, consecutive_failures=9)
    keyed = registry.get("k")
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    slow_after_first: List[Any] = []

    def first() -> None:
        with keyed:  # entered at 0, left at 6: slow
            a_in.set()
            b_in.wait()
            clock.now = 6.0
        slow_after_first.append(registry.metrics("k")["slow"])  # type: ignore[index]
        a_out.set()

    def second() -> None:
        a_in.wait()
        clock.now = 5.0
        with keyed:  # entered at 5, left at 6.5: not slow
            b_in.set()
            a_out.wait()
            clock.now = 6.5

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert slow_after_first == [1]
    m = registry.metrics("k")
    assert m is not None and (m["slow"], m["successes"], m["in_flight"]) == (1, 1, 0)


def test_a_frame_that_cannot_be_read_at_exit_still_reports_the_permit() -> None:
    # Was: an exit whose frame could not be read (an audit hook, the
    # recursion limit) kept the block's permit forever.
    import subprocess
    import sys

    script = """
import sys
from halfopen import CircuitBreaker
b = CircuitBreaker("x")
seen = [0]
def hook(event, args):
    if event == "sys._getframe":
        seen[0] += 1
        if seen[0] == 2:
            raise RuntimeError("no frames")
sys.addaudithook(hook)
with b:
    pass
m = b.metrics()
print(m["in_flight"], m["successes"])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1"], out.stdout + out.stderr
