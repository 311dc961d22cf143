"""vLLM's room in core-hooks: the plugin its loader runs; applying hooks, as vLLM has no registry.

vLLM's general-plugin loader (``vllm.plugins``) imports every entry point of
``vllm.general_plugins`` in ``load_plugins_by_group`` and then calls each ``register()`` from
``load_general_plugins``. It sets no plugin-source variable and has no hook registry or apply
step, so this room does both jobs itself:

* ``plugin_source()`` recognises either loader frame on the stack and names the entry point it
  is running (the ``plugin`` being imported, or the ``func`` being called, looked up in the
  loader's dict), with its distribution, as cardcage's own ``HookSource``;
* ``KEEPS_HOOKS``: a hook registered from inside vLLM's loader stays in the cardcage registry it
  was registered with, attributed to that source, and ``adopt()`` applies it at once in deferred
  mode: a target whose module is imported is patched now (stale ``from x import f`` copies
  rebound), any other is patched when its module is first imported. The plugin calls no apply
  function; every process that runs vLLM's loader (the API server, the engine core, each
  spawned worker) patches its own copy;
* ``run_plugin()``: cardcage's failure policy for a ``register()`` decorated with
  ``cardcage.hooks.host.general_plugin``. vLLM does not catch a raising ``register()``: start-up
  aborts and every later plugin is skipped. Under the decorator a third-party plugin's failure is
  logged with its traceback and its hooks are withdrawn, and the plugins after it run; a failure
  of a plugin whose distribution supplied the platform vLLM selected is raised as
  ``PluginLoadError`` (vLLM aborts, naming the plugin, its distribution and the fix). A hook of
  that distribution that cannot be applied raises the same way; any other is logged.

Only imported once ``vllm.plugins`` is in ``sys.modules`` (``cardcage.hooks.hosts``); nothing
here imports vLLM.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cardcage.hooks._model import HookSource, format_source
from cardcage.hooks.errors import PluginLoadError
from cardcage.hooks.log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from cardcage.hooks.registry import ApplyReport, BaseHookRegistry

__all__ = [
    "GENERAL_GROUP",
    "KEEPS_HOOKS",
    "PLATFORM_GROUP",
    "PLUGINS_MODULE",
    "adopt",
    "plugin_source",
    "run_plugin",
    "selected_distributions",
]

logger = get_logger(__name__)

PLUGINS_MODULE = "vllm.plugins"
PLATFORMS_MODULE = "vllm.platforms"
GENERAL_GROUP = "vllm.general_plugins"
PLATFORM_GROUP = "vllm.platform_plugins"
#: vLLM has no hook registry: cardcage keeps a hook registered under its loader and applies it.
KEEPS_HOOKS = True

# The packages whose classes make up a platform but never supply one.
_HOST_PACKAGES = frozenset({"vllm", "cardcage", "builtins"})


def plugin_source() -> HookSource | None:
    """The general plugin vLLM's loader is importing or running now, or None."""
    plugins = sys.modules.get(PLUGINS_MODULE)
    importer = getattr(getattr(plugins, "load_plugins_by_group", None), "__code__", None)
    runner = getattr(getattr(plugins, "load_general_plugins", None), "__code__", None)
    if importer is None and runner is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code is importer:
            scope = frame.f_locals
            entry_point = scope.get("plugin")
            if scope.get("group") != GENERAL_GROUP or entry_point is None:
                return None
            dist = getattr(entry_point, "dist", None)
            return HookSource(entry_point.name, dist.name if dist is not None else None)
        if code is runner:
            scope = frame.f_locals
            func, loaded = scope.get("func"), scope.get("plugins")
            if func is None or not isinstance(loaded, dict):
                return None
            name = next((n for n, f in loaded.items() if f is func), None)
            return None if name is None else HookSource(name, _distribution_of(name))
        frame = frame.f_back
    return None


def _distribution_of(name: str) -> str | None:
    from cardcage.hooks.snapshot import entry_point_snapshot

    for ep in entry_point_snapshot().group(GENERAL_GROUP):
        if ep.name == name:
            return ep.dist_name
    return None


# -- which distribution supplied the platform vLLM selected --------------------------------------


def _supplier_package(cls: type) -> str | None:
    """The top-level package of the first class in ``cls``'s MRO that neither vLLM nor cardcage
    defines (behind a cardcage adapter: the vendor's class)."""
    for klass in cls.__mro__:
        top = klass.__module__.partition(".")[0]
        if top not in _HOST_PACKAGES:
            return top
    return None


