"""A ``prometheus_client`` collector for breakers, registries, retention
queues and dispatchers, giving the same families and values as their
``prometheus()`` text (seed 000's names: ``circuit_state``,
``circuit_failures_total``, ``circuit_opens_total``, ...).

One collector serves any number of sources (a ``prometheus_client``
registry takes one collector per family name, so a second ``Collector`` in
the same registry is refused with ``DuplicateTimeseries``)::

    collector = Collector(breaker, registry)
    REGISTRY.register(collector)
    collector.add(another_breaker)

or, from anywhere, ``halfopen.prometheus.register(breaker)``, which adds to
the one collector it keeps in that registry.

Decisions: the families are built from the sources' native readings, no
text is written or parsed (a scrape of 10,000 breakers costs tens of
milliseconds, not seconds). A breaker name must be unique across the
sources (two would make one series twice: the scrape raises
``ValueError``). ``circuit_registry_breakers`` and
``circuit_registry_evictions_total`` are summed over the registries
collected. ``circuit_upstream_error_ratio`` is a ratio from 0 to 1
(``metrics()["error_rate"]`` is the same figure as a percentage).
"""

from __future__ import annotations

import threading
import weakref
from typing import Iterator, Tuple

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import REGISTRY, CollectorRegistry
from prometheus_client.registry import Collector as _Collector
from prometheus_client.samples import Sample

from . import _native
from ._native import NativeRegistry, NativeRetentionQueue
from ._sources import Source, _Native, _with, _without

__all__ = ["Collector", "register"]


class Collector(_Collector):
    """Collects the metrics of every source it was given on each scrape."""

    def __init__(self, *sources: Source) -> None:
        self._sources: Tuple[_Native, ...] = ()
        self._lock = threading.Lock()
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> None:
        """Collects ``source`` too (once, however often it is added)."""
        with self._lock:
            self._sources = _with(self._sources, source)

    def remove(self, source: Source) -> None:
        """Stops collecting ``source``."""
        with self._lock:
            self._sources = _without(self._sources, source)

    def collect(self) -> Iterator[Metric]:
        for name, kind, documentation, samples in _native._collect(list(self._sources), Sample):
            metric = _family(name, kind, documentation)
            metric.samples = samples
            yield metric

    def describe(self) -> Iterator[Metric]:
        """Every family it may give (so that a ``prometheus_client``
        registry checks names without collecting)."""
        for name, kind, documentation, _ in _native._collect([_EMPTY_REGISTRY, _EMPTY_QUEUE], Sample):
            yield _family(name, kind, documentation)


def _family(name: str, kind: str, documentation: str) -> Metric:
    # prometheus_client names a counter family without its samples' `_total`.
    if kind == "counter" and name.endswith("_total"):
        name = name[: -len("_total")]
    return Metric(name, documentation, kind)


_EMPTY_REGISTRY = NativeRegistry(capacity=1)
_EMPTY_QUEUE = NativeRetentionQueue("halfopen.prometheus", concurrency_limit=1)

_registered: "weakref.WeakKeyDictionary[CollectorRegistry, Collector]" = weakref.WeakKeyDictionary()
_registering = threading.Lock()


def register(*sources: Source, registry: CollectorRegistry = REGISTRY) -> Collector:
    """Adds ``sources`` to the collector this module keeps in ``registry``
    (``prometheus_client``'s default one unless told), registering it there
    the first time; returns it."""
    with _registering:
        collector = _registered.get(registry)
        if collector is None:
            collector = _registered[registry] = Collector()
            registry.register(collector)
    for source in sources:
        collector.add(source)
    return collector
