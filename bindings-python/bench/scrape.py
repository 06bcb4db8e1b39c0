"""What a Prometheus scrape of a full default Registry (10,000 names) costs
through halfopen.prometheus.Collector, beside the text exposition:
best and median of 7 runs (3 for generate_latest), in ms.

    .venv/bin/python bindings-python/bench/scrape.py   (make bench runs it)
"""

import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

import halfopen
from halfopen.prometheus import Collector


def timed(f, runs=7):
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        took.append((time.perf_counter() - start) * 1000)
    return f"best {min(took):.1f} ms, median {statistics.median(took):.1f} ms"


registry = halfopen.Registry(capacity=10_000)
for i in range(10_000):
    registry.get(f"instance-{i}").call(len, "x")
collector = Collector(registry)
scraped = CollectorRegistry()
scraped.register(collector)
print(f"10,000 names, {sum(len(m.samples) for m in collector.collect())} samples")
print(f"prometheus() text: {timed(registry.prometheus)}")
print(f"Collector.collect(): {timed(lambda: list(collector.collect()))}")
print(f"generate_latest (prometheus_client formatting included): {timed(lambda: generate_latest(scraped), 3)}")
