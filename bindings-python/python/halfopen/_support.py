"""What the native extension needs from Python: the exception classes it
raises, the exceptions that count as cancellations, and the logger that
receives callback failures."""

from __future__ import annotations

import asyncio
import concurrent.futures
import decimal
import enum
import fractions
import functools
import inspect
import logging
import numbers
import os
import signal
import sys
import threading
import types
from typing import Any, Callable, List, Optional, Tuple, Type

from . import _native

logger = logging.getLogger("halfopen")


class State(str, enum.Enum):
    """A breaker's state: ``breaker.state``, ``err.state``,
    ``StateChange.from_state`` / ``to_state`` and ``metrics()["state"]`` are
    all members of it. Its values are seed 000's strings, and a member is
    that string (``State.OPEN == "OPEN"``, ``str(State.OPEN) == "OPEN"``)."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"

    def __str__(self) -> str:
        return self.value

#: What a protected call must not return (its work has not run yet).
UNFINISHED = (types.CoroutineType, types.GeneratorType, types.AsyncGeneratorType, asyncio.Future)

#: Exceptions that end a call without saying anything about the upstream:
#: the call's slot is freed and nothing is counted; they are re-raised.
CANCELLATIONS = (
    asyncio.CancelledError,
    concurrent.futures.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
)


class CircuitBreakerError(Exception):
    """A call the breaker did not admit (the function was not called).

    ``state`` is a ``State`` (``OPEN``, ``HALF_OPEN``, or ``CLOSED`` for a
    full concurrency limit or a full registry); ``retry_after`` the seconds after which to try again
    (use it as a queue's delay), ``None`` while held open until released;
    ``reason`` the core's: ``"open"``, ``"probes_busy"``, ``"limit_full"`` or
    ``"held"``.
    """

    # The four values are the exception's args (set by BaseException's own
    # constructor, in C: a refusal costs no Python code), read by name here.
    args: Tuple[str, State, Optional[float], str]

    @property
    def breaker_name(self) -> str:
        return self.args[0]

    @property
    def state(self) -> State:
        return self.args[1]

    @property
    def retry_after(self) -> Optional[float]:
        return self.args[2]

    @property
    def reason(self) -> str:
        return self.args[3]

    def __str__(self) -> str:
        # Written when read: most refusals are handled without reading it.
        wait = "until released" if self.retry_after is None else f"retry in {self.retry_after:g} s"
        return f"CircuitBreaker[{self.breaker_name}] refused the call ({self.reason}, {self.state}); {wait}"


class CircuitOpenError(CircuitBreakerError):
    """Refused because the breaker is open (or half-open with every probe slot taken, or held open)."""


class ConcurrencyLimitError(CircuitBreakerError):
    """Refused because the concurrency limit is full (the state is ``"CLOSED"`` or ``"HALF_OPEN"``)."""


class RegistryFullError(CircuitBreakerError):
    """Refused because the registry is full and no idle breaker was found
    to evict for the name (which has no breaker).

    What that means: at more than 16 breakers the core looks at 16 drawn at
    random (as Redis evicts), not at all of them, so a refusal says that
    none of those 16 was idle — not that none is. With a share ``f`` of
    idle breakers a new name is refused with probability ``(1 - f) ** 16``
    (5 idle in 100: 44 %), and each try draws another sample. So
    ``retry_after`` is ``0.0`` when the next sample (the one a retry draws)
    holds an idle breaker: a retry now is admitted unless another new name
    takes that breaker first. It is ``None`` when the next sample holds
    none either: the registry cannot say when a breaker will become idle
    (here ``None`` does not mean "held open"). ``state`` is ``CLOSED``
    (what a new breaker would be)."""

    def __init__(self, breaker_name: str, retry_after: Optional[float] = None) -> None:
        super().__init__(breaker_name, State.CLOSED, retry_after, "registry_full")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.breaker_name, self.retry_after))

    def __str__(self) -> str:
        wait = "a retry now would find one" if self.retry_after == 0.0 else "none is known to become idle"
        return f"Registry full: no idle breaker was found to evict for {self.breaker_name!r}; {wait}"


class SnapshotError(ValueError):
    """A snapshot that cannot be restored; ``kind`` says why: ``"malformed"``,
    ``"newer_version"``, ``"config_mismatch"`` or ``"corrupt"``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (str(self), self.kind))


def exact_micros(value: object) -> Optional[int]:
    """The microseconds of a clock reading that is a real number other than
    an int or a float (a ``Fraction``, a ``Decimal``), exactly; ``None`` if it
    is not a real number (a ``ValueError`` if it is not finite)."""
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError("not finite")
        return round(value * 1_000_000)
    if not isinstance(value, numbers.Rational):
        return None
    return round(fractions.Fraction(value) * 1_000_000)


