"""Fixtures of the diffusion tests, which need torch and the diffusion runtime.

A diffusion test module imports this first: where torch or the runtime is missing (the plain
``tests-demo-cpu`` session has neither) the import skips the module with the reason. Every
diffusion test then starts with no platform resolved, no plugin phase run, an empty diffusion
hook registry and the custom-op registry as it was, and leaves them that way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

# Importing this module skips the importing test module, with the reason, where either is absent.
pytest.importorskip("torch", reason="the diffusion half needs torch (the diffusion extra)")
pytest.importorskip(
    "cardcage.diffusion.runtime.layers.custom_op",
    reason="needs cardcage-diffusion-runtime (pip install 'cardcage-demo-cpu[diffusion]')",
)

from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.platforms.plugins import (
    HookRegistry,
    _reset_for_tests,
)
from cardcage.diffusion.runtime.platforms.testing import reset_current_platform
from cardcage.hooks.snapshot import PluginEntryPoint, entry_point_snapshot
from cardcage_demo_cpu.diffusion import ENTRY_POINT_NAME

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["clean_diffusion", "installed_entry_point"]

PLATFORMS = "sglang.multimodal_gen.platforms"


def installed_entry_point(group: str = PLATFORMS) -> PluginEntryPoint:
    """demo_cpu's entry point in ``group``, from the installed distribution's metadata."""
    (ep,) = [ep for ep in entry_point_snapshot().group(group) if ep.name == ENTRY_POINT_NAME]
    return ep


def _reset() -> None:
    reset_current_platform()
    _reset_for_tests()


@pytest.fixture(autouse=True)
def clean_diffusion() -> Iterator[None]:
    registry = dict(CustomOp._oot_forward_registry)
    _reset()
    with HookRegistry.sandbox():
        yield
    _reset()
    CustomOp._oot_forward_registry.clear()
    CustomOp._oot_forward_registry.update(registry)
