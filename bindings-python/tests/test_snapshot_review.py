"""Regression tests for what a hostile review of the hand-written snapshot
codec found, through the Python binding."""

from __future__ import annotations

import json
import time

import pytest

import halfopen


def test_an_object_with_100000_fields_is_refused_at_once() -> None:
    text = "{" + "".join(f'"k{i}":0,' for i in range(100_000)) + '"version":2}'
    started = time.monotonic()
    for restore in (halfopen.CircuitBreaker("many").restore_json, halfopen.Registry().restore_json):
        with pytest.raises(halfopen.SnapshotError) as refused:
            restore(text)
        assert refused.value.kind == "malformed"
    # Not a timing test of the code: the quadratic reader took 20 s here.
    assert time.monotonic() - started < 5


def test_a_newer_registry_snapshot_is_newer_version_whatever_else_it_holds() -> None:
    newer = json.loads(halfopen.Registry().to_json())["version"] + 1
    for restore, snapshot in (
        (halfopen.Registry().restore_json, f'{{"version":{newer},"whatever":[]}}'),
        (halfopen.Registry(capacity=1).restore_json, f'{{"version":{newer},"breakers":[' + "0," * 50 + "0]}"),
        (halfopen.Registry().restore_bytes, bytes([newer])),
    ):
        with pytest.raises(halfopen.SnapshotError) as refused:
            restore(snapshot)  # type: ignore[operator]
        assert refused.value.kind == "newer_version"
