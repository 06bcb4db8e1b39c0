"""The one step interpreter of the conformance suite for the Python runners
(the Python package's, the WebAssembly component's through wasmtime): it
reads each case's steps, checks every key and op, and compares what the
runtime answers with what the step expects. A runner is a thin adapter: a
`Breakers` or a `Queue` that drives its runtime and answers in the suite's
terms (milliseconds, snake_case names, transitions as dicts).

Runner-specific failures are assertion errors with the step in their message."""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, List, Optional, Protocol

from conformance_suite import RETENTION_COUNTERS, RETENTION_STEPS, expected_events

#: A breaker case's ops and their keys (besides `op`, `at`, `key`).
STEP_KEYS = {
    "acquire": {"permit", "rejected", "refused", "transition"},
    "record": {"permit", "outcome", "transition"},
    "call": {"outcome", "duration_ms", "repeat", "transition", "transitions"},
    "expect": {"state", "retry_after_ms", "mode", "counts", "poll_timeout_ms", "metrics", "registry"},
    "force_open": {"for_ms", "transition", "transitions"},
    "force_open_at_least": {"for_ms", "transition", "transitions"},
    "force_close": {"transition", "transitions"},
    "disable": {"transition", "transitions"},
    "release": {"transition", "transitions"},
    "reset": {"transition", "transitions"},
    "handle_timeout": {"transition"},
    "snapshot_restore": {"encoding", "restore_at", "elapsed"},
    "restore": {"snapshot", "error", "elapsed"},
}
#: What an `expect` may check under `counts`.
COUNTS = {
    "consecutive_failures", "window_calls", "window_failures", "window_slow",
    "probes_in_flight", "probe_successes", "in_flight", "concurrency_limit",
}
#: What an `expect` may check under `metrics` (times in ms).
METRICS = {
    "admitted", "successes", "failures", "slow", "rejections", "ignored", "cancelled", "stale", "opens",
    "opens_last_24h", "error_rate", "time_closed_ms", "time_open_ms", "time_half_open_ms", "mean_time_open_ms",
    "latency_count", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms",
}
MANUAL = ("force_open", "force_open_at_least", "force_close", "disable", "release", "reset", "handle_timeout")


@dataclass
class Admission:
    """What an `acquire` got: a permit (any object the adapter can report),
    a rejection (state, reason, retry after in ms or `None` when held), or a
    registry's refusal (`refused`: `"full"` or `"name_too_long"`)."""

    permit: Any = None
    state: Optional[str] = None
    reason: Optional[str] = None
    retry_after_ms: Optional[float] = None
    refused: Optional[str] = None


class Breakers(Protocol):
    """A runner's breaker, or registry of breakers (`key`: the registry's
    name; `None` for a single breaker). Times in ms on the case's clock."""

    registry: bool

    def set_clock(self, ms: float) -> None: ...
    def clock(self) -> float: ...
    def acquire(self, key: Optional[str]) -> Admission: ...
    def record(self, key: Optional[str], permit: Any, outcome: str) -> None: ...
    def call(self, key: Optional[str], outcome: str, duration_ms: float, repeat: int) -> None: ...
    def manual(self, key: Optional[str], op: str, for_ms: Optional[float]) -> None: ...
    def transitions(self) -> List[Dict[str, Any]]: ...
    def state(self, key: Optional[str]) -> str: ...
    def retry_after_ms(self, key: Optional[str]) -> Optional[float]: ...
    def mode(self, key: Optional[str]) -> str: ...
    def poll_timeout_ms(self, key: Optional[str]) -> Optional[float]: ...
    def counts(self, key: Optional[str]) -> Dict[str, Any]: ...
    def metrics(self, key: Optional[str]) -> Dict[str, Any]: ...
    def names(self) -> List[str]: ...
    def size(self) -> int: ...
    def holds(self, key: str) -> bool: ...
    def evictions(self) -> int: ...
    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str) -> None: ...
    def restore(self, snapshot: str, elapsed: str) -> Optional[str]: ...


def close(got_ms: Any, want_ms: float) -> bool:
    """Equal: exactly when the runtime's time is exact (an `int` or a
    `Fraction` of ms: the component's whole µs), else to the µs (the Python
    package's times are float seconds, which cannot hold the suite's largest
    times to the µs)."""
    if isinstance(got_ms, (int, Fraction)):
        return got_ms == Fraction(want_ms)
    return bool(abs(got_ms - want_ms) <= max(1e-6, abs(want_ms) * 1e-15))


