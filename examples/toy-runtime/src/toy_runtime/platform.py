"""The toy runtime's platforms and its selection policy (cardcage's engine does the selecting).

The toy ships one built-in platform, ``cpu``, which always matches; a vendor adds another with an
entry point in the ``toy_runtime.platforms`` group whose ``activate()`` returns the qualname of a
``ToyPlatform`` subclass. ``TOY_PLATFORM`` picks one by name, as ``SGLANG_PLATFORM`` does for SRT.
"""

from __future__ import annotations

from typing import Any

from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.selection import BuiltinPlatform, SelectionPolicy

from .runtime import TOY_PROFILE

__all__ = ["ToyCpuPlatform", "ToyPlatform", "toy_policy"]


class ToyPlatform(SRTPlatform):
    """The base every toy platform derives from (the policy checks it)."""


class ToyCpuPlatform(ToyPlatform):
    """The built-in platform: plain Python on the host CPU."""

    _enum = PlatformEnum.CPU
    device_name = "cpu"
    device_type = "cpu"


def _always() -> bool:
    return True


def toy_policy(probes: Any = None) -> SelectionPolicy:
    """The toy runtime's selection policy (``probes`` is unused: the CPU needs no probing)."""
    del probes
    return SelectionPolicy(
        profile=TOY_PROFILE,
        base_class=ToyPlatform,
        builtins=(
            BuiltinPlatform(
                "cpu", "toy_runtime.platform:ToyCpuPlatform", _always, requirement="nothing"
            ),
        ),
        default_qualname=None,
        allowlist_filters_automatic=True,
    )
