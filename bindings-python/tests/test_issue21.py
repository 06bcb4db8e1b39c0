"""Regression tests for what hostile users found (issue 21): each test names
the defect it pins. Time comes from an injected clock unless a test says
otherwise."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List

import pytest

import halfopen
from halfopen import CircuitBreaker, CircuitOpenError, State


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fail() -> None:
    raise RuntimeError("upstream said 500")


def trip(breaker: Any, n: int = 1) -> None:
    for _ in range(n):
        with pytest.raises(RuntimeError):
            breaker.call(fail)


# 7. One type for a state everywhere (err.state == breaker.state was False).


def test_every_state_is_a_state_member_equal_to_its_string() -> None:
    b = CircuitBreaker("x", failure_threshold=1, clock=Clock())
    changes: List[halfopen.StateChange] = []
    b.on_state_change(changes.append)
    trip(b)
    with pytest.raises(CircuitOpenError) as refused:
        b.call(len, "x")
    assert refused.value.state is State.OPEN and refused.value.state == b.state
    assert b.state == "OPEN" and "OPEN" == b.state and str(b.state) == "OPEN" and f"{b.state}" == "OPEN"
    assert (changes[0].from_state, changes[0].to_state) == (State.CLOSED, State.OPEN)
    assert changes[0].to_state is State.OPEN and changes[0].to_state == "OPEN"
    assert b.metrics()["state"] is State.OPEN
    assert {"OPEN": 1}[b.state] == 1


def test_a_registrys_and_a_queues_states_are_state_members_too() -> None:
    registry = halfopen.Registry(capacity=1, failure_threshold=1, clock=Clock())
    trip(registry.get("a"))
    assert registry.get("a").state is State.OPEN and registry.metrics("a")["state"] is State.OPEN  # type: ignore[index]
    with pytest.raises(halfopen.RegistryFullError) as full:
        registry.get("b").call(len, "x")
    assert full.value.state is State.CLOSED
    queue: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1, consecutive_failures=1)
    _, seq = queue.submit("m")
    queue.report(seq, "failure")  # type: ignore[arg-type]
    change = [e.change for e in queue.events() if e.kind == "transition"][0]
    assert change is not None and change.to_state is State.OPEN and queue.state is State.OPEN


# 8. now(): poll_timeout() was on a private origin, with nothing to compare it to.


def test_poll_timeout_is_on_now_with_an_injected_clock() -> None:
    clock = Clock()
    clock.now = 100.0
    b = CircuitBreaker("x", failure_threshold=1, open_timeout=30.0, clock=clock)
    registry = halfopen.Registry(failure_threshold=1, open_timeout=30.0, clock=clock)
    trip(b)
    trip(registry.get("a"))
    assert b.now() == registry.now() == registry.get("a").now() == 100.0
    assert b.poll_timeout() == registry.get("a").poll_timeout() == 130.0


def test_handle_timeout_can_be_scheduled_from_poll_timeout_and_now_with_the_default_clock() -> None:
    # Real time (the default clock): waits for the breaker's own reading to pass its poll time.
    b = CircuitBreaker("x", failure_threshold=1, open_timeout=0.02)
    registry = halfopen.Registry(failure_threshold=1, open_timeout=0.02)
    queue: halfopen.RetentionQueue[str] = halfopen.RetentionQueue(
        "q", concurrency_limit=1, consecutive_failures=1, open_timeout=0.02
    )
    changes: List[halfopen.StateChange] = []
    b.on_state_change(changes.append)
    registry.on_state_change(changes.append)
    _, seq = queue.submit("m")
    queue.report(seq, "failure")  # type: ignore[arg-type]
    queue.events()
    trip(b)
    trip(registry.get("a"))
    for now, at, handle in (
        (b.now, b.poll_timeout(), b.handle_timeout),
        (registry.now, registry.get("a").poll_timeout(), registry.get("a").handle_timeout),
        (queue.now, queue.poll_timeout(), queue.handle_timeout),
    ):
        assert at is not None and at - now() <= 0.02
        while now() < at:
            time.sleep(at - now())
        handle()
    queued = [e.change for e in queue.events()]
    assert [(c.name, c.to_state, c.reason) for c in changes[2:]] == [
        ("x", State.HALF_OPEN, "open_timeout"),
        ("a", State.HALF_OPEN, "open_timeout"),
    ]
    assert [(c.to_state, c.reason) for c in queued if c is not None] == [(State.HALF_OPEN, "open_timeout")]
