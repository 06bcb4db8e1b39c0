"""The asyncio Dispatcher: seed 001's promise (nothing lost, in order, only
probes while open), dead letters, bounds, timeouts, cancellation, hostile
callbacks and bad options. Time is an injected clock; sends are futures
the test settles."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from typing import Any, Dict, List, Tuple

import pytest

import halfopen


class Partner:
    """Every send waits until the test settles it."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, "asyncio.Future[None]"]] = []

    async def send(self, message: Any) -> None:
        done: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.calls.append((message, done))
        await done


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def dispatcher(**extra: Any) -> Tuple[List[float], Partner, "halfopen.Dispatcher[Any]"]:
    clock = [0.0]
    partner = Partner()
    options: Dict[str, Any] = {"preset": "partner_webhook", "concurrency_limit": 1, "clock": lambda: clock[0], **extra}
    return clock, partner, halfopen.Dispatcher("partner-a", partner.send, **options)


def test_an_outage_loses_nothing_and_only_probes_reach_the_partner() -> None:
    async def main() -> None:
        clock, partner, d = dispatcher(concurrency_limit=4)
        changes: List[str] = []
        d_events: List[halfopen.RetentionEvent] = []
        d._on_event = d_events.append
        delivered: List[int] = []

        async def submit(i: int) -> None:
            await d.submit(i)
            delivered.append(i)

        tasks = [asyncio.ensure_future(submit(i)) for i in range(100)]
        await turns()
        failures = 0
        while d.state == "CLOSED":
            partner.calls.pop(0)[1].set_exception(RuntimeError("503"))
            failures += 1
            await turns()
        assert failures == 5
        for _, done in partner.calls:
            done.set_exception(RuntimeError("503"))
        partner.calls.clear()
        await turns()
        for _ in range(2):
            clock[0] += 10
            d.poll()
            await turns()
            assert len(partner.calls) == 1, "one probe while half-open"
            partner.calls.pop(0)[1].set_exception(RuntimeError("503"))
            await turns()
            assert d.state == "OPEN"
        clock[0] += 10
        d.poll()
        most = 0
        while len(delivered) < 100:
            await turns()
            most = max(most, len(partner.calls))
            assert partner.calls, "a send is in flight until everything is delivered"
            partner.calls.pop(0)[1].set_result(None)
            await turns()
        await asyncio.gather(*tasks)
        assert delivered == list(range(100))
        assert most <= 4
        for e in d_events:
            if e.kind == "transition":
                assert e.change is not None
                changes.append(f"{e.change.from_state}>{e.change.to_state}")
        assert changes[0] == "CLOSED>OPEN" and changes[-1] == "HALF_OPEN>CLOSED"
        stats = d.stats()
        assert stats["delivered"] == 100 and stats["retained"] + stats["in_flight"] == 0
        await d.drained()

    asyncio.run(main())


def test_a_full_queue_raises_retention_full_at_once() -> None:
    async def main() -> None:
        _, partner, d = dispatcher(max_messages=2)
        a = asyncio.ensure_future(d.submit("a"))
        b = asyncio.ensure_future(d.submit("b"))
        await turns()
        with pytest.raises(halfopen.RetentionFullError):
            await d.submit("c")
        assert d.stats()["refused"] == 1
        for _, done in partner.calls:
            done.set_result(None)
        await turns()
        partner.calls[-1][1].set_result(None)
        await asyncio.gather(a, b)

    asyncio.run(main())


