"""A runtime's lazily selected platform: resolved on first access, once, behind a lock.

Every runtime (SRT in ``cardcage.platforms.current``; each other runtime in the accessor module
its ``cardcage.runtimes`` registration names) keeps one ``LazyPlatform``, built from its own
selection policy, so the rules are written once:

* the first access runs the selection engine; every later access returns the same object;
* another thread that asks while selection runs waits for it;
* the thread that runs selection may not ask again (a plugin's ``activate()`` or platform
  constructor touching ``current_platform``): that raises ``PlatformReentrancyError`` naming the
  plugin, instead of recursing or activating twice;
* a failed selection is sticky (``PhaseFailedError`` chained to the original), like every
  once-per-process phase; ``KeyboardInterrupt`` and friends are not a verdict on the platform;
* after ``fork`` the child gets a fresh lock and keeps the parent's platform.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import weakref
from typing import TYPE_CHECKING, Any

from .selection import SelectionRecord, activating_plugin, select_platform

if TYPE_CHECKING:
    from collections.abc import Callable

    from .selection import SelectionPolicy

__all__ = ["LazyPlatform"]

_instances: weakref.WeakSet[LazyPlatform] = weakref.WeakSet()


class LazyPlatform:
    """The selection state of one runtime; ``get()`` resolves it on first use."""

    def __init__(
        self, label: str, policy_factory: Callable[[Any], SelectionPolicy], default_probes: Any
    ) -> None:
        self.label = label  # "SRT", "Diffusion": names the phase in errors
        self.policy_factory = policy_factory
        self.default_probes = default_probes
        self.lock = threading.Lock()
        self.platform: Any = None
        self.record: SelectionRecord | None = None
        self.error: BaseException | None = None
        self.resolving_thread: int | None = None
        self.probes: Any = default_probes
        _instances.add(self)

    def get(self) -> Any:
        """The platform; the first call selects it. Call it from the runtime's accessor only:
        the first-access stack starts at that accessor's caller."""
        platform = self.platform
        if platform is not None:
            return platform
        me = threading.get_ident()
        if self.resolving_thread == me:
            raise self._reentrancy_error()
        with self.lock:
            if self.platform is not None:
                return self.platform
            if self.error is not None:
                from cardcage.hooks.errors import PhaseFailedError  # a failed selection only

                raise PhaseFailedError(f"{self.label} platform selection", self.error) from (
                    self.error
                )
            self.resolving_thread = me
            try:
                selected, record = select_platform(self.policy_factory(self.probes))
            except Exception as exc:
                self.error = exc
                raise
            finally:
                self.resolving_thread = None
            # The accessor's caller's frames, outermost first; their source lines are read only
            # if someone looks at the record (reading them costs milliseconds).
            frames = traceback.StackSummary.extract(
                traceback.walk_stack(sys._getframe(2)), lookup_lines=False
            )
            frames.reverse()
            record._set_first_access_frames(frames)
            self.record = record
            self.platform = selected
            return selected

    def _reentrancy_error(self) -> Exception:
        from .errors import PlatformReentrancyError  # an error path: imported when needed

        ep = activating_plugin()
        who = (
            f"platform plugin {ep.name!r} ({ep.dist_name})"
            if ep is not None
            else "code running during platform selection"
        )
        return PlatformReentrancyError(
            f"The {self.label} current_platform was accessed while the platform is being "
            f"resolved, from {who}. activate() and the platform's constructor must not touch "
            "current_platform: keep activate() import-safe and move device set-up to "
            "init_backend()",
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        )

    def _after_fork_in_child(self) -> None:
        self.lock = threading.Lock()
        self.resolving_thread = None


def _reinit_after_fork() -> None:
    for lazy in list(_instances):
        lazy._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
