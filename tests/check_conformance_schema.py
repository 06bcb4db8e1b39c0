"""Validates every scenario file in tests/conformance/ against schema.json,
and those of the group protocol (tests/conformance/group/) against
group/schema.json.

Run: python tests/check_conformance_schema.py  (needs the `jsonschema` package).
Exits non-zero on the first invalid file, and also if the schema fails to
reject a few known-bad documents (so this check cannot pass vacuously).
"""

import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

HERE = pathlib.Path(__file__).parent / "conformance"
NOT_SCENARIOS = {"README.md", "schema.json", "group"}

KNOWN_BAD = [
    {"format": 2, "description": "x", "cases": []},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "acquire"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {"typo": 1}, "invalid": "window"}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "call", "outcome": "maybe"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "retention": {}, "steps": [{"op": "acquire", "permit": "p"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "retention": {}, "invalid": "window"}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "submit", "message": "m", "result": "send"}]}]},
]

#: Documents the group schema must refuse.
GROUP_KNOWN_BAD = [
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "exchange", "process": 0}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "group": {"processes": 2}, "steps": [{"op": "exchange"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "group": {"processes": 2}, "steps": [{"op": "exchange", "process": 0, "lost": "maybe"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "group": {"processes": 1}, "invalid": "window"}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "group": {"processes": 1, "typo": 1}, "invalid": "quorum"}]},
]


def check(validator: Draft202012Validator, paths: "list[pathlib.Path]") -> "tuple[int, int] | None":
    """Validates `paths`: (files, cases), or None after printing what is wrong."""
    files = cases = 0
    for path in paths:
        document = json.loads(path.read_text())
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        if errors:
            for error in errors[:5]:
                print(f"{path.name}: {list(error.path)}: {error.message[:300]}", file=sys.stderr)
            return None
        descriptions = [case["description"] for case in document["cases"]]
        if len(descriptions) != len(set(descriptions)):
            print(f"{path.name}: duplicate case descriptions", file=sys.stderr)
            return None
        files += 1
        cases += len(descriptions)
    return files, cases


def main() -> int:
    schema = json.loads((HERE / "schema.json").read_text())
    group_schema = json.loads((HERE / "group" / "schema.json").read_text())
    registry = Registry().with_resources(
        [(schema["$id"], Resource.from_contents(schema)), (group_schema["$id"], Resource.from_contents(group_schema))]
    )
    validators = []
    for s, bad in ((schema, KNOWN_BAD), (group_schema, GROUP_KNOWN_BAD)):
        Draft202012Validator.check_schema(s)
        validator = Draft202012Validator(s, registry=registry)
        for document in bad:
            if validator.is_valid(document):
                print(f"{s['$id']} accepts a known-bad document: {document}", file=sys.stderr)
                return 1
        validators.append(validator)
    main_files = [p for p in sorted(HERE.iterdir()) if p.name not in NOT_SCENARIOS]
    group_files = [p for p in sorted((HERE / "group").iterdir()) if p.name != "schema.json"]
    plain = check(validators[0], main_files)
    group = check(validators[1], group_files)
    if plain is None or group is None:
        return 1
    print(f"schema: {plain[0]} files, {plain[1]} cases valid; the group protocol: {group[0]} files, {group[1]} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
