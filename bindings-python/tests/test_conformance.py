"""The conformance suite (tests/conformance/*.json, the specification) run
against the Python package: one pytest case per scenario. Single calls go
through ``call()`` (the function moves the clock, then returns or raises);
side-by-side calls through ``try_acquire()`` / ``record()``. A runner must
read every file and fail on an unknown key or op, never skip one."""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction
import math
import pathlib
import sys
from typing import Any, Dict, List, Optional

import pytest

# The suite's loader, shared by the Python runners (tests/conformance_suite.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from conformance_suite import RETENTION_COUNTERS, RETENTION_STEPS, cases, every_file_was_read, expected_events, shared_clock  # noqa: E402

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
COUNTS = {
    "consecutive_failures", "window_calls", "window_failures", "window_slow",
    "probes_in_flight", "probe_successes", "in_flight", "concurrency_limit",
}
METRIC_TIMES = {"time_closed_ms": "time_closed", "time_open_ms": "time_open",
                "time_half_open_ms": "time_half_open", "mean_time_open_ms": "mean_time_open"}
LATENCIES = {"latency_p50_ms": "latency_p50", "latency_p95_ms": "latency_p95",
             "latency_p99_ms": "latency_p99", "latency_max_ms": "latency_max"}
METRIC_COUNTERS = {"admitted", "successes", "failures", "slow", "rejections", "ignored",
                   "cancelled", "stale", "opens", "opens_last_24h", "error_rate"}


class Ignored(Exception):
    """An error that says nothing about the upstream (the spec's "ignored")."""


def close(got_ms: float, want_ms: float) -> bool:
    """Equal to the µs; the Python API gives times as float seconds, exact
    to the µs up to 2**53 µs (285 years), and to 15 digits beyond."""
    return math.isclose(got_ms, want_ms, rel_tol=1e-15, abs_tol=1e-6)


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


def check_retry(got_s: Optional[float], want: Any) -> None:
    if want is None:
        assert got_s is None, f"retry after {got_s} s, expected held open"
        return
    assert got_s is not None, "retry after: held open"
    got_ms = got_s * 1000
    if isinstance(want, dict):
        assert set(want) <= {"min", "max"}
        assert want["min"] - 1e-6 <= got_ms <= want["max"] + 1e-6, f"retry after {got_ms} not in {want}"
    else:
        assert close(got_ms, want), f"retry after {got_ms} ms != {want}"


def check_transitions(seen: List[halfopen.StateChange], step: Dict[str, Any]) -> None:
    want = step.get("transitions", [step["transition"]] if "transition" in step else [])
    got = [{"from": c.from_state.lower(), "to": c.to_state.lower(), "reason": c.reason, "at": c.at} for c in seen]
    assert len(got) == len(want), f"transitions {got} != {want}"
    for g, w in zip(got, want):
        assert set(w) <= {"from", "to", "reason", "at"}
        for k in ("from", "to", "reason"):
            assert g[k] == w[k], f"transition {g} != {w}"
        if "at" in w:
            assert close(g["at"] * 1000, w["at"]), f"transition at {g['at']} s != {w['at']} ms"
    seen.clear()


def check_metrics(breaker: halfopen.CircuitBreaker, want: Dict[str, Any]) -> None:
    m = breaker.metrics()
    for key, w in want.items():
        if key in METRIC_TIMES:
            got = m[METRIC_TIMES[key]]
            got = None if got is None else got * 1000
        elif key in METRIC_COUNTERS:
            got = m[key]
        elif key == "latency_count":
            got = m[key]
        elif key in LATENCIES:
            got = m[LATENCIES[key]]
            got = None if got is None else got * 1000
        else:
            raise AssertionError(f"unknown metric {key}")
        if w is None:
            assert got is None, f"metrics.{key} = {got}, expected not measured"
        elif isinstance(w, dict):
            assert got is not None and w["min"] - 1e-9 <= got <= w["max"] + 1e-9, f"metrics.{key} = {got} not in {w}"
        else:
            assert got is not None and abs(got - w) <= 1e-9 * max(1, abs(w)), f"metrics.{key} = {got} != {w}"


