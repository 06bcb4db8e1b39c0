"""Retention (seed 001): hold what the breaker does not admit, send it later
in order and paced. ``RetentionQueue`` is the protocol without I/O (submit,
send what it hands out, report); ``Dispatcher`` drives one with an ``async``
``send`` function: ``await dispatcher.submit(message)`` returns once the
message is delivered, or raises ``DeadLetterError`` when it is given up.
Every decision is the core's.

Decisions: a message's size (for ``max_bytes``) is, by default, its length
for ``bytes``-like values, its UTF-8 length for ``str``, and the UTF-8 length
of its compact JSON otherwise, as in every runtime (``default_size``; pass
``size=`` for anything else). An exception from
``send`` that ``exclude`` says is not the upstream's health dead-letters the
message at once (sending it again cannot help). A ``Dispatcher``'s send has
a timeout, the core's ``DEFAULT_SEND_TIMEOUT`` (seed 001's 10 s) by default,
``timeout=None`` for none: a slower send is cancelled, and fails unless it
answers while it stops (a late answer is a delivery). A send the dispatcher gives up on itself (its
task cancelled: the event loop shutting down) puts the message back
without counting an attempt; a ``send`` that raises ``CancelledError`` of
its own (an inner task cancelled) failed, and counts as a failure.

Cancelling a task that awaits ``submit()`` stops the waiting, not the
message: it is delivered or given up as any other, reported through
``on_event`` (withdrawing a retained message needs an operation the core
does not have). ``aclose()`` lets the sends in flight end, then settles
every ``submit()`` and ``drained()`` still waiting with
``DispatcherClosedError``: their messages are still held
(``retained()``, ``queue.to_json()``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Generic, List, Literal, Optional, Tuple, TypeVar

from ._native import NativeRetentionQueue, StateChange
from . import _native
from ._support import CANCELLATIONS, State, check_sync, escapes, exclusions, log_error, logger, option_error

M = TypeVar("M")

__all__ = ["DeadLetterError", "Dispatcher", "DispatcherClosedError", "RetentionEvent", "RetentionFullError", "RetentionQueue"]

#: A Dispatcher's send timeout in seconds unless told: the core's
#: DEFAULT_SEND_TIMEOUT (seed 001: a call slower than 10 s fails).
DEFAULT_TIMEOUT: float = _native._DEFAULT_SEND_TIMEOUT


class RetentionFullError(Exception):
    """A message not taken: a bound (``max_messages``, ``max_bytes``) is reached. Nothing of it is held."""

    def __init__(self, queue_name: str) -> None:
        super().__init__(f"Dispatcher[{queue_name}] is full: the message was not taken")
        self.queue_name = queue_name


class DeadLetterError(Exception):
    """A message given up: ``reason`` is ``"attempts"``, ``"age"``,
    ``"refused"`` (``exclude`` said the error is not the upstream's
    health) or ``"dropped"`` (``overflow="drop_oldest"`` made room);
    ``payload`` is the message, ``attempts`` its sends."""

    def __init__(self, queue_name: str, payload: Any, reason: str, attempts: int) -> None:
        super().__init__(f"Dispatcher[{queue_name}] gave a message up ({reason}) after {attempts} send(s)")
        self.queue_name = queue_name
        self.payload = payload
        self.reason = reason
        self.attempts = attempts


class DispatcherClosedError(RuntimeError):
    """The dispatcher was closed (``aclose()``) with this message not
    delivered nor given up: it is still held, retained (read it with
    ``retained()``; ``queue.to_json()`` and the messages keep it for a
    restart). ``payload`` is the message and ``seq`` its sequence number
    (``None`` for a ``submit()`` after the close, which took nothing, or
    for ``drained()``)."""

    def __init__(self, queue_name: str, payload: Any = None, seq: Optional[int] = None) -> None:
        super().__init__(f"Dispatcher[{queue_name}] is closed")
        self.queue_name = queue_name
        self.payload = payload
        self.seq = seq


@dataclass(frozen=True)
class RetentionEvent:
    """Something a queue did, in the core's order: ``kind`` is
    ``"transition"`` (``change`` says which), ``"dead"`` (``seq``,
    ``message``, ``reason``, ``attempts``) or ``"dropped"`` (``seq``,
    ``message``); a ``Dispatcher`` also reports ``"delivered"`` (``seq``,
    ``message``)."""

    kind: Literal["transition", "dead", "dropped", "delivered"]
    seq: Optional[int]
    message: Any
    reason: Optional[str]
    attempts: Optional[int]
    change: Optional[StateChange]


def _retrieve(future: "asyncio.Future[Any]") -> None:
    """Marks what ``future`` raised as retrieved (nobody may await it)."""
    if not future.cancelled():
        future.exception()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def default_size(message: Any) -> int:
    """Bytes of a message by default, the rule every runtime shares
    (tests/conformance/README.md, "A message's size"): ``bytes``-like values
    their length in bytes, a ``str`` its UTF-8 length (a lone surrogate 3
    bytes), anything else the UTF-8 length of its compact JSON (no spaces,
    non-ASCII as is, a lone surrogate escaped); no JSON form is a
    ``TypeError`` naming ``size``."""
    if isinstance(message, (bytes, bytearray)):
        return len(message)
    if isinstance(message, str):
        return len(message.encode("utf-8", "surrogatepass"))
    try:
        if isinstance(message, memoryview):
            return message.nbytes
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    except Exception as err:  # a released view, a cycle, an object json cannot write, one whose iteration raises
        raise option_error(
            TypeError, "size", f"size: the message ({type(message).__name__}) has no JSON form; give a size function to say how many bytes it is"
        ) from err
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return len(_LONE_SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text).encode("utf-8"))


def _check_timeout(timeout: object) -> None:
    """A send timeout: a finite number of seconds above 0 (a ``ValueError``
    with the core's ``problem`` code otherwise; not a number: ``TypeError``)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise option_error(TypeError, "timeout", f"timeout must be a number of seconds or None, got {type(timeout).__name__}")
    try:
        seconds = float(timeout)
    except OverflowError:  # an int too large for a float
        seconds = math.inf if timeout > 0 else -math.inf
    if 0 < seconds < math.inf:
        return
    if isinstance(timeout, float) and not math.isfinite(timeout):
        problem = "not_finite"
    else:
        problem = "too_large" if seconds > 0 else "out_of_range"
    err = option_error(ValueError, "timeout", f"timeout must be a finite number of seconds above 0, got {timeout!r}")
    setattr(err, "problem", problem)  # noqa: B010 - an attribute of this instance
    raise err


class RetentionQueue(NativeRetentionQueue, Generic[M]):
    """A queue in front of a circuit breaker (the protocol without I/O).

    Takes the breaker's options (``preset``, ``consecutive_failures``,
    ``concurrency_limit``, ...; seconds for times), ``clock`` and
    ``shared_clock`` (as ``CircuitBreaker``'s), and the
    retention's: ``max_messages``, ``max_bytes``, ``overflow``
    (``"reject"`` or ``"drop_oldest"``), ``probe`` (``"oldest"`` or, seed
    001's rule, ``"new_message"``), ``max_attempts``, ``max_age`` (seconds),
    ``release_rate`` (``(per_second, burst)``), and ``size`` (a function:
    message -> bytes). It needs a ``release_rate`` or a ``concurrency_limit``.
    """

    __slots__ = ("_size",)

    def __new__(cls, name: str, /, *, size: Optional[Callable[[Any], int]] = None, **options: Any) -> "RetentionQueue[M]":
        return super().__new__(cls, name, **options)

    def __init__(self, name: str, /, *, size: Optional[Callable[[Any], int]] = None, **options: Any) -> None:
        if size is not None and not callable(size):
            raise option_error(TypeError, "size", f"size must be a callable, got {type(size).__name__}")
        self._size = size or default_size

    def submit(self, message: M) -> Tuple[str, Optional[int]]:
        """``("send", seq)``: send it now, then ``report``; ``("retained", seq)``:
        ``next()`` hands it out later; ``("refused", None)``: a bound is reached."""
        size = self._size(message)
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= 2**53 - 1:
            raise option_error(TypeError, "size", f"size must return a whole number of bytes from 0 to 2**53 - 1, got {size!r}")
        return self._submit(message, size)

    @property
    def state(self) -> State:
        """The breaker's state."""
        return State(self.state_name)

    def events(self) -> List[RetentionEvent]:
        """The events since the last call, oldest first."""
        return [RetentionEvent(*e) for e in self.take_events()]

    def held(self, messages: Dict[int, M]) -> List[Tuple[int, M]]:
        """``[(seq, message)]`` of the messages held, from ``messages`` (what a store keeps)."""
        return [(seq, messages[seq]) for seq in sorted(self.held_seqs())]


class Dispatcher(Generic[M]):
    """Sends messages through ``send`` (``async def send(message)``) behind a
    breaker; holds what cannot go now and sends it later, in order, paced.

    ``await submit(message)`` returns once it is delivered, raises
    ``DeadLetterError`` once it is given up, ``RetentionFullError`` at
    once when a bound is reached, and ``DispatcherClosedError`` if the
    dispatcher is closed first. ``timeout`` (seconds, 10 by default,
    ``None`` for none) fails a send that takes longer; ``exclude`` (as a
    breaker's: exception classes and predicates) says which exceptions are
    not the upstream's failure (the message itself was refused: it is
    dead-lettered at once; default: every exception is a failure);
    ``is_failure(exc)``, its inverse, is deprecated; ``on_event`` receives every
    ``RetentionEvent`` (and ``"delivered"`` ones). The queue's options as for
    ``RetentionQueue``. Use it from one event loop.
    """

    def __init__(
        self,
        name: str,
        send: Callable[[M], Awaitable[Any]],
        /,
        *,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        exclude: object = None,
        is_failure: Optional[Callable[[BaseException], bool]] = None,
        on_event: Optional[Callable[[RetentionEvent], Any]] = None,
        **options: Any,
    ) -> None:
        for option, value in (("send", send), ("is_failure", is_failure), ("on_event", on_event)):
            if value is not None and not callable(value):
                raise option_error(TypeError, option, f"{option} must be a callable, got {type(value).__name__}")
        check_sync("is_failure", is_failure, "it would return a coroutine, which is true: every error would count")
        check_sync("on_event", on_event, "events are handed over, never awaited (start a task from a plain one)")
        if timeout is not None:
            _check_timeout(timeout)
        if exclude is not None and is_failure is not None:
            raise option_error(TypeError, "exclude", "exclude and is_failure say the same: pass exclude only")
        if is_failure is not None:
            warnings.warn(
                "is_failure= is deprecated: pass exclude= (what is not the upstream's failure), as breakers take it",
                DeprecationWarning,
                stacklevel=2,
            )
        self._exclude = exclusions(exclude) if exclude is not None else None
        self.queue: RetentionQueue[M] = RetentionQueue(name, **options)
        self.name = name
        self._send = send
        self._timeout = timeout
        self._is_failure = is_failure
        self._on_event = on_event
        self._waiting: Dict[int, "asyncio.Future[None]"] = {}
        self._messages: Dict[int, M] = {}
        self._tasks: "set[asyncio.Task[None]]" = set()
        self._timer: Optional[asyncio.TimerHandle] = None
        self._idle: List["asyncio.Future[None]"] = []
        self._closing = False
        self._outbox: List[RetentionEvent] = []  # events not yet handed to on_event
        self._delivering = False
        # None, or whether a send may start now (an Outbox's lease): a
        # message handed out when it may not goes back to its place, not an
        # attempt.
        self._may_start: Optional[Callable[[], bool]] = None

    async def submit(self, message: M) -> None:
        """Returns once ``message`` is delivered; raises ``DeadLetterError``
        when it is given up, ``RetentionFullError`` when it is not taken."""
        if self._closing:
            raise DispatcherClosedError(self.name, message)
        loop = asyncio.get_running_loop()
        status, seq = self.queue.submit(message)
        if seq is None:
            raise RetentionFullError(self.name)
        done: "asyncio.Future[None]" = loop.create_future()
        self._waiting[seq] = done
        self._messages[seq] = message
        if status == "send":
            self._start(seq, message)
        self._pump()
        await done

    def _start(self, seq: int, message: M) -> None:
        if self._may_start is not None and not self._may_start():
            self.queue.report(seq, "cancelled")
            return
        task = asyncio.ensure_future(self._run(seq, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, seq: int, message: M) -> None:
        outcome = "failure"
        try:
            sent = self._send(message)
            if inspect.isawaitable(sent):
                outcome = await self._await(sent)
            else:
                outcome = "success"
        except CANCELLATIONS:
            # This task was cancelled (the loop shutting down), or an
            # interrupt: the message goes back, no attempt counted.
            outcome = "cancelled"
            raise
        except BaseException as exc:  # noqa: BLE001 - every outcome is reported
            try:
                outcome = self._classify(exc)
            except BaseException:
                # An interrupted classifier says nothing of the upstream: the
                # message goes back, no attempt counted (as a breaker's call).
                outcome = "cancelled"
                raise
            if not isinstance(exc, Exception):
                raise
        finally:
            # Reported whatever ended the send (a BaseException included).
            self._report(seq, outcome)

    async def _await(self, sent: Awaitable[Any]) -> str:
        """Awaits ``sent`` as a task of its own and says how it went. A
        cancellation of this task (not of the send) cancels the send and
        propagates; the send's own ``CancelledError`` is a failure (it did
        not deliver, and was not told to stop). Past ``timeout`` the send is
        cancelled and, as Node's Dispatcher does, waited for (holding its
        slot, so that its retry never overlaps it) for as long again: then
        it ends as it ended (cancelled: a failure; a late answer: a
        delivery), or, if it ignores its cancellation, fails (warned)."""
        task = asyncio.ensure_future(sent)
        timed_out = False
        try:
            done, _ = await asyncio.wait({task}, timeout=self._timeout)
            if not done:
                timed_out = True
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=self._timeout)
        except BaseException:
            task.cancel()
            task.add_done_callback(_retrieve)
            raise
        if not done:
            logger.warning("halfopen: Dispatcher[%s]: a send ignored its cancellation at its timeout", self.name)
            task.add_done_callback(_retrieve)
            return "failure"
        if task.cancelled():
            return "failure"
        error = task.exception()
        if error is None:
            return "success"
        if isinstance(error, Exception):
            # Past its timeout, whatever it raised while stopping is the
            # upstream's slowness: a failure, whatever is_failure says.
            return "failure" if timed_out else self._classify(error)
        raise error

    def _classify(self, exc: BaseException) -> str:
        """``"ignored"`` if ``exclude`` (or ``is_failure``) says the error is
        not the upstream's, else ``"failure"`` — also when it raises (the
        classifier rule: reported, never swallowed); an interrupt, an exit or
        a signal handler's exception from it propagates (the send then counts
        as cancelled), as from a breaker's ``exclude``."""
        if self._exclude is not None:
            classes, predicates = self._exclude
            if classes and isinstance(exc, classes):
                return "ignored"
            try:
                return "ignored" if any(p(exc) for p in predicates) else "failure"
            except Exception as err:  # noqa: BLE001
                if escapes(err, err.__traceback__):
                    raise
                log_error("an exclude predicate raised", err)
                return "failure"
        if self._is_failure is None:
            return "failure"
        try:
            return "failure" if self._is_failure(exc) else "ignored"
        except Exception as err:  # noqa: BLE001
            if escapes(err, err.__traceback__):
                raise
            log_error("is_failure raised", err)
            return "failure"

    def _report(self, seq: int, outcome: str) -> None:
        try:
            if self.queue.report(seq, outcome) == "delivered":
                self._settle(seq, None)
                self._outbox.append(RetentionEvent("delivered", seq, self._messages.pop(seq, None), None, None, None))
        except Exception as err:  # noqa: BLE001
            log_error("reporting a send failed", err)
        # A send whose task was cancelled (the loop shutting down, a task
        # group cancelled) is not started again from here: the next
        # submit(), poll() or timer sends it.
        self._pump(start=outcome != "cancelled")

    def _settle(self, seq: int, error: Optional[BaseException]) -> None:
        done = self._waiting.pop(seq, None)
        if done is None or done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)
            # Handled: a message given up is an event and a count, not a crash.
            done.add_done_callback(_retrieve)

    def _emit(self, event: RetentionEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception as err:  # noqa: BLE001
            log_error("on_event raised", err)

    def _pump(self, start: bool = True) -> None:
        """Sends what may go now (if ``start``), settles what the events
        say, sets the timer (if ``start``)."""
        try:
            if start and not self._closing and (self._may_start is None or self._may_start()):
                for seq, message in self.queue.next():
                    self._start(seq, message)
            for event in self.queue.events():
                if event.kind != "transition" and event.seq is not None:
                    self._messages.pop(event.seq, None)
                    reason = "dropped" if event.kind == "dropped" else event.reason or "refused"
                    self._settle(event.seq, DeadLetterError(self.name, event.message, reason, event.attempts or 0))
                self._outbox.append(event)
        except Exception as err:  # noqa: BLE001
            log_error("the dispatcher failed to send", err)
        if start:
            self._schedule()
        self._check_idle()
        self._deliver()

    def _deliver(self) -> None:
        """Hands the events to ``on_event`` in the core's order; a listener
        that changes the dispatcher has its events handed after these."""
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._outbox:
                self._emit(self._outbox.pop(0))
        finally:
            self._delivering = False

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        at = self.queue.poll_timeout()
        if at is None or self._closing:
            return
        try:
            delay = max(0.0, at - self.queue.now())
        except Exception as err:  # noqa: BLE001
            log_error("the clock failed", err)
            delay = _native._CLOCK_FAILURE_RETRY
        self._timer = asyncio.get_running_loop().call_later(delay, self.poll)

    def poll(self) -> None:
        """Applies what is due at the clock's reading now and sends what may
        go. The dispatcher's timer does this by itself; call it after moving
        an injected clock."""
        self._timer = None
        try:
            self.queue.handle_timeout()
        except Exception as err:  # noqa: BLE001 - a failing clock must not stop the timer
            log_error("the dispatcher failed to apply what is due", err)
        self._pump()

    def _check_idle(self) -> None:
        if not self._idle:
            return
        stats = self.queue.stats()
        if stats["retained"] + stats["in_flight"] == 0:
            error: Optional[BaseException] = None
        elif self._closing and stats["in_flight"] == 0:
            error = DispatcherClosedError(self.name)  # nothing will send what is retained
        else:
            return
        idle, self._idle = self._idle, []
        for done in idle:
            if done.done():
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)
                done.add_done_callback(_retrieve)

    async def drained(self) -> None:
        """Returns once nothing is held; raises ``DispatcherClosedError`` if
        the dispatcher is closed with messages still retained."""
        done: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._idle.append(done)
        self._check_idle()
        await done

    async def aclose(self) -> None:
        """Stops sending and submitting and waits for the sends in flight
        to end; then every ``submit()`` still waiting raises
        ``DispatcherClosedError`` (its message stays held, retained:
        ``retained()``, ``queue.to_json()`` and the messages keep it for a
        restart), and so does ``drained()`` if anything is retained."""
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for seq in list(self._waiting):
            self._settle(seq, DispatcherClosedError(self.name, self._messages.get(seq), seq))
        self._check_idle()

    @property
    def timeout(self) -> Optional[float]:
        """The send timeout in seconds (``None``: none)."""
        return self._timeout

    def retained(self) -> List[Tuple[int, M]]:
        """``[(seq, message)]`` of the messages retained (waiting to be
        sent; not those in flight), in the order they will be sent: a copy,
        changing it changes nothing."""
        return [(seq, self._messages[seq]) for seq in self.queue.retained_seqs() if seq in self._messages]

    @property
    def state(self) -> State:
        """The breaker's state."""
        return State(self.queue.state_name)

    def now(self) -> float:
        """The queue's clock reading, in seconds (what ``queue.poll_timeout()`` is on)."""
        return self.queue.now()

    def stats(self) -> Dict[str, int]:
        """What it holds and did."""
        return self.queue.stats()

    def prometheus(self) -> str:
        """The breaker's and the retention's Prometheus text."""
        return self.queue.prometheus()

    def force_open(self, seconds: Optional[float] = None) -> None:
        """Holds the breaker open for ``seconds``, or until ``release()`` (a throttle webhook)."""
        self.queue.force_open(seconds)
        self._pump()

    def force_open_at_least(self, seconds: float) -> None:
        """Holds the breaker open for at least ``seconds`` (the partner's ``Retry-After``), never shortening an open period in force."""
        self.queue.force_open_at_least(seconds)
        self._pump()

    def release(self) -> None:
        """Ends ``force_open()``."""
        self.queue.release()
        self._pump()
