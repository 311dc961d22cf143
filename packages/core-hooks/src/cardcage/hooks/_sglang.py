"""Handing a hook to SGLang 0.5.23's registry when SGLang's loader runs a cardcage-built plugin.

Only reached from ``BaseHookRegistry.register`` while SGLang's ``load_plugins()`` is inside a
plugin's callback, so SGLang is already imported: this module resolves SGLang's registry and hook
type from ``sys.modules``-backed imports and never makes a process that is not hosted by SGLang
import it. SGLang records the plugin as the hook's source from its own context variable and
applies the hook at its own apply time, with its own wrappers and failure policy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .host import SGLANG_HOOK_REGISTRY_MODULE
from .log import get_logger

__all__ = ["register_in_sglang"]

logger = get_logger(__name__)


def _resolve(qualname: str) -> Any:
    module_name, _, attr = qualname.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def register_in_sglang(
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
    hook_type = importlib.import_module(SGLANG_HOOK_REGISTRY_MODULE).HookType[hook_type_name]
    registry.register(target, hook, hook_type, source=source)
    logger.debug(
        "Handed %s hook on %s to SGLang's %s for %s",
        hook_type_name,
        target,
        registry_qualname,
        source,
    )
