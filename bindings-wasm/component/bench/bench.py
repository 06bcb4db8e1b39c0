"""Per-call cost of the component through wasmtime-py, beside the pyo3
extension (`halfopen` on PyPI) doing the same acquire + record cycle, in
one run. Medians of 7 rounds.
    .venv/bin/python bindings-wasm/component/bench/bench.py   (after `make component-build`)"""

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import halfopen  # noqa: E402
from component import Halfopen  # noqa: E402

N = 20_000
ROUNDS = 7


def median(f) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        f()
        times.append((time.perf_counter_ns() - start) / N)
    return sorted(times)[ROUNDS // 2]


def component_closed() -> None:
    h = Halfopen()
    b = h("[static]breaker.create", h("whatsapp-gateway"), False)
    acquire, record = h.func("[method]breaker.try-acquire"), h.func("[method]breaker.record")
    store = h.store

    def run() -> None:
        for i in range(N):
            admission = acquire(store, b, i)
            acquire.post_return(store)
            record(store, b, admission.decision, "success", i)
            record.post_return(store)

    return run


def extension_closed():
    clock = [0.0]
    b = halfopen.CircuitBreaker("bench", clock=lambda: clock[0])

    def run() -> None:
        for _ in range(N):
            clock[0] += 0.001
            b.record(b.try_acquire(), "success")

    return run


print("| through | acquire + record, closed (µs) |\n|---|---:|")
for name, run in [("component, wasmtime-py 50.0.1", component_closed()), ("pyo3 extension", extension_closed())]:
    print(f"| {name} | {median(run) / 1000:.2f} |")
