"""Protect a flaky HTTP endpoint with the halfopen WebAssembly component,
from Python through wasmtime: no binding, only the component's WIT
interface (bindings-wasm/component/wit/breaker.wit). Any component host
(Go, .NET, Rust, JavaScript through jco) does the same calls.

    python protect.py http://127.0.0.1:8000/   (after `make component-build`)
"""

import pathlib
import sys
import time
import urllib.request

from wasmtime import Engine, Store
from wasmtime.component import Component, Linker, ResourceAny

COMPONENT = pathlib.Path(__file__).resolve().parents[2] / "bindings-wasm" / "component" / "dist" / "halfopen.wasm"


def load(path=COMPONENT):
    """The component's functions, called by name."""
    engine = Engine()
    store = Store(engine)
    instance = Linker(engine).instantiate(store, Component.from_file(engine, str(path)))  # it imports nothing
    interface = instance.get_export_index(store, "halfopen:breaker/breaker@0.3.0")

    def call(name, *args):
        f = instance.get_func(store, instance.get_export_index(store, name, interface))
        result = f(store, *args)
        f.post_return(store)
        return result

    return call


def protect(url, calls, clock=lambda: time.monotonic_ns() // 1000, pause=lambda: time.sleep(0.5), log=print):
    """Calls `url` `calls` times behind a seed-001 breaker; returns (sent, refused)."""
    h = load()
    breaker = h("[static]breaker.create", h("partner-webhook"), False)  # 5 failures in a row: open 10 s
    show = lambda t: t and log(f"{t.at / 1e6:8.1f} s  {t.__dict__['from']} -> {t.to} ({t.reason})")  # noqa: E731
    sent = refused = 0
    for _ in range(calls):
        admission = h("[method]breaker.try-acquire", breaker, clock())
        show(admission.transition)
        if not isinstance(admission.decision, ResourceAny):
            refused += 1
        else:
            sent += 1
            # Reported exactly once, however the call ends: wasmtime-py never
            # drops a permit the host forgets (it lives until the resource is
            # dropped explicitly), so one left unreported would hold its
            # probe or limit slot for good.
            outcome = "cancelled"  # interrupted (KeyboardInterrupt, ...): counts nothing
            try:
                urllib.request.urlopen(url, timeout=10).read()
                outcome = "success"
            except Exception:  # noqa: BLE001 - any way the call fails: OSError, http.client.IncompleteRead, ...
                outcome = "failure"
            finally:
                show(h("[method]breaker.record", breaker, admission.decision, outcome, clock()))
        pause()
    return sent, refused


if __name__ == "__main__":
    sent, refused = protect(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60)
    print(f"sent {sent}, refused while open {refused}")
