"""What the metrics integrations (``prometheus``, ``opentelemetry``) read:
the native object behind each source they accept."""

from __future__ import annotations

from typing import Any, Tuple, Union

from ._native import NativeBreaker, NativeRegistry, NativeRetentionQueue
from .retention import Dispatcher

_Native = Union[NativeBreaker, NativeRegistry, NativeRetentionQueue]
Source = Union[NativeBreaker, NativeRegistry, NativeRetentionQueue, "Dispatcher[Any]"]


def _native_of(source: object) -> _Native:
    if isinstance(source, Dispatcher):
        return source.queue
    if isinstance(source, (NativeBreaker, NativeRegistry, NativeRetentionQueue)):
        return source
    hint = " (a registry's breaker: add the registry)" if hasattr(source, "registry") else ""
    raise TypeError(
        f"source must be a CircuitBreaker, a Registry, a RetentionQueue or a Dispatcher, got {type(source).__name__}{hint}"
    )


def _with(sources: Tuple[_Native, ...], source: object) -> Tuple[_Native, ...]:
    """``sources`` and the native of ``source``, once."""
    native = _native_of(source)
    return sources if any(s is native for s in sources) else sources + (native,)


def _without(sources: Tuple[_Native, ...], source: object) -> Tuple[_Native, ...]:
    """``sources`` but the native of ``source``."""
    native = _native_of(source)
    return tuple(s for s in sources if s is not native)
