"""Retention across processes (issue 24): ``Outbox``, a partner's durable,
ordered log on Redis (a Stream) that any process submits to, delivered by
one process at a time (the holder of a lease with a TTL and an epoch)
through a ``Dispatcher`` (breaker, limit, pacing). The core's deliverer
(``_native.NativeOutbox``, ``core/src/outbox/``) decides everything: when
to ask for the lease, whether a send may start, when to read a page, when
to retry a removal. This module does the I/O with the user's
``redis.asyncio`` client: ``XADD`` (a loop iteration's submits in one
pipeline), the lease script, ``XRANGE``, ``XDEL``, and a dead letter's
``XADD`` with its ``XDEL`` in one transaction. The log is the Node
package's (the same keys, fields and JSON): processes of both languages
can share one partner.

What is guaranteed (the top README, "Retention across processes"):
``await submit()`` returns only once Redis stored the event, and raises
``StoreUnavailableError`` otherwise (``ambiguous``: Redis did not answer,
it may be stored); delivery is at least once, with the event's key the
same on every attempt in every process; one process sends at a time, and
the sends of one that lost the lease are over before another starts; with
``concurrency_limit=1``, in the log's order.

The breaker goes with the lease: every lease call of the holder carries
its dispatcher's breaker state (``core/src/outbox/carried.rs``), and the
next holder resumes from the last one left, aged by Redis's clock, if its
breaker is configured the same; else it starts closed, with a
``StateNotResumedWarning``.

An ``Outbox`` belongs to the process and the event loop that made it: make
one in each worker, after a fork (a forked copy refuses to submit).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import secrets
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Generic, List, Optional, Set, Tuple, TypedDict, TypeVar

from . import _native
from ._support import SnapshotError, check_sync, log_error, option_error
from .retention import DEFAULT_TIMEOUT, DeadLetterError, Dispatcher, DispatcherClosedError, RetentionEvent

M = TypeVar("M")

__all__ = ["Outbox", "OutboxClosed", "OutboxEvent", "PersistenceWarning", "Receipt", "StateNotResumedWarning", "StoreUnavailableError"]

_KEY, _PAYLOAD, _REASON, _ID = _native._outbox_fields()

#: Dispatcher options an outbox refuses: its log is the store, its pages the bound.
_REFUSED = {
    "size": "an Outbox sizes an event by its payload",
    "max_bytes": "an Outbox holds at most two pages (and max_messages) in memory",
    "overflow": "an Outbox never drops an event it accepted",
    "group": "an Outbox's breaker is the fleet's already (one process sends at a time; its state goes with the lease)",
}


class StoreUnavailableError(Exception):
    """An event an ``Outbox`` did not store: Redis refused it (``ambiguous``
    false: it is not stored) or did not answer in time (``ambiguous`` true:
    it may be; submit it again with the same key). ``__cause__`` is Redis's
    error."""

    code = "HALFOPEN_STORE_UNAVAILABLE"

    def __init__(self, partner: str, cause: BaseException, ambiguous: bool) -> None:
        maybe = " (Redis did not say: it may be)" if ambiguous else ""
        super().__init__(f"Outbox[{partner}]: the event was not stored{maybe}: {cause!r}")
        self.partner = partner
        self.ambiguous = ambiguous
        self.__cause__ = cause


class PersistenceWarning(UserWarning):
    """Redis runs without AOF: a restart loses the events accepted since its
    last snapshot."""


class StateNotResumedWarning(UserWarning):
    """The breaker state the last deliverer left was not resumed (``kind``:
    ``config_mismatch`` when the breaker's options changed, or why it is not
    a state): this process's breaker starts closed."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind



class OutboxClosed(TypedDict):
    """What :meth:`Outbox.aclose` says: ``unremoved``, deliveries whose
    removal Redis did not confirm (they stay in the log and are sent
    again); ``lapsed``, whether Redis did not confirm the lease's last
    renewal, so that it may have run out before it was given back (the
    next holder may send again what this one delivered last)."""

    unremoved: int
    lapsed: bool

@dataclass(frozen=True)
class Receipt:
    """An event stored: its id in the log and its key."""

    id: str
    key: str


