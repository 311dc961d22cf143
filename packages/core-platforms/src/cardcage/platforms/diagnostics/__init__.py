"""The facts behind the ``cardcage`` console script: what is installed, selected, hooked and set.

One module per command: each ``collect_*`` function (and ``run_doctor``) gathers that command's
data and returns a frozen dataclass whose ``as_json()`` is the command's stable JSON document
(``"schema": "cardcage.<command>/1"``, described by ``schemas/<command>.schema.json``).
Rendering, printing and exit codes belong to ``cardcage.platforms.cli``: nothing here prints.

What each collector may touch, because a diagnostic must not change what it diagnoses:

* ``collect_plugins`` and ``collect_env`` read metadata and the environment only; they never
  import a plugin.
* ``collect_platform`` resolves each registered runtime's ``current_platform`` exactly as that
  runtime would, through the accessor its ``cardcage.hooks.runtimes.Runtime`` record names (by
  ``importlib``: this package names no other runtime's modules).
* ``collect_hooks`` runs each runtime's ``load_plugins()`` (registration and application).
* ``run_doctor`` calls every platform entry point's ``activate()`` (of every registered runtime)
  as cardcage's selection would (``platform_host()`` is cardcage), imports every general plugin,
  and calls the ``register()`` of those that startup would run, in this process, catching
  whatever they raise; the hooks they register are counted and discarded, never applied.
* A runtime whose policy names a host (``host = "vllm"``) is explained by that host's rules, in
  that host's room (``cardcage.platforms.hosts.vllm.diagnosis``): doctor and ``hooks`` call its
  plugins' ``activate()`` and ``register()`` inside a rehearsal of the host
  (``cardcage.hooks.host.rehearsing``) where the host is not installed; with vLLM installed,
  ``platform`` and ``hooks`` run vLLM's own code.

Import-safe: stdlib and the findings type only at module scope. ``cardcage.hooks`` internals,
the selection engine and plugin code are imported inside the functions that need them; torch
never is.
"""

from __future__ import annotations

from cardcage.platforms.findings import DistRef, Finding

from ._common import (
    COMMANDS,
    ErrorInfo,
    known_profiles,
    load_schema,
    runtime_names,
    runtime_profiles,
)
from .doctor import DoctorReport, run_doctor
from .env import EnvReport, collect_env
from .hooks import EarlyPatches, HookRow, HooksReport, RuntimeHooks, collect_hooks
from .platform import PlatformReport, RuntimePlatform, collect_platform, platform_runtimes
from .plugins import PluginRow, PluginsReport, collect_plugins

__all__ = [
    "COMMANDS",
    "DistRef",
    "DoctorReport",
    "EarlyPatches",
    "EnvReport",
    "ErrorInfo",
    "Finding",
    "HookRow",
    "HooksReport",
    "PlatformReport",
    "PluginRow",
    "PluginsReport",
    "RuntimeHooks",
    "RuntimePlatform",
    "collect_env",
    "collect_hooks",
    "collect_platform",
    "collect_plugins",
    "known_profiles",
    "load_schema",
    "platform_runtimes",
    "run_doctor",
    "runtime_names",
    "runtime_profiles",
]
