"""`fallback=`: what a refused call returns instead of raising (circuitbreaker's
`fallback_function`), for `call`, `call_async`, the decorator and a
registry's breakers; `with` blocks still raise. A refusal still counts, and
nothing the fallback does leaks a permit."""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

import halfopen
from halfopen import CircuitBreaker, CircuitOpenError, State


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def busy(*args: Any, **kwargs: Any) -> str:
    return f"high volume, we'll get back to you ({args}, {kwargs})"


def fail(*_: Any, **__: Any) -> None:
    raise RuntimeError("upstream said 429")


def opened(**options: Any) -> CircuitBreaker:
    breaker = CircuitBreaker("instance-1", clock=Clock(), failure_threshold=1, **options)
    with pytest.raises(RuntimeError):
        breaker.call(fail)
    assert breaker.state is State.OPEN
    return breaker


def test_a_refused_call_returns_the_fallback_with_the_calls_arguments() -> None:
    breaker = opened(fallback=busy)
    reached: List[str] = []
    answer = breaker.call(reached.append, "question", lang="pt")
    assert answer == busy("question", lang="pt")
    assert reached == []
    m = breaker.metrics()
    assert (m["rejections"], m["admitted"], m["in_flight"]) == (1, 1, 0)
    assert breaker.fallback is busy


def test_an_admitted_call_never_reaches_the_fallback() -> None:
    called: List[Any] = []
    breaker = CircuitBreaker("instance-1", clock=Clock(), fallback=lambda *a: called.append(a))
    assert breaker.call(len, "abc") == 3
    with pytest.raises(ValueError):
        breaker.call(int, "x")
    assert called == []


def test_call_async_and_both_decorators_use_it_awaiting_an_async_fallback() -> None:
    async def later(question: str) -> str:
        return f"queued: {question}"

    sync_fallback = opened(fallback=busy)
    async_fallback = opened(fallback=later)

    async def ask(question: str) -> str:
        raise AssertionError("refused calls never run")

    @sync_fallback
    def ask_sync(question: str) -> str:
        raise AssertionError("refused calls never run")

    async def main() -> None:
        assert await sync_fallback.call_async(ask, "q1") == busy("q1")
        assert await async_fallback.call_async(ask, "q2") == "queued: q2"
        assert await async_fallback(ask)("q3") == "queued: q3"

    asyncio.run(main())
    assert ask_sync("q4") == busy("q4")
    assert sync_fallback.metrics()["rejections"] == 2
    assert async_fallback.metrics()["rejections"] == 2


def test_with_blocks_still_raise_before_the_block() -> None:
    breaker = opened(fallback=busy)
    ran: List[str] = []
    with pytest.raises(CircuitOpenError):
        with breaker:
            ran.append("block")
    assert ran == []


def test_a_raising_or_reentrant_fallback_leaks_no_permit() -> None:
    def raising(*_: Any) -> None:
        raise LookupError("fallback failed")

    breaker = opened(fallback=raising)
    with pytest.raises(LookupError):
        breaker.call(len, "x")

    def reentrant(*_: Any) -> Any:
        return breaker.metrics()["in_flight"]

    again = opened(fallback=reentrant)
    assert again.call(len, "x") == 0
    assert breaker.metrics()["in_flight"] == 0 and again.metrics()["in_flight"] == 0


def test_a_registry_falls_back_for_an_open_breaker_and_when_full() -> None:
    clock = Clock()
    registry = halfopen.Registry(capacity=1, clock=clock, failure_threshold=1, fallback=busy)
    with pytest.raises(RuntimeError):
        registry.call("a", fail)
    assert registry.call("a", len, "x") == busy("x")
    # "a" is open, so it cannot be evicted for "b": the registry is full.
    assert registry.get("b").call(len, "y") == busy("y")
    assert registry.get("a").fallback is busy
    with pytest.raises(halfopen.RegistryFullError):
        with registry.get("b"):
            pass

    async def main() -> Any:
        return await registry.get("b").call_async(asyncio.sleep, 0)

    assert asyncio.run(main()) == busy(0)


@pytest.mark.parametrize("bad", [5, "busy", object()])
def test_a_fallback_must_be_callable(bad: Any) -> None:
    for make in (lambda: CircuitBreaker("x", fallback=bad), lambda: halfopen.Registry(fallback=bad)):
        with pytest.raises(TypeError) as raised:
            make()
        assert raised.value.option == "fallback"  # type: ignore[attr-defined]