def test_dead_letters_after_max_attempts_or_a_refusal() -> None:
    async def main() -> None:
        _, partner, d = dispatcher(max_attempts=2, consecutive_failures=10)
        task = asyncio.ensure_future(d.submit("m"))
        await turns()
        partner.calls.pop(0)[1].set_exception(RuntimeError("500"))
        await turns()
        partner.calls.pop(0)[1].set_exception(RuntimeError("500"))
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await task
        assert (dead.value.reason, dead.value.attempts, dead.value.payload) == ("attempts", 2, "m")

        _, partner, d = dispatcher(exclude=ValueError)
        task = asyncio.ensure_future(d.submit("bad"))
        await turns()
        partner.calls.pop(0)[1].set_exception(ValueError("422"))
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await task
        assert dead.value.reason == "refused"
        assert d.state == "CLOSED"

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["exclude", "is_failure"])
def test_a_classifier_that_raises_counts_a_failure_and_is_logged(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """The classifier rule (tests/conformance/README.md): a failure, reported, never a refusal."""

    def broken(exc: BaseException) -> bool:
        raise KeyError("classifier bug")

    async def main() -> None:
        _, partner, d = dispatcher(max_attempts=1, **{kind: broken})
        task = asyncio.ensure_future(d.submit("m"))
        await turns()
        partner.calls.pop(0)[1].set_exception(ValueError("422"))
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await task
        # Given up for its attempts (a failure), not "refused" (what an ignored error is).
        assert (dead.value.reason, dead.value.attempts) == ("attempts", 1)

    with pytest.warns(DeprecationWarning) if kind == "is_failure" else contextlib.nullcontext():
        asyncio.run(main())
    assert ("is_failure raised" if kind == "is_failure" else "exclude predicate raised") in caplog.text


def test_exclude_takes_classes_and_predicates_as_a_breaker_does_and_is_failure_is_its_deprecated_inverse() -> None:
    async def main() -> None:
        _, partner, d = dispatcher(exclude=[KeyError, lambda e: "422" in str(e)])
        for error in (KeyError("k"), RuntimeError("422 unprocessable")):
            task = asyncio.ensure_future(d.submit("m"))
            await turns()
            partner.calls.pop(0)[1].set_exception(error)
            with pytest.raises(halfopen.DeadLetterError) as dead:
                await task
            assert dead.value.reason == "refused"
        with pytest.warns(DeprecationWarning, match="exclude="):
            dispatcher(is_failure=lambda e: True)
        with pytest.raises(TypeError) as both:
            dispatcher(exclude=KeyError, is_failure=lambda e: True)
        assert both.value.option == "exclude"  # type: ignore[attr-defined]

    asyncio.run(main())


def test_a_dead_letter_nobody_awaits_is_not_an_unretrieved_exception() -> None:
    async def main() -> None:
        reported: List[Any] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reported.append(ctx))
        _, partner, d = dispatcher(max_attempts=1)
        task = asyncio.ensure_future(d.submit("m"))
        await turns()
        partner.calls.pop(0)[1].set_exception(RuntimeError("500"))
        await turns()
        task.cancel()
        del task
        gc.collect()
        await turns()
        assert d.stats()["dead"] == 1
        assert not [c for c in reported if "never retrieved" in str(c.get("message"))]

    asyncio.run(main())


def test_timeout_fails_a_send_and_closing_waits_for_it() -> None:
    async def main() -> None:
        async def hang(message: Any) -> None:
            await asyncio.sleep(3600)

        d = halfopen.Dispatcher("t", hang, concurrency_limit=1, timeout=0.01, consecutive_failures=100, failure_threshold=None)
        task = asyncio.ensure_future(d.submit("x"))
        await asyncio.sleep(0.1)
        assert d.stats()["failed"] >= 1
        await d.aclose()
        assert d.stats()["in_flight"] == 0, "closing waits for the send in flight (here: its timeout)"
        with pytest.raises(RuntimeError):
            await d.submit("late")
        with pytest.raises(halfopen.DispatcherClosedError):
            await task  # closed with its message retained (issue 21: it hung)

    asyncio.run(main())


