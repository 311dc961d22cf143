"""Test helpers: install a diffusion platform of your choice, or forget the resolved one.

``set_current_platform`` makes every later ``current_platform`` access return your object;
``reset_current_platform`` forgets the selection and the backend-init state, so the next access
resolves again (for example after changing ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.hooks.once import Once

from . import current as _current
from .probes import DEFAULT_PROBES, DiffusionProbes

if TYPE_CHECKING:
    from cardcage.platforms.selection import SelectionRecord

    from .interface import Platform

__all__ = ["reset_current_platform", "set_current_platform", "use_probes"]


def set_current_platform(platform: Platform, record: SelectionRecord | None = None) -> None:
    with _current._state.lock:
        _current._state.platform = platform
        _current._state.record = record
        _current._state.error = None


def reset_current_platform() -> None:
    with _current._state.lock:
        _current._state.platform = None
        _current._state.record = None
        _current._state.error = None
        _current._state.probes = DEFAULT_PROBES
        _current._state.backend = Once("Diffusion platform backend initialization")


def use_probes(probes: DiffusionProbes) -> None:
    """Resolve the next selection with these hardware probes (reset first if resolved)."""
    with _current._state.lock:
        _current._state.probes = probes
