"""The registry's value types: what a hook is (``HookType``), who registered it (``HookSource``)
and one registration (``HookRecord``), with the few helpers that describe them in messages.

They live apart from ``registry`` so that the modules ``registry`` uses (the wrappers, the
patching steps, the plugin host) can name them without importing ``registry`` back: no import
cycles inside core-hooks. ``cardcage.hooks.registry`` re-exports the public ones; that is where
users import them from.

It also holds cardcage's plugin-source context variable, which ``registry.plugin_source()`` sets
around each plugin's import and callback and ``cardcage.hooks.host`` reads: the registry needs
nothing of ``host`` (its enum, its rehearsals), so a process whose plugins never ask which host
runs them does not import it.

Import cost: stdlib ``contextvars``, ``enum`` and ``typing`` only.
"""

from __future__ import annotations

import contextvars
import enum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["HookRecord", "HookSource", "HookType", "describe", "format_source", "origin", "sources"]


class HookType(enum.Enum):
    """How a hook combines with the original callable."""

    BEFORE = "before"  # fn(*args, **kwargs) -> (args, kwargs) | None
    AFTER = "after"  # fn(result, *args, **kwargs) -> new_result | None
    AROUND = "around"  # fn(original_fn, *args, **kwargs) -> result
    REPLACE = "replace"  # fn(*args, **kwargs) -> result, or a class


class HookSource(NamedTuple):
    """Which plugin registered a hook: its entry-point name and distribution (a named tuple)."""

    plugin_name: str
    dist_name: str | None = None


class HookRecord(NamedTuple):
    """One registration: ``(hook_type, hook, source)``, in registration order (a named tuple)."""

    hook_type: HookType
    hook: Callable[..., Any]
    source: HookSource | None


# None outside a plugin's import and callback; a HookSource inside.
_current_plugin_source: contextvars.ContextVar[HookSource | None] = contextvars.ContextVar(
    "cardcage_current_plugin_source", default=None
)


def format_source(source: HookSource | None) -> str:
    """``unknown``, ``plugin=<p>`` or ``plugin=<p>, dist=<d>``, as in every log line."""
    if source is None:
        return "unknown"
    if source.dist_name:
        return f"plugin={source.plugin_name}, dist={source.dist_name}"
    return f"plugin={source.plugin_name}"


def describe(hook: object) -> str:
    """A hook's name for messages: its qualified name, or its repr when it has none."""
    return getattr(hook, "__qualname__", None) or repr(hook)


def origin(source: HookSource | None) -> dict[str, str | None]:
    """The plugin/distribution fields of a HookError for a hook's source."""
    if source is None:
        return {"plugin": None, "distribution": None}
    return {"plugin": source.plugin_name, "distribution": source.dist_name}


def sources(records: Iterable[HookRecord]) -> str:
    """Every distinct source of ``records``, sorted, for a log line or an error message."""
    return ", ".join(sorted({format_source(r.source) for r in records}))
