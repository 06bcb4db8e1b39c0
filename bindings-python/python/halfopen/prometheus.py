"""A ``prometheus_client`` collector for a breaker or a registry, giving the
same families and values as their ``prometheus()`` text (seed 000's names:
``circuit_state``, ``circuit_failures_total``, ``circuit_opens_total``, ...).

>>> from prometheus_client import REGISTRY
>>> REGISTRY.register(Collector(registry))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Iterator, Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector as _Collector


class _Exposes(Protocol):
    def prometheus(self) -> str: ...


class Collector(_Collector):
    """Collects a ``CircuitBreaker``'s or a ``Registry``'s metrics on each
    scrape: the text the core renders, read back by ``prometheus_client``'s
    own parser, so that both expositions carry the same values."""

    def __init__(self, source: _Exposes) -> None:
        if not callable(getattr(source, "prometheus", None)):
            raise TypeError(f"source must be a CircuitBreaker or a Registry, got {type(source).__name__}")
        self._source = source

    def collect(self) -> Iterator[Metric]:
        yield from text_string_to_metric_families(self._source.prometheus())
