"""What the metrics integrations (``prometheus``, ``opentelemetry``) read:
the native object behind each source they accept."""

from __future__ import annotations

from typing import Any, Union

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
