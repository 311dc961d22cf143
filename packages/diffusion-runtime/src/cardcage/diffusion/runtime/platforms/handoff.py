"""Hands the resolved diffusion selection to cardcage.hooks' general-plugin loader.

``DIFFUSION_PROFILE`` names ``diffusion_platform_choice`` as its ``selection_provider``: the loader
learns which distribution supplied the selected platform (automatic mode too), to exclude other
platform distributions' general plugins and to make the selected one's failures fatal.
"""

from __future__ import annotations

from cardcage.hooks.loader import PlatformChoice

from .current import get_current_platform, get_selection_record

__all__ = ["diffusion_platform_choice"]


def diffusion_platform_choice() -> PlatformChoice:
    """Resolve the diffusion ``current_platform`` (if not yet) and describe it for the loader."""
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
