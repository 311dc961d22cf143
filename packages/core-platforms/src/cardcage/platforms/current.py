"""The process-wide SRT ``current_platform``: resolved on first access, once, behind a lock.

The rules (waiting threads, the re-entrancy guard, sticky failure, fork) live in
``cardcage.platforms.lazy``; this module binds them to the SRT selection policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import LazyPlatform
from .probes import DEFAULT_PROBES
from .srt import srt_policy

if TYPE_CHECKING:
    from .interface import SRTPlatform
    from .selection import SelectionRecord

__all__ = ["get_current_platform", "get_selection_record"]

_state = LazyPlatform("SRT", srt_policy, DEFAULT_PROBES)


def get_current_platform() -> SRTPlatform:
    """The SRT platform of this process (resolved on first call)."""
    platform: SRTPlatform = _state.get()
    return platform


def get_selection_record() -> SelectionRecord | None:
    """Why the current platform was chosen; None until ``current_platform`` is first resolved."""
    return _state.record
