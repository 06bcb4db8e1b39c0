"""Retry libraries beside the breaker (issue 25): tenacity and backoff, as
their users configure them, with the breaker's refusal as the error that
stops retrying (``CircuitBreakerError``, also a full Registry's): a failure
of the upstream is retried with the library's backoff; once the breaker
opens, the next attempt is refused without reaching the upstream and the
retrying stops, with the refusal (its ``retry_after`` is when to requeue).
Time is the breaker's injected clock; the libraries wait nothing."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List

import backoff
import pytest
import tenacity

import halfopen
from halfopen import CircuitBreaker, CircuitBreakerError, Registry


class Upstream:
    """Fails its first ``failures`` calls, then answers; counts every call."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, message: str) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"gateway refused {message}")
        return f"sent {message}"

    async def asend(self, message: str) -> str:
        await asyncio.sleep(0)
        return self(message)


def breaker() -> CircuitBreaker:
    return CircuitBreaker("gateway", failure_threshold=3, open_timeout=30.0, clock=lambda: 0.0)


def tenacity_retry() -> Callable[[Callable[..., Any]], Any]:
    return tenacity.retry(
        stop=tenacity.stop_after_attempt(10),
        wait=tenacity.wait_none(),
        retry=tenacity.retry_if_not_exception_type(CircuitBreakerError),
        reraise=True,
    )


def test_tenacity_retries_failures_and_stops_at_the_refusal() -> None:
    b, up = breaker(), Upstream(failures=100)

    @tenacity_retry()
    def send(message: str) -> str:
        return b.call(up, message)

    with pytest.raises(CircuitBreakerError) as refused:
        send("olá")
    assert up.calls == 3, "three failures reached the upstream, then the breaker opened"
    assert refused.value.retry_after == 30.0
    assert send.statistics["attempt_number"] == 4, "the refused attempt was the last"
    # A flaky upstream: retried with tenacity's policy until it answers.
    b, up = breaker(), Upstream(failures=2)
    assert send("olá") == "sent olá"
    assert up.calls == 3 and b.state == halfopen.State.CLOSED


def test_tenacity_async_with_call_async() -> None:
    b, up = breaker(), Upstream(failures=100)

    @tenacity_retry()
    async def send(message: str) -> str:
        return await b.call_async(up.asend, message)

    with pytest.raises(CircuitBreakerError):
        asyncio.run(send("olá"))
    assert up.calls == 3


def test_backoff_gives_up_at_the_refusal() -> None:
    b, up = breaker(), Upstream(failures=100)
    giveups: List[BaseException] = []

    @backoff.on_exception(
        backoff.constant,
        Exception,
        interval=0,
        max_tries=10,
        giveup=lambda e: isinstance(e, CircuitBreakerError),
        on_giveup=lambda details: giveups.append(details["exception"]),  # type: ignore[typeddict-item]
    )
    def send(message: str) -> str:
        return b.call(up, message)

    with pytest.raises(CircuitBreakerError):
        send("olá")
    assert up.calls == 3
    assert len(giveups) == 1 and isinstance(giveups[0], CircuitBreakerError)
    b, up = breaker(), Upstream(failures=2)
    assert send("olá") == "sent olá"


def test_backoff_async_and_a_full_registry_is_a_refusal_too() -> None:
    registry = Registry(capacity=1, failure_threshold=1, clock=lambda: 0.0)
    up = Upstream(failures=100)

    tries: List[str] = []

    @backoff.on_exception(backoff.constant, Exception, interval=0, max_tries=10, giveup=lambda e: isinstance(e, CircuitBreakerError))
    async def send(name: str, message: str) -> str:
        tries.append(name)
        return await registry.get(name).call_async(up.asend, message)

    with pytest.raises(CircuitBreakerError):
        asyncio.run(send("a", "olá"))
    assert up.calls == 1 and tries == ["a", "a"], "one failure, then the refusal ended it"
    # "a" is open (not idle): the Registry has no room for "b".
    with pytest.raises(halfopen.RegistryFullError):
        asyncio.run(send("b", "olá"))
    assert up.calls == 1 and tries == ["a", "a", "b"], "refused: nothing reached the upstream, nothing retried"
