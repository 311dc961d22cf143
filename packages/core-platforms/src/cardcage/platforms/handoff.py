"""Hands the resolved SRT selection to cardcage.hooks' general-plugin loader.

``cardcage.hooks`` must know which distribution supplied the selected platform, in automatic
mode too, to exclude other platform distributions' general plugins and to make the selected
one's failures fatal. It never imports this package at module scope: the SRT runtime profile
names this function as its ``selection_provider``, resolved lazily when core-platforms is
installed.
"""

from __future__ import annotations

from cardcage.hooks.loader import PlatformChoice

from .current import get_current_platform, get_selection_record

__all__ = ["srt_platform_choice"]


def srt_platform_choice() -> PlatformChoice:
    """Resolve ``current_platform`` (if not yet) and describe it for the loader."""
    get_current_platform()
    record = get_selection_record()
    if record is None:  # installed by testing.set_current_platform without a record
        return PlatformChoice(None, None, reason="the platform set by the test harness")
    reason = (
        f"{record.selector_env}={record.selector}"
        if record.mode == "explicit"
        else "automatic platform selection"
    )
    return PlatformChoice(record.plugin_name, record.dist_name, reason=reason)
