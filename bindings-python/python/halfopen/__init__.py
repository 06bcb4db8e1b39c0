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
import threading
from typing import Any, Awaitable, Callable, Dict, List, Literal, Optional, Tuple, TypeVar

from ._native import NativeBreaker, NativeRegistry, Permit, StateChange
from ._support import (
    CircuitBreakerError,
    CircuitOpenError,
    ConcurrencyLimitError,
    RegistryFullError,
    SnapshotError,
)

__all__ = [
    "CircuitBreaker",
    "CircuitBreakerError",
    "CircuitOpenError",
    "ConcurrencyLimitError",
    "KeyedBreaker",
    "Permit",
    "Registry",
    "RegistryFullError",
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


# The permits of `with breaker:` blocks entered and not yet left: a stack per
# breaker (its `_with_key()`) and per context (thread, asyncio task), held in
# a context variable as an immutable mapping (each context gets its own).
_ENTERED: contextvars.ContextVar[Dict[Any, Tuple[Permit, ...]]] = contextvars.ContextVar("halfopen_entered")


class _Outstanding:
    """The permits of a breaker's `with` blocks entered and not yet left, in
    every context: a block left in another context than it was entered in
    (an exit stack torn down by another task) reports one of them, so that
    every permit is still reported exactly once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.permits: List[Permit] = []


# Serializes the first use of a breaker's table of `with` permits.
_MAKING = threading.Lock()


class _Protects:
    """The forms of a protected call, over ``call``, ``try_acquire``,
    ``record`` and ``record_exception``: asyncio, the decorator, and the
    context managers (which raise ``CircuitBreakerError`` before the block
    when the call is refused)."""

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        raise NotImplementedError

    def try_acquire(self) -> Permit:
        raise NotImplementedError

    def record(self, permit: Permit, outcome: str) -> None:
        raise NotImplementedError

    def record_exception(self, permit: Permit, exc: BaseException) -> None:
        raise NotImplementedError

    def _with_key(self) -> Any:
        """What identifies the breaker's `with` blocks."""
        raise NotImplementedError

    def _outstanding(self) -> _Outstanding:
        raise NotImplementedError

    async def call_async(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Awaits ``fn(*args, **kwargs)`` if the breaker admits it (see
        ``call``). ``fn`` must return an awaitable: anything else is a
        ``TypeError`` (nothing counted)."""
        permit = self.try_acquire()
        try:
            awaitable = fn(*args, **kwargs)
        except BaseException as exc:
            self.record_exception(permit, exc)
            raise
        if not inspect.isawaitable(awaitable):
            self.record(permit, "cancelled")
            error = TypeError(f"fn returned {type(awaitable).__name__}, not an awaitable: use call()")
            setattr(error, "option", "fn")  # noqa: B010 - an attribute of this instance
            raise error
        try:
            result = await awaitable
        except BaseException as exc:
            self.record_exception(permit, exc)
            raise
        self.record(permit, "success")
        return result

    def __call__(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Decorates ``fn`` (a plain function, or an ``async def``: it gets an async wrapper)."""
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None)):

            coroutine_fn: Callable[..., Awaitable[Any]] = fn  # type: ignore[assignment]

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                return await self.call_async(coroutine_fn, *args, **kwargs)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> T:
            return self.call(fn, *args, **kwargs)

        return guarded

    def __enter__(self: P) -> P:
        """Raises ``CircuitBreakerError`` before the block if not admitted."""
        permit = self.try_acquire()
        key = self._with_key()
        entered = dict(_ENTERED.get({}))
        entered[key] = entered.get(key, ()) + (permit,)
        _ENTERED.set(entered)
        outstanding = self._outstanding()
        with outstanding.lock:
            outstanding.permits.append(permit)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        key = self._with_key()
        entered = dict(_ENTERED.get({}))
        stack = entered.get(key, ())
        outstanding = self._outstanding()
        with outstanding.lock:
            if stack and stack[-1] in outstanding.permits:
                permit = stack[-1]
                outstanding.permits.remove(permit)
            elif outstanding.permits:
                # Left in another context than entered: one of the breaker's.
                permit = outstanding.permits.pop(0)
            else:
                raise RuntimeError("a with block was left more times than it was entered")
        if stack:
            # An empty stack's key goes: the mapping must not keep a breaker alive.
            if len(stack) > 1:
                entered[key] = stack[:-1]
            else:
                del entered[key]
            _ENTERED.set(entered)
        if exc is None:
            self.record(permit, "success")
        else:
            self.record_exception(permit, exc)
        return False

    async def __aenter__(self: P) -> P:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        return self.__exit__(exc_type, exc, tb)


