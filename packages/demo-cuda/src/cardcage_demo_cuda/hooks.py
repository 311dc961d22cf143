"""The general plugin of cardcage-demo-cuda: observability hooks on cardcage itself.

``register()`` is the ``sglang.srt.plugins`` entry point. The loader calls it only when this
distribution supplied the selected platform (a general plugin of a platform distribution is part
of that platform's contract), then applies the hooks. It adds two AROUND hooks that time and count
calls, kept in ``STATS``:

* ``cardcage.platforms.current.get_current_platform``: how often the runtime consults the
  platform (every ``current_platform`` access goes through it), at no cost beyond two clock reads;
* ``cardcage.hooks.snapshot.refresh``: every entry-point rescan, a start-up cost worth seeing,
  also logged at INFO with its duration.

Only what the platform interface cannot do belongs here: device set-up goes in
``init_backend()``, argument defaults in ``apply_server_args_defaults()``.

Import-safe: registering imports nothing; targets are resolved when the hooks are applied.
Nothing happens at import time (``cardcage doctor`` imports this module to check it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cardcage.hooks.registry import HookRegistry, HookType

__all__ = ["PLATFORM_ACCESS", "RESCAN", "STATS", "CallStats", "TargetStats", "register"]

logger = logging.getLogger(__name__)

PLATFORM_ACCESS = "cardcage.platforms.current.get_current_platform"
RESCAN = "cardcage.hooks.snapshot.refresh"


@dataclass(frozen=True)
class TargetStats:
    """Calls seen on one target: how many, how many raised, and their wall-clock time."""

    calls: int = 0
    errors: int = 0
    total_s: float = 0.0
    max_s: float = 0.0


class CallStats:
    """Thread-safe per-target counters, filled by the hooks and read by anyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_target: dict[str, TargetStats] = {}

    def record(self, target: str, elapsed_s: float, *, failed: bool) -> None:
        with self._lock:
            old = self._by_target.get(target, TargetStats())
            self._by_target[target] = TargetStats(
                calls=old.calls + 1,
                errors=old.errors + int(failed),
                total_s=old.total_s + elapsed_s,
                max_s=max(old.max_s, elapsed_s),
            )

    def get(self, target: str) -> TargetStats:
        with self._lock:
            return self._by_target.get(target, TargetStats())

    def as_dict(self) -> dict[str, TargetStats]:
        with self._lock:
            return dict(self._by_target)

    def reset(self) -> None:
        with self._lock:
            self._by_target.clear()


#: The counters of this process. ``STATS.get(PLATFORM_ACCESS).calls`` and so on.
STATS = CallStats()


def _timed(target: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    failed = True
    try:
        result = original(*args, **kwargs)
        failed = False
        return result
    finally:
        STATS.record(target, time.perf_counter() - start, failed=failed)


def time_platform_access(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``get_current_platform``: count and time; no logging on this hot path."""
    return _timed(PLATFORM_ACCESS, original, *args, **kwargs)


def time_rescan(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``refresh``: count, time and log each entry-point rescan."""
    start = time.perf_counter()
    result = _timed(RESCAN, original, *args, **kwargs)
    logger.info("entry-point rescan took %.1f ms", (time.perf_counter() - start) * 1e3)
    return result


_HOOKS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (PLATFORM_ACCESS, time_platform_access),
    (RESCAN, time_rescan),
)


def register() -> None:
    """Register the hooks (idempotent: a second call adds nothing)."""
    registered = HookRegistry.registrations()
    for target, hook in _HOOKS:
        if any(record.hook is hook for record in registered.get(target, ())):
            continue
        HookRegistry.register(target, hook, HookType.AROUND)
    logger.debug("registered %d observability hooks", len(_HOOKS))
