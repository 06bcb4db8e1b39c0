"""Issue 21, defect 1: a fork's child (gunicorn --preload, multiprocessing's
fork start method) while another thread was delivering a listener, or was
inside a `with` block. Each test forks for real; the child answers with its
exit status. Another thread is parked inside the breaker with events (no
sleeps): the fork happens while it is there."""

from __future__ import annotations

import os
import signal
import threading
import traceback
from typing import Any, Callable, List

import pytest

import halfopen
from halfopen import CircuitBreaker, State

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def in_child(check: Callable[[], bool]) -> int:
    """The exit status of a forked child that runs ``check`` (0: it held)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 3
        try:
            signal.alarm(30)  # a child that hangs dies instead
            status = 0 if check() else 1
        except BaseException:
            traceback.print_exc()
            status = 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class Parked:
    """A thread that parks (in ``park``, called from inside the breaker)
    until ``release``."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.leave = threading.Event()
        self.thread: "threading.Thread | None" = None

    def run(self, enter: Callable[[], Any]) -> None:
        """Runs ``enter`` on a thread and returns once it is parked."""
        self.thread = threading.Thread(target=enter)
        self.thread.start()
        self.inside.wait()

    def park(self) -> None:
        self.inside.set()
        self.leave.wait()

    def release(self) -> None:
        self.leave.set()
        assert self.thread is not None
        self.thread.join()


def test_a_child_forked_while_another_thread_delivers_listeners_delivers_again() -> None:
    b = CircuitBreaker("x", clock=Clock())
    registry = halfopen.Registry(clock=Clock())
    seen: List[Any] = []
    worker = threading.current_thread

    def on_breaker(change: halfopen.StateChange) -> None:
        seen.append((change.name, change.to_state))
        if worker() is not threading.main_thread():
            registry.get("a").force_open()  # delivering b's change, then the registry's

    def on_registry(change: halfopen.StateChange) -> None:
        seen.append((change.name, change.to_state))
        if worker() is not threading.main_thread():
            parked.park()

    parked = Parked()
    b.on_state_change(on_breaker)
    registry.on_state_change(on_registry)
    parked.run(b.force_open)

    def child() -> bool:
        b.force_close()
        registry.get("a").force_close()
        return seen[2:] == [("x", State.CLOSED), ("a", State.CLOSED)]

    status = in_child(child)
    parked.release()
    assert status == 0
    assert seen == [("x", State.OPEN), ("a", State.OPEN)]


def test_a_child_reports_the_blocks_of_threads_the_fork_left_behind() -> None:
    b = CircuitBreaker("x", concurrency_limit=1, clock=Clock())
    registry = halfopen.Registry(concurrency_limit=1, clock=Clock())

    parked = Parked()

    def inside_blocks() -> None:
        with b, registry.get("a"):
            parked.park()

    parked.run(inside_blocks)

    def child() -> bool:
        # That thread does not exist here: its blocks are never left, and
        # their slots must not stay taken.
        answers = (b.call(len, "x"), registry.get("a").call(len, "x"))
        m, r = b.metrics(), registry.metrics("a")
        assert r is not None
        return answers == (1, 1) and (m["cancelled"], m["in_flight"], r["cancelled"], r["in_flight"]) == (1, 0, 1, 0)

    status = in_child(child)
    parked.release()
    assert status == 0
    m = b.metrics()
    assert (m["successes"], m["cancelled"], m["in_flight"]) == (1, 0, 0)


def test_a_child_keeps_the_blocks_of_the_forking_thread_and_of_suspended_generators() -> None:
    b = CircuitBreaker("x", concurrency_limit=2, clock=Clock())

    def generator() -> Any:
        with b:
            yield 1

    suspended = generator()
    next(suspended)  # inside a block, on no thread

    def child() -> bool:
        with b:
            kept = b.metrics()["in_flight"] == 2
        with pytest.raises(StopIteration):
            next(suspended)
        m = b.metrics()
        return kept and (m["successes"], m["cancelled"], m["in_flight"]) == (2, 0, 0)

    assert in_child(child) == 0
    suspended.close()
