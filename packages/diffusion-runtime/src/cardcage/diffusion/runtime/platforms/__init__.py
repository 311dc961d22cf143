"""cardcage.diffusion.runtime.platforms: the diffusion platform contract and ``current_platform``.

``from cardcage.diffusion.runtime.platforms import current_platform`` resolves the platform on
first access; library code should prefer ``get_current_platform()`` so tests can swap it with
``.testing``. Importing this package imports nothing else (no torch, no entry-point scan), so an
out-of-tree package can ``from cardcage.diffusion.runtime.platforms import Platform`` safely.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .current import (
        get_current_platform,
        get_selected_platform_dist,
        get_selection_record,
        initialize_current_platform,
    )
    from .interface import (
        AttentionBackendEnum,
        CpuArchEnum,
        DeviceCapability,
        Platform,
        PlatformEnum,
        UnspecifiedPlatform,
    )
    from .policy import BUILTIN_PLATFORM_NAMES

PLATFORM_PLUGINS_GROUP = "sglang.multimodal_gen.platforms"

_EXPORTS = {
    "get_current_platform": "current",
    "get_selected_platform_dist": "current",
    "get_selection_record": "current",
    "initialize_current_platform": "current",
    "AttentionBackendEnum": "interface",
    "CpuArchEnum": "interface",
    "DeviceCapability": "interface",
    "Platform": "interface",
    "PlatformEnum": "interface",
    "UnspecifiedPlatform": "interface",
    "BUILTIN_PLATFORM_NAMES": "policy",
}

__all__ = [
    "BUILTIN_PLATFORM_NAMES",
    "PLATFORM_PLUGINS_GROUP",
    "AttentionBackendEnum",
    "CpuArchEnum",
    "DeviceCapability",
    "Platform",
    "PlatformEnum",
    "UnspecifiedPlatform",
    "current_platform",
    "get_current_platform",
    "get_selected_platform_dist",
    "get_selection_record",
    "initialize_current_platform",
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
