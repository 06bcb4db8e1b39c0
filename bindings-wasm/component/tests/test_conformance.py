"""The conformance suite (tests/conformance/*.json, the specification) run
against the WebAssembly component through wasmtime: one pytest case per
scenario, through the suite's one step interpreter for Python runners
(tests/conformance_steps.py; this file is its adapter), driving the WIT
interface as the core's own runner drives the core: the suite's milliseconds become the
interface's microseconds, and a value the interface's types cannot hold
(negative, fractional, too large) is an error naming its field, as in any
binding. A runner must read every file and fail on an unknown key or op."""

from __future__ import annotations

from fractions import Fraction
import math
import pathlib
import sys
from typing import Any, Dict, List, Optional

import pytest

# The suite's loader, shared by the Python runners (tests/conformance_suite.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
from conformance_steps import COUNTS, Admission, run_breaker_case, run_retention_case  # noqa: E402
from conformance_suite import RETENTION_COUNTERS, cases, every_file_was_read  # noqa: E402
from wasmtime.component import Record, ResourceAny, Variant

from component import Halfopen, field, record

SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
U16, U32, U64 = 2**16 - 1, 2**32 - 1, 2**64 - 1

# One instance for the whole suite: every case makes its own breakers.
H = Halfopen()


class Invalid(Exception):
    """A config value the interface's types cannot hold: names the field."""


def snake(name: str) -> str:
    return name.replace("-", "_")


