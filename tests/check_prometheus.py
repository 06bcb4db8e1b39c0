"""Parses halfopen's Prometheus exposition (stdin) with prometheus_client's
text parser and checks what it must hold: every breaker name, hostile ones
included, comes back exactly as a label value; nothing was injected; the
states and counters are the ones `core/examples/prometheus_text.rs` set up,
and so are the retention dispatcher's ("partner-a").

Every further argument is a file (a dashboard, alert rules) whose
`circuit_*` metric names must all be ones the exposition has.

Run: cargo run -q -p halfopen --example prometheus_text | python tests/check_prometheus.py [FILE...]
"""

import pathlib
import re
import sys

from prometheus_client.parser import text_string_to_metric_families

NAMES = ["instance-1", "instance-2", 'evil"} 1\ncircuit_state{name="injected', "back\\slash ünïcode"]


def main() -> int:
    text = sys.stdin.read()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    problems = []

    def samples(family: str) -> dict:
        return {s.labels["name"]: s.value for s in families[family].samples if s.name == family or s.name == family + "_total"}

    state = samples("circuit_state")
    if sorted(state) != sorted(NAMES):
        problems.append(f"circuit_state names {sorted(state)!r} != {sorted(NAMES)!r}")
    expected_state = {NAMES[0]: 2, NAMES[1]: 1, NAMES[2]: 0, NAMES[3]: 0}
    if state != expected_state:
        problems.append(f"circuit_state values {state!r} != {expected_state!r}")
    if families["circuit_state"].type != "gauge":
        problems.append("circuit_state is not a gauge")
    failures = samples("circuit_failures")
    if failures != {NAMES[0]: 5, NAMES[1]: 5, NAMES[2]: 0, NAMES[3]: 0}:
        problems.append(f"circuit_failures_total {failures!r}")
    retention = {
        "circuit_retained_messages": 1,
        "circuit_retained_bytes": 75,
        "circuit_retention_in_flight": 1,
        "circuit_messages_submitted": 3,
        "circuit_messages_delivered": 0,
        "circuit_messages_refused": 0,
        "circuit_messages_dropped": 0,
        "circuit_dead_letters": 1,
    }
    for family, want in retention.items():
        got = samples(family) if family in families else None
        if got != {"partner-a": want}:
            problems.append(f"{family} {got!r} != {{'partner-a': {want}}}")
    if families["circuit_failures"].type != "counter" or families["circuit_opens"].type != "counter":
        problems.append("failures/opens are not counters")
    if samples("circuit_opens") != {NAMES[0]: 1, NAMES[1]: 1, NAMES[2]: 0, NAMES[3]: 0}:
        problems.append(f"circuit_opens_total {samples('circuit_opens')!r}")
    latency = families["circuit_latency_seconds"]
    if latency.type != "summary":
        problems.append("circuit_latency_seconds is not a summary")
    quantiles = {(s.labels["name"], s.labels.get("quantile")) for s in latency.samples if "quantile" in s.labels}
    if len(quantiles) != 4 * len(NAMES):
        problems.append(f"expected 4 quantiles per breaker, got {len(quantiles)}")
    every_name = {s.labels.get("name") for f in families.values() for s in f.samples} - {None}
    if every_name != set(NAMES) | {"partner-a"}:
        problems.append(f"unexpected names in some sample: {every_name - set(NAMES) - {'partner-a'}!r}")
    for needed in ["circuit_registry_breakers", "circuit_registry_evictions", "circuit_state_seconds"]:
        if needed not in families:
            problems.append(f"missing family {needed}")
    exposed = {s.name for f in families.values() for s in f.samples}
    for path in sys.argv[1:]:
        used = set(re.findall(r"circuit_[a-z0-9_]+", pathlib.Path(path).read_text()))
        unknown = used - exposed
        if unknown:
            problems.append(f"{path} uses metrics the exposition lacks: {sorted(unknown)}")
        if not used:
            problems.append(f"{path} uses no circuit_* metric")
    for p in problems:
        print("prometheus check:", p, file=sys.stderr)
    if not problems:
        total = sum(len(f.samples) for f in families.values())
        print(f"prometheus: {len(families)} families, {total} samples parsed by prometheus_client; names round-trip")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
