"""cardcage.hooks: plugin discovery and BEFORE/AFTER/AROUND/REPLACE hooks for inference runtimes.

The public API is re-exported here and loaded on first attribute access, so ``import
cardcage.hooks`` costs almost nothing: a runtime can import it at start-up without paying for
logging, typing or importlib.metadata until it actually loads plugins.

    from cardcage.hooks import HookRegistry, HookType, load_plugins
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .errors import (
        CardcageError,
        DuplicatePluginError,
        EarlyPatchError,
        HookApplyError,
        HookError,
        HookRegistrationError,
        HookResultError,
        HookTargetError,
        InvalidEnvVarError,
        InvalidTargetError,
        PhaseFailedError,
        PluginError,
        PluginLoadError,
        RuntimeRegistrationError,
        SGLangPluginLoadError,
        TargetsSGLangError,
    )
    from .host import Host, general_plugin, plugin_host
    from .loader import (
        GENERAL_PLUGINS_GROUP,
        PLATFORM_PLUGINS_GROUP,
        LoadedPlugin,
        PlatformChoice,
        PluginLoadReport,
        execute_plugin_callbacks,
        load_plugins,
        load_plugins_by_group,
        reset_plugin_state,
    )
    from .once import Once
    from .profile import SRT_PROFILE, RuntimeProfile
    from .registry import (
        ApplyReport,
        BaseHookRegistry,
        HookRecord,
        HookRegistry,
        HookSource,
        HookType,
        format_source,
        plugin_hook,
        plugin_source,
    )
    from .runtimes import RUNTIMES_GROUP, Runtime, get_runtime, registered_runtimes
    from .snapshot import EntryPointSnapshot, PluginEntryPoint, entry_point_snapshot, refresh

__version__ = "0.1.0"

_EXPORTS = {
    "ApplyReport": "registry",
    "BaseHookRegistry": "registry",
    "HookRecord": "registry",
    "HookRegistry": "registry",
    "HookSource": "registry",
    "HookType": "registry",
    "format_source": "registry",
    "plugin_hook": "registry",
    "plugin_source": "registry",
    "CardcageError": "errors",
    "DuplicatePluginError": "errors",
    "EarlyPatchError": "errors",
    "HookApplyError": "errors",
    "HookError": "errors",
    "HookRegistrationError": "errors",
    "HookResultError": "errors",
    "HookTargetError": "errors",
    "InvalidEnvVarError": "errors",
    "InvalidTargetError": "errors",
    "PhaseFailedError": "errors",
    "PluginError": "errors",
    "PluginLoadError": "errors",
    "RuntimeRegistrationError": "errors",
    "Host": "host",
    "general_plugin": "host",
    "plugin_host": "host",
    "SGLangPluginLoadError": "errors",
    "TargetsSGLangError": "errors",
    "GENERAL_PLUGINS_GROUP": "loader",
    "PLATFORM_PLUGINS_GROUP": "loader",
    "LoadedPlugin": "loader",
    "PlatformChoice": "loader",
    "PluginLoadReport": "loader",
    "execute_plugin_callbacks": "loader",
    "load_plugins": "loader",
    "load_plugins_by_group": "loader",
    "reset_plugin_state": "loader",
    "Once": "once",
    "SRT_PROFILE": "profile",
    "RuntimeProfile": "profile",
    "RUNTIMES_GROUP": "runtimes",
    "Runtime": "runtimes",
    "get_runtime": "runtimes",
    "registered_runtimes": "runtimes",
    "EntryPointSnapshot": "snapshot",
    "PluginEntryPoint": "snapshot",
    "entry_point_snapshot": "snapshot",
    "refresh": "snapshot",
}

__all__ = [
    "ApplyReport",
    "BaseHookRegistry",
    "CardcageError",
    "DuplicatePluginError",
    "EarlyPatchError",
    "EntryPointSnapshot",
    "GENERAL_PLUGINS_GROUP",
    "HookApplyError",
    "HookError",
    "HookRecord",
    "HookRegistrationError",
    "HookRegistry",
    "HookResultError",
    "HookSource",
    "HookTargetError",
    "HookType",
    "Host",
    "InvalidEnvVarError",
    "InvalidTargetError",
    "LoadedPlugin",
    "Once",
    "PLATFORM_PLUGINS_GROUP",
    "PhaseFailedError",
    "PlatformChoice",
    "PluginEntryPoint",
    "PluginError",
    "PluginLoadError",
    "PluginLoadReport",
    "RUNTIMES_GROUP",
    "Runtime",
    "RuntimeProfile",
    "RuntimeRegistrationError",
    "SGLangPluginLoadError",
    "SRT_PROFILE",
    "TargetsSGLangError",
    "entry_point_snapshot",
    "execute_plugin_callbacks",
    "format_source",
    "general_plugin",
    "get_runtime",
    "load_plugins",
    "load_plugins_by_group",
    "plugin_host",
    "plugin_hook",
    "plugin_source",
    "refresh",
    "registered_runtimes",
    "reset_plugin_state",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
