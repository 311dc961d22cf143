"""Builders for real platform and plugin distributions used by the tests."""

from __future__ import annotations

from pathlib import Path

from cardcage.hooks.testing import write_distribution

PLATFORMS = "sglang.multimodal_gen.platforms"
PLUGINS = "sglang.multimodal_gen.plugins"


def oot_platform_source(module: str, *, activate: str = "", enum: str = "OOT") -> str:
    body = activate or f"return {module + ':VendorPlatform'!r}"
    return f"""
from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum

class VendorPlatform(Platform):
    _enum = PlatformEnum.{enum}
    device_name = "vendor"
    device_type = "vendor"
    dispatch_key = "PrivateUse1"

def activate():
    {body}
"""


def platform_dist(
    site: Path,
    dist: str,
    name: str,
    module: str,
    *,
    activate: str = "",
    plugin: str | None = None,
    plugin_source: str = "def register():\n    pass\n",
) -> None:
    """A distribution providing platform entry point ``name`` (and, optionally, a plugin)."""
    entry_points = {PLATFORMS: {name: f"{module}:activate"}}
    modules = {module: oot_platform_source(module, activate=activate)}
    if plugin is not None:
        entry_points[PLUGINS] = {plugin: f"{module}_plugin:register"}
        modules[f"{module}_plugin"] = plugin_source
    write_distribution(site, dist, entry_points=entry_points, modules=modules)
