"""The process-wide diffusion ``current_platform`` and its once-per-process backend init.

Mirrors ``cardcage.platforms.current``: the first access runs the selection engine with the
diffusion policy behind a lock; other threads wait; the resolving thread may not ask again
(``PlatformReentrancyError``); a failed selection is sticky. ``initialize_current_platform()``
runs the platform's ``init_backend()`` at most once per process, and a failure is sticky too:
retrying arbitrary backend side effects could duplicate registrations.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING

from cardcage.hooks.errors import PhaseFailedError
from cardcage.hooks.once import Once
from cardcage.platforms.selection import SelectionRecord, activating_plugin, select_platform

from .policy import diffusion_policy
from .probes import DEFAULT_PROBES, DiffusionProbes

if TYPE_CHECKING:
    from .interface import Platform

__all__ = [
    "get_current_platform",
    "get_selected_platform_dist",
    "get_selection_record",
    "initialize_current_platform",
]


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.platform: Platform | None = None
        self.record: SelectionRecord | None = None
        self.error: BaseException | None = None
        self.resolving_thread: int | None = None
        self.probes: DiffusionProbes = DEFAULT_PROBES
        self.backend = Once("Diffusion platform backend initialization")


_state = _State()


def get_current_platform() -> Platform:
    """The diffusion platform of this process (resolved on first call)."""
    platform = _state.platform
    if platform is not None:
        return platform
    me = threading.get_ident()
    if _state.resolving_thread == me:
        ep = activating_plugin()
        who = (
            f"platform plugin {ep.name!r} ({ep.dist_name})"
            if ep is not None
            else "code running during platform selection"
        )
        from cardcage.platforms.errors import PlatformReentrancyError

        raise PlatformReentrancyError(
            f"The diffusion current_platform was accessed while it is being resolved, from {who}. "
            "activate() and the platform's constructor must not touch current_platform: keep "
            "activate() import-safe and move device set-up to init_backend()",
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        )
    with _state.lock:
        if _state.platform is not None:
            return _state.platform
        if _state.error is not None:
            raise PhaseFailedError("Diffusion platform selection", _state.error) from _state.error
        _state.resolving_thread = me
        try:
            selected, record = select_platform(diffusion_policy(_state.probes))
        except Exception as exc:
            _state.error = exc
            raise
        finally:
            _state.resolving_thread = None
        frames = traceback.StackSummary.extract(
            traceback.walk_stack(sys._getframe(1)), lookup_lines=False
        )
        frames.reverse()
        record._set_first_access_frames(frames)
        _state.record = record
        _state.platform = selected
        return selected  # type: ignore[no-any-return]


def get_selection_record() -> SelectionRecord | None:
    """Why the current platform was chosen; None until it is first resolved."""
    return _state.record


def get_selected_platform_dist() -> str | None:
    """The distribution that supplied the selected platform; None for a built-in.

    Resolves ``current_platform`` if it is not resolved yet.
    """
    get_current_platform()
    record = _state.record
    return record.dist_name if record is not None else None


def initialize_current_platform() -> None:
    """Run the current platform's ``init_backend()`` at most once per process.

    Only worker entry points call it. A failure (selection included) is sticky: later calls raise
    ``PhaseFailedError`` chained to the original error. A re-entrant call from inside
    ``init_backend()`` returns at once.
    """
    _state.backend.run(lambda: get_current_platform().init_backend())


def _reinit_after_fork() -> None:
    _state.lock = threading.Lock()
    _state.resolving_thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
