"""Which runtime is hosting the plugin code that runs now: cardcage's, or SGLang 0.5.23's.

A vendor distribution built on cardcage is a plugin for two hosts at once (DESIGN §8): cardcage's
own runtimes, and SGLang 0.5.23, whose selection and loader call the same entry points. The two
hosts announce themselves differently, and this module reads both signals without importing
anything: cardcage's loader sets its plugin-source context variable around each plugin's import
and ``register()``; SGLang's ``load_plugins()`` sets its own (``_current_plugin_source`` in
``sglang.srt.plugins.hook_registry``). The SGLang side is only looked at when that module is
already in ``sys.modules``: a process that never imported SGLang never pays for it.

Import-safe and stdlib-only, like the rest of core-hooks.
"""

from __future__ import annotations

import contextvars
import enum
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType

    from ._model import HookSource

__all__ = ["SGLANG_HOOK_REGISTRY_MODULE", "Host", "plugin_host", "sglang_plugin_source"]

#: The module that holds SGLang's hook registry and its plugin-source context variable.
SGLANG_HOOK_REGISTRY_MODULE = "sglang.srt.plugins.hook_registry"
SGLANG_SRT_PLUGINS_MODULE = "sglang.srt.plugins"
SGLANG_SRT_GENERAL_GROUP = "sglang.srt.plugins"


# cardcage's side of the signal: set by ``registry.plugin_source()`` around each plugin's import
# and callback. It lives here, not in ``registry``, so that this module needs no other.
_current_plugin_source: contextvars.ContextVar[HookSource | None] = contextvars.ContextVar(
    "cardcage_current_plugin_source", default=None
)


class Host(enum.Enum):
    """The runtime whose loader or selection is calling plugin code."""

    CARDCAGE = "cardcage"
    SGLANG = "sglang"


def sglang_plugin_source() -> Any | None:
    """The ``HookSource`` of the plugin SGLang's loader is running now, or None.

    SGLang's diffusion loader sets its context variable around both a plugin's import and its
    callback; its SRT loader sets it only around ``register()``, and imports general plugins
    earlier, in ``load_plugins_by_group``. A hook registered at import time there (the seed's
    ``@plugin_hook`` at module level) is recognised by that function's frame on the stack and
    attributed to the entry point it is loading. None when SGLang is not imported or none of its
    loaders is running a plugin.
    """
    module = sys.modules.get(SGLANG_HOOK_REGISTRY_MODULE)
    if module is None:
        return None
    variable = getattr(module, "_current_plugin_source", None)
    source = variable.get() if variable is not None else None
    if source is not None:
        return source
    return _sglang_srt_import_source(module)


def _sglang_srt_import_source(hook_registry_module: Any) -> Any | None:
    plugins = sys.modules.get(SGLANG_SRT_PLUGINS_MODULE)
    loader = getattr(plugins, "load_plugins_by_group", None)
    code = getattr(loader, "__code__", None)
    if code is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            scope = frame.f_locals
            entry_point = scope.get("ep")
            if scope.get("group") != SGLANG_SRT_GENERAL_GROUP or entry_point is None:
                return None
            dist = getattr(entry_point, "dist", None)
            return hook_registry_module.HookSource(
                plugin_name=entry_point.name, dist_name=dist.name if dist else None
            )
        frame = frame.f_back
    return None


def plugin_host() -> Host | None:
    """Which host's general-plugin loader is running the current plugin callback.

    ``Host.CARDCAGE`` inside cardcage's loader (``load_plugins``, ``register_plugins``),
    ``Host.SGLANG`` inside SGLang's (SRT ``load_plugins()`` or the diffusion one), None when no
    loader is running a plugin (a test or a runtime registering hooks directly). A plugin's
    ``register()`` uses it to pick the targets of the host that runs it; ``HookRegistry.register``
    uses it to hand hooks to SGLang's registry when SGLang is the host.
    """
    if _current_plugin_source.get() is not None:
        return Host.CARDCAGE
    if sglang_plugin_source() is not None:
        return Host.SGLANG
    return None
