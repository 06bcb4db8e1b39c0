"""The component as an artifact (valid, no imports, the interface it says)
and the permit contract through wasmtime: a permit cannot be reported
twice, another breaker refuses it, and one dropped unreported counts as
cancelled."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
from wasmtime.component import ResourceAny

from component import COMPONENT, INTERFACE, Halfopen

WASM_TOOLS = pathlib.Path(sys.executable).parent / "wasm-tools"


def wasm_tools(*args: str) -> str:
    return subprocess.run([str(WASM_TOOLS), *args], check=True, capture_output=True, text=True).stdout


def test_the_component_is_valid_and_imports_nothing() -> None:
    wasm_tools("validate", str(COMPONENT))
    world = wasm_tools("component", "wit", str(COMPONENT))
    assert re.search(r"^\s*import ", world, re.MULTILINE) is None, world
    assert f"export {INTERFACE};" in world


def test_its_interface_is_the_documented_one() -> None:
    documented = wasm_tools("component", "wit", str(pathlib.Path(__file__).resolve().parents[1] / "wit"))
    built = wasm_tools("component", "wit", str(COMPONENT))
    functions = lambda wit: sorted(re.findall(r"^\s*(%?[a-z][a-z0-9-]*): (?:static )?func", wit, re.MULTILINE))  # noqa: E731
    assert functions(built) == functions(documented)
    assert len(functions(built)) >= 50, "the pattern finds the functions"
    # The component's README names the interface's version, the one built.
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (version,) = set(re.findall(r"halfopen:breaker@([0-9.]+)", readme))
    assert f"export halfopen:breaker/breaker@{version};" in built


@pytest.fixture
def h() -> Halfopen:
    return Halfopen()


def test_a_permit_is_reported_once(h: Halfopen) -> None:
    config = h("default-config")
    a = h("[static]breaker.create", config, False)
    other = h("[static]breaker.create", config, False)
    permit = h("[method]breaker.try-acquire", a, 0).decision
    assert isinstance(permit, ResourceAny)
    assert h("[method]breaker.record", a, permit, "success", 1) is None
    with pytest.raises(ValueError):
        h("[method]breaker.record", a, permit, "success", 2)
    assert h("[method]breaker.metrics", a, 3).successes == 1

    foreign = h("[method]breaker.try-acquire", a, 4).decision
    assert h("[method]breaker.record", other, foreign, "failure", 5) == "other-owner"
    assert h("[method]breaker.metrics", a, 6).cancelled == 1, "reported to its own breaker as cancelled"
    assert h("[method]breaker.metrics", other, 6).admitted == 0

    dropped = h("[method]breaker.try-acquire", a, 7).decision
    assert h("[method]breaker.counts", a, 7).__dict__["in-flight"] == 1
    dropped.drop(h.store)
    assert h("[method]breaker.counts", a, 8).__dict__["in-flight"] == 0
    assert h("[method]breaker.metrics", a, 8).cancelled == 2


def test_a_registry_permit_is_reported_to_its_name(h: Halfopen) -> None:
    config = h("default-config")
    r = h("[static]registry.create", config, 4)
    b = h("[static]breaker.create", config, False)
    permit = h("[method]registry.try-acquire", r, "a", 0).decision
    assert h("[method]breaker.record", b, permit, "failure", 1) == "other-owner"
    assert h("[method]registry.metrics", r, "a", 2).cancelled == 1
    permit = h("[method]registry.try-acquire", r, "a", 3).decision
    assert h("[method]registry.record", r, permit, "failure", 4) is None
    assert h("[method]registry.metrics", r, "a", 5).failures == 1


def test_a_registry_too_large_for_the_memory_is_refused_not_a_trap(h: Halfopen) -> None:
    config = h("default-config")
    refused = h("[static]registry.create", config, 2**20 + 1)
    assert refused.tag == "capacity", refused
    assert isinstance(h("[static]registry.create", config, 2**20), ResourceAny)


def test_a_name_is_at_most_1024_bytes_and_its_permits_share_one_copy(h: Halfopen) -> None:
    # 1,100 permits of a 4 MiB name would have taken 4.4 GiB if each kept
    # its own copy (a review trapped the component so): such a name is now
    # refused, as a value; one of 1024 bytes (the longest) works, its
    # permits sharing one copy.
    r = h("[static]registry.create", h("default-config"), 4)
    refused = h("[method]registry.try-acquire", r, "n" * (4 << 20), 0)
    assert (refused.tag, refused.payload) == ("name-too-long", 4 << 20)
    name = "é" * 512
    permits = [h("[method]registry.try-acquire", r, name, i).decision for i in range(1_100)]
    assert all(isinstance(p, ResourceAny) for p in permits)
    for i, p in enumerate(permits):
        h("[method]registry.record", r, p, "success", 2_000 + i)
    m = h("[method]registry.metrics", r, name, 5_000)
    assert (m.admitted, m.successes) == (1_100, 1_100)


def test_retry_after_for_a_name_without_a_breaker_says_whether_there_is_room(h: Halfopen) -> None:
    r = h("[static]registry.create", h("default-config"), 1)
    assert h("[method]registry.retry-after", r, "new", 0) == 0
    held = h("[method]registry.try-acquire", r, "busy", 0).decision
    assert h("[method]registry.retry-after", r, "new", 1) is None, "full: no time is known"
    h("[method]registry.record", r, held, "success", 2)
    assert h("[method]registry.retry-after", r, "new", 3) == 0


def test_an_output_too_large_for_the_memory_is_out_of_memory_not_a_trap() -> None:
    # Issue 21 §5: an exposition repeats each name in every family, so a
    # registry that fits the memory may not fit its own exposition; that was
    # a trap (wasmtime then refuses the whole instance). Now it is
    # `output-error.out-of-memory`, and the instance goes on.
    h = Halfopen()
    h.store.set_limits(memory_size=64 << 20)
    r = h("[static]registry.create", h("default-config"), 2**20)
    names = 16_000  # 16 MB of names: the exposition is about 14 times that
    def name(i: int) -> str:
        return f"{i:08d}" + "n" * 1016  # 1024 bytes, the longest

    for i in range(names):
        h("[method]registry.force-open", r, name(i), 0, None)
    # wasmtime-py lifts `err(output-error.out-of-memory)`, a payload-less
    # case of a one-case variant, as None (an `ok` is always the text).
    assert h("[method]registry.prometheus", r, 1) is None
    # A snapshot needs another copy of every name: out of memory or whole.
    for encoding, whole in (("snapshot-json", str), ("snapshot", bytes)):
        saved = h(f"[method]registry.{encoding}", r, 1)
        assert saved is None or (isinstance(saved, whole) and len(saved) > names * 1024), type(saved)
    # The instance and the registry go on, and a small exposition works.
    assert h("[method]registry.len", r) == names
    assert h("[method]registry.state", r, name(7), 2) == "open"
    small = h("[static]registry.create", h("default-config"), 4)
    h("[method]registry.force-open", small, "a", 0, None)
    assert 'name="a"' in h("[method]registry.prometheus", small, 1)
    assert h("[method]registry.prometheus", r, 1) is None, "what it built was freed: the same again"
