"""The prometheus_client collector gives the families and values of the
core's own exposition, for a registry with hostile names too."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import halfopen
from halfopen.prometheus import Collector


def samples(text: str) -> set:
    return {(s.name, tuple(sorted(s.labels.items())), s.value) for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_collector_gives_the_same_values_as_the_text() -> None:
    now = [0.0]
    registry = halfopen.Registry(clock=lambda: now[0], failure_threshold=1)
    for name in ['instance-1', 'quote"and\\backslash', "new\nline"]:
        registry.get(name).call(len, "x")
    with pytest.raises(ZeroDivisionError):
        registry.get("instance-1").call(lambda: 1 / 0)
    scrape = CollectorRegistry()
    scrape.register(Collector(registry))
    exposed = generate_latest(scrape).decode()
    ours = registry.prometheus()
    assert samples(exposed) == samples(ours)
    assert ('circuit_state', (('name', 'instance-1'),), 2.0) in samples(exposed)
    names = {dict(labels).get("name") for _, labels, _ in samples(exposed)} - {None}
    assert names == {"instance-1", 'quote"and\\backslash', "new\nline"}


def test_a_single_breaker_too_and_a_bad_source_is_refused() -> None:
    breaker = halfopen.CircuitBreaker("one", clock=lambda: 0.0)
    scrape = CollectorRegistry()
    scrape.register(Collector(breaker))
    assert samples(generate_latest(scrape).decode()) == samples(breaker.prometheus())
    with pytest.raises(TypeError):
        Collector(object())  # type: ignore[arg-type]
