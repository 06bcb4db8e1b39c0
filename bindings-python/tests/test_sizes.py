"""A message's default size, the rule every runtime shares
(tests/message_sizes.json; tests/conformance/README.md, "A message's size")."""

from __future__ import annotations

import array
import json
import pathlib
from typing import Any, Dict

import pytest

import halfopen

SIZES = json.loads((pathlib.Path(__file__).resolve().parents[2] / "tests" / "message_sizes.json").read_text(encoding="utf-8"))


def message(spec: Dict[str, Any]) -> Any:
    if "string" in spec:
        return spec["string"]
    if "binary" in spec:
        return bytes(spec["binary"])
    if "json" in spec:
        return spec["json"]
    return object()


def held_queue() -> halfopen.RetentionQueue[Any]:
    queue: halfopen.RetentionQueue[Any] = halfopen.RetentionQueue("sizes", concurrency_limit=1, max_bytes=1000)
    queue.force_open()  # held: the bytes stay counted
    return queue


@pytest.mark.parametrize("case", SIZES["cases"], ids=[c["description"] for c in SIZES["cases"]])
def test_the_default_size(case: Dict[str, Any]) -> None:
    queue = held_queue()
    if "error" in case:
        with pytest.raises(TypeError) as refused:
            queue.submit(message(case["message"]))
        assert refused.value.option == case["error"]  # type: ignore[attr-defined]
        assert queue.stats()["submitted"] == 0
        return
    assert queue.submit(message(case["message"]))[0] == "retained"
    assert queue.stats()["bytes"] == case["bytes"]


def test_binary_forms_weigh_their_bytes() -> None:
    queue = held_queue()
    queue.submit(bytearray(7))
    queue.submit(memoryview(array.array("i", [1, 2, 3])))  # 3 items of 4 bytes
    assert queue.stats()["bytes"] == 7 + 12


class Unreadable(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise RuntimeError("broken mapping")


def test_a_value_with_no_faithful_json_form_is_a_type_error_naming_size() -> None:
    cycle: Dict[str, Any] = {}
    cycle["self"] = cycle
    released = memoryview(b"abc")
    released.release()
    for message in (cycle, {1, 2}, released, Unreadable(a=1)):
        with pytest.raises(TypeError) as refused:
            held_queue().submit(message)
        assert refused.value.option == "size", message  # type: ignore[attr-defined]