def count(v: Any, limit: int, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limit:
        raise Invalid(name)
    return v


def micros(v: Any, name: str) -> int:
    """Whole non-negative milliseconds as microseconds."""
    return count(v, U64 // 1000, name) * 1000


def number(v: Any, name: str) -> float:
    v = SPECIAL.get(v, v) if isinstance(v, str) else v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Invalid(name)
    return float(v)


PRESETS = {"whatsapp_gateway": "whatsapp-gateway", "partner_webhook": "partner-webhook", "sender": "sender"}


def changes(spec: Dict[str, Any]) -> List[Variant]:
    """The suite's flat config as the interface's `config-change` list: what
    a key's own options change (`registry.configure-from`)."""
    out: List[Variant] = []
    opt = lambda v, parse: None if v is None else parse(v)  # noqa: E731
    for key, v in spec.items():
        if key in ("latency_histogram", "adaptive_limit_max"):
            continue
        if key == "preset":
            assert v in PRESETS, f"unknown preset {v}"
            out.append(Variant("preset", H(PRESETS[v])))
        elif key == "failure_threshold":
            out.append(Variant("failure-threshold", opt(v, lambda v: count(v, U32, "failure_threshold"))))
        elif key == "window_ms":
            out.append(Variant("window", Variant("time", micros(v, "window"))))
        elif key == "window_calls":
            out.append(Variant("window", Variant("count", count(v, U16, "window"))))
        elif key == "consecutive_failures":
            out.append(Variant("consecutive-failures", opt(v, lambda v: count(v, U32, key))))
        elif key == "failure_rate_threshold":
            out.append(Variant("failure-rate-threshold", opt(v, lambda v: number(v, key))))
        elif key == "minimum_calls":
            out.append(Variant("minimum-calls", count(v, U32, key)))
        elif key == "slow_call_duration_ms":
            out.append(Variant("slow-call-duration", opt(v, lambda v: micros(v, "slow_call_duration"))))
        elif key == "slow_call_rate_threshold":
            out.append(Variant("slow-call-rate-threshold", opt(v, lambda v: number(v, key))))
        elif key == "open_timeout_ms":
            out.append(Variant("open-timeout", micros(v, "open_timeout")))
        elif key == "backoff_factor":
            out.append(Variant("backoff-factor", number(v, key)))
        elif key == "max_open_timeout_ms":
            out.append(Variant("max-open-timeout", micros(v, "max_open_timeout")))
        elif key == "jitter":
            out.append(Variant("jitter", number(v, key)))
        elif key == "jitter_seed":
            out.append(Variant("jitter-seed", count(v, U64, key)))
        elif key == "half_open_max_attempts":
            out.append(Variant("half-open-max-attempts", count(v, U16, key)))
        elif key == "half_open_successes":
            out.append(Variant("half-open-successes", count(v, U16, key)))
        elif key == "probe_timeout_ms":
            out.append(Variant("probe-timeout", micros(v, "probe_timeout")))
        elif key == "concurrency_limit":
            out.append(Variant("concurrency-limit", opt(v, lambda v: count(v, U32, key))))
        elif key == "adaptive_limit_min":
            assert "adaptive_limit_max" in spec, "adaptive_limit_min needs adaptive_limit_max"
            low = count(v, U32, "adaptive_limit_min")
            high = count(spec["adaptive_limit_max"], U32, "adaptive_limit_max")
            out.append(Variant("concurrency-limit", record(min=low, max=high)))
        else:
            raise AssertionError(f"unknown config key {key}")
    return out


def config(spec: Dict[str, Any]) -> Record:
    """The suite's flat config as the interface's `config` record: the
    preset (the component's: the core owns the defaults) with the changes."""
    c = H(PRESETS[spec.get("preset", "whatsapp_gateway")])
    for change in changes(spec):
        if change.tag != "preset":
            c.__dict__[change.tag] = change.payload
    return c


def is_err(value: Any, ok: type) -> bool:
    """Whether a result's value is its error (wasmtime gives the case's value
    itself when the ok and error types can be told apart)."""
    return not isinstance(value, ok)


def ms(us: Optional[int]) -> Optional[Fraction]:
    """Whole µs as exact ms (the interpreter compares them exactly)."""
    return None if us is None else Fraction(us, 1000)


def change(t: Record) -> Dict[str, Any]:
    return {"from": snake(t.__dict__["from"]), "to": snake(t.to), "reason": snake(t.reason), "at": ms(t.at)}


class ComponentBreakers:
    """A `breaker` resource, or a `registry` (`key`: the name): the suite's
    milliseconds as the interface's microseconds."""

    def __init__(self, case: Dict[str, Any]) -> None:
        spec = case["config"]
        self.now = 0  # µs
        self.seen: List[Record] = []
        self.registry = "registry" in case
        if self.registry:
            r = case["registry"]
            assert set(r) <= {"capacity", "configure"}
            made = H("[static]registry.create", config(spec), count(r["capacity"], U32, "capacity"))
            assert not is_err(made, ResourceAny), f"registry: {made}"
            for key, own in r.get("configure", {}).items():
                done = H("[method]registry.configure-from", made, key, changes(own), 0)
                assert not isinstance(done, Variant), f"configure {key}: {done}"
        else:
            made = H("[static]breaker.create", config(spec), bool(spec.get("latency_histogram", False)))
            assert not is_err(made, ResourceAny), f"breaker: {made.__dict__}"
        self.holder = made

    def method(self, name: str, key: Optional[str], *args: Any) -> Any:
        if self.registry:
            assert key is not None, "a registry case needs a key on this step"
            return H(f"[method]registry.{name}", self.holder, key, *args)
        assert key is None, "key given, but the case has no registry"
        return H(f"[method]breaker.{name}", self.holder, *args)

    def set_clock(self, now_ms: float) -> None:
        self.now = round(now_ms * 1000)

    def clock(self) -> float:
        return self.now / 1000

    def acquire(self, key: Optional[str]) -> Admission:
        admission = self.method("try-acquire", key, self.now)
        if isinstance(admission, Variant):
            return Admission(refused=snake(admission.tag))
        if admission.transition is not None:
            self.seen.append(admission.transition)
        decision = admission.decision
        if isinstance(decision, ResourceAny):
            return Admission(permit=decision)
        return Admission(state=snake(decision.state), reason=snake(decision.reason), retry_after_ms=ms(decision.__dict__["retry-after"]))

    def report(self, permit: ResourceAny, outcome: str, at: int) -> None:
        kind = "registry" if self.registry else "breaker"
        result = H(f"[method]{kind}.record", self.holder, permit, outcome, at)
        assert not isinstance(result, str), f"record: {result}"
        t = result.transition if result is not None and self.registry else result
        if t is not None:
            self.seen.append(t)

    def record(self, key: Optional[str], permit: Any, outcome: str) -> None:
        self.report(permit, outcome, self.now)

    def call(self, key: Optional[str], outcome: str, duration_ms: float, repeat: int) -> None:
        """`repeat` calls side by side: all admitted, then all report."""
        end = self.now + round(duration_ms * 1000)
        permits = []
        for i in range(repeat):
            got = self.acquire(key)
            assert got.permit is not None, f"call {i} was refused: {got}"
            permits.append(got.permit)
        for permit in permits:
            self.report(permit, outcome, end)
        self.now = end

    def manual(self, key: Optional[str], op: str, for_ms: Optional[float]) -> None:
        if op == "handle_timeout":
            t = self.method("handle-timeout", key, self.now)
            self.seen.extend([t] if t is not None else [])
            return
        args = () if op not in ("force_open", "force_open_at_least") else (None if for_ms is None else micros(for_ms, "for_ms"),)
        result = self.method(op.replace("_", "-"), key, self.now, *args)
        if self.registry:
            assert not isinstance(result, Variant), f"{op}: {result}"
        self.seen.extend(result)

    def transitions(self) -> List[Dict[str, Any]]:
        got = [change(t) for t in self.seen]
        self.seen.clear()
        return got

    def state(self, key: Optional[str]) -> str:
        return snake(self.method("state", key, self.now))

    def retry_after_ms(self, key: Optional[str]) -> Optional[float]:
        return ms(self.method("retry-after", key, self.now))

    def mode(self, key: Optional[str]) -> str:
        return snake(self.method("mode", key, self.now).tag)

    def poll_timeout_ms(self, key: Optional[str]) -> Optional[float]:
        return ms(self.method("poll-timeout", key))

    def counts(self, key: Optional[str]) -> Dict[str, Any]:
        c = self.method("counts", key, self.now)
        return {k: field(c, k) for k in COUNTS}

    def metrics(self, key: Optional[str]) -> Dict[str, Any]:
        m = self.method("metrics", key, self.now)
        latency = m.latency
        return {
            **{k: getattr(m, k) for k in ("admitted", "successes", "failures", "slow", "rejections", "ignored",
                                          "cancelled", "stale", "opens")},
            "opens_last_24h": m.__dict__["opens-last24h"],
            "time_closed_ms": ms(m.__dict__["time-closed"]),
            "time_open_ms": ms(m.__dict__["time-open"]),
            "time_half_open_ms": ms(m.__dict__["time-half-open"]),
            "mean_time_open_ms": ms(m.__dict__["mean-time-open"]),
            "error_rate": m.__dict__["error-rate"],
            "latency_count": None if latency is None else latency.count,
            **{f"latency_{q}_ms": None if latency is None else getattr(latency, q) / 1000
               for q in ("p50", "p95", "p99", "max")},
        }

    def names(self) -> List[str]:
        return list(H("[method]registry.names", self.holder))

    def size(self) -> int:
        return int(H("[method]registry.len", self.holder))

    def holds(self, key: str) -> bool:
        return key in self.names()

    def evictions(self) -> int:
        return int(H("[method]registry.evictions", self.holder))

    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str) -> None:
        suffix = "-json" if encoding == "json" else ""
        holder = "registry" if self.registry else "breaker"
        saved = H(f"[method]{holder}.snapshot{suffix}", self.holder, self.now)
        if restore_at is not None:
            self.set_clock(restore_at)
        if self.registry:
            result = H(f"[method]registry.restore{suffix}", self.holder, saved, self.now, elapsed)
            assert isinstance(result, list), f"restore: {result}"
        else:
            result = H(f"[method]breaker.load{suffix}", self.holder, saved, self.now, elapsed)
            assert result is None, f"load: {result}"

    def restore(self, snapshot: str, elapsed: str) -> Optional[str]:
        assert not self.registry, "restore needs a single-breaker case"
        result = H("[method]breaker.load-json", self.holder, snapshot, self.now, elapsed)
        return None if result is None else snake(result.tag)


def retention(spec: Dict[str, Any]) -> Record:
    """The suite's retention keys as the interface's `retention-config`."""
    assert set(spec) <= {"max_messages", "max_bytes", "overflow", "probe", "max_attempts", "max_age_ms",
                         "release_per_second", "release_burst"}, spec
    whole = lambda key, limit, name: None if key not in spec else count(SPECIAL.get(spec[key], spec[key]) if isinstance(spec[key], str) else spec[key], limit, name)  # noqa: E731
    rate = None
    if "release_per_second" in spec or "release_burst" in spec:
        rate = record(per_second=whole("release_per_second", U32, "release_rate"), burst=whole("release_burst", U32, "release_rate"))
    age = whole("max_age_ms", U64 // 1000, "max_age")
    return record(
        max_messages=whole("max_messages", U32, "max_messages"),
        max_bytes=whole("max_bytes", U64, "max_bytes"),
        overflow=spec.get("overflow", "reject").replace("_", "-"),
        probe=spec.get("probe", "oldest").replace("_", "-"),
        max_attempts=whole("max_attempts", U32, "max_attempts"),
        max_age=None if age is None else age * 1000,
        release_rate=rate,
    )


class ComponentQueue:
    """A `dispatcher` resource: the suite's milliseconds as microseconds."""

    def __init__(self, case: Dict[str, Any]) -> None:
        self.config = config(case["config"])
        self.retention = retention(case["retention"])
        made = H("[static]dispatcher.create", self.config, self.retention)
        assert not is_err(made, ResourceAny), f"dispatcher: {made}"
        self.d = made
        self.now = 0

    def m(self, name: str, *args: Any) -> Any:
        return H(f"[method]dispatcher.{name}", self.d, *args)

    def set_clock(self, now_ms: float) -> None:
        self.now = round(now_ms * 1000)

    def submit(self, bytes: int) -> Optional[tuple]:
        got = self.m("submit", bytes, self.now)
        return None if got is None else (got.tag, got.payload)

    def next(self) -> List[int]:
        return list(self.m("next", self.now))

    def report(self, seq: int, outcome: str) -> str:
        return str(self.m("report", seq, outcome, self.now))

    def manual(self, op: str, for_ms: Optional[float]) -> None:
        args = () if op not in ("force_open", "force_open_at_least") else (None if for_ms is None else round(for_ms * 1000),)
        self.m(op.replace("_", "-"), self.now, *args)

    def state(self) -> str:
        return snake(self.m("state", self.now))

    def stats(self) -> Dict[str, int]:
        stats = self.m("stats")
        return {k: field(stats, k) for k in ("retained", "in_flight", "bytes", *RETENTION_COUNTERS)}

    def poll_timeout_ms(self) -> Optional[float]:
        return ms(self.m("poll-timeout"))

    def snapshot_restore(self, encoding: str, restore_at: Optional[float], elapsed: str, held: List[int]) -> None:
        suffix = "-json" if encoding == "json" else ""
        saved = self.m(f"snapshot{suffix}", self.now)
        if restore_at is not None:
            self.set_clock(restore_at)
        made = H(f"[static]dispatcher.restore{suffix}", self.config, self.retention, saved, held, self.now, elapsed)
        assert isinstance(made, ResourceAny), f"restore: {made}"
        self.d = made

    def events(self) -> List[Dict[str, Any]]:
        got: List[Dict[str, Any]] = []
        for e in self.m("take-events"):
            if e.tag == "transition":
                t = e.payload
                got.append({"transition": {"from": snake(t.__dict__["from"]), "to": snake(t.to), "reason": snake(t.reason)}})
            elif e.tag == "dead":
                got.append({"dead": e.payload.seq, "reason": e.payload.reason, "attempts": e.payload.attempts})
            else:
                got.append({"dropped": e.payload})
        return got


def run_retention(case: Dict[str, Any]) -> None:
    if "invalid" in case:
        try:
            made = H("[static]dispatcher.create", config(case["config"]), retention(case["retention"]))
        except Invalid as refused:
            got, problem = str(refused), None
        else:
            assert is_err(made, ResourceAny), "the config was accepted"
            assert made.tag == "retention", f"{made.tag}: {made.payload}"
            got, problem = snake(made.payload.field), snake(made.payload.problem)
        assert got == case["invalid"], f"expected an error for {case['invalid']}, got one for {got}"
        if "problem" in case:
            assert problem == case["problem"], f"expected {case['problem']}, got {problem}"
        return
    run_retention_case(case["steps"], ComponentQueue(case))


@pytest.mark.parametrize("case", list(cases()))
def test_conformance(case: Dict[str, Any]) -> None:
    assert set(case) <= {"description", "config", "registry", "retention", "steps", "invalid", "problem"}, case
    if "retention" in case:
        return run_retention(case)
    if "invalid" in case:
        try:
            made = H("[static]breaker.create", config(case["config"]), False)
        except Invalid as refused:
            got, problem = str(refused), None
        else:
            assert is_err(made, ResourceAny), "the config was accepted"
            got, problem = snake(made.field), snake(made.problem)
        assert got == case["invalid"], f"expected an error for {case['invalid']}, got one for {got}"
        if "problem" in case:
            assert problem == case["problem"], f"expected {case['problem']}, got {problem}"
        return
    run_breaker_case(case["steps"], ComponentBreakers(case))


def test_every_file_is_read() -> None:
    every_file_was_read("component, wasmtime")
