"""Validates every scenario file in tests/conformance/ against schema.json.

Run: python tests/check_conformance_schema.py  (needs the `jsonschema` package).
Exits non-zero on the first invalid file, and also if the schema fails to
reject a few known-bad documents (so this check cannot pass vacuously).
"""

import json
import pathlib
import sys

from jsonschema import Draft202012Validator

HERE = pathlib.Path(__file__).parent / "conformance"
NOT_SCENARIOS = {"README.md", "schema.json"}

KNOWN_BAD = [
    {"format": 2, "description": "x", "cases": []},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "acquire"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {"typo": 1}, "invalid": "window"}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "call", "outcome": "maybe"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "retention": {}, "steps": [{"op": "acquire", "permit": "p"}]}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "retention": {}, "invalid": "window"}]},
    {"format": 1, "description": "x", "cases": [{"description": "d", "config": {}, "steps": [{"op": "submit", "message": "m", "result": "send"}]}]},
]


def main() -> int:
    schema = json.loads((HERE / "schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    for bad in KNOWN_BAD:
        if validator.is_valid(bad):
            print(f"schema accepts a known-bad document: {bad}", file=sys.stderr)
            return 1
    files = cases = 0
    for path in sorted(HERE.iterdir()):
        if path.name in NOT_SCENARIOS:
            continue
        document = json.loads(path.read_text())
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        if errors:
            for error in errors[:5]:
                print(f"{path.name}: {list(error.path)}: {error.message[:300]}", file=sys.stderr)
            return 1
        descriptions = [case["description"] for case in document["cases"]]
        if len(descriptions) != len(set(descriptions)):
            print(f"{path.name}: duplicate case descriptions", file=sys.stderr)
            return 1
        files += 1
        cases += len(descriptions)
    print(f"schema: {files} files, {cases} cases valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