def run_steps(config: Dict[str, Any], steps: List[Dict[str, Any]], registry_case: Optional[Dict[str, Any]]) -> None:
    clock = [0]  # ms (whole, so that every time is exact: the clock gives a Fraction of seconds)
    seen: List[halfopen.StateChange] = []
    opts = options(config)
    common: Dict[str, Any] = {"clock": lambda: Fraction(clock[0]) / 1000, "exclude": lambda e: isinstance(e, Ignored)}
    if shared_clock({"steps": steps}):
        common["shared_clock"] = True
    registry: Optional[halfopen.Registry] = None
    single: Optional[halfopen.CircuitBreaker] = None
    if registry_case is not None:
        assert set(registry_case) <= {"capacity", "configure"}
        registry = halfopen.Registry(capacity=registry_case["capacity"], **common, **opts)
        for key, own in registry_case.get("configure", {}).items():
            registry.configure(key, **options(own))
        registry.on_state_change(seen.append)
    else:
        single = halfopen.CircuitBreaker("conformance", **common, **opts)
        single.on_state_change(seen.append)
    holder: Any = registry if registry is not None else single
    permits: Dict[str, halfopen.Permit] = {}
    for index, step in enumerate(steps):
        op = step["op"]
        assert op in STEP_KEYS, f"unknown op {op}"
        assert set(step) <= STEP_KEYS[op] | {"op", "at", "key"}, f"unknown key in step {index}: {step}"
        assert ("key" in step) == (registry is not None) or op in ("expect", "snapshot_restore"), f"step {index}: key"
        if step.get("refused") == "name_too_long":
            assert registry is not None
            with pytest.raises(ValueError) as refused:
                registry.get(step["key"]).try_acquire()
            assert refused.value.option == "name", refused.value  # type: ignore[attr-defined]
            continue
        breaker: Any = registry.get(step["key"]) if registry is not None and "key" in step else single
        if "at" in step:
            clock[0] = step["at"]
        where = f"step {index} {json.dumps(step)}"
        if op == "acquire":
            try:
                permit = breaker.try_acquire()
            except halfopen.RegistryFullError as err:
                assert step.get("refused") == "full", f"{where}: unexpected {err}"
            except halfopen.CircuitBreakerError as err:
                assert "rejected" in step, f"{where}: expected admission, got {err}"
                want = step["rejected"]
                assert set(want) <= {"state", "reason", "retry_after_ms"}
                if "state" in want:
                    assert err.state == want["state"].upper(), where
                if "reason" in want:
                    assert err.reason == want["reason"], where
                    expected_class = halfopen.ConcurrencyLimitError if err.reason == "limit_full" else halfopen.CircuitOpenError
                    assert isinstance(err, expected_class), where
                if "retry_after_ms" in want:
                    check_retry(err.retry_after, want["retry_after_ms"])
            else:
                assert "permit" in step, f"{where}: expected a refusal, the call was admitted"
                assert step["permit"] not in permits, f"{where}: permit name in use"
                permits[step["permit"]] = permit
        elif op == "record":
            breaker.record(permits.pop(step["permit"]), step["outcome"])
        elif op == "call":
            run_call(breaker, clock, step, where)
        elif op == "expect":
            if "registry" in step:
                assert registry is not None, where
                want = step["registry"]
                assert set(want) <= {"len", "evictions", "holds", "lacks"}
                if "len" in want:
                    assert len(registry) == want["len"], f"{where}: len {len(registry)}"
                if "evictions" in want:
                    assert registry.evictions == want["evictions"], f"{where}: evictions {registry.evictions}"
                for key in want.get("holds", []):
                    assert key in registry, f"{where}: lacks {key}"
                for key in want.get("lacks", []):
                    assert key not in registry, f"{where}: holds {key}"
                if "key" not in step:
                    continue
            if "state" in step:
                assert breaker.state == halfopen.State(step["state"].upper()), f"{where}: state {breaker.state}"
            if "retry_after_ms" in step:
                check_retry(breaker.retry_after(), step["retry_after_ms"])
            if "mode" in step:
                assert breaker.mode() == step["mode"].upper(), where
            if "poll_timeout_ms" in step:
                got = breaker.poll_timeout()
                want = step["poll_timeout_ms"]
                assert (got is None and want is None) or (got is not None and want is not None and close(got * 1000, want)), f"{where}: poll timeout {got}"
            if "counts" in step:
                m = breaker.metrics()
                for key, want in step["counts"].items():
                    assert key in COUNTS, f"unknown count {key}"
                    assert m[key] == want, f"{where}: counts.{key} = {m[key]}"
            if "metrics" in step:
                check_metrics(breaker, step["metrics"])
        elif op == "force_open":
            breaker.force_open(None if "for_ms" not in step else step["for_ms"] / 1000)
        elif op == "force_open_at_least":
            breaker.force_open_at_least(step["for_ms"] / 1000)
        elif op in ("force_close", "disable", "release", "reset", "handle_timeout"):
            getattr(breaker, op)()
        elif op == "snapshot_restore":
            assert step["encoding"] in ("json", "compact")
            saved = holder.to_json() if step["encoding"] == "json" else holder.to_bytes()
            clock[0] = step.get("restore_at", clock[0])
            if step["encoding"] == "json":
                holder.restore_json(saved)
            else:
                holder.restore_bytes(saved)
        elif op == "restore":
            try:
                holder.restore_json(json.dumps(step["snapshot"]))
            except halfopen.SnapshotError as err:
                assert step.get("error") == err.kind, f"{where}: {err.kind}: {err}"
            else:
                assert "error" not in step, f"{where}: expected the error {step['error']}"
        if op != "expect":
            check_transitions(seen, step)


