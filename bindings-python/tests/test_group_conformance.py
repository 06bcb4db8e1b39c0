"""Runs the group protocol's conformance cases (tests/conformance/group/;
format: tests/conformance/README.md, "The group protocol") against the
package: each simulated process is a `CircuitBreaker` on the case's clock
with the package's own group link (`halfopen.group._Link`), whose exchanges
the steps make (`_exchange`, as its thread would) instead of its thread,
through a client that runs the Redis script's arguments on the core's
reference store (`_native.GroupMemoryStore`) at the store's clock. Unknown
keys or ops fail."""

from __future__ import annotations

import json
import math
import pathlib
import sys
from typing import Any, Callable, Dict, List, Optional

import pytest

import halfopen
from halfopen import _native
from halfopen import group as group_module

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from conformance_steps import check_retry, check_transitions, expect  # noqa: E402
from test_conformance import PackageBreakers  # noqa: E402

SUITE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "conformance" / "group"

#: A group case's ops and their keys (besides `op`, `at`, `process`, `events`).
STEP_KEYS = {
    "acquire": {"permit", "rejected", "transition"},
    "record": {"permit", "outcome", "transition"},
    "call": {"outcome", "duration_ms", "repeat", "transition", "transitions"},
    "expect": {"state", "retry_after_ms", "mode", "counts", "poll_timeout_ms", "metrics", "group", "store"},
    "exchange": {"due", "lost", "transition", "transitions"},
    "group_force_open": {"for_ms", "transition", "transitions"},
    "group_force_close": {"transition", "transitions"},
    "group_reset": {"transition", "transitions"},
    "store_restart": set(),
}
#: The group options, in seconds where the suite has ms.
GROUP_OPTIONS = {
    "flush_interval_ms": "flush_interval",
    "quorum": "quorum",
    "lease_ms": "lease",
    "member_ttl_ms": "member_ttl",
    "store_timeout_ms": "store_timeout",
}
OUTCOMES = {"success", "failure", "ignored", "cancelled"}
SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _Inline:
    """The link's store calls, made on the caller's thread (no real time)."""

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        return fn()

    def stop(self) -> None:
        pass


class SteppedLink(group_module._Link):
    """A link whose exchanges the steps make: no thread, member `member`."""

    def __init__(self, breaker: Any, group: Any, member: int) -> None:
        self._member = member
        super().__init__(breaker, group)

    def _join(self, breaker: Any) -> None:
        self.member = self._member
        _native._group_join(breaker, self.member, *self.group._options)

    def _start(self) -> None:
        import threading

        self._wake = threading.Event()
        self._calls = _Inline()


class Client:
    """The script's call on the store at the store's clock: a request
    `lost` never reaches it, an answer `lost` never comes back."""

    def __init__(self) -> None:
        self.store = _native.GroupMemoryStore()
        self.at = 0
        self.lost: Optional[str] = None
        self.calls = 0

    def register_script(self, _text: str) -> Callable[..., List[str]]:
        def script(keys: List[str], args: List[str]) -> List[str]:
            self.calls += 1
            if self.lost == "request":
                raise ConnectionError("the request was lost")
            reply = self.store.exchange(args, self.at)
            if self.lost == "answer":
                raise ConnectionError("the answer was lost")
            return reply

        return script


class Process:
    def __init__(self, case: Dict[str, Any], client: Client, offset: int, member: int) -> None:
        self.offset = offset
        self.events: List[str] = []
        self.b = PackageBreakers({"config": case["config"], "steps": []})
        options = {}
        for key, option in GROUP_OPTIONS.items():
            if key in case["group"]:
                value = SPECIAL.get(case["group"][key], case["group"][key])
                options[option] = value / 1000 if key.endswith("_ms") else value
        group = halfopen.RedisGroup(
            client,
            "conformance",
            on_degraded=lambda _e: self.events.append("degraded"),
            on_recovered=lambda: self.events.append("recovered"),
            **options,
        )
        self.link = SteppedLink(self.b.holder, group, member)


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1000


def run_case(case: Dict[str, Any]) -> None:
    assert set(case) <= {"description", "config", "group", "steps", "invalid", "problem"}, case
    assert set(case["group"]) <= {"processes", "clocks_ms", *GROUP_OPTIONS}, case["group"]
    n = case["group"]["processes"]
    assert isinstance(n, int) and 1 <= n <= 16, "group.processes: 1 to 16"
    offsets = case["group"].get("clocks_ms", [0] * n)
    assert len(offsets) == n
    client = Client()
    assert ("invalid" in case) != ("steps" in case), "a case has either steps or invalid"
    if "invalid" in case:
        with pytest.raises((TypeError, ValueError)) as refused:
            Process(case, client, 0, 1)
        assert getattr(refused.value, "option", None) == f"group.{case['invalid']}", refused.value
        if "problem" in case:
            assert getattr(refused.value, "problem", None) == case["problem"], refused.value
        return
    processes = [Process(case, client, offsets[i], i + 1) for i in range(n)]
    permits: Dict[str, Any] = {}
    try:
        for index, step in enumerate(case["steps"]):
            where = f"step {index} {json.dumps(step)}"
            run_step(client, processes, step, permits, where)
    finally:
        for p in processes:
            p.link.close()


