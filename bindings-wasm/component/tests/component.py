"""The component (dist/halfopen.wasm, built by `make component-build`)
loaded in wasmtime from Python, with its interface's functions by name:
``h("[method]breaker.try-acquire", breaker, now)``. Records are wasmtime's
``Record`` objects, whose fields keep their WIT names (``failure-threshold``);
``record()`` builds one."""

from __future__ import annotations

import pathlib
from typing import Any, Dict

from wasmtime import Engine, Store
from wasmtime.component import Component, Func, Linker, Record

COMPONENT = pathlib.Path(__file__).resolve().parents[1] / "dist" / "halfopen.wasm"
INTERFACE = "halfopen:breaker/breaker@0.3.0"


class Halfopen:
    """One instance of the component in its own store."""

    def __init__(self, path: pathlib.Path = COMPONENT) -> None:
        engine = Engine()
        self.store = Store(engine)
        # No imports to provide: an empty linker instantiates it.
        self.instance = Linker(engine).instantiate(self.store, Component.from_file(engine, str(path)))
        self.interface = self.instance.get_export_index(self.store, INTERFACE)
        assert self.interface is not None, f"the component does not export {INTERFACE}"
        self.funcs: Dict[str, Func] = {}

    def func(self, name: str) -> Func:
        if name not in self.funcs:
            index = self.instance.get_export_index(self.store, name, self.interface)
            if index is None:
                raise AttributeError(f"the component has no function {name}")
            self.funcs[name] = self.instance.get_func(self.store, index)
        return self.funcs[name]

    def __call__(self, name: str, *args: Any) -> Any:
        f = self.func(name)
        result = f(self.store, *args)
        f.post_return(self.store)
        return result


def record(**fields: Any) -> Record:
    """A WIT record from keyword arguments (``_`` becomes ``-``)."""
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def field(r: Record, name: str) -> Any:
    """A field of a WIT record by its Python name (``_`` for ``-``)."""
    return getattr(r, name.replace("_", "-"))
