"""halfopen: one circuit breaker, written once in Rust (the core decides;
this package translates), for threads and asyncio.

>>> breaker = CircuitBreaker("instance-1", failure_threshold=5, window=60.0, open_timeout=30.0)
>>> breaker.call(len, "abc")
3
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, Dict, Literal, Optional, ParamSpec, TypeVar, cast

from . import _native
from . import group as _group
from ._native import NativeBreaker, NativeRegistry, Permit, StateChange
from .group import GroupStatus, RedisGroup, RegistryGroupStatus
from .outbox import Outbox, OutboxClosed, OutboxEvent, PersistenceWarning, Receipt, StateNotResumedWarning, StoreUnavailableError
from .retention import (
    DeadLetterError,
    Dispatcher,
    DispatcherClosedError,
    RetentionEvent,
    RetentionFullError,
    RetentionQueue,
)
from ._support import (
    CircuitBreakerError,
    is_generator,
    CircuitOpenError,
    ConcurrencyLimitError,
    RegistryFullError,
    SnapshotError,
    State,
)

__all__ = [
    "CircuitBreaker",
    "CircuitBreakerError",
    "CircuitOpenError",
    "ConcurrencyLimitError",
    "DeadLetterError",
    "Dispatcher",
    "DispatcherClosedError",
    "GroupStatus",
    "KeyedBreaker",
    "Outbox",
    "OutboxClosed",
    "OutboxEvent",
    "Permit",
    "PersistenceWarning",
    "Receipt",
    "Registry",
    "RedisGroup",
    "RegistryGroupStatus",
    "RegistryFullError",
    "RetentionEvent",
    "RetentionFullError",
    "RetentionQueue",
    "SnapshotError",
    "State",
    "StateChange",
    "StateNotResumedWarning",
    "StoreUnavailableError",
]

T = TypeVar("T")
#: The protected function's parameters: mypy checks a protected call's arguments.
Params = ParamSpec("Params")


class _Protects:
    """The forms of a protected call, over ``call``, ``try_acquire``,
    ``record``, ``record_exception`` and ``__enter__``/``__exit__`` (which
    raise ``CircuitBreakerError`` before the block when the call is
    refused): asyncio, the decorator, ``async with``."""

    __slots__ = ()

    @property
    def fallback(self) -> Optional[Callable[..., Any]]:
        raise NotImplementedError

    def call(self, fn: Callable[Params, T], /, *args: Params.args, **kwargs: Params.kwargs) -> T:
        raise NotImplementedError

    def try_acquire(self) -> Permit:
        raise NotImplementedError

    def record(self, permit: Permit, outcome: str) -> None:
        raise NotImplementedError

    def record_exception(self, permit: Permit, exc: BaseException) -> None:
        raise NotImplementedError

    def __enter__(self: P) -> P:
        raise NotImplementedError

    def __exit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Literal[False]:
        raise NotImplementedError

    async def call_async(
        self, fn: Callable[Params, Awaitable[T]], /, *args: Params.args, **kwargs: Params.kwargs
    ) -> T:
        """Awaits ``fn(*args, **kwargs)`` if the breaker admits it (see
        ``call``); refused, it raises ``CircuitBreakerError`` or returns the
        fallback's result (awaited if it is awaitable). ``fn`` must return
        an awaitable: anything else is a ``TypeError`` (nothing counted)."""
        try:
            permit = self.try_acquire()
        except CircuitBreakerError:
            fallback = self.fallback
            if fallback is None:
                raise
            answer = fallback(*args, **kwargs)
            return await answer if inspect.isawaitable(answer) else answer  # type: ignore[no-any-return]
        try:
            awaitable = fn(*args, **kwargs)
        except BaseException as exc:
            self.record_exception(permit, exc)
            raise
        try:
            is_awaitable = inspect.isawaitable(awaitable)
        except BaseException:
            # What fn returned cannot even be looked at: nothing is known of the upstream.
            self.record(permit, "cancelled")
            raise
        if not is_awaitable:
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

    def __call__(self, fn: Callable[Params, T]) -> Callable[Params, T]:
        """Decorates ``fn`` (a plain function, or an ``async def``: it gets
        an async wrapper). A generator function is a ``TypeError`` here: its
        calls return a generator whose work runs later, outside any call."""
        if is_generator(fn):
            name = getattr(fn, "__qualname__", type(fn).__name__)
            error = TypeError(
                f"{name} is a generator function: calling it runs none of its work, so there is no call to "
                "protect; put a `with breaker:` (or `async with`) block inside it around what reaches the upstream"
            )
            setattr(error, "option", "fn")  # noqa: B010 - an attribute of this instance
            raise error
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None)):

            coroutine_fn: Callable[..., Awaitable[Any]] = fn  # type: ignore[assignment]

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                return await self.call_async(coroutine_fn, *args, **kwargs)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Params.args, **kwargs: Params.kwargs) -> T:
            return self.call(fn, *args, **kwargs)

        return guarded

    # The block is known by the frame of its statement: one frame above these.
    async def __aenter__(self: P) -> P:
        self._enter(1)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Literal[False]:
        self._leave(exc, 1)
        return False

    def _enter(self, depth: int) -> None:
        raise NotImplementedError

    def _leave(self, exc: Optional[BaseException], depth: int) -> None:
        raise NotImplementedError


P = TypeVar("P", bound=_Protects)


class CircuitBreaker(_Protects, NativeBreaker):
    """A circuit breaker for one upstream.

    ``CircuitBreaker(name, *, failure_threshold=5, window=60.0, open_timeout=30.0,
    half_open_max_attempts=3, ...)``: every core option under its snake_case
    name, times in seconds; unset options take the core's defaults (seed
    000's breaker), ``None`` unsets a policy. Also ``exclude`` (what never
    counts: an exception class, a predicate on the exception, or any
    iterable of them, nested ones flattened, as ``[KeyError, is_throttle]``;
    a class that is not an exception's, or an ``async`` predicate, is a
    ``TypeError``), ``clock`` (a plain callable returning seconds; monotonic
    by default, read in Rust),
    ``shared_clock`` (``True`` when ``clock`` reads the same in every process
    that restores this breaker's snapshots, such as ``time.time``: a restore
    then counts the time since the snapshot was taken; by default it resumes
    as if no time had passed), ``fallback`` (called with the call's arguments instead of
    raising when ``call``, ``call_async`` or the decorator is refused: the
    bot's "high volume, we'll get back to you"; ``with`` blocks still raise)
    and ``latency_histogram``. ``group=RedisGroup(client, name)`` makes
    the breaker one of a group of processes sharing it through Redis (see
    ``halfopen.group``): no Redis call on the call path, ever.

    Outcomes: a call that returns is a success; an exception is a failure,
    unless ``exclude`` says otherwise (then it counts nothing); a
    cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``,
    ``SystemExit``, ``GeneratorExit``) counts nothing. Every exception is
    re-raised; every admitted call is reported exactly once, and its slot
    freed. No lock is held while the call runs or while a listener runs.
    """

    # No __dict__: a breaker is its native struct and an object header.
    __slots__ = ("__weakref__",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass with an ``__init__`` of its own (taking keywords of its
        own: ``def __init__(self, name, *, team, **options)``) gets a
        ``__new__`` that ignores the arguments and makes an unconfigured
        breaker; ``CircuitBreaker.__init__`` (``super().__init__(name,
        **options)``, which that ``__init__`` must call before using the
        breaker) configures it, checking the options as the constructor
        does (on a breaker made configured it does nothing). A subclass that
        defines ``__new__`` itself is left alone."""
        super().__init_subclass__(**kwargs)
        below = cls.__mro__[: cls.__mro__.index(CircuitBreaker)]
        if any("__init__" in c.__dict__ for c in below) and not any("__new__" in c.__dict__ for c in below):
            cls.__new__ = _unconfigured  # type: ignore[method-assign, assignment]

    def __new__(cls, name: str, /, *, group: Optional[RedisGroup] = None, **options: Any) -> "CircuitBreaker":
        return cast("CircuitBreaker", NativeBreaker.__new__(cls, name, **options))

    def __init__(self, name: str, /, *, group: Optional[RedisGroup] = None, **options: Any) -> None:
        NativeBreaker.__init__(self, name, **options)
        if group is not None:
            _group.join(self, group)

    def group_status(self) -> Optional[GroupStatus]:
        """With ``group=``: the member id, whether it decides alone because
        the store failed, the group's phase as last answered; ``None``
        outside a group (and after ``leave_group()``)."""
        return cast("Optional[GroupStatus]", _group.status(self))

    def group_force_open(self, seconds: float) -> None:
        """With ``group=``: opens every process's breaker for ``seconds`` (a
        throttle webhook that reached this one): this breaker at once, the
        others at their next exchange (within a flush interval); sent again
        until Redis answers. Then the group probes, as after any open period."""
        _group.force_open(self, seconds)

    def group_force_close(self) -> None:
        """With ``group=``: closes every process's breaker and forgets the
        group's failures and backoff (an operator's force-close): this one
        at once, the others at their next exchange; sent again until Redis
        answers."""
        _group.force_close(self, reset=False)

    def group_reset(self) -> None:
        """With ``group=``: resets every process's breaker (as
        ``group_force_close``, each breaker reset)."""
        _group.force_close(self, reset=True)

    def leave_group(self) -> None:
        """Stops exchanging with the group: the breaker decides alone."""
        _group.leave(self)

    call = NativeBreaker.call
    try_acquire = NativeBreaker.try_acquire
    record = NativeBreaker.record
    record_exception = NativeBreaker.record_exception
    fallback = NativeBreaker.fallback
    __enter__ = NativeBreaker.__enter__
    __exit__ = NativeBreaker.__exit__
    _enter = NativeBreaker._enter
    _leave = NativeBreaker._leave

    @property
    def state(self) -> State:
        """The state now, counting elapsed time."""
        return State(self.state_name())

    def __repr__(self) -> str:
        return f"<halfopen.{type(self).__qualname__} {self.name!r} {_state_of(self)}>"

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