@dataclass(frozen=True)
class OutboxEvent:
    """What an outbox did: ``kind`` is ``"acquired"`` (``epoch``; ``breaker``:
    ``resumed`` from the state the last holder left, ``none`` left, or why
    not, a ``SnapshotError`` kind such as ``config_mismatch``, or ``clock``
    when the breaker's clock failed), ``"lost"``
    (``reason``: ``taken``, ``expired``, ``released``), ``"delivered"``
    (``id``, ``key``), ``"dead"`` (``id``, ``key``, ``reason``, ``error``),
    ``"store_error"`` (``operation``: ``lease``, ``read``, ``remove``;
    ``error``; each retried), or ``"transition"`` (``transition``: the
    breaker's ``StateChange``)."""

    kind: str
    epoch: Optional[int] = None
    reason: Optional[str] = None
    id: Optional[str] = None
    key: Optional[str] = None
    error: Optional[BaseException] = None
    operation: Optional[str] = None
    transition: Any = None
    breaker: Optional[str] = None


@dataclass(frozen=True)
class _Entry(Generic[M]):
    """An event in the dispatcher: what ``send`` gets, and its log entry."""

    event: M
    key: str
    payload: str


def _text(value: Any, errors: str = "strict") -> str:
    return value.decode("utf-8", errors) if isinstance(value, (bytes, bytearray)) else str(value)


