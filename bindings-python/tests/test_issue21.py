"""Regression tests for what hostile users found (issue 21): each test names
the defect it pins. Time comes from an injected clock unless a test says
otherwise."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import signal
import subprocess
import sys
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


# 3. An async predicate's coroutine is true (every error excluded); an async listener never ran.


async def async_predicate(exc: BaseException) -> bool:
    return False


async def async_generator_predicate(exc: BaseException) -> Any:
    yield False


class AsyncCallable:
    async def __call__(self, arg: Any) -> bool:
        return False

    async def method(self, arg: Any) -> bool:
        return False


ASYNC_CALLABLES = [
    async_predicate,
    async_generator_predicate,
    AsyncCallable(),
    AsyncCallable().method,
    functools.partial(async_predicate),
    functools.partial(functools.partial(AsyncCallable())),
]


async def post(message: Any) -> None:
    pass


@pytest.mark.parametrize("fn", ASYNC_CALLABLES)
def test_an_async_predicate_listener_or_clock_is_refused_when_given(fn: Any) -> None:
    refused_by = [
        (lambda: CircuitBreaker("x", exclude=fn), "exclude"),
        (lambda: CircuitBreaker("x", exclude=[KeyError, fn]), "exclude"),
        (lambda: halfopen.Registry(exclude=fn), "exclude"),
        (lambda: CircuitBreaker("x").on_state_change(fn), "callback"),
        (lambda: halfopen.Registry().on_state_change(fn), "callback"),
        (lambda: CircuitBreaker("x", clock=fn), "clock"),
        (lambda: halfopen.RetentionQueue("q", concurrency_limit=1, clock=fn), "clock"),
        (lambda: halfopen.Dispatcher("d", post, concurrency_limit=1, exclude=fn), "exclude"),
        (lambda: halfopen.Dispatcher("d", post, concurrency_limit=1, on_event=fn), "on_event"),
    ]
    for make, option in refused_by:
        with pytest.raises(TypeError, match="not an async one") as refused:
            make()
        assert refused.value.option == option  # type: ignore[attr-defined]


def test_plain_callables_are_still_taken_where_async_ones_are_refused() -> None:
    class Plain:
        def __call__(self, exc: BaseException) -> bool:
            return isinstance(exc, KeyError)

    b = CircuitBreaker("x", failure_threshold=1, exclude=functools.partial(Plain()), clock=Clock())
    with pytest.raises(KeyError):
        b.call(lambda: {}["k"])
    assert b.state is State.CLOSED and b.metrics()["ignored"] == 1


# 4. exclude in the forms pybreaker users write: lists, mixed, nested; a class that is no exception's refused.


class Widget:
    pass


def is_429(e: BaseException) -> bool:
    return "429" in str(e)


@pytest.mark.parametrize(
    "exclude",
    [
        lambda: [KeyError],
        lambda: [KeyError, is_429],
        lambda: (KeyError, is_429),
        lambda: ((KeyError, (LookupError, [is_429])),),
        lambda: [[KeyError], ([is_429],)],
        lambda: {KeyError},
        lambda: (e for e in (KeyError, is_429)),
    ],
)
def test_exclude_takes_any_iterable_of_classes_and_predicates_nested(exclude: Any) -> None:
    clock = Clock()
    for source in (
        CircuitBreaker("x", failure_threshold=2, exclude=exclude(), clock=clock),
        halfopen.Registry(failure_threshold=2, exclude=exclude(), clock=clock).get("x"),
    ):
        with pytest.raises(KeyError):
            source.call(lambda: {}["k"])
        with pytest.raises(RuntimeError):
            source.call(fail)
        m = source.metrics()
        assert m is not None and (m["ignored"], m["failures"]) == (1, 1)


def test_exclude_with_a_predicate_in_a_list_ignores_what_it_says() -> None:
    def throttled() -> None:
        raise RuntimeError("429 too many requests")

    b = CircuitBreaker("x", failure_threshold=1, exclude=[KeyError, is_429], clock=Clock())
    with pytest.raises(RuntimeError):
        b.call(throttled)
    assert b.state is State.CLOSED and b.metrics()["ignored"] == 1


@pytest.mark.parametrize("exclude", [Widget, [KeyError, Widget], ((Widget,),), "KeyError", [1], [None], b"x"])
def test_exclude_refuses_what_is_neither_an_exception_class_nor_a_predicate(exclude: Any) -> None:
    for make in (lambda: CircuitBreaker("x", exclude=exclude), lambda: halfopen.Registry(exclude=exclude)):
        with pytest.raises(TypeError, match="^exclude ") as refused:
            make()
        assert refused.value.option == "exclude"  # type: ignore[attr-defined]


def test_exclude_that_holds_itself_is_refused() -> None:
    loop: List[Any] = [KeyError]
    loop.append(loop)
    with pytest.raises(TypeError, match="^exclude "):
        CircuitBreaker("x", exclude=loop)


# 2. An interrupt, an exit or a signal handler's exception from a listener, a
# predicate or the clock was only logged; it propagates, after the bookkeeping.


def test_an_interrupt_from_a_listener_propagates_after_the_call_is_reported() -> None:
    b = CircuitBreaker("x", failure_threshold=1, clock=Clock())
    seen: List[Any] = []

    def interrupting(change: halfopen.StateChange) -> None:
        seen.append(("first", change.to_state))
        raise KeyboardInterrupt

    b.on_state_change(interrupting)
    b.on_state_change(lambda change: seen.append(("second", change.to_state)))
    with pytest.raises(KeyboardInterrupt):
        b.call(fail)
    # The change reached every listener; the failure was counted once.
    assert seen == [("first", State.OPEN), ("second", State.OPEN)]
    m = b.metrics()
    assert (m["admitted"], m["failures"], m["in_flight"], b.state) == (1, 1, 0, State.OPEN)


@pytest.mark.parametrize("escaping", [KeyboardInterrupt, SystemExit])
def test_an_exit_from_a_listener_at_admission_reports_the_permit_as_cancelled(escaping: type) -> None:
    clock = Clock()
    b = CircuitBreaker("x", failure_threshold=1, open_timeout=1.0, half_open_max_attempts=1, clock=clock)
    registry = halfopen.Registry(failure_threshold=1, open_timeout=1.0, half_open_max_attempts=1, clock=clock)
    for source in (b, registry.get("a")):
        trip(source)
        source_listen = b.on_state_change if source is b else registry.on_state_change

        def exiting(change: halfopen.StateChange) -> None:
            if change.to_state is State.HALF_OPEN:
                raise escaping

        source_listen(exiting)
    clock.now = 2.0
    for source in (b, registry.get("a")):
        called: List[int] = []
        with pytest.raises(escaping):
            source.call(called.append, 1)
        # Not called; its permit (the probe's) reported: the next call is the probe.
        m = source.metrics()
        assert called == [] and m is not None and (m["cancelled"], m["in_flight"]) == (1, 0)
        assert source.call(len, "x") == 1 and source.state is State.CLOSED


def test_an_interrupt_from_a_listener_leaves_later_changes_queued_in_order() -> None:
    b = CircuitBreaker("x", clock=Clock())
    seen: List[Any] = []

    def listener(change: halfopen.StateChange) -> None:
        seen.append(change.to_state)
        if change.to_state is State.OPEN:
            b.force_close()  # noted behind this change
            raise KeyboardInterrupt

    b.on_state_change(listener)
    with pytest.raises(KeyboardInterrupt):
        b.force_open()
    assert seen == [State.OPEN] and b.state is State.CLOSED
    b.call(len, "x")  # the next operation delivers what is queued
    assert seen == [State.OPEN, State.CLOSED]


def test_an_interrupt_from_an_exclude_predicate_propagates_and_counts_the_call_as_cancelled() -> None:
    def interrupted(exc: BaseException) -> bool:
        raise KeyboardInterrupt

    b = CircuitBreaker("x", failure_threshold=1, exclude=interrupted, clock=Clock())
    registry = halfopen.Registry(failure_threshold=1, exclude=[KeyError, interrupted], clock=Clock())
    for source in (b, registry.get("a")):
        with pytest.raises(KeyboardInterrupt) as raised:
            source.call(fail)
        assert isinstance(raised.value.__context__, RuntimeError)
        m = source.metrics()
        assert m is not None and (m["failures"], m["cancelled"], m["in_flight"]) == (0, 1, 0)
        permit = source.try_acquire()
        with pytest.raises(KeyboardInterrupt):
            source.record_exception(permit, RuntimeError("x"))
        with pytest.raises(ValueError, match="already reported"):
            source.record(permit, "failure")


def test_an_interrupt_from_the_clock_at_the_report_propagates_after_the_report() -> None:
    readings = iter([0.0])

    def clock() -> float:
        try:
            return next(readings)
        except StopIteration:
            raise KeyboardInterrupt from None

    b = CircuitBreaker("x", clock=clock)
    with pytest.raises(KeyboardInterrupt):
        b.call(len, "x")  # admitted at 0.0; the report's reading is interrupted
    readings = iter([5.0])
    m = b.metrics()
    assert (m["admitted"], m["successes"], m["in_flight"]) == (1, 1, 0)


class AlarmTimeout(Exception):
    pass


def test_a_signal_handlers_exception_from_a_listener_propagates() -> None:
    def handler(signum: int, frame: Any) -> None:
        raise AlarmTimeout("deadline")

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        b = CircuitBreaker("x", failure_threshold=1, clock=Clock())
        b.on_state_change(lambda change: signal.raise_signal(signal.SIGUSR1))
        with pytest.raises(AlarmTimeout):
            b.call(fail)
        assert b.metrics()["failures"] == 1 and b.state is State.OPEN
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_listeners_ordinary_exception_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    b = CircuitBreaker("x", failure_threshold=1, clock=Clock())
    b.on_state_change(lambda change: 1 / 0)
    with pytest.raises(RuntimeError):
        b.call(fail)
    assert "a state-change listener raised" in caplog.text


# 9. A subclass could not take a keyword of its own ("team is not an option").


class TeamBreaker(CircuitBreaker):
    def __init__(self, name: str, *, team: str, **options: Any) -> None:
        super().__init__(name, **options)
        self.team = team


def test_a_subclass_takes_keywords_of_its_own_and_passes_the_options_on() -> None:
    clock = Clock()
    b = TeamBreaker("payments", team="core", failure_threshold=1, open_timeout=5.0, exclude=[KeyError], clock=clock)
    assert (b.name, b.team, b.state) == ("payments", "core", State.CLOSED)
    with pytest.raises(KeyError):
        b.call(lambda: {}["k"])
    trip(b)
    assert b.state is State.OPEN and b.poll_timeout() == 5.0  # the options took effect, the clock too
    with pytest.raises(CircuitOpenError) as refused:
        b.call(len, "x")
    assert refused.value.breaker_name == "payments"
    restored = TeamBreaker.from_json("payments", b.to_json(), team="core", failure_threshold=1, open_timeout=5.0, clock=clock)
    assert restored.state is State.OPEN and restored.team == "core"


def test_a_subclass_may_derive_the_name_and_its_options_are_still_checked() -> None:
    class Derived(CircuitBreaker):
        def __init__(self, team: str, **options: Any) -> None:
            super().__init__(f"team-{team}", **options)

    b = Derived("core", failure_threshold=2)
    assert b.name == "team-core" and "team-core" in b.prometheus()
    with pytest.raises(TypeError, match="failur_threshold is not an option"):
        TeamBreaker("p", team="core", failur_threshold=1)
    with pytest.raises(ValueError) as refused:
        TeamBreaker("p", team="core", failure_threshold=0)
    assert refused.value.option == "failure_threshold"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="team is not an option"):
        CircuitBreaker("p", team="core")  # type: ignore[call-arg]


def test_a_subclass_must_configure_before_use_and_one_with_its_own_new_is_left_alone() -> None:
    class Early(CircuitBreaker):
        def __init__(self, name: str, **options: Any) -> None:
            self.on_state_change(print)
            super().__init__(name, **options)

    with pytest.raises(TypeError, match="must run before the breaker is used"):
        Early("x")

    class OwnNew(CircuitBreaker):
        def __new__(cls, name: str, *, team: str, **options: Any) -> "OwnNew":
            return super().__new__(cls, name, **options)  # type: ignore[return-value]

        def __init__(self, name: str, *, team: str, **options: Any) -> None:
            self.team = team

    b = OwnNew("x", team="core", failure_threshold=1)
    trip(b)
    assert (b.name, b.team, b.state) == ("x", "core", State.OPEN)
    # Configured once: calling __init__ again changes nothing.
    b2 = TeamBreaker("y", team="a", failure_threshold=1)
    CircuitBreaker.__init__(b2, "z", failure_threshold=9)
    trip(b2)
    assert b2.name == "y" and b2.state is State.OPEN


# Low: Registry(latency_histogram=True) was a TypeError.


def test_a_registry_keeps_latency_histograms_when_asked() -> None:
    clock = Clock()
    registry = halfopen.Registry(latency_histogram=True, clock=clock)

    def slow() -> int:
        clock.now += 0.5
        return 1

    assert registry.get("a").call(slow) == 1
    m = registry.metrics("a")
    assert m is not None and (m["latency_count"], m["latency_max"]) == (1, 0.5)
    assert 'circuit_latency_seconds_count{name="a"} 1' in registry.prometheus()
    assert halfopen.Registry(clock=clock).metrics("a") is None
    plain = halfopen.Registry(clock=clock)
    plain.get("a").call(len, "x")
    assert plain.metrics("a")["latency_count"] is None  # type: ignore[index]
    with pytest.raises(TypeError) as refused:
        halfopen.Registry(latency_histogram=1)  # type: ignore[arg-type]
    assert refused.value.option == "latency_histogram"  # type: ignore[attr-defined]


# 6. A full registry refused a new name while idle breakers existed (the core
# samples), with retry_after None ("held open until released").


def test_a_full_registrys_refusal_says_whether_a_retry_now_would_be_admitted() -> None:
    clock = Clock()
    registry = halfopen.Registry(capacity=100, failure_threshold=5, clock=clock)
    for i in range(95):  # counting a failure: never evicted
        with pytest.raises(RuntimeError):
            registry.get(f"failing-{i}").call(fail)
    for i in range(5):  # idle
        registry.get(f"idle-{i}").call(len, "x")
    hints = []
    for i in range(60):
        name = f"new-{i}"
        try:
            registry.get(name).call(len, "x")
            continue
        except halfopen.RegistryFullError as full:
            hints.append(full.retry_after)
            assert full.reason == "registry_full" and full.state is State.CLOSED
        # The hint is what a retry now meets: 0.0 admitted, None refused again.
        if hints[-1] == 0.0:
            assert registry.get(name).call(len, "x") == 1
        else:
            assert hints[-1] is None
            with pytest.raises(halfopen.RegistryFullError):
                registry.get(name).call(len, "x")
    assert 0.0 in hints and None in hints  # both happen with 5 idle in 100
    assert registry.evictions > 0


def test_a_registry_full_of_failing_breakers_gives_no_retry_time() -> None:
    registry = halfopen.Registry(capacity=20, failure_threshold=5, clock=Clock())
    for i in range(20):
        with pytest.raises(RuntimeError):
            registry.get(f"failing-{i}").call(fail)
    for _ in range(5):
        with pytest.raises(halfopen.RegistryFullError) as full:
            registry.get("new").try_acquire()
        assert full.value.retry_after is None
    assert registry.retry_after("new") is None
    import pickle

    copy = pickle.loads(pickle.dumps(halfopen.RegistryFullError("n", 0.0)))
    assert (copy.breaker_name, copy.retry_after, copy.state) == ("n", 0.0, State.CLOSED)
    assert "until released" not in str(full.value) and "none is known to become idle" in str(full.value)


# Low: error messages naming wrong bounds, the core's field names, a word twice.


@pytest.mark.parametrize(
    "options, option, says",
    [
        ({"concurrency_limit": 0}, "concurrency_limit", "from 1 to 1000000"),
        ({"concurrency_limit": 2**33}, "concurrency_limit", "from 1 to 1000000"),
        ({"window_calls": 70_000}, "window_calls", "from 1 to 128"),
        ({"window_calls": 200}, "window_calls", "from 1 to 128"),
        ({"half_open_max_attempts": 70_000}, "half_open_max_attempts", "from 1 to 1000"),
        ({"half_open_max_attempts": 2_000}, "half_open_max_attempts", "from 1 to 1000"),
        ({"failure_threshold": 2**40}, "failure_threshold", "from 1 to 4294967295"),
        ({"minimum_calls": -1}, "minimum_calls", "from 1 to 4294967295"),
        ({"adaptive_limit": (0, 5)}, "adaptive_limit", "1 <= min <= max <= 1000000"),
        ({"adaptive_limit": (5, 2)}, "adaptive_limit", "1 <= min <= max <= 1000000"),
        ({"adaptive_limit": (1, 2**40)}, "adaptive_limit", "1 <= min <= max <= 1000000"),
        ({"open_timeout": 1e300}, "open_timeout", "is too large: at most 18446744073709 seconds"),
        ({"window": -1.0}, "window", "must not be negative"),
        ({"window": math.nan}, "window", "must be a finite number of seconds"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_options_own_bounds(options: Any, option: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        CircuitBreaker("x", **options)
    assert refused.value.option == option and says in str(refused.value)  # type: ignore[attr-defined]
    assert "adaptive_limit_m" not in str(refused.value) and "from 0 to" not in str(refused.value)


@pytest.mark.parametrize(
    "options, option, says",
    [
        ({"max_attempts": 0}, "max_attempts", "max_attempts must be a whole number from 1 to 4294967295"),
        ({"max_messages": -1}, "max_messages", "max_messages must be a whole number from 1 to 4294967295"),
        ({"max_bytes": 0}, "max_bytes", "max_bytes must be a whole number from 1 to 2**53 - 1"),
        ({"release_rate": (0, 1)}, "release_rate", "each a whole number from 1 to 4294967295"),
        ({"max_age": 1e300}, "max_age", "is too large"),
        ({"max_age": 0}, "max_age", "must be above 0 seconds"),
    ],
)
def test_a_queues_values_out_of_range_are_refused_saying_what_the_option_takes(options: Any, option: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        halfopen.RetentionQueue("q", concurrency_limit=1, **options)
    assert refused.value.option == option and says in str(refused.value)  # type: ignore[attr-defined]
    assert f"invalid {option}" not in str(refused.value)


def test_force_open_for_1e300_seconds_says_too_large_and_a_configuration_past_capacity_names_no_word_twice() -> None:
    with pytest.raises(ValueError, match="is too large"):
        CircuitBreaker("x").force_open(1e300)
    registry = halfopen.Registry(capacity=1)
    registry.configure("a", failure_threshold=2)
    with pytest.raises(ValueError) as refused:
        registry.configure("b", failure_threshold=2)
    assert refused.value.option == "capacity" and "capacity registry" not in str(refused.value)  # type: ignore[attr-defined]
    assert str(refused.value).startswith("capacity 1 reached")


# Low: the decorator took a generator function, then refused its calls with advice that failed too.


def test_decorating_a_generator_function_is_refused_with_advice_that_works() -> None:
    b = CircuitBreaker("x", clock=Clock())

    def lines() -> Any:
        yield 1

    async def chunks() -> Any:
        yield 1

    for fn in (lines, chunks, functools.partial(lines)):
        with pytest.raises(TypeError, match="generator function") as refused:
            b(fn)
        assert refused.value.option == "fn" and "with breaker:" in str(refused.value)  # type: ignore[attr-defined]

    def protected_lines() -> Any:  # the advice
        with b:
            yield 1

    assert list(protected_lines()) == [1] and b.metrics()["successes"] == 1


# Low: repr() without the name.


def test_repr_names_the_breaker_and_its_state() -> None:
    b = CircuitBreaker("openai", failure_threshold=1, clock=Clock())
    trip(b)
    assert repr(b) == "<halfopen.CircuitBreaker 'openai' OPEN>"
    registry = halfopen.Registry()
    registry.get("a").call(len, "x")
    assert repr(registry) == "<halfopen.Registry of 1 breakers>"
    assert repr(registry.get("a")) == "<halfopen.KeyedBreaker 'a' of <halfopen.Registry of 1 breakers>>"

    def broken() -> float:
        raise OSError("no clock")

    assert "'x'" in repr(CircuitBreaker("x", clock=broken))


# Low: Registry.get("\ud800") was accepted, then every call failed.


def test_a_name_with_a_lone_surrogate_is_refused_by_get() -> None:
    with pytest.raises(ValueError) as refused:
        halfopen.Registry().get("bad\ud800")
    assert refused.value.option == "name"  # type: ignore[attr-defined]


# Low: a larger registry's snapshot was "corrupt", saying no more.


def test_a_larger_registrys_snapshot_is_refused_saying_it_has_more_breakers_than_the_capacity() -> None:
    big = halfopen.Registry(capacity=50)
    for i in range(20):
        big.get(f"n{i}").call(len, "x")
    small = halfopen.Registry(capacity=10)
    for restore, snapshot in ((small.restore_json, big.to_json()), (small.restore_bytes, big.to_bytes())):
        with pytest.raises(halfopen.SnapshotError) as refused:
            restore(snapshot)  # type: ignore[operator]
        assert refused.value.kind == "corrupt"
        assert "holds 20 breakers, more than this registry's capacity of 10" in str(refused.value)
        assert "Registry(capacity=20)" in str(refused.value)
    halfopen.Registry(capacity=20).restore_json(big.to_json())


# Low: restore_json(None) raised a SnapshotError (a ValueError), restore_bytes("x") a TypeError.


def test_a_snapshot_of_the_wrong_type_is_a_type_error_for_both_forms() -> None:
    queue: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", concurrency_limit=1)
    for restore_json, restore_bytes in (
        (CircuitBreaker("x").restore_json, CircuitBreaker("x").restore_bytes),
        (halfopen.Registry().restore_json, halfopen.Registry().restore_bytes),
        (lambda t: queue.restore_json(t, {}), lambda b: queue.restore_bytes(b, {})),
    ):
        for bad in (None, b"{}", 3):
            with pytest.raises(TypeError) as refused:
                restore_json(bad)
            assert not isinstance(refused.value, halfopen.SnapshotError)
        with pytest.raises(TypeError):
            restore_bytes("{}")
    with pytest.raises(halfopen.SnapshotError) as malformed:
        CircuitBreaker("x").restore_json("{\ud800}")
    assert malformed.value.kind == "malformed"


# Low: the README's migration guide and units, as the package behaves.


def test_the_migration_guides_pybreaker_example_behaves_as_it_says() -> None:
    clock = Clock()
    breaker = CircuitBreaker(
        "openai", consecutive_failures=3, failure_threshold=None, open_timeout=30.0, backoff_factor=1.0,
        half_open_max_attempts=1, exclude=[ValueError], clock=clock,
    )

    def rejected() -> None:
        raise ValueError("the API refused this question")

    with pytest.raises(RuntimeError):
        breaker.call(fail)
    with pytest.raises(ValueError):  # excluded: counts nothing, not a success
        breaker.call(rejected)
    assert breaker.metrics()["consecutive_failures"] == 1
    for _ in range(2):
        with pytest.raises(RuntimeError):  # the third failure raises its own error
            breaker.call(fail)
    with pytest.raises(halfopen.CircuitOpenError) as refused:
        breaker.call(fail)
    assert refused.value.retry_after == 30.0
    clock.now = 30.0
    assert breaker.call(len, "x") == 1 and breaker.state is State.CLOSED  # one probe closes


def test_error_rate_is_a_percentage_in_metrics_and_a_ratio_in_the_exposition() -> None:
    b = CircuitBreaker("x", failure_threshold=10, clock=Clock())
    b.call(len, "x")
    with pytest.raises(RuntimeError):
        b.call(fail)
    assert b.metrics()["error_rate"] == 50.0
    assert 'circuit_upstream_error_ratio{name="x"} 0.5' in b.prometheus()


def test_a_name_longer_than_1024_bytes_is_refused_wherever_a_name_is_given() -> None:
    long = "é" * 513  # 1026 bytes of UTF-8
    for make in (
        lambda: halfopen.CircuitBreaker(long),
        lambda: halfopen.Registry().get(long).try_acquire(),
        lambda: halfopen.RetentionQueue(long, concurrency_limit=1),
    ):
        with pytest.raises(ValueError) as refused:
            make()
        assert refused.value.option == "name" and "1024" in str(refused.value)  # type: ignore[attr-defined]
    assert halfopen.CircuitBreaker("é" * 512).name == "é" * 512


# §3. A Retry-After read with retry_after() and then applied with force_open()
# was not atomic: a shorter hint could replace a longer one between threads.
# force_open_at_least never shortens an open period in force.


def test_force_open_at_least_keeps_the_longer_hint_everywhere() -> None:
    clock = Clock()
    breaker = CircuitBreaker("hint", clock=clock)
    breaker.force_open_at_least(120)
    clock.now = 1.0
    breaker.force_open_at_least(5)
    assert breaker.retry_after() == pytest.approx(119.0)
    breaker.force_open()
    breaker.force_open_at_least(500)
    assert breaker.retry_after() is None  # held until release() stays held
    registry = halfopen.Registry(clock=clock)
    registry.force_open_at_least("a", 30)
    registry.force_open_at_least("a", 0.01)
    assert registry.retry_after("a") == pytest.approx(30.0)
    assert registry.get("a").retry_after() == pytest.approx(30.0)
    registry.get("b").force_open_at_least(2)
    assert registry.retry_after("b") == pytest.approx(2.0)
    queue = halfopen.RetentionQueue("q", clock=clock, concurrency_limit=1)
    queue.force_open_at_least(7)
    queue.force_open_at_least(1)
    assert queue.state_name == "OPEN"
    assert queue.submit("m") == ("retained", 0)
    assert queue.poll_timeout() == pytest.approx(8.0)  # 1 s + 7 s: the shorter hint after it changed nothing


@pytest.mark.parametrize("bad, error", [
    (None, TypeError), ("5", TypeError), (True, TypeError),
    (-1, ValueError), (math.nan, ValueError), (math.inf, ValueError), (1e300, ValueError),
])
def test_force_open_at_least_refuses_what_is_no_duration(bad: Any, error: type) -> None:
    clock = Clock()
    breaker = CircuitBreaker("hint", clock=clock)
    registry = halfopen.Registry(clock=clock)
    queue = halfopen.RetentionQueue("q", clock=clock, concurrency_limit=1)
    for call in (breaker.force_open_at_least, functools.partial(registry.force_open_at_least, "a"), queue.force_open_at_least):
        with pytest.raises(error, match="seconds"):
            call(bad)
    assert breaker.state is State.CLOSED and queue.state_name == "CLOSED"


# §5. Outputs that scale with a registry's names (the exposition repeats each
# name in every family; a snapshot copies every name) are built with fallible
# allocation: one the memory cannot hold is a MemoryError, never an abort.

MEMORY_CHILD = r"""
import json, resource, sys, halfopen
from halfopen.prometheus import Collector
registry = halfopen.Registry(capacity=2**20, clock=lambda: 0.0)
name = lambda i: f"{i:08d}" + "n" * 1016
for i in range(16_000):
    registry.force_open(name(i))