def _unconfigured(cls: "type[CircuitBreaker]", *args: Any, **kwargs: Any) -> CircuitBreaker:
    """``__new__`` of a subclass with an ``__init__`` of its own."""
    return NativeBreaker.__new__(cls, _native._UNCONFIGURED)  # type: ignore[return-value]


class Registry(NativeRegistry):
    """One breaker per name (seed 000's ``breakerFor``), made on first use,
    at most ``capacity`` (10,000 by default): a new name evicts the least
    recently used idle breaker, never one that is open, busy or counting
    failures (``RegistryFullError`` if none is idle).

    ``Registry(*, capacity=10000, exclude=None, clock=None, shared_clock=False, fallback=None, group=None, **options)``:
    the options of every breaker (``configure(name, **options)`` changes
    them for one name). ``group=RedisGroup(client, name)`` makes each name's
    breaker one breaker for every process whose registry names the same
    group on the same Redis (its key ``halfopen:v2:{name}:k:<name>``); the
    names due go together, in script calls of at most 100 names, one round
    per flush interval.
    """

    def __new__(cls, *, group: Optional[RedisGroup] = None, **options: Any) -> "Registry":
        return cast("Registry", NativeRegistry.__new__(cls, **options))

    def __init__(self, *, group: Optional[RedisGroup] = None, **options: Any) -> None:
        if group is not None:
            _group.join(self, group, registry=True)

    def group_status(self) -> Optional[RegistryGroupStatus]:
        """With ``group=``: the member id, whether some names decide alone
        (the store failed them), the names in the group and those whose
        group answered; ``None`` outside a group (and after ``leave_group()``)."""
        return cast("Optional[RegistryGroupStatus]", _group.status(self))

    def leave_group(self) -> None:
        """Stops exchanging with the group: every name decides alone."""
        _group.leave(self)

    def get(self, name: str) -> "KeyedBreaker":
        """``name``'s breaker, as a handle (made on its first call). A name
        that is not a non-empty ``str`` of valid Unicode is refused here."""
        if not isinstance(name, str):
            error: Exception = TypeError(f"name must be a str, got {type(name).__name__}")
        elif not name:
            error = ValueError("name must not be empty")
        elif not _valid_unicode(name):
            error = ValueError("name must be valid Unicode (it holds a lone surrogate)")
        else:
            # The str itself: a subclass's methods never run in the handle's checks.
            return KeyedBreaker(self, str.__str__(name))
        setattr(error, "option", "name")  # noqa: B010 - an attribute of this instance
        raise error


    def __repr__(self) -> str:
        return f"<halfopen.{type(self).__qualname__} of {len(self)} breakers>"


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _state_of(breaker: CircuitBreaker) -> str:
    """The state for a ``repr``, which must not raise (a custom clock may)."""
    try:
        return breaker.state_name()
    except Exception:  # noqa: BLE001
        return "(state unreadable)"


