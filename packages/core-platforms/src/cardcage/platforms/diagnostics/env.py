"""``cardcage env``: interpreter, cardcage distributions and every variable cardcage reads."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.envs import EnvRegistry, EnvVar
    from cardcage.hooks.snapshot import EntryPointSnapshot

from cardcage.platforms.findings import DistRef

from ._common import (
    CORE_ENV_MODULE,
    ENV_PREFIXES,
    SECRET_NAME,
    choose_runtimes,
    current_snapshot,
    dist_location,
    ep_dist,
    exc_line,
    normalize,
    to_json,
    watched_groups,
)

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PythonInfo:
    version: str
    implementation: str
    executable: str


@dataclass(frozen=True)
class OsInfo:
    system: str
    release: str
    platform: str
    machine: str


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    location: str | None


@dataclass(frozen=True)
class PluginDist:
    """A distribution that provides entry points in a watched group."""

    name: str
    version: str | None
    groups: tuple[str, ...]


@dataclass(frozen=True)
class EnvVarRow:
    """One declared variable: raw and parsed value (or the parse error), default, meaning."""

    name: str
    distribution: str
    module: str
    kind: str
    set: bool
    raw: str | None
    value: Any
    error: str | None
    default: Any
    description: str


@dataclass(frozen=True)
class OtherVar:
    """A set ``CARDCAGE_*``/``SGLANG_*`` variable that no registry declares (maybe a typo)."""

    name: str
    raw: str


@dataclass(frozen=True)
class EnvReport:
    python: PythonInfo
    os: OsInfo
    distributions: tuple[InstalledDist, ...]
    plugin_distributions: tuple[PluginDist, ...]
    registries: tuple[str, ...]
    variables: tuple[EnvVarRow, ...]
    other_variables: tuple[OtherVar, ...]

    def as_json(self) -> dict[str, Any]:
        return {"schema": "cardcage.env/1", **to_json(self)}


#: The entry-point group where a plugin distribution names its own registry of variables
#: (``acme-npu-plugin = "acme_npu_plugin.envs:ENV_VARS"``), so ``cardcage env`` lists them and
#: doctor checks their values. The module must import without its hardware, like ``activate()``'s.
PLUGIN_ENV_GROUP = "cardcage.env_registries"


def env_modules(runtimes: Sequence[str] | None = None) -> list[str]:
    """The modules holding ``ENV_VARS`` registries: core-hooks', each runtime's own, then each
    plugin distribution's (``PLUGIN_ENV_GROUP``)."""
    modules = [CORE_ENV_MODULE]
    for runtime in choose_runtimes(runtimes):
        modules.extend(m for m in runtime.env_registries if m not in modules)
    for ep in current_snapshot().group(PLUGIN_ENV_GROUP):
        if ep.module not in modules:
            modules.append(ep.module)
    return modules


def env_registries(runtimes: Sequence[str] | None = None) -> list[tuple[str, EnvRegistry]]:
    """``(module, ENV_VARS)`` of core-hooks, of every (chosen) registered runtime and of every
    plugin distribution that names its registry in ``PLUGIN_ENV_GROUP``.

    Each runtime's record names its registries (``Runtime.env_registries``); a module that is
    absent is skipped, one that fails to import is logged (``cardcage doctor`` reports the
    runtime, or the plugin's broken import).
    """
    import importlib

    found: list[tuple[str, EnvRegistry]] = []
    for module_name in env_modules(runtimes):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # that package is not installed (not: one of its imports is missing)
            _logger.warning("cannot read %s: %s", module_name, exc_line(exc))
            continue
        except Exception as exc:  # a broken install: `cardcage doctor` reports the runtime
            _logger.warning("cannot read %s: %s", module_name, exc_line(exc))
            continue
        registry = getattr(module, "ENV_VARS", None)
        if registry is not None:
            found.append((module_name, registry))
    return found


def env_row(module: str, registry: EnvRegistry, var: EnvVar[object]) -> EnvVarRow:
    raw = var.raw()
    value: object = None
    error: str | None = None
    if raw is not None:
        try:
            value = var.get()
        except Exception as exc:
            error = str(exc)
    return EnvVarRow(
        name=var.name,
        distribution=registry.distribution,
        module=module,
        kind=var.kind,
        set=raw is not None,
        raw=raw,
        value=to_json(value),
        error=error,
        default=to_json(var.default),
        description=var.description,
    )


def _installed_cardcage() -> tuple[InstalledDist, ...]:
    from importlib import metadata

    found: dict[str, InstalledDist] = {}
    for dist in metadata.distributions():
        name = str(dist.metadata["Name"] or "")
        key = normalize(name)
        if key.startswith("cardcage") and key not in found:
            found[key] = InstalledDist(name, str(dist.version), dist_location(name))
    return tuple(found[k] for k in sorted(found))


def _plugin_dists(
    snapshot: EntryPointSnapshot, runtimes: Sequence[str] | None
) -> tuple[PluginDist, ...]:
    groups_of: dict[str, tuple[DistRef, list[str]]] = {}
    profiles = tuple(r.profile for r in choose_runtimes(runtimes))
    groups = (
        watched_groups(snapshot, profiles)
        if runtimes is None
        else [g for p in profiles for g in (p.platform_group, p.plugin_group)]
    )
    for group in groups:
        for ep in snapshot.group(group):
            if ep.dist is None:
                continue
            entry = groups_of.setdefault(ep.dist.normalized_name, (ep_dist(ep), []))
            if group not in entry[1]:
                entry[1].append(group)
    return tuple(
        PluginDist(ref.name or key, ref.version, tuple(groups))
        for key, (ref, groups) in sorted(groups_of.items())
    )


def collect_env(runtimes: Sequence[str] | None = None) -> EnvReport:
    """Interpreter, OS, cardcage and plugin distributions, and every declared variable.

    ``runtimes`` limits the variables and plugin distributions to those registered runtimes'
    (default: every registered runtime).
    """
    import platform
    import sys

    registries = env_registries(runtimes)
    declared = {var.name for _, registry in registries for var in registry}
    others = tuple(
        OtherVar(name, "<redacted>" if SECRET_NAME.search(name) else raw)
        for name, raw in sorted(os.environ.items())
        if name.startswith(ENV_PREFIXES) and name not in declared
    )
    return EnvReport(
        python=PythonInfo(
            version=platform.python_version(),
            implementation=platform.python_implementation(),
            executable=sys.executable,
        ),
        os=OsInfo(
            system=platform.system(),
            release=platform.release(),
            platform=platform.platform(),
            machine=platform.machine(),
        ),
        distributions=_installed_cardcage(),
        plugin_distributions=_plugin_dists(current_snapshot(), runtimes),
        registries=tuple(module for module, _ in registries),
        variables=tuple(
            env_row(module, registry, var) for module, registry in registries for var in registry
        ),
        other_variables=others,
    )
