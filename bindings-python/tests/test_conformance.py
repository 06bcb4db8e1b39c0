"""The conformance suite (tests/conformance/*.json, the specification) run
against the Python package: one pytest case per scenario, through the
suite's one step interpreter (tests/conformance_steps.py); this file is its
adapter. Single calls go through ``call()`` (the function moves the clock,
then returns or raises); side-by-side calls through ``try_acquire()`` /
``record()``. A runner must read every file and fail on an unknown key or
op, never skip one."""

from __future__ import annotations

import asyncio
from fractions import Fraction
import math
import pathlib
import sys
from typing import Any, Dict, List, Optional

import pytest

# The suite's loader, shared by the Python runners (tests/conformance_suite.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from conformance_steps import Admission, run_breaker_case, run_retention_case  # noqa: E402
from conformance_suite import cases, every_file_was_read, shared_clock  # noqa: E402

import halfopen



SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
MS_KEYS = {
    "window_ms": "window",
    "slow_call_duration_ms": "slow_call_duration",
    "open_timeout_ms": "open_timeout",
    "max_open_timeout_ms": "max_open_timeout",
    "probe_timeout_ms": "probe_timeout",
}
PLAIN_KEYS = {
    "preset", "failure_threshold", "window_calls", "consecutive_failures", "failure_rate_threshold",
    "minimum_calls", "slow_call_rate_threshold", "backoff_factor", "jitter", "jitter_seed",
    "half_open_max_attempts", "half_open_successes", "concurrency_limit",
}
class Ignored(Exception):
    """An error that says nothing about the upstream (the spec's "ignored")."""


def value(v: Any) -> Any:
    return SPECIAL.get(v, v) if isinstance(v, str) else v


