"""Regression tests for the Dispatcher defects hostile users found (issue
21, 10 to 14). Time is an injected clock; sends are futures the test
settles; nothing waits on a margin."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

import halfopen

# A dispatcher in front of a partner the test settles (beside this file).
from test_dispatcher import dispatcher  # noqa: E402


async def turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


# 10. A send raising CancelledError of its own was put back uncounted, in a tight loop.


def test_a_send_that_raises_cancelled_error_itself_counts_as_a_failure() -> None:
    calls = 0

    async def cancelled_inside(message: Any) -> None:
        nonlocal calls
        calls += 1
        if calls <= 10:  # (without the fix: ten uncounted tries, then a delivery)
            raise asyncio.CancelledError()

    async def main() -> None:
        d = halfopen.Dispatcher("c", cancelled_inside, concurrency_limit=1, max_attempts=3, consecutive_failures=100, failure_threshold=None)
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await d.submit("m")
        assert (dead.value.reason, dead.value.attempts, calls) == ("attempts", 3, 3)
        assert d.stats()["failed"] == 3

    asyncio.run(main())


def test_a_send_the_dispatcher_itself_gives_up_on_puts_the_message_back_uncounted() -> None:
    _, partner, d = dispatcher(max_attempts=1)

    async def main() -> None:
        asyncio.ensure_future(d.submit("m"))
        while not partner.calls:
            await asyncio.sleep(0)
        # Returning leaves the send in flight: asyncio.run cancels its task.

    asyncio.run(main())
    stats = d.stats()
    assert (stats["in_flight"], stats["retained"], stats["failed"], stats["dead"]) == (0, 1, 0, 0)
    assert d.retained() == [(0, "m")]


# 11. Cancelling `await submit()`: decided, the waiting stops, not the message.


def test_cancelling_the_awaiting_task_leaves_the_message_to_be_delivered() -> None:
    async def main() -> None:
        events: List[halfopen.RetentionEvent] = []
        reported: List[Any] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reported.append(ctx))
        _, partner, d = dispatcher(on_event=events.append)
        first = asyncio.ensure_future(d.submit("in flight"))
        second = asyncio.ensure_future(d.submit("retained"))
        await turns()
        assert [m for _, m in d.retained()] == ["retained"]
        first.cancel()
        second.cancel()
        await turns()
        assert first.cancelled() and second.cancelled()
        partner.calls.pop(0)[1].set_result(None)
        await turns()
        partner.calls.pop(0)[1].set_result(None)
        await d.drained()
        delivered = [e.message for e in events if e.kind == "delivered"]
        assert delivered == ["in flight", "retained"] and d.stats()["delivered"] == 2
        assert reported == []

    asyncio.run(main())


# 12. aclose() left submit() and drained() waiting forever.


def test_aclose_settles_every_waiter_with_dispatcher_closed_error() -> None:
    async def main() -> None:
        _, partner, d = dispatcher()
        sent = asyncio.ensure_future(d.submit("a"))
        held = [asyncio.ensure_future(d.submit(m)) for m in ("b", "c")]
        idle = asyncio.ensure_future(d.drained())
        await turns()
        closing = asyncio.ensure_future(d.aclose())
        await turns()
        assert not closing.done(), "a send in flight is let finish"
        partner.calls.pop(0)[1].set_result(None)
        await turns()
        assert closing.done() and sent.done() and sent.exception() is None
        for task, message, seq in zip(held, ("b", "c"), (1, 2)):
            assert task.done()
            error = task.exception()
            assert isinstance(error, halfopen.DispatcherClosedError) and isinstance(error, RuntimeError)
            assert (error.payload, error.seq) == (message, seq)
        assert idle.done() and isinstance(idle.exception(), halfopen.DispatcherClosedError)
        assert d.retained() == [(1, "b"), (2, "c")]
        with pytest.raises(halfopen.DispatcherClosedError) as late:
            await d.submit("d")
        assert late.value.payload == "d" and d.stats()["submitted"] == 3
        with pytest.raises(halfopen.DispatcherClosedError):
            await d.drained()

    asyncio.run(main())


def test_aclose_with_nothing_held_lets_drained_return() -> None:
    async def main() -> None:
        _, partner, d = dispatcher()
        task = asyncio.ensure_future(d.submit("a"))
        await turns()
        partner.calls.pop(0)[1].set_result(None)
        await task
        await d.aclose()
        await d.drained()

    asyncio.run(main())


# 13. Retained messages could not be read.


def test_retained_lists_what_waits_in_the_order_it_will_go() -> None:
    async def main() -> None:
        _, partner, d = dispatcher()
        tasks = [asyncio.ensure_future(d.submit(m)) for m in ("a", "b", "c")]
        await turns()
        view = d.retained()
        assert view == [(1, "b"), (2, "c")]  # "a" is in flight
        view.clear()
        assert d.retained() == [(1, "b"), (2, "c")]
        for _ in range(3):
            partner.calls.pop(0)[1].set_result(None)
            await turns()
        await asyncio.gather(*tasks)
        assert d.retained() == []

    asyncio.run(main())


# 14. The Dispatcher had no send timeout unless given one (seed 001: 10 s).


def test_a_dispatcher_has_a_ten_second_send_timeout_unless_told_otherwise() -> None:
    async def send(message: Any) -> None:
        pass

    assert halfopen.Dispatcher("d", send, concurrency_limit=1).timeout == 10.0
    assert halfopen.Dispatcher("d", send, concurrency_limit=1, timeout=None).timeout is None
    assert halfopen.Dispatcher("d", send, concurrency_limit=1, timeout=2.5).timeout == 2.5


def test_a_send_past_its_timeout_is_cancelled_and_ends_as_it_then_ends() -> None:
    # Real time, short timeouts: each test waits for the dispatcher's own answer.
    async def late_answer(message: Any) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return  # answers while it stops: delivered, late

    async def deaf(message: Any) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # ignores the dispatcher's cancellation (the loop's, at the end, ends it)
        await asyncio.sleep(3600)

    async def main() -> None:
        options: Dict[str, Any] = {"concurrency_limit": 1, "timeout": 0.01, "max_attempts": 1}
        late = halfopen.Dispatcher("late", late_answer, **options)
        await late.submit("m")
        assert late.stats()["delivered"] == 1
        stuck = halfopen.Dispatcher("deaf", deaf, **options)
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await stuck.submit("m")
        assert dead.value.reason == "attempts" and stuck.stats()["in_flight"] == 0

    asyncio.run(main())


def test_a_send_that_raises_while_stopping_at_its_timeout_failed_whatever_exclude_says() -> None:
    # exclude says only 5xx are the upstream's: the error raised while
    # stopping is not one, but a timeout is the upstream's failure (Node's
    # Dispatcher decides the same): retried, not dead-lettered.
    class Aborted(Exception):
        status = 499

    attempts = 0

    async def obedient(message: Any) -> None:
        nonlocal attempts
        attempts += 1
        if attempts > 1:
            return
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise Aborted() from None

    async def main() -> None:
        d = halfopen.Dispatcher(
            "obedient", obedient, concurrency_limit=1, consecutive_failures=5, failure_threshold=None,
            timeout=0.01, max_attempts=3, exclude=lambda e: getattr(e, "status", 500) < 500,
        )
        await d.submit("m")
        assert (d.stats()["failed"], d.stats()["dead"], d.stats()["delivered"]) == (1, 0, 1)

    asyncio.run(main())