def option_error(kind: Type[Exception], option: str, message: str) -> Exception:
    """A ``TypeError``/``ValueError`` whose ``option`` attribute names the option."""
    err = kind(message)
    setattr(err, "option", option)  # noqa: B010 - an attribute of this instance
    return err


def is_async(fn: object) -> bool:
    """Whether calling ``fn`` gives a coroutine or an async generator instead
    of doing its work: an ``async def`` (or ``async`` generator) function, a
    method or ``functools.partial`` of one, or an object whose ``__call__`` is."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    if inspect.isroutine(fn) or isinstance(fn, type):
        return False
    call = getattr(type(fn), "__call__", None)
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def is_generator(fn: object) -> bool:
    """Whether calling ``fn`` gives a generator or an async generator (a
    generator function, a method or ``functools.partial`` of one, or an
    object whose ``__call__`` is one)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    if inspect.isroutine(fn) or isinstance(fn, type):
        return False
    call = getattr(type(fn), "__call__", None)
    return inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call)


def check_sync(option: str, fn: object, why: str) -> None:
    """Refuses an async callable for ``option`` (``why``: what would go wrong)."""
    if is_async(fn):
        raise option_error(TypeError, option, f"{option} must be a plain function, not an async one: {why}")


def exclusions(exclude: object) -> Tuple[Tuple[Type[BaseException], ...], Tuple[Callable[[BaseException], Any], ...]]:
    """``exclude`` as exception classes and predicates: a class, a predicate,
    or any iterable of them (lists, tuples, sets, nested ones flattened, in
    order). A class that is not an exception's, an async predicate, or
    anything else is a ``TypeError`` naming ``exclude``."""
    classes: List[Type[BaseException]] = []
    predicates: List[Callable[[BaseException], Any]] = []

    def add(item: object, within: Tuple[int, ...]) -> None:
        if isinstance(item, type):
            if not issubclass(item, BaseException):
                problem = f"exclude must hold exception classes or predicates; {item.__qualname__} is not an exception class"
                raise option_error(TypeError, "exclude", problem)
            classes.append(item)
            return
        if callable(item):
            check_sync("exclude", item, "it would return a coroutine, which is true, so every error would be excluded")
            predicates.append(item)
            return
        problem = f"exclude must be exception classes or predicates, got {type(item).__name__}"
        if isinstance(item, (str, bytes, bytearray)) or id(item) in within:
            raise option_error(TypeError, "exclude", problem)
        try:
            items = iter(item)  # type: ignore[call-overload]
        except TypeError:
            raise option_error(TypeError, "exclude", problem) from None
        for each in items:
            add(each, within + (id(item),))

    add(exclude, ())
    return tuple(classes), tuple(predicates)


def escapes(error: BaseException, tb: Optional[types.TracebackType]) -> bool:
    """Whether an exception from a listener, an ``exclude`` predicate or the
    clock must propagate instead of being logged: one that is not an
    ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ...), or one that a
    signal handler raised (its traceback passes through the function
    installed for a signal: a ``SIGALRM`` timeout, say). ``tb`` is its
    traceback (not yet on the exception while the extension holds it)."""
    if not isinstance(error, Exception):
        return True
    handlers = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):  # pragma: no cover - a signal Python cannot name
            continue
        while isinstance(handler, functools.partial):
            handler = handler.func
        if not callable(handler):  # SIG_DFL, SIG_IGN, None
            continue
        if not inspect.isroutine(handler):
            handler = getattr(type(handler), "__call__", None)
        code = getattr(getattr(handler, "__func__", handler), "__code__", None)
        if code is not None:
            handlers.add(code)
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False


def log_error(what: str, error: BaseException) -> None:
    """Logs a callback's failure; it never changes a call or the breaker."""
    try:
        logger.error("halfopen: %s", what, exc_info=error)
    except Exception:  # noqa: BLE001 - nothing a callback raises may escape
        pass


#: The frames running on the other threads while this thread forks.
_forking: List[types.FrameType] = []


def _before_fork() -> None:
    me = threading.get_ident()
    for thread, frame in sys._current_frames().items():
        while thread != me and frame is not None:
            _forking.append(frame)
            frame = frame.f_back  # type: ignore[assignment]


def _after_fork_in_parent() -> None:
    _forking.clear()


def _after_fork_in_child() -> None:
    # Those threads do not exist in the child: their frames never run again.
    frames = list(_forking)
    _forking.clear()
    _native._forked(frames)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