def check_retry(got_ms: Optional[float], want: Any, where: str) -> None:
    if want is None:
        assert got_ms is None, f"{where}: retry after {got_ms} ms, expected held open"
        return
    assert got_ms is not None, f"{where}: retry after: held open"
    if isinstance(want, dict):
        assert set(want) <= {"min", "max"}, where
        assert want["min"] - 1e-6 <= got_ms <= want["max"] + 1e-6, f"{where}: retry after {got_ms} not in {want}"
    else:
        assert close(got_ms, want), f"{where}: retry after {got_ms} ms != {want}"


def check_transitions(got: List[Dict[str, Any]], step: Dict[str, Any], where: str) -> None:
    assert not ("transition" in step and "transitions" in step), f"{where}: transition and transitions are exclusive"
    want = step.get("transitions", [step["transition"]] if "transition" in step else [])
    assert len(got) == len(want), f"{where}: transitions {got} != {want}"
    for g, w in zip(got, want):
        assert set(w) <= {"from", "to", "reason", "at"}, where
        for k in ("from", "to", "reason"):
            assert g[k] == w[k], f"{where}: transition {g} != {w}"
        if "at" in w:
            assert close(g["at"], w["at"]), f"{where}: transition at {g['at']} ms != {w['at']} ms"


def check_metrics(got: Dict[str, Any], want: Dict[str, Any], where: str) -> None:
    for key, w in want.items():
        assert key in METRICS, f"unknown metric {key}"
        g = got[key]
        if w is None:
            assert g is None, f"{where}: metrics.{key} = {g}, expected not measured"
        elif isinstance(w, dict):
            assert g is not None and w["min"] - 1e-9 <= g <= w["max"] + 1e-9, f"{where}: metrics.{key} = {g} not in {w}"
        else:
            assert g is not None and abs(g - w) <= 1e-9 * max(1, abs(w)), f"{where}: metrics.{key} = {g} != {w}"


def run_breaker_case(steps: List[Dict[str, Any]], b: Breakers) -> None:
    """Runs a breaker (or registry) case's steps on `b`."""
    permits: Dict[str, Any] = {}
    for index, step in enumerate(steps):
        op = step["op"]
        assert op in STEP_KEYS, f"unknown op {op}"
        assert set(step) <= STEP_KEYS[op] | {"op", "at", "key"}, f"unknown key in step {index}: {step}"
        key = step.get("key")
        assert (key is not None) == b.registry or op in ("expect", "snapshot_restore"), f"step {index}: key"
        where = f"step {index} {json.dumps(step)}"
        if "at" in step:
            b.set_clock(step["at"])
        if op == "acquire":
            got = b.acquire(key)
            if got.refused is not None:
                assert step.get("refused") == got.refused, f"{where}: refused ({got.refused})"
            elif got.permit is not None:
                assert "permit" in step, f"{where}: expected a refusal, the call was admitted"
                assert step["permit"] not in permits, f"{where}: permit name in use"
                permits[step["permit"]] = got.permit
            else:
                assert "rejected" in step, f"{where}: expected admission, got {got}"
                want = step["rejected"]
                assert set(want) <= {"state", "reason", "retry_after_ms"}, where
                if "state" in want:
                    assert got.state == want["state"], f"{where}: state {got.state}"
                if "reason" in want:
                    assert got.reason == want["reason"], f"{where}: reason {got.reason}"
                if "retry_after_ms" in want:
                    check_retry(got.retry_after_ms, want["retry_after_ms"], where)
        elif op == "record":
            b.record(key, permits.pop(step["permit"]), step["outcome"])
        elif op == "call":
            b.call(key, step["outcome"], step.get("duration_ms", 0), step.get("repeat", 1))
        elif op in MANUAL:
            b.manual(key, op, step.get("for_ms"))
        elif op == "snapshot_restore":
            assert step["encoding"] in ("json", "compact"), where
            b.snapshot_restore(step["encoding"], step.get("restore_at"), step.get("elapsed", "ignored"))
        elif op == "restore":
            error = b.restore(json.dumps(step["snapshot"]), step.get("elapsed", "ignored"))
            assert error == step.get("error"), f"{where}: error {error}"
        elif op == "expect":
            expect(b, step, key, where)
        if op != "expect":
            check_transitions(b.transitions(), step, where)


