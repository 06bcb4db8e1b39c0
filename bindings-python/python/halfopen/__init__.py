"""halfopen: one circuit breaker, written once in Rust (the core decides;
this package translates), for threads and asyncio.

>>> breaker = CircuitBreaker("instance-1", failure_threshold=5, window=60.0, open_timeout=30.0)
>>> breaker.call(len, "abc")
3
"""

from __future__ import annotations

import contextvars
import enum
import functools
import inspect
from typing import Any, Awaitable, Callable, List, TypeVar

from ._native import NativeBreaker, Permit, StateChange
from ._support import (
    CircuitBreakerError,
    CircuitOpenError,
    ConcurrencyLimitError,
    SnapshotError,
)

__all__ = [
    "CircuitBreaker",
    "CircuitBreakerError",
    "CircuitOpenError",
    "ConcurrencyLimitError",
    "Permit",
    "SnapshotError",
    "State",
    "StateChange",
]

T = TypeVar("T")


class State(enum.Enum):
    """A breaker's state; the values are seed 000's strings."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


# The permits of `with breaker:` blocks entered and not yet left, per thread
# and per asyncio task (a context variable holds a stack per context).
_ENTERED: contextvars.ContextVar[List[Permit]] = contextvars.ContextVar("halfopen_entered")


class CircuitBreaker(NativeBreaker):
    """A circuit breaker for one upstream.

    ``CircuitBreaker(name, *, failure_threshold=5, window=60.0, open_timeout=30.0,
    half_open_max_attempts=3, ...)``: every core option under its snake_case
    name, times in seconds; unset options take the core's defaults (seed
    000's breaker), ``None`` unsets a policy. Also ``exclude`` (exception
    classes, or a predicate on the exception, that never count) and ``clock``
    (a callable returning seconds, for tests; monotonic by default, read in
    Rust).

    Outcomes: a call that returns is a success; an exception is a failure,
    unless ``exclude`` says otherwise (then it counts nothing); a
    cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``,
    ``SystemExit``, ``GeneratorExit``) counts nothing. Every exception is
    re-raised; every admitted call is reported exactly once, and its slot
    freed. No lock is held while the call runs or while a listener runs.
    """

    @property
    def state(self) -> State:
        """The state now, counting elapsed time."""
        return State(self.state_name())

    async def call_async(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Awaits ``fn(*args, **kwargs)`` if the breaker admits it (see ``call``)."""
        permit = self.try_acquire()
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            self.record_exception(permit, exc)
            raise
        self.record(permit, "success")
        return result

    def __call__(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Decorates ``fn`` (a plain function, or an ``async def``: it gets an async wrapper)."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                return await self.call_async(fn, *args, **kwargs)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> T:
            return self.call(fn, *args, **kwargs)

        return guarded

    def __enter__(self) -> "CircuitBreaker":
        """Raises ``CircuitBreakerError`` before the block if not admitted."""
        permit = self.try_acquire()
        _ENTERED.set(_ENTERED.get([]) + [permit])
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        stack = _ENTERED.get([])
        permit, rest = stack[-1], stack[:-1]
        _ENTERED.set(rest)
        if exc is None:
            self.record(permit, "success")
        else:
            self.record_exception(permit, exc)
        return False

    async def __aenter__(self) -> "CircuitBreaker":
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return self.__exit__(exc_type, exc, tb)

    @classmethod
    def from_json(cls, name: str, snapshot: str, /, **options: Any) -> "CircuitBreaker":
        """A breaker built from ``options`` with the state of a JSON snapshot."""
        breaker = cls(name, **options)
        breaker.restore_json(snapshot)
        return breaker

    @classmethod
    def from_bytes(cls, name: str, snapshot: bytes, /, **options: Any) -> "CircuitBreaker":
        """A breaker built from ``options`` with the state of a compact snapshot."""
        breaker = cls(name, **options)
        breaker.restore_bytes(snapshot)
        return breaker