def test_a_raising_send_is_reported_once_and_a_raising_on_event_changes_nothing() -> None:
    async def main() -> None:
        calls = 0

        async def flaky(message: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise KeyError("boom")

        def on_event(event: halfopen.RetentionEvent) -> None:
            raise RuntimeError("listener")

        d = halfopen.Dispatcher("f", flaky, concurrency_limit=1, on_event=on_event)
        await d.submit("a")
        await d.submit("b")
        assert d.stats()["delivered"] == 2 and d.stats()["failed"] == 1

    asyncio.run(main())


@pytest.mark.parametrize(
    "options,option",
    [
        ({"max_messages": -1}, "max_messages"),
        ({"max_messages": "5"}, "max_messages"),
        ({"max_bytes": float("inf")}, "max_bytes"),
        ({"max_age": float("nan")}, "max_age"),
        ({"max_age": 0}, "max_age"),
        ({"max_attempts": True}, "max_attempts"),
        ({"overflow": "drop_newest"}, "overflow"),
        ({"probe": 3}, "probe"),
        ({"release_rate": 5}, "release_rate"),
        ({"release_rate": (0, 1)}, "release_rate"),
        ({"concurrency_limit": None}, "release_rate"),
        ({"size": 3}, "size"),
        ({"timeout": float("inf")}, "timeout"),
        ({"is_failure": "no"}, "is_failure"),
        ({"exclude": "no"}, "exclude"),
        ({"exclude": int}, "exclude"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_options_name_the_option(options: Dict[str, Any], option: str) -> None:
    async def send(message: Any) -> None:
        pass

    with pytest.raises((TypeError, ValueError)) as raised:
        halfopen.Dispatcher("x", send, **{"concurrency_limit": 1, **options})
    assert raised.value.option == option, str(raised.value)  # type: ignore[attr-defined]


def test_a_bad_size_is_a_type_error_and_nothing_is_held() -> None:
    queue: halfopen.RetentionQueue[Any] = halfopen.RetentionQueue("q", concurrency_limit=1, size=lambda m: -1)
    with pytest.raises(TypeError):
        queue.submit("m")
    assert queue.stats()["submitted"] == 0
    with pytest.raises(TypeError):
        halfopen.RetentionQueue("q", concurrency_limit=1).submit(object())


def test_a_restored_queue_takes_its_messages_back_and_refuses_a_snapshot_missing_one() -> None:
    q: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    held = {}
    for m in "abc":
        _, seq = q.submit(m)
        assert seq is not None
        held[seq] = m
    text = q.to_json()
    again: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    again.restore_json(text, held)
    assert [m for _, m in again.next()] == ["a"]
    with pytest.raises(halfopen.SnapshotError) as err:
        halfopen.RetentionQueue("q", concurrency_limit=1).restore_json(text, {0: "a"})
    assert err.value.kind == "corrupt"


# Regressions from the hostile review (issue 13).


def test_on_event_that_changes_the_dispatcher_sees_events_in_the_cores_order() -> None:
    async def main() -> None:
        clock = [0.0]
        seen: List[str] = []

        def on_event(e: halfopen.RetentionEvent) -> None:
            seen.append(e.kind if e.change is None else f"{e.kind}:{e.change.to_state}")
            if e.kind == "dead" and e.seq == 0:
                d.release()

        async def never(message: Any) -> None:
            await asyncio.sleep(3600)

        d = halfopen.Dispatcher("o", never, concurrency_limit=1, max_age=1.0, clock=lambda: clock[0], on_event=on_event)
        d.force_open()
        tasks = [asyncio.ensure_future(d.submit(m)) for m in "abc"]
        await turns()
        clock[0] = 2.0
        d.poll()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert seen == ["transition:OPEN", "dead", "dead", "dead", "transition:HALF_OPEN"]
        await d.aclose()

    asyncio.run(main())


def test_a_send_raising_a_base_exception_is_still_reported() -> None:
    class Odd(BaseException):
        pass

    async def main() -> None:
        calls = 0

        async def send(message: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise Odd()

        d = halfopen.Dispatcher("b", send, concurrency_limit=1, consecutive_failures=10)
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, ctx: None)
        await d.submit("a")
        assert d.stats()["failed"] == 1 and d.stats()["in_flight"] == 0

    asyncio.run(main())


def test_a_plain_function_as_send_works_too() -> None:
    async def main() -> None:
        got: List[str] = []
        d = halfopen.Dispatcher("s", got.append, concurrency_limit=1)
        await d.submit("x")
        assert got == ["x"] and d.stats()["sent"] == 1

    asyncio.run(main())


def test_restore_only_into_a_queue_that_has_taken_nothing_and_typed_errors() -> None:
    q: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    _, seq = q.submit("old")
    text = q.to_json()
    with pytest.raises(ValueError) as used:
        q.restore_json(text, {0: "old"})
    assert used.value.option == "snapshot"  # type: ignore[attr-defined]
    assert q.stats()["retained"] + q.stats()["in_flight"] == 1, "nothing lost"
    fresh: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    with pytest.raises(TypeError) as bad:
        fresh.restore_json(text, [(0, "old")])  # type: ignore[arg-type]
    assert bad.value.option == "messages"  # type: ignore[attr-defined]
    assert q.message(-1) is None and q.message(2**80) is None and q.message(True) is None
    extra: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    with pytest.raises(halfopen.SnapshotError) as lost:
        extra.restore_json(text, {0: "old", 9: "never submitted"})
    assert lost.value.kind == "corrupt"


def test_a_clock_that_fails_while_the_timer_fires_does_not_stop_the_dispatcher() -> None:
    async def main() -> None:
        now = [0.0]
        failing = [False]

        def clock() -> float:
            if failing[0]:
                raise RuntimeError("clock down")
            return now[0]

        got: List[str] = []

        async def send(message: str) -> None:
            got.append(message)

        d = halfopen.Dispatcher("c", send, concurrency_limit=1, clock=clock)
        d.force_open(0.05)
        task = asyncio.ensure_future(d.submit("m"))
        await turns()
        failing[0] = True
        now[0] = 1.0
        d.poll()  # the clock fails: logged, the timer set again
        failing[0] = False
        await asyncio.wait_for(task, 5)
        assert got == ["m"]

    asyncio.run(main())


class Stop(BaseException):
    """Not an Exception: what an interrupt looks like to a classifier."""


@pytest.mark.parametrize("awaited", [True, False])
def test_an_interrupted_exclude_predicate_counts_the_send_cancelled_and_propagates(awaited: bool) -> None:
    """As a breaker's: an interrupted classifier says nothing of the upstream."""

    def interrupted(exc: BaseException) -> bool:
        raise Stop()

    async def main() -> None:
        async def failing(message: Any) -> None:
            raise RuntimeError("500")

        def failing_now(message: Any) -> None:
            raise RuntimeError("500")

        d: halfopen.Dispatcher[Any] = halfopen.Dispatcher(
            "d", failing if awaited else failing_now, concurrency_limit=1, max_attempts=1, exclude=interrupted
        )
        task = asyncio.ensure_future(d.submit("m"))
        await turns()
        stats = d.queue.stats()
        # Not a failure (no attempt, no dead letter): back in the queue.
        assert (stats["failed"], stats["dead"], stats["retained"]) == (0, 0, 1), stats
        task.cancel()

    asyncio.run(main())


def test_a_base_exception_named_in_exclude_is_not_a_failure() -> None:
    async def main() -> None:
        def refused(message: Any) -> None:
            raise Stop()

        d: halfopen.Dispatcher[Any] = halfopen.Dispatcher("d", refused, concurrency_limit=1, exclude=Stop)
        with pytest.raises(halfopen.DeadLetterError) as dead:
            await d.submit("m")
        assert dead.value.reason == "refused"
        assert d.queue.stats()["failed"] == 0

    asyncio.run(main())