P = TypeVar("P", bound=_Protects)


class CircuitBreaker(_Protects, NativeBreaker):
    """A circuit breaker for one upstream.

    ``CircuitBreaker(name, *, failure_threshold=5, window=60.0, open_timeout=30.0,
    half_open_max_attempts=3, ...)``: every core option under its snake_case
    name, times in seconds; unset options take the core's defaults (seed
    000's breaker), ``None`` unsets a policy. Also ``exclude`` (exception
    classes, or a predicate on the exception, that never count), ``clock``
    (a callable returning seconds, for tests; monotonic by default, read in
    Rust) and ``latency_histogram``.

    Outcomes: a call that returns is a success; an exception is a failure,
    unless ``exclude`` says otherwise (then it counts nothing); a
    cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``,
    ``SystemExit``, ``GeneratorExit``) counts nothing. Every exception is
    re-raised; every admitted call is reported exactly once, and its slot
    freed. No lock is held while the call runs or while a listener runs.
    """

    call = NativeBreaker.call
    try_acquire = NativeBreaker.try_acquire
    record = NativeBreaker.record
    record_exception = NativeBreaker.record_exception

    def _with_key(self) -> Any:
        return self

    def _outstanding(self) -> _Outstanding:
        # Made on first use (a native instance's attributes are its own).
        try:
            return self.__dict__["_with_permits"]  # type: ignore[no-any-return]
        except KeyError:
            with _MAKING:
                return self.__dict__.setdefault("_with_permits", _Outstanding())  # type: ignore[no-any-return]

    @property
    def state(self) -> State:
        """The state now, counting elapsed time."""
        return State(self.state_name())

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


class Registry(NativeRegistry):
    """One breaker per name (seed 000's ``breakerFor``), made on first use,
    at most ``capacity`` (10,000 by default): a new name evicts the least
    recently used idle breaker, never one that is open, busy or counting
    failures (``RegistryFullError`` if none is idle).

    ``Registry(*, capacity=10000, exclude=None, clock=None, **options)``:
    the options of every breaker (``configure(name, **options)`` changes
    them for one name).
    """

    def get(self, name: str) -> "KeyedBreaker":
        """``name``'s breaker, as a handle (made on its first call)."""
        if not isinstance(name, str):
            error: Exception = TypeError(f"name must be a str, got {type(name).__name__}")
        elif not name:
            error = ValueError("name must not be empty")
        else:
            return KeyedBreaker(self, name)
        setattr(error, "option", "name")  # noqa: B010 - an attribute of this instance
        raise error

    def _outstanding(self, name: str) -> _Outstanding:
        with _MAKING:
            table = self.__dict__.setdefault("_with_permits", {})
            return table.setdefault(name, _Outstanding())  # type: ignore[no-any-return]


class KeyedBreaker(_Protects):
    """A registry's breaker for one name: the forms of ``CircuitBreaker``."""

    __slots__ = ("registry", "name")

    def __init__(self, registry: Registry, name: str) -> None:
        self.registry = registry
        self.name = name

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return self.registry.call(self.name, fn, *args, **kwargs)

    def try_acquire(self) -> Permit:
        return self.registry.try_acquire(self.name)

    def record(self, permit: Permit, outcome: str) -> None:
        self._check(permit)
        self.registry.record(permit, outcome)

    def record_exception(self, permit: Permit, exc: BaseException) -> None:
        self._check(permit)
        self.registry.record_exception(permit, exc)

    def _check(self, permit: Permit) -> None:
        if getattr(permit, "name", None) != self.name:
            raise TypeError(f"permit was issued for another name than {self.name!r}")

    def _with_key(self) -> Any:
        return (self.registry, self.name)

    def _outstanding(self) -> _Outstanding:
        return self.registry._outstanding(self.name)

    @property
    def state(self) -> State:
        return State(self.registry.state_name(self.name))

    def retry_after(self) -> Optional[float]:
        return self.registry.retry_after(self.name)

    def metrics(self) -> Optional[Dict[str, Any]]:
        return self.registry.metrics(self.name)

    def force_open(self, seconds: Optional[float] = None) -> None:
        self.registry.force_open(self.name, seconds)

    def force_close(self) -> None:
        self.registry.force_close(self.name)

    def disable(self) -> None:
        self.registry.disable(self.name)

    def release(self) -> None:
        self.registry.release(self.name)

    def reset(self) -> None:
        self.registry.reset(self.name)

    def handle_timeout(self) -> None:
        self.registry.handle_timeout(self.name)

    def mode(self) -> str:
        return self.registry.mode(self.name)

    def poll_timeout(self) -> Optional[float]:
        return self.registry.poll_timeout(self.name)
