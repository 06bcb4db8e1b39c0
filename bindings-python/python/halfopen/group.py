"""One breaker for a group of processes (``CircuitBreaker(..., group=RedisGroup(client, name))``;
``Registry(group=RedisGroup(client, name))``: each name's breaker a group of its own).

The core's member (``src/group.rs``, ``core/src/group/``) decides
everything: when to exchange, what to send, what the group's answer does to
the breaker; a registry's members (``src/registry_group.rs``,
``core/src/group/keyed.rs``) do the same for each of its names, the names
due in script calls of at most 100 names. This module does the I/O: one
script call (``EVALSHA``, through the user's redis-py client) per exchange,
in the background, with a timeout.
No call of the breaker ever waits for Redis or fails because of it: a store
that fails or is late leaves the process deciding alone (``on_degraded``)
until it answers again (``on_recovered``).

- A sync client (``redis.Redis``, ``redis.cluster.RedisCluster``): a daemon
  thread per breaker waits for the next exchange; each store call runs on a
  second daemon thread, waited for at most the store timeout (a call that
  hangs is given up, and the next waits behind it; a request that reaches
  Redis after it was given up changes nothing there: it carries a deadline).
- An asyncio client (``redis.asyncio.Redis``, ``redis.asyncio.RedisCluster``):
  a task on the event loop running when the breaker is made (making one
  outside a running loop is a ``TypeError``).
- ``fork()`` (gunicorn ``--preload``): in the child, a sync link rejoins as
  a new member (two processes never share a member id) on a new thread; an
  asyncio link leaves (its loop does not run in the child; make the breaker
  in the worker instead), with a warning on the ``halfopen`` logger.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import secrets
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, Union, cast

from . import _native
from ._support import check_sync, escapes, log_error, logger, option_error

if TYPE_CHECKING:
    from . import CircuitBreaker, Registry

__all__ = ["GroupStatus", "RedisGroup", "RegistryGroupStatus"]

#: How long a link sleeps at most between looks at its member (seconds).
_LONGEST_WAIT = 60.0


class GroupStatus:
    """What a breaker's link to its group knows: its member id, whether it
    decides alone because the store failed, and the group's phase as last
    answered (``"closed"``, ``"open"``, ``"half_open"``; ``None`` before the
    first answer or since the store failed)."""

    __slots__ = ("member", "degraded", "phase")

    def __init__(self, member: str, degraded: bool, phase: Optional[str]) -> None:
        self.member = member
        self.degraded = degraded
        self.phase = phase

    def __repr__(self) -> str:
        return f"GroupStatus(member={self.member!r}, degraded={self.degraded}, phase={self.phase!r})"


class RegistryGroupStatus:
    """What a grouped registry knows of its group: this process's member id
    (16 hex digits), whether some names decide alone (an exchange that
    carried them failed, and the store has not answered them since), the
    names in the group (a name joins at the next round after its breaker is
    made) and those whose group answered."""

    __slots__ = ("member", "degraded", "names", "answered")

    def __init__(self, member: str, degraded: bool, names: int, answered: int) -> None:
        self.member = member
        self.degraded = degraded
        self.names = names
        self.answered = answered

    def __repr__(self) -> str:
        return (
            f"RegistryGroupStatus(member={self.member!r}, degraded={self.degraded}, names={self.names}, "
            f"answered={self.answered})"
        )


def _is_async(client: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(client, "execute_command", None))


class RedisGroup:
    """A group on Redis, for the ``group=`` option of ``CircuitBreaker``:
    ``client`` is a redis-py client (sync or asyncio, single node or
    cluster), ``name`` the group's name (its key is the hash
    ``halfopen:v2:{name}``). Every process whose breaker
    names the same group on the same Redis is one breaker.

    ``flush_interval`` (seconds, default 1), ``quorum`` (default 2),
    ``store_timeout``, ``lease`` and ``member_ttl`` are the core's group
    options (``None``: its default). ``on_degraded(error)`` is called when
    the store fails or is late (the process then decides alone), and
    ``on_recovered()`` when it answers again; what they raise is logged."""

    __slots__ = ("client", "name", "_keys", "_options", "_on_degraded", "_on_recovered", "_async", "_script")

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        flush_interval: Optional[float] = None,
        quorum: Optional[int] = None,
        store_timeout: Optional[float] = None,
        lease: Optional[float] = None,
        member_ttl: Optional[float] = None,
        on_degraded: Optional[Callable[[BaseException], Any]] = None,
        on_recovered: Optional[Callable[[], Any]] = None,
    ) -> None:
        if not callable(getattr(client, "register_script", None)):
            raise option_error(
                TypeError,
                "group.client",
                f"group.client must be a redis-py client (sync or asyncio), got {type(client).__name__}",
            )
        self._keys: List[str] = _native._group_keys(name)
        for option, callback in (("group.on_degraded", on_degraded), ("group.on_recovered", on_recovered)):
            if callback is not None and not callable(callback):
                raise option_error(TypeError, option, f"{option} must be a callable, got {type(callback).__name__}")
            check_sync(option, callback, "it is called from the group's thread or task and never awaited")
        self.client = client
        self.name = name
        self._options = (flush_interval, quorum, store_timeout, lease, member_ttl)
        self._on_degraded = on_degraded
        self._on_recovered = on_recovered
        self._async = _is_async(client)
        self._script = client.register_script(_native._group_script())

    def __repr__(self) -> str:
        return f"RedisGroup({self.name!r})"


#: Every live link, for the fork hook.
_LINKS: "weakref.WeakSet[_Link]" = weakref.WeakSet()

#: The link of each breaker in a group.
_BY_BREAKER: "weakref.WeakKeyDictionary[Any, _Link]" = weakref.WeakKeyDictionary()


def _text(reply: Any) -> Optional[List[str]]:
    """The script's reply as text, or ``None`` if it cannot be the script's."""
    if not isinstance(reply, list):
        return None
    out = []
    for value in reply:
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                return None
        if not isinstance(value, str):
            return None
        out.append(value)
    return out


_BAD_REPLY = "the group store answered something its script cannot have"


def _bare(error: BaseException) -> BaseException:
    """``error`` with the tracebacks of its chain dropped."""
    seen = set()
    e: Optional[BaseException] = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return error


class _Caller:
    """A daemon thread that runs store calls one at a time, each waited for
    at most a timeout (no ``concurrent.futures``: its global lock may be held
    by another thread at a fork, and a child that starts a link before the
    lock is reinitialised would wait on it forever)."""

    def __init__(self, name: str) -> None:
        self._jobs: "queue.SimpleQueue[Optional[List[Any]]]" = queue.SimpleQueue()
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        """``fn()``'s result or exception; ``TimeoutError`` after ``timeout``
        (the call then runs later if it has started, or never)."""
        done = threading.Event()
        job: List[Any] = [fn, done, None, None, False]
        self._jobs.put(job)
        if not done.wait(timeout):
            job[4] = True
            raise TimeoutError(f"the group store did not answer within {timeout} s")
        if job[3] is not None:
            raise job[3]
        return job[2]

    def stop(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, done, *_ = job
            if job[4]:
                continue  # given up before it started
            try:
                job[2] = fn()
            except BaseException as error:  # handed to the waiter
                job[3] = error
            done.set()


class _Native:
    """The native functions a link calls, for its owner's kind."""

    __slots__ = ("delay", "request", "apply", "failed", "event", "store_timeout", "leave")

    def __init__(self, *functions: Callable[..., Any]) -> None:
        self.delay, self.request, self.apply, self.failed, self.event, self.store_timeout, self.leave = functions


