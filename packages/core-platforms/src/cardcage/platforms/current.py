"""The process-wide ``current_platform``: resolved on first access, once, behind a lock.

Rules: the first access runs the selection engine; every later access returns the same object.
Another thread that asks while selection runs waits for it. The thread that runs selection may
not ask again (a plugin's ``activate()`` or platform constructor touching ``current_platform``):
that raises ``PlatformReentrancyError`` naming the plugin, instead of recursing or activating
twice. A failed selection is sticky, like every once-per-process phase. After ``fork`` the child
gets a fresh lock and keeps the parent's platform.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING

from cardcage.hooks.errors import PhaseFailedError

from .probes import DEFAULT_PROBES, HardwareProbes
from .selection import SelectionRecord, activating_plugin, select_platform
from .srt import srt_policy

if TYPE_CHECKING:
    from .interface import SRTPlatform

__all__ = ["get_current_platform", "get_selection_record"]


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.platform: SRTPlatform | None = None
        self.record: SelectionRecord | None = None
        self.error: BaseException | None = None
        self.resolving_thread: int | None = None
        self.probes: HardwareProbes = DEFAULT_PROBES


_state = _State()


def get_current_platform() -> SRTPlatform:
    """The SRT platform of this process (resolved on first call)."""
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
        from .errors import PlatformReentrancyError  # an error path: imported when needed

        raise PlatformReentrancyError(
            f"current_platform was accessed while the platform is being resolved, from {who}. "
            "activate() and the platform's constructor must not touch current_platform: keep "
            "activate() import-safe and move device set-up to init_backend()",
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        )
    with _state.lock:
        if _state.platform is not None:
            return _state.platform
        if _state.error is not None:
            raise PhaseFailedError("SRT platform selection", _state.error) from _state.error
        _state.resolving_thread = me
        try:
            selected, record = select_platform(srt_policy(_state.probes))
        except Exception as exc:  # KeyboardInterrupt & co. are not a verdict on the platform
            _state.error = exc
            raise
        finally:
            _state.resolving_thread = None
        # The caller's frames, outermost first, as format_stack() would list them; their source
        # lines are read only if someone looks at the record (reading them costs milliseconds).
        frames = traceback.StackSummary.extract(
            traceback.walk_stack(sys._getframe(1)), lookup_lines=False
        )
        frames.reverse()
        record._set_first_access_frames(frames)
        _state.record = record
        _state.platform = selected
        return selected  # type: ignore[no-any-return]


def get_selection_record() -> SelectionRecord | None:
    """Why the current platform was chosen; None until ``current_platform`` is first resolved."""
    return _state.record


def _reinit_after_fork() -> None:
    _state.lock = threading.Lock()
    _state.resolving_thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
