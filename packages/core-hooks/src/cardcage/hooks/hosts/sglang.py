"""SGLang's room in core-hooks: its loaders' plugin source, and handing hooks to its registry.

SGLang's diffusion loader sets its plugin-source context variable (``_current_plugin_source`` in
``sglang.srt.plugins.hook_registry``) around both a plugin's import and its callback; its SRT
loader sets it only around ``register()`` and imports general plugins earlier, in
``load_plugins_by_group``. A hook registered at import time there (the seed's ``@plugin_hook`` at
module level) is recognised by that function's frame on the stack and attributed to the entry
point it is loading.

Only imported once ``sglang.srt.plugins.hook_registry`` is in ``sys.modules`` (see
``cardcage.hooks.hosts``), so SGLang is already imported when anything here runs: this module
never makes a process that SGLang does not host import it. SGLang applies a handed-over hook at
its own apply time, with its own wrappers and failure policy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cardcage.hooks.log import get_logger

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["HOOK_REGISTRY_MODULE", "plugin_source", "register"]

logger = get_logger(__name__)

#: The module that holds SGLang's hook registry and its plugin-source context variable.
HOOK_REGISTRY_MODULE = "sglang.srt.plugins.hook_registry"
SRT_PLUGINS_MODULE = "sglang.srt.plugins"
SRT_GENERAL_GROUP = "sglang.srt.plugins"


def plugin_source() -> Any | None:
    """The ``HookSource`` of the plugin SGLang's loader is running now, or None."""
    module = sys.modules.get(HOOK_REGISTRY_MODULE)
    if module is None:
        return None
    variable = getattr(module, "_current_plugin_source", None)
    source = variable.get() if variable is not None else None
    if source is not None:
        return source
    return _srt_import_source(module)


def _srt_import_source(hook_registry_module: Any) -> Any | None:
    plugins = sys.modules.get(SRT_PLUGINS_MODULE)
    loader = getattr(plugins, "load_plugins_by_group", None)
    code = getattr(loader, "__code__", None)
    if code is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            scope = frame.f_locals
            entry_point = scope.get("ep")
            if scope.get("group") != SRT_GENERAL_GROUP or entry_point is None:
                return None
            dist = getattr(entry_point, "dist", None)
            return hook_registry_module.HookSource(
                plugin_name=entry_point.name, dist_name=dist.name if dist else None
            )
        frame = frame.f_back
    return None


def _resolve(qualname: str) -> Any:
    module_name, _, attr = qualname.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def register(
    registry_qualname: str,
    target: str,
    hook: Callable[..., Any],
    hook_type_name: str,
    source: Any,
) -> None:
    """Register ``hook`` on ``target`` in SGLang's registry ``registry_qualname``.

    ``target`` is in dotted form (SGLang resolves nothing else); ``hook_type_name`` is the
    member name shared by both ``HookType`` enums (BEFORE, AFTER, AROUND, REPLACE); ``source``
    is SGLang's ``HookSource`` of the plugin, passed on explicitly so an import-time registration
    is attributed too.
    """
    registry = _resolve(registry_qualname)
    hook_type = importlib.import_module(HOOK_REGISTRY_MODULE).HookType[hook_type_name]
    registry.register(target, hook, hook_type, source=source)
    from cardcage.hooks.effect import record_handoff

    record_handoff("sglang", registry_qualname, target, hook, hook_type_name, source)
    logger.debug(
        "Handed %s hook on %s to SGLang's %s for %s",
        hook_type_name,
        target,
        registry_qualname,
        source,
    )
