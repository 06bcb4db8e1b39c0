"""OpenTelemetry observable instruments for breakers, registries, retention
queues and dispatchers (``opentelemetry-api``; ``pip install
halfopen[opentelemetry]``)::

    from halfopen.opentelemetry import observe
    handle = observe(breaker, registry, meter=metrics.get_meter("app"))

The instruments (names, kinds, units, descriptions, attributes) are the
core's table, the same in every runtime: ``circuit.state``,
``circuit.failures`` (``{call}``), ``circuit.time_in_state`` (``s``, with
``circuit.state``), ... each with the breaker's name as ``circuit.name``.
The values are those of the Prometheus collector (the same native
readings, the same rounding).

Decisions: one handle per meter (the SDK gives an instrument made twice
on a meter its first callbacks only): a second ``observe()`` on the same
meter adds to the first's handle and returns it, also after ``close()``.
The sources are read once per collection (the first instrument the SDK
asks reads them; an instrument asking again starts the next reading). A
registry's own series (breakers held, evictions) have no attributes and are
summed over the registries. A source that fails to give its figures does
not stop the others: their values are observed, and the failure is raised
from a callback of its own on ``circuit.state`` (the SDK logs a failed
callback with its traceback, and keeps what the other callbacks observed),
and kept in the handle's ``errors`` for the program to act on.
A breaker name in two sources (OpenTelemetry keeps one value per instrument
and attribute set) is the first source's, and raised the same way.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import namedtuple
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

try:
    from opentelemetry import metrics
    from opentelemetry.metrics import (
        CallbackOptions,
        Meter,
        Observation,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
    )
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        f"halfopen.opentelemetry needs opentelemetry-api: pip install halfopen[opentelemetry] ({error})"
    ) from error

from . import _native
from ._sources import Source, _Native, _native_of, _with, _without

__all__ = ["INSTRUMENTS", "NAME_ATTRIBUTE", "BreakerMetrics", "Instrument", "observe"]

NAME_ATTRIBUTE = "circuit.name"
"""The attribute that holds the breaker's (or dispatcher's) name."""


@dataclass(frozen=True)
class Instrument:
    """One instrument of the core's table."""

    name: str
    kind: str
    """``gauge``, ``counter`` or ``updowncounter``."""
    unit: str
    description: str
    sample: str
    """The Prometheus sample it reports (``circuit_failures_total``)."""
    label: Optional[str]
    """The Prometheus label beside ``name``, or None."""
    attribute: Optional[str]
    """The attribute that label becomes, or None."""


INSTRUMENTS: Tuple[Instrument, ...] = tuple(Instrument(**row) for row in json.loads(_native._opentelemetry_instruments()))
"""Every instrument, in the order of the Prometheus exposition."""

# What `_native._collect` makes each sample as (any named tuple whose first
# fields are name, labels, value).
_Sample = namedtuple("_Sample", "name labels value")
_BY_SERIES = {(row.sample, row.label): row for row in INSTRUMENTS}
# The sample every breaker has: a source's names are its samples' of it.
_STATE_SAMPLE = INSTRUMENTS[0].sample

_Point = Tuple[float, Dict[str, str]]
_Observable = Union[ObservableGauge, ObservableCounter, ObservableUpDownCounter]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("halfopen")
    except PackageNotFoundError:
        return "0.0.0"


