"""The conformance suite (tests/conformance/*.json, the specification) run
against the WebAssembly component through wasmtime: one pytest case per
scenario, driving the WIT interface as the core's own runner drives the
core (core/tests/conformance.rs): the suite's milliseconds become the
interface's microseconds, and a value the interface's types cannot hold
(negative, fractional, too large) is an error naming its field, as in any
binding. A runner must read every file and fail on an unknown key or op."""

from __future__ import annotations

import json
import math
import pathlib
import sys
from typing import Any, Dict, List, Optional

import pytest

# The suite's loader, shared by the Python runners (tests/conformance_suite.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
from conformance_suite import RETENTION_COUNTERS, RETENTION_STEPS, cases, every_file_was_read, expected_events  # noqa: E402
from wasmtime.component import Record, ResourceAny, Variant

from component import Halfopen, field, record

SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
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


PRESETS = {"whatsapp_gateway": "whatsapp-gateway", "partner_webhook": "partner-webhook"}


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


def check_transitions(got: List[Record], step: Dict[str, Any]) -> None:
    want = step.get("transitions", [step["transition"]] if "transition" in step else [])
    assert len(got) == len(want), f"transitions {[t.__dict__ for t in got]} != {want}"
    for g, w in zip(got, want):
        assert set(w) <= {"from", "to", "reason", "at"}
        actual = {"from": snake(g.__dict__["from"]), "to": snake(g.to), "reason": snake(g.reason)}
        for k in ("from", "to", "reason"):
            assert actual[k] == w[k], f"transition {actual} != {w}"
        if "at" in w:
            assert g.at == w["at"] * 1000, f"transition at {g.at} µs != {w['at']} ms"


def check_retry(got_us: Optional[int], want: Any) -> None:
    if want is None:
        assert got_us is None, f"retry after {got_us} µs, expected held open"
    elif isinstance(want, dict):
        assert set(want) <= {"min", "max"}
        assert got_us is not None and want["min"] * 1000 <= got_us <= want["max"] * 1000, f"{got_us} µs not in {want}"
    else:
        assert got_us == want * 1000, f"retry after {got_us} µs != {want} ms"


