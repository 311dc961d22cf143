"""cardcage.platforms: the SRT platform contract and the lazy ``current_platform``.

``from cardcage.platforms import current_platform`` resolves the platform on first access (see
``cardcage.platforms.current``); prefer ``get_current_platform()`` in library code so a test can
swap the platform with ``cardcage.platforms.testing``. Importing this package imports nothing
else: no torch, no entry-point scan, until something is used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .current import get_current_platform, get_selection_record
    from .device_mixin import CpuArchEnum, DeviceCapability, DeviceMixin, PlatformEnum
    from .effect import in_effect
    from .interface import KVPoolKind, PlatformCapabilities, SRTPlatform

__version__ = "0.1.0"

_EXPORTS = {
    "get_current_platform": "current",
    "get_selection_record": "current",
    "CpuArchEnum": "device_mixin",
    "DeviceCapability": "device_mixin",
    "DeviceMixin": "device_mixin",
    "PlatformEnum": "device_mixin",
    "KVPoolKind": "interface",
    "PlatformCapabilities": "interface",
    "SRTPlatform": "interface",
    "in_effect": "effect",
}

__all__ = [
    "CpuArchEnum",
    "DeviceCapability",
    "DeviceMixin",
    "KVPoolKind",
    "PlatformCapabilities",
    "PlatformEnum",
    "SRTPlatform",
    "current_platform",
    "get_current_platform",
    "get_selection_record",
    "in_effect",
]


def __getattr__(name: str) -> object:
    if name == "current_platform":
        return importlib.import_module(f"{__name__}.current").get_current_platform()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