_BREAKER = _Native(
    _native._group_delay,
    _native._group_request,
    _native._group_apply,
    _native._group_failed,
    _native._group_event,
    _native._group_store_timeout,
    _native._group_leave,
)
_REGISTRY = _Native(
    _native._registry_group_delay,
    _native._registry_group_request,
    _native._registry_group_apply,
    _native._registry_group_failed,
    _native._registry_group_event,
    _native._registry_group_store_timeout,
    _native._registry_group_leave,
)


class _Link:
    """The exchanges of a breaker (or of a registry's names) with their group's store."""

    def __init__(self, breaker: "Union[CircuitBreaker, Registry]", group: RedisGroup, registry: bool = False) -> None:
        self.group = group
        self._registry = registry
        self._native = _REGISTRY if registry else _BREAKER
        self._breaker = weakref.ref(breaker)
        self._closed = False
        self._last_error: Optional[BaseException] = None
        self._join(breaker)
        self._timeout: float = self._native.store_timeout(breaker) or 0.0
        _LINKS.add(self)
        _BY_BREAKER[breaker] = self
        # A transition may ask for an exchange sooner.
        breaker.on_state_change(lambda _change: self.poke())
        self._start()

    def _join(self, breaker: Any) -> None:
        self.member = secrets.randbits(64)
        if self._registry:
            _native._registry_group_join(breaker, self.group.name, self.member, *self.group._options)
        else:
            _native._group_join(breaker, self.member, *self.group._options)

    def _start(self) -> None:
        if self.group._async:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self.close()
                raise option_error(
                    TypeError,
                    "group.client",
                    "group.client is an asyncio client: make the breaker inside the running event loop",
                ) from None
            self._wake_async = asyncio.Event()
            self._task = self._loop.create_task(self._run_async(), name=f"halfopen-group-{self.group.name}")
            self._task.add_done_callback(self._task_done)
        else:
            self._wake = threading.Event()
            self._calls = _Caller(f"halfopen-group-call-{self.group.name}")
            self._thread = threading.Thread(target=self._run, name=f"halfopen-group-{self.group.name}", daemon=True)
            self._thread.start()

    def _task_done(self, task: "asyncio.Task[None]") -> None:
        """The exchange task ended: its loop was closed (or stopped) with the
        breaker still in the group. The breaker decides alone from then on
        (a warning says so): a share of the group's limit, or a phase, that
        no exchange updates any more must not hold it."""
        if self._closed or self._breaker() is None:
            return  # left, or its owner was collected: nothing ended early
        logger.warning(
            "halfopen: RedisGroup[%s]: the event loop of the group's exchanges ended; the breaker decides alone "
            "from now on (make it in the loop that uses it)",
            self.group.name,
        )
        self.close()

    def status(self) -> Union[GroupStatus, RegistryGroupStatus, None]:
        if self.group._async and self._loop.is_closed() and not self._closed:
            self._task_done(self._task)
        owner: Any = self._breaker()
        if owner is None or self._closed:
            return None
        if self._registry:
            got = _native._registry_group_status(owner)
            return None if got is None else RegistryGroupStatus(f"{self.member:016x}", *got)
        status = _native._group_status(owner)
        if status is None:
            return None
        degraded, phase = status
        return GroupStatus(f"{self.member:016x}", degraded, phase)

    def poke(self) -> None:
        """Wakes the link to look at its member again."""
        if self._closed:
            return
        if self.group._async:
            try:
                self._loop.call_soon_threadsafe(self._wake_async.set)
            except RuntimeError:
                pass  # the loop is closed: the link is over with it
        else:
            self._wake.set()

    def close(self) -> None:
        """Stops exchanging; the breaker decides alone from now on."""
        if self._closed:
            return
        self._closed = True
        breaker = self._breaker()
        if breaker is not None:
            self._native.leave(breaker)
            _BY_BREAKER.pop(breaker, None)
        self._stop()

    def _stop(self) -> None:
        if self.group._async:
            task = getattr(self, "_task", None)
            if task is not None:
                try:
                    self._loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:
                    pass
        else:
            wake = getattr(self, "_wake", None)
            if wake is not None:
                wake.set()
            calls = getattr(self, "_calls", None)
            if calls is not None:
                calls.stop()

    # The steps of an exchange, shared by both kinds of client.

    def _delay(self, breaker: Any) -> float:
        delay = self._native.delay(breaker)
        return _LONGEST_WAIT if delay is None else min(delay, _LONGEST_WAIT)

    def _request(self, breaker: Any) -> Optional[Tuple[List[str], List[str]]]:
        """The script's keys and arguments, if an exchange is due; a clock that fails is a failed exchange."""
        try:
            got = self._native.request(breaker)
        except BaseException as error:
            if escapes(error, error.__traceback__):
                raise
            self._failed(breaker, error)
            return None
        if got is None or self._registry:
            return cast("Optional[Tuple[List[str], List[str]]]", got)
        return self.group._keys, got

    def _answered(self, breaker: Any, reply: Any) -> None:
        text = _text(reply)
        if text is None:
            self._failed(breaker, ValueError(_BAD_REPLY))
            return
        try:
            ok = self._native.apply(breaker, text)
        except BaseException as error:
            # The clock failed (or a listener raised what must propagate:
            # an interrupt): the exchange counts as failed.
            if escapes(error, error.__traceback__):
                raise
            self._failed(breaker, error)
            return
        if not ok:
            # A reply the script cannot have given: the native side counted
            # the exchange failed (once: a second count would back off
            # twice as long and give up the group's limit at once).
            self._last_error = ValueError(_BAD_REPLY)
        self._events(breaker)

    def _failed(self, breaker: Any, error: BaseException) -> None:
        # Kept without tracebacks: a traceback's frames hold the breaker
        # (a breaker no one else holds must still be collected, and leave).
        self._last_error = _bare(error)
        self._native.failed(breaker)
        self._events(breaker)

    def _stopped(self, breaker: Any, error: BaseException) -> None:
        """Something the exchange did not expect stopped it (an interrupt
        raised by the script, say): the exchange failed, and ``on_degraded``
        gets the error."""
        try:
            self._failed(breaker, error)
        except BaseException as again:
            log_error(f"RedisGroup[{self.group.name}]: an exchange failed and could not say so", again)

    def _events(self, breaker: Any) -> None:
        while True:
            event = self._native.event(breaker)
            if event is None:
                return
            try:
                if event == "degraded" and self.group._on_degraded is not None:
                    self.group._on_degraded(self._last_error or ConnectionError("the group store failed"))
                elif event == "recovered" and self.group._on_recovered is not None:
                    self.group._on_recovered()
            except BaseException as error:
                if escapes(error, error.__traceback__):
                    raise
                log_error(f"RedisGroup[{self.group.name}]: the on_{event} callback raised", error)

    # A sync client: a thread.

    def _run(self) -> None:
        try:
            self._loop_sync()
        finally:
            self._calls.stop()

    def _loop_sync(self) -> None:
        while not self._closed:
            breaker = self._breaker()
            if breaker is None:
                return
            delay = self._delay(breaker)
            del breaker
            # Woken early (a transition): look again. Else the exchange is
            # due (with a clock that fails, after the member's backoff from
            # its latest good reading: the exchange then fails, and says why).
            if delay > 0 and self._wake.wait(delay):
                self._wake.clear()
                continue
            breaker = self._breaker()
            if breaker is None or self._closed:
                return
            try:
                self._exchange(breaker)
            except BaseException as error:  # never let the thread die
                self._stopped(breaker, error)
            del breaker

    def _exchange(self, breaker: Any) -> None:
        call = self._request(breaker)
        if call is None:
            return
        script, (keys, args) = self.group._script, call
        try:
            reply = self._calls.call(lambda: script(keys=keys, args=args), self._timeout)
        except BaseException as error:
            if escapes(error, error.__traceback__):
                raise
            self._failed(breaker, error)
            return
        if not self._closed:
            self._answered(breaker, reply)

    # An asyncio client: a task.

    async def _run_async(self) -> None:
        while not self._closed:
            breaker = self._breaker()
            if breaker is None:
                return
            delay = self._delay(breaker)
            if delay > 0:
                del breaker
                try:
                    await asyncio.wait_for(self._wake_async.wait(), delay)
                    self._wake_async.clear()
                    continue  # woken early: look again
                except asyncio.TimeoutError:
                    pass  # due (see _run)
                breaker = self._breaker()
                if breaker is None:
                    return
            try:
                await self._exchange_async(breaker)
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # never let the task die
                self._stopped(breaker, error)
            del breaker

    async def _exchange_async(self, breaker: Any) -> None:
        call = self._request(breaker)
        if call is None:
            return
        keys, args = call
        try:
            reply = await asyncio.wait_for(self.group._script(keys=keys, args=args), self._timeout)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            if isinstance(error, asyncio.TimeoutError):
                error = TimeoutError(f"the group store did not answer within {self._timeout} s")
            self._failed(breaker, error)
            return
        if not self._closed:
            self._answered(breaker, reply)

    # fork()

    def _forked(self) -> None:
        """In a fork's child: rejoin as a new member on a new thread (sync),
        or leave (asyncio)."""
        breaker = self._breaker()
        if breaker is None or self._closed:
            return
        if self.group._async:
            logger.warning(
                "halfopen: RedisGroup[%s]: an asyncio group does not survive fork(); the breaker decides alone in "
                "the child (make it in the worker's event loop)",
                self.group.name,
            )
            self._closed = True
            self._native.leave(breaker)
            _BY_BREAKER.pop(breaker, None)
            return
        self._join(breaker)
        self._start()