def run_step(client: Client, processes: List[Process], step: Dict[str, Any], permits: Dict[str, Any], where: str) -> None:
    op = step["op"]
    assert op in STEP_KEYS, f"unknown op {op}"
    assert set(step) <= STEP_KEYS[op] | {"op", "at", "process", "events"}, f"unknown key in {where}"
    if "at" in step:
        client.at = step["at"]
    if op == "store_restart":
        assert "process" not in step and "events" not in step, f"{where}: no process, no events"
        client.store.restart()
        return
    if "process" not in step:
        assert op == "expect" and set(step) <= {"op", "at", "store"} and "store" in step, f"{where}: needs a process"
        expect_store(client, step["store"], where)
        return
    p = processes[step["process"]]
    b = p.b
    b.set_clock(client.at + p.offset)
    b.transitions()
    p.events.clear()
    breaker = b.holder
    if op == "acquire":
        assert ("permit" in step) != ("rejected" in step), f"{where}: permit or rejected"
        got = b.acquire(None)
        if "permit" in step:
            assert got.permit is not None, f"{where}: expected admission, got {got}"
            permits[step["permit"]] = got.permit
        else:
            assert got.permit is None, f"{where}: expected a rejection"
            want = step["rejected"]
            assert set(want) <= {"state", "reason", "retry_after_ms"}, f"{where}: rejected"
            if "state" in want:
                assert got.state == want["state"], f"{where}: state {got.state}"
            if "reason" in want:
                assert got.reason == want["reason"], f"{where}: reason {got.reason}"
            if "retry_after_ms" in want:
                check_retry(got.retry_after_ms, want["retry_after_ms"], where)
    elif op == "record":
        assert step["outcome"] in OUTCOMES, f"{where}: outcome"
        b.record(None, permits.pop(step["permit"]), step["outcome"])
    elif op == "call":
        assert step["outcome"] in OUTCOMES, f"{where}: outcome"
        b.call(None, step["outcome"], step.get("duration_ms", 0), step.get("repeat", 1))
        client.at += step.get("duration_ms", 0)
    elif op == "expect":
        if "store" in step:
            expect_store(client, step["store"], where)
        expect(b, {k: v for k, v in step.items() if k not in ("group", "store", "process")}, None, where)
        if "group" in step:
            expect_group(p, step["group"], where)
    elif op == "exchange":
        assert step.get("lost") in (None, "request", "answer"), where
        before = client.calls
        client.lost = step.get("lost")
        try:
            p.link._exchange(breaker)
        finally:
            client.lost = None
        due = step.get("due", True)
        assert client.calls - before == (1 if due else 0), f"{where}: expected {'an' if due else 'no'} exchange due"
    elif op == "group_force_open":
        breaker.group_force_open(step["for_ms"] / 1000)
    elif op == "group_force_close":
        breaker.group_force_close()
    elif op == "group_reset":
        breaker.group_reset()
    if op != "expect":
        check_transitions(b.transitions(), step, where)
    assert p.events == step.get("events", []), f"{where}: events {p.events}"


def expect_store(client: Client, want: Dict[str, Any], where: str) -> None:
    assert set(want) <= {"phase", "epoch", "limit"}, where
    if "phase" in want:
        assert client.store.phase() == want["phase"], f"{where}: store.phase {client.store.phase()}"
    if "epoch" in want:
        assert client.store.epoch() == want["epoch"], f"{where}: store.epoch {client.store.epoch()}"
    if "limit" in want:
        assert client.store.limit() == want["limit"], f"{where}: store.limit {client.store.limit()}"


def expect_group(p: Process, want: Dict[str, Any], where: str) -> None:
    assert set(want) <= {"degraded", "phase", "next_exchange_ms"}, where
    status = p.b.holder.group_status()
    if "degraded" in want:
        assert status.degraded == want["degraded"], f"{where}: group.degraded {status.degraded}"
    if "phase" in want:
        assert status.phase == want["phase"], f"{where}: group.phase {status.phase}"
    if "next_exchange_ms" in want:
        check_retry(ms(_native._group_delay(p.b.holder)), want["next_exchange_ms"], where)


def cases() -> List[Any]:
    files = sorted(p for p in SUITE.iterdir() if p.name != "schema.json")
    assert files, "no group conformance files"
    out = []
    for path in files:
        assert path.suffix == ".json", f"{path.name} is not a scenario file"
        suite = json.loads(path.read_text())
        assert set(suite) == {"format", "description", "cases"} and suite["format"] == 1, path.name
        out += [pytest.param(c, id=f"group/{path.stem}::{c['description']}") for c in suite["cases"]]
    return out


@pytest.mark.parametrize("case", cases())
def test_group_conformance(case: Dict[str, Any]) -> None:
    run_case(case)


def test_a_reply_the_script_cannot_have_given_is_one_failed_exchange() -> None:
    """One bad reply backs off as one failure does (the link once counted it
    twice: twice the backoff, and the group's limit given up at once)."""

    class Mangled(Client):
        def register_script(self, _text: str) -> Callable[..., List[str]]:
            return lambda keys, args: ["x"]

    case = {"config": {}, "group": {"processes": 1}}
    client = Mangled()
    p = Process(case, client, 0, 1)
    try:
        p.link._exchange(p.b.holder)
        assert p.events == ["degraded"]
        status = p.b.holder.group_status()
        assert status is not None and status.degraded
        # The backoff after one failure: the flush interval less up to a fifth.
        check_retry(ms(_native._group_delay(p.b.holder)), {"min": 800, "max": 1000}, "after one bad reply")
    finally:
        p.link.close()