def options(config: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, v in config.items():
        v = value(v)
        if key in MS_KEYS:
            out[MS_KEYS[key]] = v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        elif key in PLAIN_KEYS:
            out[key] = v
        elif key in ("adaptive_limit_min", "adaptive_limit_max"):
            out["adaptive_limit"] = (config.get("adaptive_limit_min"), config.get("adaptive_limit_max"))
        elif key == "latency_histogram":
            out["latency_histogram"] = v
        else:
            raise AssertionError(f"unknown config key {key}")
    return out


def python_option(field: str, config: Dict[str, Any]) -> str:
    """The Python option an invalid core field is reported under."""
    if field == "window":
        return "window_calls" if "window_calls" in config else "window"
    if field in ("adaptive_limit_min", "adaptive_limit_max"):
        return "adaptive_limit"
    return field


def retention_options(retention: Dict[str, Any]) -> Dict[str, Any]:
    """The suite's retention keys as the queue's keyword options."""
    out: Dict[str, Any] = {}
    for key, v in retention.items():
        v = value(v)
        if key in ("max_messages", "max_bytes", "max_attempts", "overflow", "probe"):
            out[key] = v
        elif key == "max_age_ms":
            out["max_age"] = v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        elif key in ("release_per_second", "release_burst"):
            out["release_rate"] = (value(retention.get("release_per_second")), value(retention.get("release_burst")))
        else:
            raise AssertionError(f"unknown retention key {key}")
    return out


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1000


def change(c: halfopen.StateChange) -> Dict[str, Any]:
    return {"from": c.from_state.lower(), "to": c.to_state.lower(), "reason": c.reason, "at": c.at * 1000}


class PackageBreakers:
    """A `CircuitBreaker`, or a `Registry` (`key`: the name), on a clock of
    whole milliseconds (a `Fraction` of seconds, so every time is exact)."""

    def __init__(self, case: Dict[str, Any]) -> None:
        self.now = 0
        self.seen: List[halfopen.StateChange] = []
        opts = options(case["config"])
        common: Dict[str, Any] = {"clock": lambda: Fraction(self.now) / 1000, "exclude": lambda e: isinstance(e, Ignored)}
        if shared_clock(case):
            common["shared_clock"] = True
        spec = case.get("registry")
        self.registry = spec is not None
        if spec is not None:
            assert set(spec) <= {"capacity", "configure"}
            self.holder: Any = halfopen.Registry(capacity=spec["capacity"], **common, **opts)
            for key, own in spec.get("configure", {}).items():
                self.holder.configure(key, **options(own))
        else:
            self.holder = halfopen.CircuitBreaker("conformance", **common, **opts)
        self.holder.on_state_change(self.seen.append)

    def breaker(self, key: Optional[str]) -> Any:
        return self.holder.get(key) if self.registry and key is not None else self.holder

    def set_clock(self, now: float) -> None:
        self.now = now

    def clock(self) -> float:
        return self.now

    def acquire(self, key: Optional[str]) -> Admission:
        try:
            return Admission(permit=self.breaker(key).try_acquire())
        except halfopen.RegistryFullError:
            return Admission(refused="full")
        except ValueError as err:
            assert getattr(err, "option", None) == "name", err
            return Admission(refused="name_too_long")
        except halfopen.CircuitBreakerError as err:
            expected_class = halfopen.ConcurrencyLimitError if err.reason == "limit_full" else halfopen.CircuitOpenError
            assert isinstance(err, expected_class), err
            return Admission(state=err.state.lower(), reason=err.reason, retry_after_ms=ms(err.retry_after))

    def record(self, key: Optional[str], permit: Any, outcome: str) -> None:
        self.breaker(key).record(permit, outcome)

    def call(self, key: Optional[str], outcome: str, duration_ms: float, repeat: int) -> None:
        breaker = self.breaker(key)
        if repeat == 1:
            # Through call(): the function moves the clock, then ends as told.
            def upstream() -> str:
                self.now += duration_ms
                if outcome == "failure":
                    raise RuntimeError("upstream failed")
                if outcome == "ignored":
                    raise Ignored("bad request")
                if outcome == "cancelled":
                    raise asyncio.CancelledError()
                return "ok"

            try:
                breaker.call(upstream)
            except halfopen.CircuitBreakerError as err:
                raise AssertionError(f"the call was rejected: {err}") from err
            except (RuntimeError, Ignored, asyncio.CancelledError):
                assert outcome != "success"
            return
        permits = []
        for i in range(repeat):
            try:
                permits.append(breaker.try_acquire())
            except halfopen.CircuitBreakerError as err:
                raise AssertionError(f"call {i + 1} of {repeat} was rejected: {err}") from err
        self.now += duration_ms
        for permit in permits:
            breaker.record(permit, outcome)

    def manual(self, key: Optional[str], op: str, for_ms: Optional[float]) -> None:
        breaker = self.breaker(key)
        if op == "force_open":
            breaker.force_open(None if for_ms is None else for_ms / 1000)
        elif op == "force_open_at_least":
            breaker.force_open_at_least(for_ms / 1000)
        else:
            getattr(breaker, op)()

    def transitions(self) -> List[Dict[str, Any]]:
        got = [change(c) for c in self.seen]
        self.seen.clear()
        return got

    def state(self, key: Optional[str]) -> str:
        return self.breaker(key).state.lower()

    def retry_after_ms(self, key: Optional[str]) -> Optional[float]:
        return ms(self.breaker(key).retry_after())

    def mode(self, key: Optional[str]) -> str:
        return self.breaker(key).mode().lower()

    def poll_timeout_ms(self, key: Optional[str]) -> Optional[float]:
        return ms(self.breaker(key).poll_timeout())

    def counts(self, key: Optional[str]) -> Dict[str, Any]:
        return dict(self.breaker(key).metrics())

    def metrics(self, key: Optional[str]) -> Dict[str, Any]:
        m = self.breaker(key).metrics()
        out = {k: m[k] for k in ("admitted", "successes", "failures", "slow", "rejections", "ignored", "cancelled",
                                 "stale", "opens", "opens_last_24h", "error_rate", "latency_count")}
        for name in ("time_closed", "time_open", "time_half_open", "mean_time_open",
                     "latency_p50", "latency_p95", "latency_p99", "latency_max"):
            out[f"{name}_ms"] = ms(m[name])
        return out

    def names(self) -> List[str]:
        return list(self.holder.names())

    def size(self) -> int:
        return len(self.holder)

    def holds(self, key: str) -> bool:
        return key in self.holder

    def evictions(self) -> int:
        return int(self.holder.evictions)

    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str) -> None:
        saved = self.holder.to_json() if encoding == "json" else self.holder.to_bytes()
        if restore_at is not None:
            self.now = restore_at
        if encoding == "json":
            self.holder.restore_json(saved)
        else:
            self.holder.restore_bytes(saved)

    def restore(self, snapshot: str, elapsed: str) -> Optional[str]:
        try:
            self.holder.restore_json(snapshot)
        except halfopen.SnapshotError as err:
            return str(err.kind)
        return None