def join(breaker: "Union[CircuitBreaker, Registry]", group: Union[RedisGroup, Any], registry: bool = False) -> None:
    """Makes ``breaker`` (or every name of a registry) a member of ``group`` (the ``group=`` option)."""
    if not isinstance(group, RedisGroup):
        raise option_error(TypeError, "group", f"must be a halfopen.RedisGroup, got {type(group).__name__}")
    if breaker in _BY_BREAKER:
        return
    _Link(breaker, group, registry)


def status(breaker: Any) -> Union[GroupStatus, RegistryGroupStatus, None]:
    """The breaker's link's status (``None`` outside a group)."""
    link = _BY_BREAKER.get(breaker)
    return None if link is None else link.status()


def force_open(breaker: Any, seconds: float) -> None:
    """Opens the breaker's whole group for ``seconds`` (see ``CircuitBreaker.group_force_open``)."""
    link = _BY_BREAKER.get(breaker)
    if link is None:
        raise TypeError("group_force_open needs the group= option (and a breaker still in its group)")
    _native._group_force_open(breaker, seconds)
    link.poke()


def force_close(breaker: Any, reset: bool) -> None:
    """Closes (or resets) the breaker's whole group (see ``CircuitBreaker.group_force_close``)."""
    link = _BY_BREAKER.get(breaker)
    if link is None:
        method = "group_reset" if reset else "group_force_close"
        raise TypeError(f"{method} needs the group= option (and a breaker still in its group)")
    _native._group_force_close(breaker, reset)
    link.poke()


def force_close_name(registry: Any, name: str, reset: bool) -> None:
    """Closes (or resets) ``name``'s group of a grouped registry."""
    link = _BY_BREAKER.get(registry)
    if link is None:
        method = "group_reset" if reset else "group_force_close"
        raise TypeError(f"{method} needs the registry's group= option (and a registry still in its group)")
    _native._registry_group_force_close(registry, name, reset)
    link.poke()


def force_open_name(registry: Any, name: str, seconds: float) -> None:
    """Opens ``name``'s group of a grouped registry for ``seconds``."""
    link = _BY_BREAKER.get(registry)
    if link is None:
        raise TypeError("group_force_open needs the registry's group= option (and a registry still in its group)")
    _native._registry_group_force_open(registry, name, seconds)
    link.poke()


def leave(breaker: Any) -> None:
    """Stops the breaker's exchanges with its group (it decides alone)."""
    link = _BY_BREAKER.get(breaker)
    if link is not None:
        link.close()


def _after_fork_in_child() -> None:
    for link in list(_LINKS):
        try:
            link._forked()
        except BaseException as error:
            log_error("a group link could not be restarted after fork()", error)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
