"""A hypothesis state machine drives the binding and a pure-Python model of
the rules (consecutive failures open it for a constant time; half-open
admits K probes at once and K successes close it, a probe failure reopens
it; permits of an earlier state period are stale; manual operations) and
demands the same state, counts and refusals after every step.
``HALFOPEN_MODEL_EXAMPLES`` sets the number of sequences (default 2,000)."""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import halfopen

OPEN_MS = 1000
EXAMPLES = int(os.environ.get("HALFOPEN_MODEL_EXAMPLES", "2000"))


class Model:
    """Seed 000's rules for one breaker, the way the README states them."""

    def __init__(self, threshold: int, probes: int) -> None:
        self.threshold, self.probes = threshold, probes
        self.state = "CLOSED"
        self.held = False  # forced open until released
        self.until = 0
        self.run = 0  # failures in a row
        self.in_flight = 0  # probes of this period
        self.successes = 0
        self.generation = 0

    def enter(self, state: str, until: int = 0) -> None:
        self.state, self.until = state, until
        self.generation += 1
        self.in_flight = self.successes = 0

    def advance(self, now: int) -> None:
        if self.state == "OPEN" and not self.held and now >= self.until:
            self.enter("HALF_OPEN")

    def acquire(self, now: int) -> Tuple[bool, Optional[str], int]:
        self.advance(now)
        if self.state == "OPEN":
            return False, "held" if self.held else "open", self.generation
        if self.state == "HALF_OPEN":
            if self.in_flight >= self.probes:
                return False, "probes_busy", self.generation
            self.in_flight += 1
        return True, None, self.generation

    def record(self, generation: int, outcome: str, now: int) -> None:
        self.advance(now)
        if generation != self.generation or outcome in ("ignored", "cancelled"):
            if generation == self.generation and self.state == "HALF_OPEN":
                self.in_flight -= 1
            return
        failed = outcome == "failure"
        if self.state == "CLOSED":
            self.run = self.run + 1 if failed else 0
            if failed and self.run >= self.threshold:
                self.enter("OPEN", now + OPEN_MS)
        elif self.state == "HALF_OPEN":
            self.in_flight -= 1
            if failed:
                self.enter("OPEN", now + OPEN_MS)
            else:
                self.successes += 1
                if self.successes >= self.probes:
                    self.run = 0
                    self.enter("CLOSED")

    def force_open(self, now: int) -> None:
        self.advance(now)
        self.held = True
        self.enter("OPEN")

    def release(self, now: int) -> None:
        self.advance(now)
        if self.state == "OPEN" and self.held:
            self.held = False
            self.enter("HALF_OPEN")

    def force_close(self, now: int) -> None:
        self.advance(now)
        self.held = False
        self.run = 0
        self.enter("CLOSED")


class BreakerVsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.breaker: Optional[halfopen.CircuitBreaker] = None
        self.model: Optional[Model] = None
        self.permits: List[Tuple[halfopen.Permit, int]] = []

    @precondition(lambda self: self.breaker is None)
    @rule(threshold=st.integers(1, 4), probes=st.integers(1, 3))
    def build(self, threshold: int, probes: int) -> None:
        self.breaker = halfopen.CircuitBreaker(
            "model",
            clock=lambda: Fraction(self.now, 1000),
            failure_threshold=None,
            consecutive_failures=threshold,
            open_timeout=OPEN_MS / 1000,
            backoff_factor=1,
            half_open_max_attempts=probes,
            probe_timeout=10**6,
        )
        self.model = Model(threshold, probes)

    @precondition(lambda self: self.breaker is not None)
    @rule(ms=st.sampled_from([0, 1, 300, 999, 1000, 2500]))
    def advance(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.breaker is not None)
    @rule()
    def acquire(self) -> None:
        assert self.breaker is not None and self.model is not None
        admitted, reason, generation = self.model.acquire(self.now)
        try:
            permit = self.breaker.try_acquire()
        except halfopen.CircuitBreakerError as refused:
            assert not admitted and refused.reason == reason, (refused.reason, reason)
        else:
            assert admitted, f"admitted, the model says {reason}"
            self.permits.append((permit, generation))

    @precondition(lambda self: self.breaker is not None and self.permits)
    @rule(index=st.integers(0, 50), outcome=st.sampled_from(["success", "success", "failure", "ignored", "cancelled"]))
    def record(self, index: int, outcome: str) -> None:
        assert self.breaker is not None and self.model is not None
        permit, generation = self.permits.pop(index % len(self.permits))
        self.breaker.record(permit, outcome)
        self.model.record(generation, outcome, self.now)

    @precondition(lambda self: self.breaker is not None)
    @rule(op=st.sampled_from(["force_open", "release", "force_close"]))
    def manual(self, op: str) -> None:
        assert self.breaker is not None and self.model is not None
        getattr(self.breaker, op)()
        getattr(self.model, op)(self.now)

    @invariant()
    def same(self) -> None:
        if self.breaker is None or self.model is None:
            return
        self.model.advance(self.now)
        m: Dict[str, Any] = self.breaker.metrics()
        assert self.breaker.state.value == self.model.state
        assert m["probes_in_flight"] == (self.model.in_flight if self.model.state == "HALF_OPEN" else 0)
        assert m["probe_successes"] == (self.model.successes if self.model.state == "HALF_OPEN" else 0)
        assert m["consecutive_failures"] == self.model.run


BreakerVsModel.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None)
TestBreakerVsModel = BreakerVsModel.TestCase