def expect(b: Breakers, step: Dict[str, Any], key: Optional[str], where: str) -> None:
    if "registry" in step:
        assert b.registry, f"{where}: no registry in this case"
        want = step["registry"]
        assert set(want) <= {"len", "evictions", "holds", "lacks"}, where
        names = b.names()
        assert len(names) == len(set(names)) == b.size(), f"{where}: names {names}, size {b.size()}"
        if "len" in want:
            assert b.size() == want["len"], f"{where}: len {b.size()}"
        if "evictions" in want:
            assert b.evictions() == want["evictions"], f"{where}: evictions {b.evictions()}"
        for k in want.get("holds", []):
            assert b.holds(k) and k in names, f"{where}: lacks {k}"
        for k in want.get("lacks", []):
            assert not b.holds(k) and k not in names, f"{where}: holds {k}"
        if key is None:
            about_a_breaker = set(step) & {"state", "retry_after_ms", "mode", "poll_timeout_ms", "counts", "metrics"}
            assert not about_a_breaker, f"{where}: {sorted(about_a_breaker)} need a key"
            return
    if b.registry:
        assert key is not None and b.holds(key), f"{where}: no breaker {key}"
    if "state" in step:
        assert b.state(key) == step["state"], f"{where}: state {b.state(key)}"
    if "retry_after_ms" in step:
        check_retry(b.retry_after_ms(key), step["retry_after_ms"], where)
    if "mode" in step:
        assert b.mode(key) == step["mode"], f"{where}: mode {b.mode(key)}"
    if "poll_timeout_ms" in step:
        got, want = b.poll_timeout_ms(key), step["poll_timeout_ms"]
        assert (got is None and want is None) or (got is not None and want is not None and close(got, want)), f"{where}: poll timeout {got}"
    if "counts" in step:
        counts = b.counts(key)
        for k, want in step["counts"].items():
            assert k in COUNTS, f"unknown count {k}"
            assert counts[k] == want, f"{where}: counts.{k} = {counts[k]}"
    if "metrics" in step:
        check_metrics(b.metrics(key), step["metrics"], where)


class Queue(Protocol):
    """A runner's retention queue: messages named by sequence number; times
    in ms on the case's clock."""

    def set_clock(self, ms: float) -> None: ...
    def submit(self, bytes: int) -> Optional[tuple]: ...  # (status, seq), or None when refused
    def next(self) -> List[int]: ...
    def report(self, seq: int, outcome: str) -> str: ...
    def manual(self, op: str, for_ms: Optional[float]) -> None: ...
    def state(self) -> str: ...
    def stats(self) -> Dict[str, int]: ...
    def poll_timeout_ms(self) -> Optional[float]: ...
    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str, held: List[int]) -> None: ...
    def events(self) -> List[Dict[str, Any]]: ...  # dead and dropped by seq; transitions without `at`


def run_retention_case(steps: List[Dict[str, Any]], q: Queue) -> None:
    """Runs a retention case's steps on `q` (messages named in the case)."""
    seqs: Dict[str, int] = {}
    names: Dict[int, str] = {}
    for index, step in enumerate(steps):
        op = step["op"]
        assert op in RETENTION_STEPS, f"unknown op {op} in a retention case"
        assert set(step) <= RETENTION_STEPS[op] | {"op", "at", "events"}, f"unknown key in step {index}: {step}"
        where = f"step {index} {json.dumps(step)}"
        if "at" in step:
            q.set_clock(step["at"])
        if op == "submit":
            got = q.submit(step.get("bytes", 0))
            status = "refused" if got is None else got[0]
            assert status == step["result"], f"{where}: {status}"
            if got is not None:
                seqs[step["message"]] = got[1]
                names[got[1]] = step["message"]
        elif op == "next":
            sent = [names[seq] for seq in q.next()]
            assert sent == step["sends"], f"{where}: sends {sent}"
        elif op == "report":
            got = q.report(seqs[step["message"]], step["outcome"])
            assert got == step["result"], f"{where}: report {got}"
        elif op in ("handle_timeout", "release", "force_open", "force_open_at_least"):
            q.manual(op, step.get("for_ms"))
        elif op == "expect":
            if "state" in step:
                assert q.state() == step["state"], f"{where}: state {q.state()}"
            want = step.get("retention", {})
            assert set(want) <= {"retained", "in_flight", "bytes", "poll_timeout_ms", "counters"}, where
            stats = q.stats()
            for k in ("retained", "in_flight", "bytes"):
                if k in want:
                    assert stats[k] == want[k], f"{where}: {k} = {stats[k]}"
            if "poll_timeout_ms" in want:
                got_ms, w = q.poll_timeout_ms(), want["poll_timeout_ms"]
                assert (got_ms is None and w is None) or (got_ms is not None and w is not None and close(got_ms, w)), f"{where}: poll timeout {got_ms}"
            for k, n in want.get("counters", {}).items():
                assert k in RETENTION_COUNTERS, f"unknown counter {k}"
                assert stats[k] == n, f"{where}: counters.{k} = {stats[k]}"
        elif op == "snapshot_restore":
            q.snapshot_restore(step["encoding"], step.get("restore_at"), step.get("elapsed", "ignored"), list(names))
        got_events = []
        for e in q.events():
            if "dead" in e:
                got_events.append({**e, "dead": names[e["dead"]]})
            elif "dropped" in e:
                got_events.append({"dropped": names[e["dropped"]]})
            else:
                got_events.append(e)
        assert got_events == expected_events(step), f"{where}: events {got_events}"
