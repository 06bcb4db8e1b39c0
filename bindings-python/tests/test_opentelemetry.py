"""The OpenTelemetry instruments, read by the SDK's InMemoryMetricReader:
every instrument of the core's table with its kind, unit and description,
the values of the Prometheus text, hostile names whole, several registries
summed, a failing source reported without losing the others, and nothing
observed after close()."""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum
from prometheus_client.parser import text_string_to_metric_families

import halfopen
from halfopen.opentelemetry import INSTRUMENTS, NAME_ATTRIBUTE, observe
from test_prometheus import busy_sources


def sdk() -> "tuple[Any, InMemoryMetricReader]":
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]).get_meter("test"), reader


def collected(reader: InMemoryMetricReader) -> Dict[str, Any]:
    data = reader.get_metrics_data()
    if data is None:
        return {}
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def point(metric: Any, attributes: Dict[str, str]) -> Optional[float]:
    found = [p.value for p in metric.data.data_points if dict(p.attributes) == attributes]
    assert len(found) <= 1
    return found[0] if found else None


def test_every_instrument_with_the_values_of_the_prometheus_text() -> None:
    clock = [0.0]
    breaker, registry, queue = busy_sources(clock)
    meter, reader = sdk()
    observe(breaker, registry, queue, meter=meter)
    metrics = collected(reader)
    rows = {row.name: row for row in INSTRUMENTS}
    for row in INSTRUMENTS:
        if row.sample.startswith("circuit_group_"):
            continue  # a grouped breaker's (test_group.py's sources)
        metric = metrics[row.name]
        assert (metric.unit, metric.description) == (row.unit, row.description)
        if row.kind == "gauge":
            assert isinstance(metric.data, Gauge)
        else:
            assert isinstance(metric.data, Sum) and metric.data.is_monotonic == (row.kind == "counter")
    # Each series of each source's text has the same value.
    checked = 0
    for source in (breaker, registry, queue):
        for family in text_string_to_metric_families(source.prometheus()):
            for sample in family.samples:
                labels = dict(sample.labels)
                name = labels.pop("name", None)
                label, value = next(iter(labels.items()), (None, None))
                row = next(r for r in INSTRUMENTS if r.sample == sample.name and r.label == label)
                if name is None:
                    continue  # a registry's own: one source here, the sum is the next test's
                attributes = {NAME_ATTRIBUTE: name}
                if row.attribute is not None:
                    attributes[row.attribute] = value
                assert point(metrics[row.name], attributes) == pytest.approx(sample.value, rel=1e-12), (row.name, attributes)
                checked += 1
    assert checked > 60
    assert point(metrics["circuit.upstream.error_ratio"], {NAME_ATTRIBUTE: "one"}) == 0.5
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: 'quote"and\\backslash'}) == 0
    assert point(metrics["circuit.time_in_state"], {NAME_ATTRIBUTE: "new\nline", "circuit.state": "closed"}) is not None
    assert rows["circuit.retention.size"].unit == "By"


def test_several_registries_summed_and_sources_added_once() -> None:
    one, two = halfopen.Registry(), halfopen.Registry()
    for registry, name in [(one, "x"), (two, "y"), (two, "z")]:
        registry.get(name).call(len, "x")
    meter, reader = sdk()
    handle = observe(one, meter=meter)
    handle.add(two)
    handle.add(two)
    metrics = collected(reader)
    assert point(metrics["circuit.registry.breakers"], {}) == 3
    assert len(metrics["circuit.state"].data.data_points) == 3
    handle.remove(one)
    assert point(collected(reader)["circuit.registry.breakers"], {}) == 2


def test_each_collection_reads_the_sources_anew() -> None:
    breaker = halfopen.CircuitBreaker("b", failure_threshold=1)
    meter, reader = sdk()
    observe(breaker, meter=meter)
    assert point(collected(reader)["circuit.state"], {NAME_ATTRIBUTE: "b"}) == 0
    with pytest.raises(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)
    metrics = collected(reader)
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: "b"}) == 2
    assert point(metrics["circuit.failures"], {NAME_ATTRIBUTE: "b"}) == 1