def selected_distributions() -> set[str] | None:
    """Normalised names of the distributions that ship the platform class vLLM selected.

    Resolves vLLM's ``current_platform`` if vLLM has not yet. None when that cannot be known
    (vLLM's platforms module not imported, or its selection raises: vLLM reports that itself).
    """
    from cardcage.hooks.snapshot import normalize_dist_name

    platforms = sys.modules.get(PLATFORMS_MODULE)
    if platforms is None:
        return None
    try:
        current = platforms.current_platform
    except Exception:
        logger.debug("vLLM's platform selection failed; its supplier is unknown", exc_info=True)
        return None
    package = _supplier_package(type(current))
    if package is None:
        return set()
    import importlib.metadata

    dists = importlib.metadata.packages_distributions().get(package, [])
    return {normalize_dist_name(d) for d in dists}


def _platform_providers() -> set[str]:
    from cardcage.hooks.snapshot import entry_point_snapshot, normalize_dist_name

    return {
        normalize_dist_name(ep.dist_name)
        for ep in entry_point_snapshot().group(PLATFORM_GROUP)
        if ep.dist_name
    }


def _is_fatal(dist_name: str | None) -> bool:
    """True when a failure of ``dist_name``'s plugin must not be hidden: it supplied vLLM's
    platform (or may have: its distribution provides one and the selection is unknown)."""
    if not dist_name:
        return False
    from cardcage.hooks.snapshot import normalize_dist_name

    key = normalize_dist_name(dist_name)
    selected = selected_distributions()
    if selected is None:
        return key in _platform_providers()
    return key in selected


# -- applying what a plugin registers ------------------------------------------------------------


def _enforce(report: ApplyReport, registry: type[BaseHookRegistry]) -> None:
    """Raise for a failed target that has a hook of the selected platform's distribution."""
    registrations = registry.registrations()
    for target in sorted(report.failed):
        exc = report.failed[target]
        sources = [r.source for r in registrations.get(target, ()) if r.source is not None]
        fatal = [s for s in sources if _is_fatal(s.dist_name)]
        if fatal:
            first = fatal[0]
            raise PluginLoadError(
                f"The hook of general plugin {format_source(first)} on {target} could not be "
                f"applied under vLLM: {type(exc).__name__}: {exc}. Its distribution supplied the "
                "platform vLLM selected, so vLLM cannot start without it: fix the hook target in "
                f"{first.dist_name}, or select another platform.",
                group=GENERAL_GROUP,
                plugin=first.plugin_name,
                distribution=first.dist_name,
                targets=[target],
            ) from exc
        logger.warning(
            "Hook target %s (from: %s) could not be applied under vLLM: %s: %s; the hook does "
            "not run. Fix the target path, or uninstall the plugin's distribution.",
            target,
            ", ".join(format_source(s) for s in sources) or "unknown",
            type(exc).__name__,
            exc,
        )


def adopt(registry: type[BaseHookRegistry], source: HookSource) -> None:
    """Apply ``registry``'s new hooks now, in deferred mode (see the module docstring)."""

    def on_deferred(report: ApplyReport) -> None:
        _enforce(report, registry)

    registry.set_deferred_failure_handler(on_deferred)
    report = registry.apply(deferred=True)
    logger.debug("Applied hooks of %s under vLLM: %s", format_source(source), report)
    if report.failed:
        _enforce(report, registry)


def _withdraw(source: HookSource) -> int:
    """Drop every hook ``source`` registered, in every registry, and undo the patches."""
    from cardcage.hooks.registry import BaseHookRegistry

    dropped = 0
    pending: list[type[BaseHookRegistry]] = [BaseHookRegistry]
    while pending:
        registry = pending.pop()
        pending.extend(registry.__subclasses__())
        removed = registry.discard_source(source)
        if removed:
            dropped += removed
            registry.apply(deferred=True)  # rebuilds the targets without the withdrawn hooks
    return dropped


def run_plugin(register: Callable[[], Any], source: HookSource) -> Any:
    """Call a general plugin's ``register()`` for vLLM's loader with cardcage's failure policy."""
    try:
        return register()
    except Exception as exc:
        dropped = _withdraw(source)
        if _is_fatal(source.dist_name):
            raise PluginLoadError(
                f"General plugin {format_source(source)} failed in register() under vLLM: "
                f"{type(exc).__name__}: {exc}. Its distribution supplied the platform vLLM "
                f"selected, so vLLM cannot start without it: fix {source.dist_name}, or select "
                "another platform.",
                group=GENERAL_GROUP,
                plugin=source.plugin_name,
                distribution=source.dist_name,
            ) from exc
        logger.exception(
            "General plugin %s failed in register() under vLLM: %s: %s; withdrew its %d "
            "hook(s), and vLLM's start-up goes on. Fix the plugin, remove it from VLLM_PLUGINS, "
            "or uninstall %s.",
            format_source(source),
            type(exc).__name__,
            exc,
            dropped,
            source.dist_name or "its distribution",
        )
        return None