with open("/proc/self/status") as status:
    vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
# 96 MiB more: not 14 copies of 16 MB (an exposition); 8 MiB: not one (every name listed).
headroom, outputs = {
    "outputs": (96 << 20, (("prometheus", registry.prometheus), ("to_json", registry.to_json), ("to_bytes", registry.to_bytes))),
    "lists": (8 << 20, (("names", registry.names), ("collect", lambda: list(Collector(registry).collect())))),
}[sys.argv[1]]
resource.setrlimit(resource.RLIMIT_AS, (vm + headroom,) * 2)
seen = {}
for what, produce in outputs:
    try:
        seen[what] = len(produce())
    except MemoryError as err:
        seen[what] = str(err)
seen["state"] = registry.state_name(name(7))
print(json.dumps(seen))
"""


def memory_child(which: str) -> dict:
    run = subprocess.run([sys.executable, "-c", MEMORY_CHILD, which], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr  # an abort (the review's) is -6
    seen: dict = json.loads(run.stdout)
    assert seen.pop("state") == "OPEN", "the registry goes on"
    return seen


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmSize from /proc")
def test_an_exposition_the_memory_cannot_hold_is_a_memory_error() -> None:
    seen = memory_child("outputs")
    assert seen["prometheus"] == "out of memory: the exposition did not fit"
    for encoding in ("to_json", "to_bytes"):  # another copy of every name: refused, or whole
        assert seen[encoding] == "out of memory: the snapshot did not fit" or seen[encoding] > 16_000 * 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmSize from /proc")
def test_every_name_listed_or_scraped_that_the_memory_cannot_hold_is_a_memory_error() -> None:
    # The review found `names()` and the Collector's scrape aborting the process.
    assert memory_child("lists") == {
        "names": "out of memory: the names did not fit",
        "collect": "out of memory: the readings did not fit",
    }


# From the final read: an int too large for a float (10**400) was refused as
# "not finite"; it is finite, and too large (or negative).
def test_an_int_beyond_a_float_is_too_large_not_infinite() -> None:
    breaker = CircuitBreaker("big", clock=Clock())
    with pytest.raises(ValueError, match="seconds is too large"):
        breaker.force_open_at_least(10**400)
    with pytest.raises(ValueError, match="seconds must not be negative"):
        breaker.force_open(-(10**400))
    with pytest.raises(ValueError, match="max_age is too large"):
        halfopen.RetentionQueue("q", clock=Clock(), concurrency_limit=1, max_age=10**400)
    assert breaker.state is State.CLOSED
