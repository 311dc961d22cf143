"""Diffusion general plugins in two once-per-process phases, on a registry of their own.

``load_plugins()`` registers: it imports the ``sglang.multimodal_gen.plugins`` entry points that
pass ``SGLANG_PLUGINS`` and the platform exclusion, and runs their callbacks. It never resolves a
hook target (resolving one imports its module, which would let discovery import the runtime).
``apply_plugin_hooks()`` implies registration, then applies the registry; a re-entrant call from
a plugin callback returns, and the outer call applies the complete registry. Both phases are
``cardcage.hooks.loader``'s, with ``DIFFUSION_PROFILE`` and the diffusion ``HookRegistry``; the
failure policy is the loader's: the selected platform's distribution is fatal, others are logged.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from cardcage.hooks import loader as _loader
from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage.hooks.registry import BaseHookRegistry, HookSource, HookType
from cardcage.hooks.registry import plugin_hook as _plugin_hook

if TYPE_CHECKING:
    from collections.abc import Callable

    from cardcage.hooks.loader import PluginLoadReport

__all__ = [
    "GENERAL_PLUGINS_GROUP",
    "HookRegistry",
    "HookSource",
    "HookType",
    "apply_plugin_hooks",
    "load_plugins",
    "plugin_hook",
]

GENERAL_PLUGINS_GROUP = DIFFUSION_PROFILE.plugin_group

_F = TypeVar("_F", bound="Callable[..., Any]")


class HookRegistry(BaseHookRegistry):
    """The diffusion hook registry: its hooks never land in (or run from) SRT's registry."""

    # Under SGLang's diffusion loader, hooks go to SGLang's diffusion registry (DESIGN §8).
    host_registries = MappingProxyType(
        {"sglang": "sglang.multimodal_gen.runtime.platforms.plugins:HookRegistry"}
    )


def plugin_hook(
    target: str,
    type: HookType = HookType.AFTER,  # noqa: A002 - the seed's public keyword
) -> Callable[[_F], _F]:
    """Register the decorated function (or class, with REPLACE) on the diffusion registry."""
    return _plugin_hook(target, type, registry=HookRegistry)


def load_plugins() -> PluginLoadReport:
    """Phase 1, once per process: import diffusion plugins and run their callbacks."""
    return _loader.register_plugins(DIFFUSION_PROFILE, HookRegistry)


def apply_plugin_hooks() -> PluginLoadReport:
    """Phase 2, once per process (implies phase 1): apply the diffusion hooks."""
    return _loader.load_plugins(DIFFUSION_PROFILE, HookRegistry)


def _reset_for_tests() -> None:
    """Forget both phases (the registry itself is left as it is)."""
    _loader.reset_plugin_state(DIFFUSION_PROFILE, HookRegistry)
