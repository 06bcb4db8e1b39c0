"""What a typed user writes (checked with `mypy --strict` by test_typing.py)."""

from __future__ import annotations

import asyncio
from typing import Optional

from opentelemetry.metrics import ObservableGauge

import halfopen
import halfopen.opentelemetry
import halfopen.prometheus

breaker = halfopen.CircuitBreaker("openai", failure_threshold=5, window=60.0, exclude=(ValueError,))
registry = halfopen.Registry(capacity=100, open_timeout=30.0)


@breaker
def ask(question: str) -> str:
    return question.upper()


async def ask_async(question: str) -> str:
    await asyncio.sleep(0)
    return question


def answer(question: str) -> Optional[str]:
    try:
        return breaker.call(ask, question)
    except halfopen.CircuitBreakerError as refused:
        delay: Optional[float] = refused.retry_after
        return None if delay is None else f"retry in {delay:.1f} s"


async def answer_async(question: str) -> str:
    result: str = await registry.get("instance-1").call_async(ask_async, question)
    with breaker:
        pass
    state: halfopen.State = breaker.state
    return f"{result} {state.value}"


breaker.on_state_change(lambda change: print(change.name, change.from_state, change.to_state, change.reason))


async def webhooks() -> None:
    async def post(event: dict[str, int]) -> None:
        await asyncio.sleep(0)

    dispatcher: halfopen.Dispatcher[dict[str, int]] = halfopen.Dispatcher(
        "partner", post, preset="partner_webhook", concurrency_limit=1, max_messages=10_000, timeout=10.0
    )
    # Metrics of a typed dispatcher, beside the breaker and the registry.
    handle = halfopen.opentelemetry.observe(breaker, registry, dispatcher)
    state: ObservableGauge = handle.instruments["circuit.state"]  # type: ignore[assignment]
    print(state, halfopen.prometheus.Collector(dispatcher))
    try:
        await dispatcher.submit({"id": 1})
    except halfopen.DeadLetterError as dead:
        print(dead.reason, dead.attempts)
    except halfopen.RetentionFullError:
        pass
    queue: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    status, seq = queue.submit("m")
    if seq is not None:
        print(status, queue.report(seq, "success"))
