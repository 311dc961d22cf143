"""Test helpers: install a platform of your choice, or forget the resolved one.

``set_current_platform`` makes every later ``current_platform`` access return your object (a
real platform or a stand-in), so tests can exercise platform-dependent code on any machine.
``reset_current_platform`` forgets the selection, so the next access resolves again (for
example after changing ``SGLANG_PLATFORM`` with ``monkeypatch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import current as _current
from .probes import DEFAULT_PROBES, HardwareProbes

if TYPE_CHECKING:
    from .interface import SRTPlatform
    from .selection import SelectionRecord

__all__ = ["reset_current_platform", "set_current_platform", "use_probes"]


def set_current_platform(platform: SRTPlatform, record: SelectionRecord | None = None) -> None:
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


def use_probes(probes: HardwareProbes) -> None:
    """Resolve the next selection with these hardware probes (reset first if already resolved)."""
    with _current._state.lock:
        _current._state.probes = probes
