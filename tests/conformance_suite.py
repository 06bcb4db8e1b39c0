"""The conformance suite's files as pytest cases, for every Python runner
(the Python package's, the WebAssembly component's through wasmtime): read
every scenario file in `tests/conformance/` (all but README.md and
schema.json; the group protocol's, in `group/`, are run by
`test_group_conformance.py`), refuse a format it does not know, never skip
one."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Iterator, List

import pytest

SUITE = pathlib.Path(__file__).resolve().parent / "conformance"


def cases() -> Iterator[Any]:
    """One `pytest.param` per scenario, named `file::description`."""
    files = sorted(p for p in SUITE.iterdir() if p.name not in ("README.md", "schema.json", "group"))
    assert files, "no conformance files"
    for path in files:
        suite = json.loads(path.read_text())
        assert suite["format"] == 1, f"{path.name}: unknown format"
        for case in suite["cases"]:
            yield pytest.param(case, id=f"{path.stem}::{case['description']}")


#: A retention case's ops and their keys (besides `op`, `at`, `events`).
RETENTION_STEPS = {
    "submit": {"message", "bytes", "result"},
    "next": {"sends"},
    "report": {"message", "outcome", "result"},
    "handle_timeout": set(),
    "force_open": {"for_ms"},
    "force_open_at_least": {"for_ms"},
    "release": set(),
    "expect": {"state", "retention"},
    "snapshot_restore": {"encoding", "restore_at", "elapsed"},
}
#: The counters a retention `expect` may check.
RETENTION_COUNTERS = {"submitted", "refused", "sent", "delivered", "failed", "dead", "dropped"}


def shared_clock(case: Any) -> bool:
    """Whether a case's restores count the time between (`elapsed:
    "counted"`): a property of the clock in the bindings (`shared_clock`),
    so one case does not mix the two."""
    restores = [s for s in case["steps"] if s["op"] in ("snapshot_restore", "restore")]
    counted = sum(s.get("elapsed") == "counted" for s in restores)
    assert counted in (0, len(restores)), "a case mixes restores that count the time between and ones that do not"
    return counted > 0


def expected_events(step: Any) -> List[Any]:
    """A retention step's `events`, transitions without their optional `at`
    (what the runners compare with)."""
    return [
        {"transition": {k: v for k, v in w["transition"].items() if k != "at"}} if "transition" in w else w
        for w in step.get("events", [])
    ]


def every_file_was_read(runner: str) -> None:
    """Checks the suite was all read (at least 18 files, 200 scenarios), and
    prints what `runner` ran."""
    names = {p.stem for p in SUITE.iterdir() if p.suffix == ".json"} - {"schema"}
    ran: List[Any] = list(cases())
    assert len(names) >= 18 and len({case.values[0]["description"] for case in ran}) >= 200
    print(f"conformance ({runner}): {len(names)} files, {len(ran)} scenarios")