class KeyedBreaker(_Protects):
    """A registry's breaker for one name: the forms of ``CircuitBreaker``."""

    __slots__ = ("registry", "name")

    def __init__(self, registry: Registry, name: str) -> None:
        self.registry = registry
        self.name = name

    def call(self, fn: Callable[Params, T], /, *args: Params.args, **kwargs: Params.kwargs) -> T:
        return self.registry.call(self.name, fn, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<halfopen.KeyedBreaker {self.name!r} of {self.registry!r}>"

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

    def group_force_open(self, seconds: float) -> None:
        """With the registry's ``group=``: opens this name's breaker in every
        process for ``seconds`` (see ``CircuitBreaker.group_force_open``)."""
        _group.force_open_name(self.registry, self.name, seconds)

    def group_force_close(self) -> None:
        """With the registry's ``group=``: closes this name's breaker in every
        process (see ``CircuitBreaker.group_force_close``)."""
        _group.force_close_name(self.registry, self.name, reset=False)

    def group_reset(self) -> None:
        """With the registry's ``group=``: resets this name's breaker in every process."""
        _group.force_close_name(self.registry, self.name, reset=True)

    @property
    def fallback(self) -> Optional[Callable[..., Any]]:
        return self.registry.fallback

    # The block is known by the frame of its statement: one frame above these.
    def __enter__(self) -> "KeyedBreaker":
        self.registry._enter(self.name, 1)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Literal[False]:
        self.registry._leave(self.name, exc, 1)
        return False

    async def __aenter__(self) -> "KeyedBreaker":
        self.registry._enter(self.name, 1)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Literal[False]:
        self.registry._leave(self.name, exc, 1)
        return False

    @property
    def state(self) -> State:
        return State(self.registry.state_name(self.name))

    def retry_after(self) -> Optional[float]:
        return self.registry.retry_after(self.name)

    def metrics(self) -> Optional[Dict[str, Any]]:
        return self.registry.metrics(self.name)

    def force_open(self, seconds: Optional[float] = None) -> None:
        self.registry.force_open(self.name, seconds)

    def force_open_at_least(self, seconds: float) -> None:
        self.registry.force_open_at_least(self.name, seconds)

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
        """When (seconds on the registry's clock: compare with ``now()``)
        the breaker next changes by itself, or ``None``."""
        return self.registry.poll_timeout(self.name)

    def now(self) -> float:
        """The registry's clock reading, in seconds (what ``poll_timeout`` is on)."""
        return self.registry.now()
