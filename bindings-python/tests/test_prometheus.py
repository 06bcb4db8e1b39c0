"""The prometheus_client collector gives the families and values of the
core's own exposition, for a registry with hostile names too."""

from __future__ import annotations

import time

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


# Issue 21, defect 5: one collector for many sources (two collectors could not
# share a prometheus_client registry), built from native readings (a scrape
# re-parsed the text: 6-7 s for 10,000 names).


def families_of(collector: Collector) -> dict:
    scrape = CollectorRegistry()
    scrape.register(collector)
    return {f.name: f for f in text_string_to_metric_families(generate_latest(scrape).decode())}


def busy_sources(clock: "list[float]") -> "tuple[halfopen.CircuitBreaker, halfopen.Registry, halfopen.RetentionQueue[str]]":
    breaker = halfopen.CircuitBreaker("one", clock=lambda: clock[0], failure_threshold=1, latency_histogram=True)
    registry = halfopen.Registry(clock=lambda: clock[0], failure_threshold=2, latency_histogram=True)
    queue: halfopen.RetentionQueue[str] = halfopen.RetentionQueue("q", clock=lambda: clock[0], concurrency_limit=1)
    breaker.call(len, "x")
    clock[0] = 0.25
    with pytest.raises(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)
    for name in ["a", 'quote"and\\backslash', "new\nline"]:
        registry.get(name).call(len, "x")
    with pytest.raises(KeyError):
        registry.get("a").call(lambda: {}["k"])
    clock[0] = 3.5
    _, seq = queue.submit("m")
    queue.submit("n")
    queue.report(seq, "success")  # type: ignore[arg-type]
    return breaker, registry, queue


def test_one_collector_serves_many_sources_with_each_ones_values() -> None:
    clock = [0.0]
    breaker, registry, queue = busy_sources(clock)
    dispatcher: halfopen.Dispatcher[str] = halfopen.Dispatcher("d", lambda m: None, concurrency_limit=1, clock=lambda: clock[0])
    collector = Collector(breaker, registry)
    collector.add(queue)
    collector.add(dispatcher)
    collector.add(breaker)  # once only
    exposed = families_of(collector)
    expected = set()
    for source in (breaker, registry, queue, dispatcher):
        expected |= samples(source.prometheus())
    got = {(s.name, tuple(sorted(s.labels.items())), s.value) for f in exposed.values() for s in f.samples}
    assert got == expected
    # Every family once, with the exposition's help and type.
    texts = [s.prometheus() for s in (breaker, registry, queue)]
    for text in texts:
        for family in text_string_to_metric_families(text):
            assert (exposed[family.name].type, exposed[family.name].documentation) == (family.type, family.documentation)
    assert ("circuit_upstream_error_ratio", (("name", "one"),), 0.5) in got
    assert any(name == "circuit_latency_seconds" for name, _, _ in got)
    collector.remove(registry)
    assert "circuit_registry_breakers" not in families_of(collector)


def test_the_registry_gauges_are_summed_over_registries() -> None:
    first, second = halfopen.Registry(), halfopen.Registry()
    first.get("a").call(len, "x")
    for name in ("b", "c"):
        second.get(name).call(len, "x")
    exposed = families_of(Collector(first, second))
    assert [s.value for s in exposed["circuit_registry_breakers"].samples] == [3.0]
    assert [s.value for s in exposed["circuit_registry_evictions"].samples] == [0.0]


def test_register_keeps_one_collector_per_prometheus_registry() -> None:
    scrape = CollectorRegistry()
    a, b = halfopen.CircuitBreaker("a"), halfopen.CircuitBreaker("b")
    first = halfopen.prometheus.register(a, registry=scrape)
    assert halfopen.prometheus.register(b, registry=scrape) is first
    names = {s.labels.get("name") for f in text_string_to_metric_families(generate_latest(scrape).decode()) for s in f.samples}
    assert names == {"a", "b"}
    # Two collectors in one prometheus_client registry: its own refusal.
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        scrape.register(Collector(halfopen.CircuitBreaker("c")))


def test_a_name_in_two_sources_is_refused_at_the_scrape_and_a_keyed_breaker_is_not_a_source() -> None:
    registry = halfopen.Registry()
    registry.get("same").call(len, "x")
    collector = Collector(registry, halfopen.CircuitBreaker("same"))
    with pytest.raises(ValueError, match='two breakers are named "same"'):
        list(collector.collect())
    with pytest.raises(TypeError, match="add the registry"):
        Collector(registry.get("same"))  # type: ignore[arg-type]


def test_a_full_registry_of_10000_names_collects_the_values_of_its_text() -> None:
    registry = halfopen.Registry(capacity=10_000, failure_threshold=3, clock=lambda: 7.0)
    for i in range(10_000):
        registry.get(f"instance-{i}").call(len, "x")
        if i % 7 == 0:
            with pytest.raises(ZeroDivisionError):
                registry.get(f"instance-{i}").call(lambda: 1 / 0)
    collector = Collector(registry)
    started = time.perf_counter()
    collected = list(collector.collect())
    elapsed = time.perf_counter() - started
    got = {(s.name, tuple(sorted(s.labels.items())), s.value) for f in collected for s in f.samples}
    assert got == samples(registry.prometheus())
    assert len(got) == sum(len(f.samples) for f in collected) > 150_000
    print(f"collect() of 10,000 breakers: {elapsed * 1000:.0f} ms")  # reported, not asserted