def run_call(breaker: Any, clock: List[float], step: Dict[str, Any], where: str) -> None:
    outcome = step["outcome"]
    repeat = step.get("repeat", 1)
    duration = step.get("duration_ms", 0)
    if repeat == 1:
        # Through call(): the function moves the clock, then ends as told.
        def upstream() -> str:
            clock[0] += duration
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
            raise AssertionError(f"{where}: call was rejected: {err}") from err
        except (RuntimeError, Ignored, asyncio.CancelledError):
            assert outcome != "success"
        return
    permits = []
    for i in range(repeat):
        try:
            permits.append(breaker.try_acquire())
        except halfopen.CircuitBreakerError as err:
            raise AssertionError(f"{where}: call {i + 1} of {repeat} was rejected: {err}") from err
    clock[0] += duration
    for permit in permits:
        breaker.record(permit, outcome)




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


def run_retention(case: Dict[str, Any]) -> None:
    clock = [0]
    sizes: Dict[str, int] = {}
    opts = {**options(case["config"]), **retention_options(case["retention"])}
    shared = shared_clock(case)
    build = lambda: halfopen.RetentionQueue("conformance", clock=lambda: Fraction(clock[0]) / 1000, shared_clock=shared, size=sizes.__getitem__, **opts)  # noqa: E731
    queue = build()
    seqs: Dict[str, int] = {}
    for index, step in enumerate(case["steps"]):
        op = step["op"]
        assert op in RETENTION_STEPS, f"unknown op {op} in a retention case"
        assert set(step) <= RETENTION_STEPS[op] | {"op", "at", "events"}, f"unknown key in step {index}: {step}"
        if "at" in step:
            clock[0] = step["at"]
        where = f"step {index} {json.dumps(step)}"
        if op == "submit":
            sizes[step["message"]] = step.get("bytes", 0)
            status, seq = queue.submit(step["message"])
            assert status == step["result"], f"{where}: {status}"
            if seq is not None:
                seqs[step["message"]] = seq
        elif op == "next":
            sent = queue.next()
            assert all(seqs[m] == seq for seq, m in sent), where
            assert [m for _, m in sent] == step["sends"], f"{where}: sends {sent}"
        elif op == "report":
            assert queue.report(seqs[step["message"]], step["outcome"]) == step["result"], where
        elif op in ("handle_timeout", "release"):
            getattr(queue, op)()
        elif op == "force_open":
            queue.force_open(None if "for_ms" not in step else step["for_ms"] / 1000)
        elif op == "force_open_at_least":
            queue.force_open_at_least(step["for_ms"] / 1000)
        elif op == "expect":
            if "state" in step:
                assert queue.state_name == step["state"].upper(), where
            want = step.get("retention", {})
            assert set(want) <= {"retained", "in_flight", "bytes", "poll_timeout_ms", "counters"}, where
            stats = queue.stats()
            for key in ("retained", "in_flight", "bytes"):
                if key in want:
                    assert stats[key] == want[key], f"{where}: {key} = {stats[key]}"
            if "poll_timeout_ms" in want:
                got = queue.poll_timeout()
                w = want["poll_timeout_ms"]
                assert (got is None and w is None) or (got is not None and w is not None and close(got * 1000, w)), f"{where}: poll timeout {got}"
            for key, n in want.get("counters", {}).items():
                assert key in RETENTION_COUNTERS, f"unknown counter {key}"
                assert stats[key] == n, f"{where}: counters.{key} = {stats[key]}"
        elif op == "snapshot_restore":
            names = {seq: m for m, seq in seqs.items()}
            held = {seq: names[seq] for seq in queue.held_seqs()}
            restored = build()
            saved = queue.to_json() if step["encoding"] == "json" else queue.to_bytes()
            clock[0] = step.get("restore_at", clock[0])
            if step["encoding"] == "json":
                restored.restore_json(saved, held)
            else:
                restored.restore_bytes(saved, held)
            queue = restored
        got = []
        for e in queue.events():
            if e.kind == "transition":
                got.append({"transition": {"from": e.change.from_state.lower(), "to": e.change.to_state.lower(), "reason": e.change.reason}})
            elif e.kind == "dead":
                got.append({"dead": e.message, "reason": e.reason, "attempts": e.attempts})
            else:
                got.append({"dropped": e.message})
        assert got == expected_events(step), f"{where}: events {got}"


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
        run_retention(case)
        return
    if "invalid" in case:
        opts = options(case["config"])
        with pytest.raises((TypeError, ValueError)) as raised:
            halfopen.CircuitBreaker("conformance", **opts)
        assert raised.value.option == python_option(case["invalid"], case["config"]), str(raised.value)
        if "problem" in case:
            assert getattr(raised.value, "problem", None) == case["problem"], str(raised.value)
        return
    run_steps(case["config"], case["steps"], case.get("registry"))


def test_every_file_is_read() -> None:
    every_file_was_read("python")
