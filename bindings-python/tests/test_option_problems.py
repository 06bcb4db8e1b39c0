"""The same wrong option values give the same ``problem`` codes in every
binding (tests/option_problems.json; the Node package reads it too)."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Dict

import pytest

import halfopen

PROBLEMS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "tests" / "option_problems.json").read_text(encoding="utf-8"))
SPECIAL = {"NaN": math.nan, "Infinity": math.inf}


def make(where: str, options: Dict[str, Any]) -> Any:
    if where == "breaker":
        return halfopen.CircuitBreaker("a", **options)
    if where == "retention":
        return halfopen.RetentionQueue("q", concurrency_limit=1, **options)
    return halfopen.Registry(**options)


@pytest.mark.parametrize("case", PROBLEMS["cases"], ids=[f"{c['where']} {c['option']}={c['value']}" for c in PROBLEMS["cases"]])
def test_the_problem_code_is_every_bindings(case: Dict[str, Any]) -> None:
    value = SPECIAL.get(case["value"], case["value"]) if isinstance(case["value"], str) else case["value"]
    with pytest.raises(ValueError) as refused:
        make(case["where"], {case["option"]: value})
    assert refused.value.option == case["option"], str(refused.value)  # type: ignore[attr-defined]
    assert refused.value.problem == case["problem"], str(refused.value)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [(-1, "out_of_range"), (0, "out_of_range"), (math.nan, "not_finite"), (math.inf, "not_finite"), (10**400, "too_large")],
)
def test_a_dispatchers_timeout_says_its_problem(timeout: Any, problem: str) -> None:
    async def send(message: Any) -> None:
        pass

    with pytest.raises(ValueError) as refused:
        halfopen.Dispatcher("d", send, concurrency_limit=1, timeout=timeout)
    assert (refused.value.option, refused.value.problem) == ("timeout", problem)  # type: ignore[attr-defined]


def test_an_int_too_large_for_a_float_is_too_large_not_infinite() -> None:
    for option in ("open_timeout", "window", "probe_timeout"):
        with pytest.raises(ValueError) as refused:
            halfopen.CircuitBreaker("a", **{option: 10**400})
        assert refused.value.problem == "too_large", option  # type: ignore[attr-defined]
        with pytest.raises(ValueError) as refused:
            halfopen.CircuitBreaker("a", **{option: -(10**400)})
        assert refused.value.problem == "out_of_range", option  # type: ignore[attr-defined]


def test_too_many_configured_names_and_a_long_name_carry_codes() -> None:
    registry = halfopen.Registry(capacity=1)
    registry.configure("a", failure_threshold=2)
    with pytest.raises(ValueError) as refused:
        registry.configure("b", failure_threshold=3)
    assert (refused.value.option, refused.value.problem) == ("capacity", "too_large")  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as refused:
        halfopen.CircuitBreaker("x" * 2000)
    assert (refused.value.option, refused.value.problem) == ("name", "too_large")  # type: ignore[attr-defined]
