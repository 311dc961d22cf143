"""How often, how long: per-target call statistics for a vendor's AROUND hooks.

The first hooks a vendor writes are observability: how often does the runtime consult my
platform, how long does a rescan take, what did the host ask my device. ``CallStats`` is the
one thread-safe place those counts live, and ``CallStats.timed`` is the AROUND hook's body::

    STATS = CallStats()

    def time_platform_access(original, *args, **kwargs):
        return STATS.timed(PLATFORM_ACCESS, original, *args, **kwargs)

``STATS.get(PLATFORM_ACCESS)`` then reads the calls, the errors and their wall-clock time. A call
that raises is counted as an error and the exception goes on unchanged. ``STATS.hook(target)``
builds that AROUND hook for a plugin that needs nothing more (``then=`` sees each result, to log
it), as demo-cuda's general plugin does.

Import-safe and cheap on the hot path: stdlib only; one lock and two clock reads per call.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["CallStats", "TargetStats"]


class TargetStats(NamedTuple):
    """Calls seen on one target: how many, how many raised, and their wall-clock time."""

    calls: int = 0
    errors: int = 0
    total_s: float = 0.0
    max_s: float = 0.0


class CallStats:
    """Thread-safe per-target counters, filled by hooks and read by anyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_target: dict[str, TargetStats] = {}

    def timed(self, target: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``original(*args, **kwargs)``, record it under ``target``, return its result."""
        start = time.perf_counter()
        failed = True
        try:
            result = original(*args, **kwargs)
            failed = False
            return result
        finally:
            self.record(target, time.perf_counter() - start, failed=failed)

    def hook(self, target: str, *, then: Callable[..., None] | None = None) -> Callable[..., Any]:
        """An AROUND hook that times each call into ``target``'s statistics.

        ``then(result, *args, **kwargs)``, when given, runs after each call that returned (to
        log what the hooked function answered); its own return value is ignored.
        """

        def timed(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            result = self.timed(target, original, *args, **kwargs)
            if then is not None:
                then(result, *args, **kwargs)
            return result

        timed.__qualname__ = f"CallStats.hook({target!r})"
        return timed

    def record(self, target: str, elapsed_s: float, *, failed: bool) -> None:
        """Count one call of ``target`` that took ``elapsed_s`` seconds (and raised if failed)."""
        with self._lock:
            old = self._by_target.get(target, TargetStats())
            self._by_target[target] = TargetStats(
                calls=old.calls + 1,
                errors=old.errors + int(failed),
                total_s=old.total_s + elapsed_s,
                max_s=max(old.max_s, elapsed_s),
            )

    def get(self, target: str) -> TargetStats:
        """The statistics of ``target`` (zeros when it was never called)."""
        with self._lock:
            return self._by_target.get(target, TargetStats())

    def as_dict(self) -> dict[str, TargetStats]:
        """Every target that was called, with its statistics."""
        with self._lock:
            return dict(self._by_target)

    def reset(self) -> None:
        """Forget every count (tests; a new run in a long-lived process)."""
        with self._lock:
            self._by_target.clear()