class BreakerMetrics:
    """The instruments made by :func:`observe`, observing its sources."""

    def __init__(self, meter: Meter) -> None:
        self._sources: Tuple[_Native, ...] = ()
        self._lock = threading.Lock()
        self._closed = False
        self._points: Dict[str, List[_Point]] = {}
        self._asked: Set[str] = set()
        self._failures: List[BaseException] = []
        self._errors: Tuple[BaseException, ...] = ()
        create: Dict[str, Callable[..., _Observable]] = {
            "gauge": meter.create_observable_gauge,
            "counter": meter.create_observable_counter,
            "updowncounter": meter.create_observable_up_down_counter,
        }
        self.instruments: Dict[str, _Observable] = {}
        """The instruments made, by name."""
        for i, row in enumerate(INSTRUMENTS):
            callbacks = [self._callback(row.name)]
            if i == 0:
                callbacks.append(self._report)
            make = create[row.kind]
            self.instruments[row.name] = make(row.name, callbacks=callbacks, unit=row.unit, description=row.description)

    def add(self, source: Source) -> None:
        """Observes ``source`` too (once, however often it is added). After
        :meth:`close`, a ``RuntimeError``: :func:`observe` opens it again."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this handle is closed: observe() opens it again")
            self._sources = _with(self._sources, source)

    def remove(self, source: Source) -> None:
        """Stops observing ``source``."""
        with self._lock:
            self._sources = _without(self._sources, source)

    def close(self) -> None:
        """Stops observing every source (the instruments stay, with no value)."""
        with self._lock:
            self._closed = True
            self._sources = ()

    @property
    def errors(self) -> Tuple[BaseException, ...]:
        """What went wrong in the latest collection: a source whose reading
        failed, a breaker name in two sources (empty when all went well).
        The SDK only logs a failed callback; this is where a program reads
        it."""
        with self._lock:
            return self._errors

    def _reopen(self) -> None:
        with self._lock:
            self._closed = False

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, attributes) for value, attributes in self._take(name)]

        return observe

    def _take(self, name: str) -> List[_Point]:
        with self._lock:
            if self._closed:
                return []
            if name in self._asked or not self._asked:
                self._read()
            self._asked.add(name)
            return self._points.get(name, [])

    def _read(self) -> None:
        """Reads every source (the lock held): the next collection's points."""
        points: Dict[str, List[_Point]] = {}
        unlabelled: Dict[str, float] = {}
        failures: List[BaseException] = []
        owners: Set[str] = set()
        for source in self._sources:
            try:
                families = _native._collect([source], _Sample)
            except Exception as error:  # noqa: BLE001 - raised from _report
                failures.append(error)
                continue
            names = {s.labels["name"] for _, _, _, samples in families for s in samples if s.name == _STATE_SAMPLE}
            taken = names & owners
            owners |= names
            if taken:
                failures.append(ValueError(f"breaker names in two sources (their series are the first's): {sorted(taken)}"))
            for _, _, _, samples in families:
                for sample in samples:
                    labels = sample.labels
                    breaker = labels.get("name")
                    if breaker in taken:
                        continue
                    label, value = None, None
                    if len(labels) > 1:
                        label, value = next((k, v) for k, v in labels.items() if k != "name")
                    row = _BY_SERIES.get((sample.name, label))
                    if row is None:
                        continue
                    if breaker is None:
                        unlabelled[row.name] = unlabelled.get(row.name, 0.0) + sample.value
                        continue
                    attributes = {NAME_ATTRIBUTE: breaker}
                    if row.attribute is not None and value is not None:
                        attributes[row.attribute] = value
                    points.setdefault(row.name, []).append((sample.value, attributes))
        for name, total in unlabelled.items():
            points.setdefault(name, []).append((total, {}))
        self._points, self._asked = points, set()
        self._failures = failures
        self._errors = tuple(failures)

    def _report(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            failed, self._failures = self._failures, []
        if len(failed) == 1:
            raise failed[0]
        if failed:
            causes = "; ".join(repr(f) for f in failed)
            raise RuntimeError(f"halfopen: {len(failed)} sources failed to give their metrics: {causes}") from failed[0]
        return []


_handles: "weakref.WeakKeyDictionary[Meter, BreakerMetrics]" = weakref.WeakKeyDictionary()
_observing = threading.Lock()


def observe(*sources: Source, meter: Optional[Meter] = None) -> BreakerMetrics:
    """Observes ``sources`` (breakers, registries, retention queues,
    dispatchers) with OpenTelemetry instruments on ``meter`` (default:
    ``metrics.get_meter("halfopen", version)`` of the global meter
    provider). Returns the meter's handle (one per meter), to add, remove or
    close."""
    natives = [_native_of(source) for source in sources]
    meter = meter if meter is not None else metrics.get_meter("halfopen", _version())
    with _observing:
        handle = _handles.get(meter)
        if handle is None:
            handle = _handles[meter] = BreakerMetrics(meter)
        handle._reopen()
    for native in natives:
        handle.add(native)
    return handle