def _utf8(text: str) -> bool:
    """Whether ``text`` is UTF-8 (no lone surrogate): what Redis is sent."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _same(event: Any, back: Any) -> bool:
    """Whether ``back`` (read from JSON) is ``event`` as it was: equal, and
    of the very same types at every depth, keys included (an IntEnum comes
    back an int, a tuple a list, an OrderedDict a dict). Iterative: as deep
    as ``json.dumps`` goes."""
    pending = [(event, back)]
    while pending:
        a, b = pending.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, list):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif isinstance(a, dict):
            if a.keys() != b.keys() or any(type(k) is not str for k in a):
                return False
            pending.extend((v, b[k]) for k, v in a.items())
        elif a != b:
            return False
    return True


class _Json:
    """The default serializer: compact JSON; a value JSON does not write as
    itself (a set, bytes, a function, NaN, a tuple, an IntEnum) is a
    ``TypeError``."""

    @staticmethod
    def encode(event: Any) -> str:
        try:
            text = json.dumps(event, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            same = _same(event, json.loads(text))
        except (TypeError, ValueError, RecursionError) as err:
            raise option_error(TypeError, "serializer", f"serializer: the event ({type(event).__name__}) has no JSON form; give a serializer with encode and decode") from err
        if not same:
            # A tuple comes back a list, an int key a str, an IntEnum an int: not the event.
            raise option_error(
                TypeError,
                "serializer",
                "serializer: JSON would not give the event back as it is (a tuple, a non-str key, a subclass of int, str or dict); give a serializer with encode and decode",
            )
        return text

    @staticmethod
    def decode(text: str) -> Any:
        return json.loads(text)


class Outbox(Generic[M]):
    """Partner ``partner``'s outbox in this process: ``await submit(event)``
    stores it in the log; whenever this process holds the lease it delivers
    the log through ``send`` (``async def send(event, *, key, epoch)``).
    The dispatcher's options as for ``Dispatcher`` (``concurrency_limit``
    or ``release_rate`` needed; ``timeout`` may not be ``None``: the lease
    must outlast every send). ``serializer``: ``encode(event) -> str`` and
    ``decode(str) -> event`` (default JSON). ``lease``, ``poll_interval``,
    ``store_timeout``: seconds; ``page_size``: events a read takes (64).
    ``on_event`` gets every ``OutboxEvent``. Use ``await Outbox.open(...)``.
    """

    def __init__(
        self,
        redis: Any,
        partner: str,
        send: Callable[..., Awaitable[Any]],
        /,
        *,
        serializer: Any = None,
        lease: Optional[float] = None,
        page_size: Optional[int] = None,
        poll_interval: Optional[float] = None,
        store_timeout: Optional[float] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        on_event: Optional[Callable[[OutboxEvent], Any]] = None,
        **options: Any,
    ) -> None:
        if not all(callable(getattr(redis, m, None)) for m in ("pipeline", "register_script", "xrange")):
            raise option_error(TypeError, "redis", f"redis must be a redis.asyncio client, got {type(redis).__name__}")
        keys = _native._outbox_keys(partner)
        if not callable(send):
            raise option_error(TypeError, "send", f"send must be a callable, got {type(send).__name__}")
        if on_event is not None and not callable(on_event):
            raise option_error(TypeError, "on_event", f"on_event must be a callable, got {type(on_event).__name__}")
        check_sync("on_event", on_event, "events are handed over, never awaited (start a task from a plain one)")
        if serializer is not None and not (callable(getattr(serializer, "encode", None)) and callable(getattr(serializer, "decode", None))):
            raise option_error(TypeError, "serializer", "serializer must have encode(event) -> str and decode(str) -> event")
        if timeout is None:
            raise option_error(TypeError, "timeout", "timeout must be a number of seconds: the lease must outlast every send")
        for option, words in _REFUSED.items():
            if options.get(option) is not None:
                raise option_error(TypeError, option, f"{option} must be absent: {words}")
        name = options.pop("name", partner)
        self._name: str = name
        self._options = dict(options, timeout=timeout)
        # Checks the dispatcher's options (a TypeError or ValueError naming one).
        # Each dispatcher's grant: the epoch its sends carry, fixed when it starts delivering.
        self._grants: "weakref.WeakKeyDictionary[Dispatcher[_Entry[M]], List[Optional[int]]]" = weakref.WeakKeyDictionary()
        self._spare: Optional[Dispatcher[_Entry[M]]] = self._new_dispatcher()
        self._native = _native.NativeOutbox(
            secrets.randbits(64),
            timeout,
            options.get("max_messages"),
            lease,
            page_size,
            poll_interval,
            store_timeout,
        )
        self.partner = partner
        self._redis = redis
        self._log, self._dead, *self._lease_keys = keys
        self._lease_script = redis.register_script(_native._outbox_lease_script())
        self._dead_script = redis.register_script(_native._outbox_dead_script())
        self._token = secrets.token_hex(16)
        self._serializer = serializer if serializer is not None else _Json
        self._send = send
        self._on_event = on_event
        self._timeout = self._native.store_timeout()
        self._turn_events = self._native.turn_events()
        self._pid = os.getpid()
        self._loop: Optional[asyncio.AbstractEventLoop] = None  # the loop it runs in, from its first use
        self._append_lock: Optional[asyncio.Lock] = None  # one pipeline out at a time: the log keeps the submits' order
        self._closing: "Optional[asyncio.Task[OutboxClosed]]" = None
        self._submits: List[Tuple[List[Any], Optional[str], "asyncio.Future[Receipt]"]] = []
        self._dispatcher: Optional[Dispatcher[_Entry[M]]] = None
        self._epoch: Optional[int] = None
        self._cursor: Optional[str] = None
        self._handing = False  # a page is being handed to the dispatcher
        self._asked = False  # a lease call was made (aclose gives the lease back)
        self._held = 0
        self._removing: Set[str] = set()
        self._removals: List[str] = []
        self._dead_letters: List[Tuple[str, Dict[str, str], str]] = []
        self._removal_timer: Optional[asyncio.TimerHandle] = None
        self._flushing: Optional["asyncio.Task[Optional[float]]"] = None
        self._lease_out: Optional["asyncio.Task[None]"] = None
        self._appending: "set[asyncio.Task[None]]" = set()
        self._retired: "set[asyncio.Task[None]]" = set()
        # Deliveries handed to a dispatcher, not yet settled (their callback not yet run).
        self._deliveries: "set[asyncio.Future[None]]" = set()
        self._timer: Optional[asyncio.TimerHandle] = None
        self._tasks: "set[asyncio.Task[Any]]" = set()
        self._closed = False
        self._stats = {"submitted": 0, "delivered": 0, "dead": 0, "removed": 0, "store_errors": 0}

    @classmethod
    async def open(cls, redis: Any, partner: str, send: Callable[..., Awaitable[Any]], /, **options: Any) -> "Outbox[M]":
        """An outbox that starts delivering once its caller has it; warns
        once (``PersistenceWarning``), with the fix, when Redis runs
        without AOF."""
        outbox: Outbox[M] = cls(redis, partner, send, **options)
        outbox._own_loop()
        await outbox._check_persistence()
        asyncio.get_running_loop().call_soon(outbox._tick)
        return outbox

    def _own_loop(self) -> None:
        """This process's outbox, in the event loop of its first use: a
        forked copy, or another loop, is a ``RuntimeError``."""
        if os.getpid() != self._pid:
            raise RuntimeError(f"Outbox[{self.partner}] was made in process {self._pid}: make one in each worker, after the fork")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(f"Outbox[{self.partner}] runs in another event loop: make one in each loop")

    async def _check_persistence(self) -> None:
        try:
            reply = await asyncio.wait_for(self._redis.config_get("appendonly"), self._timeout)
        except Exception:  # noqa: BLE001 - a managed Redis may refuse CONFIG: not checked
            return
        values = {_text(k): _text(v) for k, v in dict(reply).items()}
        if values.get("appendonly") != "yes" and id(self._redis) not in _WARNED:
            _WARNED.add(id(self._redis))
            warnings.warn(
                f"Outbox[{self.partner}]: Redis runs without AOF (appendonly no): a Redis restart loses the events "
                "accepted since its last RDB snapshot, and the lease (until the old holder's runs out, two processes "
                "may deliver; epochs start again). Run it with --appendonly yes (appendfsync everysec loses at most a "
                "second; always, nothing).",
                PersistenceWarning,
                stacklevel=3,
            )

    async def submit(self, event: M, *, key: Optional[str] = None) -> Receipt:
        """Returns once Redis stored ``event`` (its id and key); raises
        ``StoreUnavailableError`` when it did not (or did not say), a
        ``TypeError`` for an event the serializer cannot write or a bad key."""
        if key is not None and (not isinstance(key, str) or key == "" or not _utf8(key)):
            raise option_error(TypeError, "key", f"key must be a non-empty str of UTF-8 (no lone surrogate), got {key!r}")
        self._own_loop()
        if self._closed:
            raise DispatcherClosedError(self.partner, event)
        try:
            payload = self._serializer.encode(event)
        except TypeError as err:
            if getattr(err, "option", None) == "serializer":
                raise
            raise option_error(TypeError, "serializer", f"serializer: encode raised {err!r}") from err
        except Exception as err:  # noqa: BLE001 - any failure to encode refuses the event
            raise option_error(TypeError, "serializer", f"serializer: encode raised {err!r}") from err
        if not isinstance(payload, str) or not _utf8(payload):
            what = type(payload).__name__ if not isinstance(payload, str) else "a str with a lone surrogate"
            raise option_error(TypeError, "serializer", f"serializer: encode must return a str of UTF-8, got {what}")
        fields = [_PAYLOAD, payload] if key is None else [_KEY, key, _PAYLOAD, payload]
        loop = asyncio.get_running_loop()
        done: "asyncio.Future[Receipt]" = loop.create_future()
        self._submits.append((fields, key, done))
        if len(self._submits) == 1:
            loop.call_soon(self._spawn, self._append_all(), self._appending)
        return await done

    def _spawn(self, work: Awaitable[Any], into: "Optional[set[asyncio.Task[Any]]]" = None) -> "asyncio.Task[Any]":
        """Runs ``work`` as a task, kept in ``into`` (what ``aclose`` waits for) or in the tasks it may cancel."""
        task = asyncio.ensure_future(work)
        kept = self._tasks if into is None else into
        kept.add(task)
        task.add_done_callback(kept.discard)
        return task

    async def _append_all(self) -> None:
        """This iteration's submits, in one pipeline, after the pipeline
        before it (the log keeps each process's order): each gets its id or
        why not."""
        if self._append_lock is None:
            self._append_lock = asyncio.Lock()
        async with self._append_lock:
            batch, self._submits = self._submits, []
            if batch:
                await self._append(batch)

    async def _append(self, batch: List[Tuple[List[Any], Optional[str], "asyncio.Future[Receipt]"]]) -> None:
        try:
            pipe = self._redis.pipeline(transaction=False)
            for fields, _, _ in batch:
                pipe.xadd(self._log, dict(zip(fields[::2], fields[1::2])))
            results = await asyncio.wait_for(pipe.execute(raise_on_error=False), self._timeout)
        except Exception as err:  # noqa: BLE001 - no answer: each may be stored
            for _, _, done in batch:
                if not done.done():
                    done.set_exception(StoreUnavailableError(self.partner, err, True))
            return
        stored = 0
        for (_, key, done), result in zip(batch, results):
            if isinstance(result, BaseException):
                # Redis answered with an error: not stored.
                if not done.done():
                    done.set_exception(StoreUnavailableError(self.partner, result, not _is_reply_error(result)))
                continue
            # Stored, whether its submitter still waits or not.
            stored += 1
            entry_id = _text(result)
            if not done.done():
                done.set_result(Receipt(entry_id, key if key is not None else entry_id))
        self._stats["submitted"] += stored
        if stored and not self._closed:
            self._native.appended()
            self._tick()

    def is_deliverer(self) -> bool:
        """Whether this process delivers now (it holds the lease)."""
        return self._dispatcher is not None

    def stats(self) -> Dict[str, Any]:
        """Counters of this process (submitted, delivered, dead, removed,
        store_errors) and its role (deliverer, epoch, held, removing)."""
        return {**self._stats, "deliverer": self.is_deliverer(), "epoch": self._epoch, "held": self._held, "removing": len(self._removing)}

    def _tick(self) -> None:
        """Does what is due, then sets the timer for what is next."""
        if self._closed:
            return
        n = self._native
        n.handle_timeout()
        self._roles()
        if self._lease_out is None and n.lease_call():
            self._lease_out = self._spawn(self._lease_call())
        self._read_if_due()
        self._schedule()

    def _schedule(self) -> None:
        """Sets the timer for what the core says is next."""
        if self._timer is not None:
            self._timer.cancel()
        delay = self._native.delay()
        self._timer = None if delay is None else asyncio.get_running_loop().call_later(delay, self._tick)

    async def _lease_call(self) -> None:
        """One lease call; its answer applies even while closing (a grant is then given back)."""
        self._asked = True
        try:
            args = self._native.lease_args(self._token, self._left_state(self._dispatcher), self._native.epoch())
            reply = await asyncio.wait_for(self._lease_script(keys=self._lease_keys, args=args), self._timeout)
        except Exception as err:  # noqa: BLE001 - retried with the core's backoff
            failed: Optional[BaseException] = err
        else:
            failed = None
        finally:
            self._lease_out = None
        if failed is not None:
            self._native.lease_failed()
            self._store_error("lease", failed)
        elif not self._native.lease_answered(reply):
            self._store_error("lease", ValueError(f"the lease script answered {reply!r}, which it cannot have"))
        self._tick()

    def _roles(self) -> None:
        """A grant starts a dispatcher from the log's start; a loss closes it."""
        while (change := self._native.poll_event()) is not None:
            kind, value = change
            if kind == "lost":
                d, self._dispatcher = self._dispatcher, None
                self._epoch = None
                self._held = 0
                if d is not None:
                    # Its sends in flight end (the core starts none until
                    # they are over); a delivery among them is still removed.
                    self._spawn(d.aclose(), self._retired)
                self._emit(OutboxEvent("lost", reason=value))
            else:
                self._epoch = value
                self._cursor = None
                d = self._spare if self._spare is not None else self._new_dispatcher()
                self._dispatcher = d
                self._grants[d][0] = value
                self._spare = None
                self._emit(OutboxEvent("acquired", epoch=value, breaker=self._resume(d)))

    def _resume(self, d: Dispatcher[_Entry[M]]) -> str:
        """Resumes new dispatcher ``d``'s breaker from the state the last holder
        left: ``resumed``, ``none`` (none was left), or why not (a
        ``SnapshotError`` kind), said by a ``StateNotResumedWarning`` too."""
        left = self._native.take_left()
        if left is None:
            return "none"
        state, age_us = left
        try:
            d.queue._resume_state(state, age_us)
        except Exception as err:  # noqa: BLE001 - any failure: it starts closed, and says why
            kind = str(err.kind) if isinstance(err, SnapshotError) else "clock"  # (its clock failed)
            why = "its breaker options differ from this one's" if kind == "config_mismatch" else kind
            message = f"halfopen: Outbox[{self.partner}]: the breaker state the last deliverer left is not resumed ({why}): this breaker starts closed"
            warnings.warn(StateNotResumedWarning(message, kind), stacklevel=2)
            return kind
        return "resumed"

    @staticmethod
    def _left_state(d: "Optional[Dispatcher[_Entry[M]]]") -> str:
        """The breaker state ``d`` leaves for the next holder (empty without one, or if its clock fails)."""
        if d is None:
            return ""
        try:
            return d.queue._left_state()
        except Exception:  # noqa: BLE001 - a clock that fails: nothing is carried this time
            return ""

    def _new_dispatcher(self) -> Dispatcher[_Entry[M]]:
        """A dispatcher of the outbox's options whose sends start only while the core says they may."""

        grant: List[Optional[int]] = [None]

        async def send(entry: _Entry[M]) -> Any:
            # The grant's epoch, however late the task runs (a later grant has a dispatcher of its own).
            sent = self._send(entry.event, key=entry.key, epoch=grant[0])
            # A plain function's value is its outcome, as the Dispatcher takes it.
            return await sent if inspect.isawaitable(sent) else sent

        def relay(event: RetentionEvent) -> None:
            if event.kind == "transition":
                if self._dispatcher is d and not self._closed:
                    # A change of the holder's breaker goes to Redis with a renewal soon.
                    self._native.breaker_changed()
                    self._schedule()
                self._emit(OutboxEvent("transition", transition=event.change))

        d: Dispatcher[_Entry[M]] = Dispatcher(
            self._name,
            send,
            on_event=relay,
            size=lambda entry: len(entry.payload.encode()),
            **self._options,
        )
        d._may_start = lambda: self._dispatcher is d and self._native.may_send()
        self._grants[d] = grant
        return d

    def _read_if_due(self) -> None:
        d = self._dispatcher
        if d is None or self._epoch is None or self._handing:
            return
        count = self._native.read_due(self._held, len(self._removing))
        if count is not None:
            self._spawn(self._read(d, self._epoch, count))

    async def _read(self, d: Dispatcher[_Entry[M]], epoch: int, count: int) -> None:
        low = "-" if self._cursor is None else f"({self._cursor}"
        try:
            entries = await asyncio.wait_for(self._redis.xrange(self._log, min=low, max="+", count=count), self._timeout)
        except Exception as err:  # noqa: BLE001 - read again a poll interval later
            self._store_error("read", err)
            if not self._closed:
                self._native.read_failed(epoch)
                self._tick()
            return
        if self._closed or self._dispatcher is not d or not self._native.read_answered(epoch, len(entries)):
            return self._tick()
        # No read while a page is handed on: the next starts after its last entry.
        self._handing = True
        try:
            await self._hand_on(d, entries)
        finally:
            self._handing = False
        self._tick()

    async def _hand_on(self, d: Dispatcher[_Entry[M]], entries: List[Any]) -> None:
        """Hands a page's entries to dispatcher ``d``, ``turn_events`` at a
        time, an iteration of the loop each (it is never held for long); a
        grant that ended meanwhile takes no more."""
        for i, (raw_id, raw_fields) in enumerate(entries):
            if i > 0 and i % self._turn_events == 0:
                await asyncio.sleep(0)
                if self._closed or self._dispatcher is not d:
                    return
            entry_id = _text(raw_id)
            self._cursor = entry_id
            if entry_id in self._removing:
                continue
            try:
                fields = {_text(k): _text(v) for k, v in dict(raw_fields).items()}
            except UnicodeDecodeError as err:
                # Not written by an outbox: its bytes go to the dead letters as they are.
                raw = {_text(k, "replace"): v for k, v in dict(raw_fields).items()}
                self._dead_letter(entry_id, raw, entry_id, "undecodable", err)
                continue
            key = fields.get(_KEY, entry_id)
            try:
                event = self._serializer.decode(fields[_PAYLOAD])
            except Exception as err:  # noqa: BLE001 - a payload this process cannot read is a dead letter
                self._dead_letter(entry_id, fields, key, "undecodable", err)
                continue
            self._held += 1
            delivery = asyncio.ensure_future(d.submit(_Entry(event, key, fields.get(_PAYLOAD, ""))))
            delivery.add_done_callback(functools.partial(self._settled, d, entry_id=entry_id, key=key, fields=fields))
            self._deliveries.add(delivery)

    def _settled(self, d: Dispatcher[_Entry[M]], done: "asyncio.Future[None]", *, entry_id: str, key: str, fields: Dict[str, str]) -> None:
        self._deliveries.discard(done)
        if self._dispatcher is d:
            self._held -= 1
        error = None if done.cancelled() else done.exception()
        if done.cancelled() or isinstance(error, DispatcherClosedError):
            return  # this process stopped delivering: it stays in the log
        if error is None:
            self._stats["delivered"] += 1
            self._remove(entry_id)
            self._emit(OutboxEvent("delivered", id=entry_id, key=key))
        elif isinstance(error, DeadLetterError):
            self._dead_letter(entry_id, fields, key, error.reason, error)
        else:
            # Not taken (a bound: "full"): kept, with why, never skipped silently.
            self._dead_letter(entry_id, fields, key, "full", error)
        self._tick()

    def _remove(self, entry_id: str) -> None:
        self._removing.add(entry_id)
        self._removals.append(entry_id)
        self._flush_soon(0.0)

    def _dead_letter(self, entry_id: str, fields: Dict[str, Any], key: str, reason: str, error: BaseException) -> None:
        self._removing.add(entry_id)
        self._stats["dead"] += 1
        self._dead_letters.append((entry_id, fields, reason))
        self._emit(OutboxEvent("dead", id=entry_id, key=key, reason=reason, error=error))
        self._flush_soon(0.0)

    def _flush_soon(self, delay: float) -> None:
        if self._removal_timer is None and not self._closed:
            self._removal_timer = asyncio.get_running_loop().call_later(delay, self._flush_removals)

    def _flush_removals(self) -> None:
        self._removal_timer = None
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._remove_now())

    async def _remove_now(self) -> Optional[float]:
        """One ``XDEL`` of the delivered events (a plain command: Redis at
        ``maxmemory`` still takes it) and one dead-letter script call each
        (it moves an event once, however often it is retried); what fails
        is retried with the core's backoff. Returns the seconds until that
        retry (0: nothing failed), or ``None`` (closing: the lease it held
        leaves no room for one)."""
        ids, self._removals = self._removals, []
        dead, self._dead_letters = self._dead_letters, []
        if not ids and not dead:
            return 0.0
        # Each dead letter its own script call (a cluster client runs no
        # script in a pipeline), all at once: one try is over within one
        # store timeout (the core's retry rule counts on it).
        calls: List[Awaitable[Any]] = []
        results: List[Any]
        try:
            if ids:
                calls.append(self._redis.xdel(self._log, *ids))
            for entry_id, fields, reason in dead:
                args = [entry_id, reason, *[v for kv in fields.items() for v in kv]]
                calls.append(self._dead_script(keys=[self._log, self._dead], args=args))
        except Exception as err:  # noqa: BLE001 - a client that raised at once: retried
            for call in calls:
                if inspect.iscoroutine(call):
                    call.close()  # made, never sent
            calls, results = [], [err] * (len(dead) + (1 if ids else 0))
        if calls:
            try:
                results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), self._timeout)
            except Exception as err:  # noqa: BLE001 - retried
                results = [err] * len(calls)
        failed: Optional[BaseException] = None
        if ids:
            outcome = results.pop(0)
            if isinstance(outcome, BaseException):
                failed = outcome
                self._removals = ids + self._removals
            else:
                self._removed(ids)
        for letter, outcome in zip(dead, results):
            if isinstance(outcome, BaseException):
                failed = outcome
                self._dead_letters.append(letter)
            else:
                self._removed([letter[0]])
        delay: Optional[float] = 0.0
        if failed is not None:
            self._store_error("remove", failed)
            delay = self._native.removal_failed()
        else:
            self._native.removal_done()
        if delay is not None and (self._removals or self._dead_letters):
            self._flush_soon(delay)
        return delay

    def _removed(self, ids: List[str]) -> None:
        """Redis confirmed these ids are out of the log: room for the next page."""
        self._removing.difference_update(ids)
        self._stats["removed"] += len(ids)
        if not self._closed:
            self._tick()

    def _store_error(self, operation: str, error: BaseException) -> None:
        """A store call failed: an event (and a count), never only a log line."""
        self._stats["store_errors"] += 1
        self._emit(OutboxEvent("store_error", operation=operation, error=error))

    def _emit(self, event: OutboxEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception as err:  # noqa: BLE001 - a raising listener stops nothing
            log_error("an outbox's on_event raised", err)

    async def aclose(self) -> OutboxClosed:
        """Stores this iteration's submits (and waits for those sent),
        waits for every send this process started, under any grant, makes
        the pending removals (four tries at most, with the core's backoff,
        while the lease it held leaves room: ``policy::closing_retry``),
        then gives the lease up (another
        process takes over at once, without what this one delivered):
        an :class:`OutboxClosed`. The lease is renewed once as it begins,
        so that it outlasts the sends and removals. Every call waits for the
        one close (a cancelled wait does not stop it). A forked copy touches
        nothing in Redis (the lease is its parent's)."""
        if os.getpid() != self._pid:
            self._closed = True
            return {"unremoved": 0, "lapsed": False}
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        return await asyncio.shield(self._closing)

    async def _close(self) -> OutboxClosed:
        await self._append_all()
        await asyncio.gather(*self._appending, return_exceptions=True)
        self._closed = True
        for handle in (self._timer, self._removal_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._removal_timer = None
        # A lease call out: its answer applies first (a grant is given back below).
        while self._lease_out is not None:
            await asyncio.gather(self._lease_out, return_exceptions=True)
        d = self._dispatcher
        # (The core's: a grant the lease call just answered is not yet applied.)
        epoch = self._native.epoch()
        held = self._native.release()
        self._roles()
        # Held: renewed once more, so that it outlasts the sends still out
        # and their removals (a lease fits two send timeouts and two store
        # timeouts); if Redis does not confirm this grant, it may lapse
        # before it is given back, and aclose says so ("lapsed").
        kept = held and await self._renew_once(epoch, d)
        if d is not None:
            await d.aclose()
        await asyncio.gather(*self._retired, return_exceptions=True)
        # Every delivery's callback has run (they are called before
        # gather's): what was delivered is in the removals.
        await asyncio.gather(*self._deliveries, return_exceptions=True)
        # The removals before the lease goes back: the next holder reads the
        # log without what this one delivered (a handover sends nothing twice).
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        retry = await self._remove_now()
        # What fails is tried again as the core says (a few times, while the lease it held leaves room).
        while retry is not None and (self._removals or self._dead_letters):
            await asyncio.sleep(retry)
            retry = await self._remove_now()
        # Given back whenever it was asked for: a grant whose answer came too
        # late is Redis's all the same (the script deletes only this token's).
        if self._asked:
            try:
                # With the breaker's state now, for the next holder (if this one still holds it).
                args = self._native.lease_args(self._token, self._left_state(d), None, release=True)
                await asyncio.wait_for(self._lease_script(keys=self._lease_keys, args=args), self._timeout)
            except Exception as err:  # noqa: BLE001 - it lapses by itself after its TTL
                self._store_error("lease", err)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return {"unremoved": len(self._removals) + len(self._dead_letters), "lapsed": held and not kept}

    async def _renew_once(self, epoch: Optional[int], d: "Optional[Dispatcher[_Entry[M]]]") -> bool:
        """One renewal of grant ``epoch`` (closing), with ``d``'s breaker state: whether Redis confirmed it."""
        try:
            args = self._native.lease_args(self._token, self._left_state(d), epoch)
            self._native.close_renewal()
            reply = await asyncio.wait_for(self._lease_script(keys=self._lease_keys, args=args), self._timeout)
        except Exception as err:  # noqa: BLE001 - then it may lapse: said by the result
            self._store_error("lease", err)
            return False
        try:
            kept = int(reply[0]) == 1 and int(reply[1]) == epoch
        except (TypeError, ValueError, IndexError, KeyError):
            return False  # not the script's reply: as if unanswered
        # (Refused: another process may hold it; a failed removal is not tried again.)
        self._native.close_renewal_answered(kept)
        return kept


def _is_reply_error(err: BaseException) -> bool:
    """Whether Redis itself answered the error (then it did not store)."""
    try:
        from redis.exceptions import ResponseError
    except ImportError:  # pragma: no cover - redis-py is what the client is
        return False
    return isinstance(err, ResponseError)


_WARNED: Set[int] = set()