class PackageQueue:
    """A `RetentionQueue`: each message an int token, weighing what the step says."""

    def __init__(self, case: Dict[str, Any]) -> None:
        self.now = 0
        self.sizes: Dict[int, int] = {}
        self.seq_of: Dict[int, int] = {}
        self.token_of: Dict[int, int] = {}
        opts = {**options(case["config"]), **retention_options(case["retention"])}
        shared = shared_clock(case)
        self.build = lambda: halfopen.RetentionQueue(  # noqa: E731
            "conformance", clock=lambda: Fraction(self.now) / 1000, shared_clock=shared, size=self.sizes.__getitem__, **opts
        )
        self.queue = self.build()

    def set_clock(self, now: float) -> None:
        self.now = now

    def submit(self, bytes: int) -> Optional[tuple]:
        token = len(self.sizes)
        self.sizes[token] = bytes
        status, seq = self.queue.submit(token)
        if seq is None:
            return None
        self.seq_of[token], self.token_of[seq] = seq, token
        return (status, seq)

    def next(self) -> List[int]:
        sent = self.queue.next()
        assert all(self.token_of[seq] == token for seq, token in sent)
        return [seq for seq, _ in sent]

    def report(self, seq: int, outcome: str) -> str:
        return str(self.queue.report(seq, outcome))

    def manual(self, op: str, for_ms: Optional[float]) -> None:
        if op == "force_open":
            self.queue.force_open(None if for_ms is None else for_ms / 1000)
        elif op == "force_open_at_least":
            self.queue.force_open_at_least(for_ms / 1000)
        else:
            getattr(self.queue, op)()

    def state(self) -> str:
        return str(self.queue.state_name).lower()

    def stats(self) -> Dict[str, int]:
        return dict(self.queue.stats())

    def poll_timeout_ms(self) -> Optional[float]:
        return ms(self.queue.poll_timeout())

    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str, held: List[int]) -> None:
        messages = {seq: self.token_of[seq] for seq in self.queue.held_seqs()}
        restored = self.build()
        saved = self.queue.to_json() if encoding == "json" else self.queue.to_bytes()
        if restore_at is not None:
            self.now = restore_at
        if encoding == "json":
            restored.restore_json(saved, messages)
        else:
            restored.restore_bytes(saved, messages)
        self.queue = restored

    def events(self) -> List[Dict[str, Any]]:
        got: List[Dict[str, Any]] = []
        for e in self.queue.events():
            if e.kind == "transition":
                got.append({"transition": {"from": e.change.from_state.lower(), "to": e.change.to_state.lower(), "reason": e.change.reason}})
            elif e.kind == "dead":
                got.append({"dead": self.seq_of[e.message], "reason": e.reason, "attempts": e.attempts})
            else:
                got.append({"dropped": self.seq_of[e.message]})
        return got


@pytest.mark.parametrize("case", list(cases()))
def test_conformance(case: Dict[str, Any]) -> None:
    assert set(case) <= {"description", "config", "registry", "retention", "steps", "invalid", "problem"}, case
    if "retention" in case and "invalid" in case:
        opts = {**options(case["config"]), **retention_options(case["retention"])}
        with pytest.raises((TypeError, ValueError)) as raised:
            halfopen.RetentionQueue("conformance", **opts)
        field = case["invalid"]
        assert raised.value.option == field, str(raised.value)
        if "problem" in case:
            assert getattr(raised.value, "problem", None) == case["problem"], str(raised.value)
        return
    if "retention" in case:
        run_retention_case(case["steps"], PackageQueue(case))
        return
    if "invalid" in case:
        opts = options(case["config"])
        with pytest.raises((TypeError, ValueError)) as raised:
            halfopen.CircuitBreaker("conformance", **opts)
        assert raised.value.option == python_option(case["invalid"], case["config"]), str(raised.value)
        if "problem" in case:
            assert getattr(raised.value, "problem", None) == case["problem"], str(raised.value)
        return
    run_breaker_case(case["steps"], PackageBreakers(case))


def test_every_file_is_read() -> None:
    every_file_was_read("python")