def test_a_failing_source_is_reported_and_the_others_still_observed(caplog: pytest.LogCaptureFixture) -> None:
    good = halfopen.CircuitBreaker("good")
    bad: halfopen.Dispatcher[str] = halfopen.Dispatcher("bad", lambda m: None, concurrency_limit=1)
    meter, reader = sdk()
    handle = observe(good, bad, meter=meter)
    # A reading that fails (as the native _collect does when it runs out of memory).
    import halfopen.opentelemetry as module

    real = module._native._collect

    def failing(sources: Any, sample: Any) -> Any:
        if any(s is bad.queue for s in sources):
            raise MemoryError("no room for the figures")
        return real(sources, sample)

    module._native._collect = failing  # type: ignore[attr-defined]
    try:
        with caplog.at_level(logging.ERROR):
            metrics = collected(reader)
    finally:
        module._native._collect = real  # type: ignore[attr-defined]
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: "good"}) == 0
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: "bad"}) is None
    failures = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], MemoryError)]
    assert len(failures) == 1, caplog.records
    # Where the program reads it (the SDK only logs).
    assert [type(e) for e in handle.errors] == [MemoryError]
    collected(reader)
    assert handle.errors == ()


def test_close_stops_observing_and_bad_sources_are_type_errors() -> None:
    breaker = halfopen.CircuitBreaker("c")
    meter, reader = sdk()
    handle = observe(breaker, meter=meter)
    assert point(collected(reader)["circuit.state"], {NAME_ATTRIBUTE: "c"}) == 0
    handle.close()
    handle.close()
    breaker.force_open()
    state = collected(reader).get("circuit.state")
    assert state is None or point(state, {NAME_ATTRIBUTE: "c"}) != 2
    with pytest.raises(RuntimeError, match="closed"):
        handle.add(breaker)
    # observe() on the meter opens its handle again.
    assert observe(breaker, meter=meter) is handle
    assert point(collected(reader)["circuit.state"], {NAME_ATTRIBUTE: "c"}) == 2
    for bad in [None, 1, "name", object()]:
        with pytest.raises(TypeError):
            observe(bad, meter=meter)  # type: ignore[arg-type]
    registry = halfopen.Registry()
    with pytest.raises(TypeError, match="add the registry"):
        observe(registry.get("k"), meter=meter)  # type: ignore[arg-type]


def test_one_handle_per_meter() -> None:
    # The SDK gives an instrument made twice on one meter its first callbacks
    # only: a second observe() there must add to the first.
    meter, reader = sdk()
    one = observe(halfopen.CircuitBreaker("one"), meter=meter)
    two = observe(halfopen.CircuitBreaker("two"), meter=meter)
    assert one is two
    names = sorted(p.attributes[NAME_ATTRIBUTE] for p in collected(reader)["circuit.state"].data.data_points)
    assert names == ["one", "two"]


def test_a_name_in_two_sources_is_the_first_ones_and_raised(caplog: pytest.LogCaptureFixture) -> None:
    first, second = halfopen.CircuitBreaker("api"), halfopen.CircuitBreaker("api", failure_threshold=1)
    with pytest.raises(ZeroDivisionError):
        second.call(lambda: 1 / 0)
    meter, reader = sdk()
    handle = observe(first, second, halfopen.CircuitBreaker("other"), meter=meter)
    with caplog.at_level(logging.ERROR):
        metrics = collected(reader)
    assert point(metrics["circuit.failures"], {NAME_ATTRIBUTE: "api"}) == 0
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: "api"}) == 0
    assert point(metrics["circuit.state"], {NAME_ATTRIBUTE: "other"}) == 0
    raised = [r.exc_info[1] for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], ValueError)]
    assert len(raised) == 1 and "api" in str(raised[0])
    assert [str(e) for e in handle.errors] == [str(raised[0])]


def test_the_global_meter_provider_by_default() -> None:
    from opentelemetry import metrics

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(provider)
    observe(halfopen.CircuitBreaker("global"))
    data = reader.get_metrics_data()
    assert data is not None
    scopes = {sm.scope.name: sm for rm in data.resource_metrics for sm in rm.scope_metrics}
    assert any(m.name == "circuit.state" for m in scopes["halfopen"].metrics)