def check_metrics(m: Record, want: Dict[str, Any]) -> None:
    ms = lambda us: None if us is None else us / 1000  # noqa: E731
    latency = m.latency
    actual = {
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
    for key, w in want.items():
        assert key in actual, f"unknown metric {key}"
        got = actual[key]
        if w is None:
            assert got is None, f"metrics.{key} = {got}, expected not measured"
        elif isinstance(w, dict):
            assert got is not None and w["min"] - 1e-9 <= got <= w["max"] + 1e-9, f"metrics.{key} = {got} not in {w}"
        else:
            assert got is not None and abs(got - w) <= 1e-9, f"metrics.{key} = {got} != {w}"


def is_err(value: Any, ok: type) -> bool:
    """Whether a result's value is its error (wasmtime gives the case's value
    itself when the ok and error types can be told apart)."""
    return not isinstance(value, ok)


class Run:
    def __init__(self, case: Dict[str, Any]) -> None:
        spec = case["config"]
        self.clock = 0  # µs
        self.permits: Dict[str, ResourceAny] = {}
        self.registry: Optional[ResourceAny] = None
        self.breaker: Optional[ResourceAny] = None
        if "registry" in case:
            r = case["registry"]
            assert set(r) <= {"capacity", "configure"}
            made = H("[static]registry.create", config(spec), count(r["capacity"], U32, "capacity"))
            assert not is_err(made, ResourceAny), f"registry: {made}"
            self.registry = made
            for key, own in r.get("configure", {}).items():
                done = H("[method]registry.configure-from", made, key, changes(own), 0)
                assert not isinstance(done, Variant), f"configure {key}: {done}"
        else:
            made = H("[static]breaker.create", config(spec), bool(spec.get("latency_histogram", False)))
            assert not is_err(made, ResourceAny), f"breaker: {made.__dict__}"
            self.breaker = made

    # -- the interface, for a single breaker or a registry's `key` ------------

    def method(self, name: str, key: Optional[str], *args: Any) -> Any:
        if self.registry is not None:
            assert key is not None, "a registry case needs a key on this step"
            return H(f"[method]registry.{name}", self.registry, key, *args)
        assert key is None, "key given, but the case has no registry"
        return H(f"[method]breaker.{name}", self.breaker, *args)

    def acquire(self, key: Optional[str]) -> Any:
        """The admission, or a registry error."""
        return self.method("try-acquire", key, self.clock)

    def report(self, permit: ResourceAny, outcome: str, at: int) -> Optional[Record]:
        holder = self.registry if self.registry is not None else self.breaker
        kind = "registry" if self.registry is not None else "breaker"
        result = H(f"[method]{kind}.record", holder, permit, outcome, at)
        assert not isinstance(result, str), f"record: {result}"
        if result is not None and self.registry is not None:
            return result.transition
        return result

    def manual(self, op: str, key: Optional[str], *args: Any) -> List[Record]:
        result = self.method(op, key, self.clock, *args)
        if self.registry is not None:
            assert not isinstance(result, Variant), f"{op}: {result}"
        return result

    # -- steps ----------------------------------------------------------------

    def step(self, step: Dict[str, Any]) -> None:
        op = step["op"]
        assert op in STEP_KEYS, f"unknown op {op}"
        assert set(step) <= STEP_KEYS[op] | {"op", "at", "key"}, f"unknown key in {step}"
        if "at" in step:
            self.clock = step["at"] * 1000
        key = step.get("key")
        seen: List[Record] = []
        if op == "expect":
            return self.expect(step, key)
        if op == "snapshot_restore":
            return self.snapshot_restore(step)
        if op == "restore":
            return self.restore(step)
        if op == "acquire":
            admission = self.acquire(key)
            if isinstance(admission, Variant):
                want = {"full": "full", "name_too_long": "name-too-long"}.get(step.get("refused"))
                assert admission.tag == want, f"registry refused: {admission}"
                return
            assert "refused" not in step, "expected the registry to refuse a new key"
            if admission.transition is not None:
                seen.append(admission.transition)
            decision = admission.decision
            if isinstance(decision, ResourceAny):
                assert "permit" in step, "expected a refusal, the call was admitted"
                assert step["permit"] not in self.permits, "permit name in use"
                self.permits[step["permit"]] = decision
            else:
                assert "rejected" in step, f"expected admission, got {decision.__dict__}"
                want = step["rejected"]
                assert set(want) <= {"state", "reason", "retry_after_ms"}
                if "state" in want:
                    assert snake(decision.state) == want["state"], decision.__dict__
                if "reason" in want:
                    assert snake(decision.reason) == want["reason"], decision.__dict__
                if "retry_after_ms" in want:
                    check_retry(decision.__dict__["retry-after"], want["retry_after_ms"])
        elif op == "record":
            t = self.report(self.permits.pop(step["permit"]), step["outcome"], self.clock)
            seen.extend([t] if t is not None else [])
        elif op == "call":
            self.call(step, key, seen)
        elif op == "force_open":
            duration = None if "for_ms" not in step else micros(step["for_ms"], "for_ms")
            seen.extend(self.manual("force-open", key, duration))
        elif op == "force_open_at_least":
            seen.extend(self.manual("force-open-at-least", key, micros(step["for_ms"], "for_ms")))
        elif op in ("force_close", "disable", "release", "reset"):
            seen.extend(self.manual(op.replace("_", "-"), key))
        elif op == "handle_timeout":
            t = self.method("handle-timeout", key, self.clock)
            seen.extend([t] if t is not None else [])
        check_transitions(seen, step)

    def call(self, step: Dict[str, Any], key: Optional[str], seen: List[Record]) -> None:
        """`repeat` calls side by side: all admitted, then all report."""
        end = self.clock + step.get("duration_ms", 0) * 1000
        permits = []
        for i in range(step.get("repeat", 1)):
            admission = self.acquire(key)
            assert not isinstance(admission, Variant), f"registry refused: {admission}"
            if admission.transition is not None:
                seen.append(admission.transition)
            assert isinstance(admission.decision, ResourceAny), f"call {i} was rejected: {admission.decision.__dict__}"
            permits.append(admission.decision)
        for permit in permits:
            t = self.report(permit, step["outcome"], end)
            if t is not None:
                seen.append(t)
        self.clock = end

    def expect(self, step: Dict[str, Any], key: Optional[str]) -> None:
        now = self.clock
        if "registry" in step:
            assert self.registry is not None, "no registry in this case"
            want = step["registry"]
            assert set(want) <= {"len", "evictions", "holds", "lacks"}
            names = H("[method]registry.names", self.registry)
            if "len" in want:
                assert H("[method]registry.len", self.registry) == want["len"] == len(names)
            if "evictions" in want:
                assert H("[method]registry.evictions", self.registry) == want["evictions"]
            for k in want.get("holds", []):
                assert k in names, f"lacks {k}"
            for k in want.get("lacks", []):
                assert k not in names, f"holds {k}"
            if key is None:
                return
        if self.registry is not None:
            assert key is not None and key in H("[method]registry.names", self.registry), f"no breaker {key}"
        if "state" in step:
            assert snake(self.method("state", key, now)) == step["state"]
        if "retry_after_ms" in step:
            check_retry(self.method("retry-after", key, now), step["retry_after_ms"])
        if "mode" in step:
            assert snake(self.method("mode", key, now).tag) == step["mode"]
        if "poll_timeout_ms" in step:
            got = self.method("poll-timeout", key)
            want = step["poll_timeout_ms"]
            assert got == (None if want is None else want * 1000), f"poll timeout {got} µs != {want} ms"
        if "counts" in step:
            c = self.method("counts", key, now)
            for k, want in step["counts"].items():
                assert k in {"consecutive_failures", "window_calls", "window_failures", "window_slow",
                             "probes_in_flight", "probe_successes", "in_flight", "concurrency_limit"}, k
                assert field(c, k) == want, f"counts.{k} = {field(c, k)} != {want}"
        if "metrics" in step:
            check_metrics(self.method("metrics", key, now), step["metrics"])

    def snapshot_restore(self, step: Dict[str, Any]) -> None:
        assert step["encoding"] in ("json", "compact")
        suffix = "-json" if step["encoding"] == "json" else ""
        elapsed = step.get("elapsed", "ignored")
        holder = "registry" if self.registry is not None else "breaker"
        saved = H(f"[method]{holder}.snapshot{suffix}", self.registry or self.breaker, self.clock)
        if "restore_at" in step:
            self.clock = step["restore_at"] * 1000
        if self.registry is not None:
            result = H(f"[method]registry.restore{suffix}", self.registry, saved, self.clock, elapsed)
            assert isinstance(result, list), f"restore: {result}"
        else:
            result = H(f"[method]breaker.load{suffix}", self.breaker, saved, self.clock, elapsed)
            assert result is None, f"load: {result}"

    def restore(self, step: Dict[str, Any]) -> None:
        assert self.breaker is not None, "restore needs a single-breaker case"
        elapsed = step.get("elapsed", "ignored")
        result = H("[method]breaker.load-json", self.breaker, json.dumps(step["snapshot"]), self.clock, elapsed)
        if result is None:
            assert "error" not in step, f"expected the error {step['error']}"
        else:
            assert snake(result.tag) == step.get("error"), f"got {result}"




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


class RetentionRun:
    """A retention case: a `dispatcher` resource; the messages by name here."""

    def __init__(self, case: Dict[str, Any]) -> None:
        self.config = config(case["config"])
        self.retention = retention(case["retention"])
        made = H("[static]dispatcher.create", self.config, self.retention)
        assert not is_err(made, ResourceAny), f"dispatcher: {made}"
        self.d = made
        self.clock = 0
        self.seqs: Dict[str, int] = {}
        self.names: Dict[int, str] = {}

    def step(self, step: Dict[str, Any]) -> None:
        op = step["op"]
        assert op in RETENTION_STEPS, f"unknown op {op} in a retention case"
        assert set(step) <= RETENTION_STEPS[op] | {"op", "at", "events"}, f"unknown key in {step}"
        if "at" in step:
            self.clock = step["at"] * 1000
        m = lambda name, *args: H(f"[method]dispatcher.{name}", self.d, *args)  # noqa: E731
        if op == "submit":
            got = m("submit", step.get("bytes", 0), self.clock)
            status = "refused" if got is None else got.tag
            assert status == step["result"], f"submit: {status}"
            if got is not None:
                self.seqs[step["message"]] = got.payload
                self.names[got.payload] = step["message"]
        elif op == "next":
            sent = [self.names[seq] for seq in m("next", self.clock)]
            assert sent == step["sends"], f"sends {sent}"
        elif op == "report":
            got = m("report", self.seqs[step["message"]], step["outcome"], self.clock)
            assert got == step["result"], f"report: {got}"
        elif op == "handle_timeout":
            m("handle-timeout", self.clock)
        elif op == "force_open":
            m("force-open", self.clock, None if "for_ms" not in step else step["for_ms"] * 1000)
        elif op == "force_open_at_least":
            m("force-open-at-least", self.clock, step["for_ms"] * 1000)
        elif op == "release":
            m("release", self.clock)
        elif op == "expect":
            if "state" in step:
                assert snake(m("state", self.clock)) == step["state"]
            want = step.get("retention", {})
            assert set(want) <= {"retained", "in_flight", "bytes", "poll_timeout_ms", "counters"}
            stats = m("stats")
            for k in ("retained", "in_flight", "bytes"):
                if k in want:
                    assert field(stats, k) == want[k], f"{k} = {field(stats, k)}"
            if "poll_timeout_ms" in want:
                w = want["poll_timeout_ms"]
                assert m("poll-timeout") == (None if w is None else w * 1000), f"poll timeout {m('poll-timeout')}"
            for k, n in want.get("counters", {}).items():
                assert k in RETENTION_COUNTERS, k
                assert field(stats, k) == n, f"counters.{k} = {field(stats, k)}"
        elif op == "snapshot_restore":
            suffix = "-json" if step["encoding"] == "json" else ""
            saved = m(f"snapshot{suffix}", self.clock)
            if "restore_at" in step:
                self.clock = step["restore_at"] * 1000
            elapsed = step.get("elapsed", "ignored")
            made = H(f"[static]dispatcher.restore{suffix}", self.config, self.retention, saved, list(self.names), self.clock, elapsed)
            assert isinstance(made, ResourceAny), f"restore: {made}"
            self.d = made
        got = []
        for e in m("take-events"):
            if e.tag == "transition":
                t = e.payload
                got.append({"transition": {"from": snake(t.__dict__["from"]), "to": snake(t.to), "reason": snake(t.reason)}})
            elif e.tag == "dead":
                got.append({"dead": self.names[e.payload.seq], "reason": e.payload.reason, "attempts": e.payload.attempts})
            else:
                got.append({"dropped": self.names[e.payload]})
        assert got == expected_events(step), f"events {got}"


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
    run = RetentionRun(case)
    for index, step in enumerate(case["steps"]):
        try:
            run.step(step)
        except AssertionError as failed:
            raise AssertionError(f"step {index} {json.dumps(step)}: {failed}") from None


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
    run = Run(case)
    for index, step in enumerate(case["steps"]):
        try:
            run.step(step)
        except AssertionError as failed:
            raise AssertionError(f"step {index} {json.dumps(step)}: {failed}") from None


def test_every_file_is_read() -> None:
    every_file_was_read("component, wasmtime")
