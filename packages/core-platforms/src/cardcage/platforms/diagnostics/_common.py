"""Shared pieces of the diagnostics: JSON, schemas, entry-point and profile facts."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks._records import Record
from cardcage.platforms import findings as _findings

if TYPE_CHECKING:
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.selection import SelectionPolicy


#: The commands with a JSON document, each described by ``schemas/<command>.schema.json``.
COMMANDS = ("plugins", "platform", "hooks", "env", "doctor")

#: Entry-point groups under this prefix are listed even when no installed runtime reads them
#: (the diffusion runtime's groups, before ``cardcage-diffusion-runtime`` is installed).
WATCHED_PREFIX = "sglang."

#: Modules that may hold an ``EnvRegistry`` named ``ENV_VARS``; absent ones are skipped.
ENV_MODULES = (
    "cardcage.hooks.envs",
    "cardcage.platforms.envs",
    "cardcage.shm.envs",
    "cardcage.diffusion.envs",
)

#: Prefixes of variables that belong to the plugin system (a set one no registry declares is
#: listed by ``cardcage env``: it is often a typo).
ENV_PREFIXES = ("CARDCAGE_", "SGLANG_")

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY($|_)|AUTH")

PluginKind = Literal["platform", "general", "other"]


def to_json(value: Any) -> Any:
    """Dataclasses, tuples and sets as plain JSON types (lists, dicts, strings, numbers)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Record):  # Finding, DistRef: records of the selection engine
        return {name: to_json(getattr(value, name)) for name in value._fields}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_json(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def load_schema(command: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``cardcage <command> --json``, as shipped in the wheel."""
    if command not in COMMANDS:
        raise ValueError(f"no JSON schema for {command!r}; commands: {', '.join(COMMANDS)}")
    from importlib import resources

    text = (
        resources.files("cardcage.platforms")
        .joinpath("schemas", f"{command}.schema.json")
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


# -- shared facts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorInfo:
    """A failure rendered for humans and JSON; the fields come from cardcage's typed errors."""

    type: str
    message: str
    plugin: str | None
    distribution: str | None
    version: str | None
    group: str | None
    cause: str | None


def exc_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def error_info(exc: BaseException, versions: dict[str, str] | None = None) -> ErrorInfo:
    """Structured fields of a cardcage error (plugin, distribution, group) plus its cause."""
    dist = getattr(exc, "distribution", None)
    cause = exc.__cause__ or getattr(exc, "cause", None)
    return ErrorInfo(
        type=type(exc).__name__,
        message=str(exc),
        plugin=_str_or_none(getattr(exc, "plugin", None)),
        distribution=_str_or_none(dist),
        version=version_of(_str_or_none(dist), versions),
        group=_str_or_none(getattr(exc, "group", None)),
        cause=exc_line(cause) if isinstance(cause, BaseException) else None,
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def current_snapshot() -> EntryPointSnapshot:
    from cardcage.hooks.snapshot import entry_point_snapshot

    return entry_point_snapshot()


def normalize(name: str) -> str:
    from cardcage.hooks.snapshot import normalize_dist_name

    return normalize_dist_name(name)


def dist_versions(snapshot: EntryPointSnapshot) -> dict[str, str]:
    """``{normalised distribution name: version}`` for every distribution with entry points."""
    found: dict[str, str] = {}
    for group in snapshot.groups():
        for ep in snapshot.group(group):
            if ep.dist is not None:
                found.setdefault(ep.dist.normalized_name, ep.dist.version)
    return found


def version_of(dist: str | None, versions: dict[str, str] | None) -> str | None:
    if dist is None:
        return None
    if versions is None:
        versions = dist_versions(current_snapshot())
    return versions.get(normalize(dist))


def ep_order(ep: PluginEntryPoint) -> tuple[str, str]:
    """A stable order of rows: (distribution, entry-point name), ignoring case."""
    return ((ep.dist_name or "").lower(), ep.name)


#: How every diagnostic names a plugin's distribution (``DistRef``) and a plugin
#: (``'name' (dist 1.0)``): the findings' own helpers, so doctor and selection word them alike.
ep_dist = _findings.ep_dist
describe_ep = _findings.describe_ep


@functools.cache
def dist_location(name: str) -> str | None:
    """The folder a distribution is installed in (its ``site-packages``), from metadata only."""
    from importlib import metadata

    try:
        return str(metadata.distribution(name).locate_file(""))
    except (metadata.PackageNotFoundError, OSError, ValueError):
        return None


def defined_profiles() -> tuple[RuntimeProfile, ...]:
    """Every runtime profile cardcage.hooks defines (SRT first), installed or not."""
    from cardcage.hooks import profile as profile_module

    found: dict[str, RuntimeProfile] = {profile_module.SRT_PROFILE.name: profile_module.SRT_PROFILE}
    for value in vars(profile_module).values():
        if isinstance(value, profile_module.RuntimeProfile):
            found.setdefault(value.name, value)
    return tuple(found.values())


def defined_runtimes() -> tuple[str, ...]:
    """The names of every defined runtime profile (``--runtime`` choices), installed or not."""
    return tuple(p.name for p in defined_profiles())


def runtime_profiles() -> tuple[RuntimeProfile, ...]:
    """The installed runtimes' profiles (SRT first), so new runtimes are covered."""
    return tuple(p for p in defined_profiles() if runtime_installed(p))


def provider_package(profile: RuntimeProfile) -> str | None:
    """The top-level package of the profile's selection provider (``cardcage.diffusion``)."""
    if not profile.selection_provider:
        return None
    return ".".join(profile.selection_provider.partition(":")[0].split(".")[:2])


def runtime_installed(profile: RuntimeProfile) -> bool:
    """A runtime counts once the package that provides its selection is installed."""
    package = provider_package(profile)
    if package is None:
        return True
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class RuntimeSelection:
    """Where a runtime keeps its platform selection, named so nothing is imported until asked.

    ``cardcage.platforms`` must not import another runtime's package at module scope (the
    diffusion runtime is a separate distribution that depends on this one), so each runtime is
    reached through ``importlib`` by these names, and only once its provider package is installed.
    """

    profile: RuntimeProfile
    #: Module with ``get_current_platform()`` and ``get_selection_record()``.
    accessor_module: str
    #: ``"module:function"`` returning the runtime's ``SelectionPolicy`` (default probes).
    policy: str
    #: The automatic fallback chain, in words, for ``cardcage platform``.
    chain: str
    #: The distribution that installs the runtime (named in "not installed" messages).
    distribution: str
    #: ``"module:class"`` of the hook registry the runtime's general plugins register with.
    registry: str

    def accessor(self) -> Any:
        import importlib

        return importlib.import_module(self.accessor_module)

    def load_policy(self) -> SelectionPolicy:
        import importlib

        module, _, name = self.policy.partition(":")
        policy: SelectionPolicy = getattr(importlib.import_module(module), name)()
        return policy

    def load_registry(self) -> type[BaseHookRegistry]:
        import importlib

        module, _, name = self.registry.partition(":")
        registry: type[BaseHookRegistry] = getattr(importlib.import_module(module), name)
        return registry


#: Profile name -> (accessor module, policy factory, fallback chain in words, distribution,
#: hook registry).
_SELECTIONS = {
    "srt": (
        "cardcage.platforms.current",
        "cardcage.platforms.srt:srt_policy",
        "CPU if SGLANG_USE_CPU_ENGINE=1, then CUDA, ROCm, XPU, then the base SRTPlatform",
        "cardcage-core-platforms",
        "cardcage.hooks.registry:HookRegistry",
    ),
    "diffusion": (
        "cardcage.diffusion.runtime.platforms.current",
        "cardcage.diffusion.runtime.platforms.policy:diffusion_policy",
        "MPS, XPU, ROCm, CUDA, NPU, MUSA, then CPU, which always matches",
        "cardcage-diffusion-runtime",
        "cardcage.diffusion.runtime.platforms.plugins:HookRegistry",
    ),
}


def runtime_distribution(profile: RuntimeProfile) -> str | None:
    """The distribution that installs ``profile``'s runtime, when cardcage ships it."""
    known = _SELECTIONS.get(profile.name)
    return known[3] if known is not None else None


def runtime_selection(profile: RuntimeProfile) -> RuntimeSelection | None:
    """How to reach ``profile``'s platform selection; None if it is unknown or not installed."""
    known = _SELECTIONS.get(profile.name)
    if known is None or not runtime_installed(profile):
        return None
    return RuntimeSelection(profile, *known)


def group_roles(
    profiles: tuple[RuntimeProfile, ...],
) -> dict[str, tuple[RuntimeProfile, PluginKind]]:
    roles: dict[str, tuple[RuntimeProfile, PluginKind]] = {}
    for profile in profiles:
        roles.setdefault(profile.platform_group, (profile, "platform"))
        roles.setdefault(profile.plugin_group, (profile, "general"))
    return roles


def watched_groups(snapshot: EntryPointSnapshot, profiles: tuple[RuntimeProfile, ...]) -> list[str]:
    """The profiles' groups (even when empty), then every other ``sglang.*`` group present."""
    groups: list[str] = []
    for profile in profiles:
        groups.extend((profile.platform_group, profile.plugin_group))
    groups.extend(g for g in snapshot.groups() if g.startswith(WATCHED_PREFIX) and g not in groups)
    return list(dict.fromkeys(groups))


def kind_of_unknown_group(group: str) -> PluginKind:
    if group.endswith(".platforms"):
        return "platform"
    if group.endswith(".plugins"):
        return "general"
    return "other"


def selector_value(profile: RuntimeProfile) -> str:
    return os.environ.get(profile.selector_env, "").strip()


def allowlist_value(profile: RuntimeProfile) -> frozenset[str] | None:
    from cardcage.hooks.loader import read_allowlist

    return read_allowlist(profile)


def excluded_dists(profile: RuntimeProfile, snapshot: EntryPointSnapshot) -> set[str]:
    """Distributions whose general plugins the loader skips, knowable without importing anything.

    Only an explicit selector is known from metadata; in automatic mode the selected platform is
    known only after activation (``cardcage platform``), so nothing is returned here (``plugins
    list`` shows the general plugins of platform distributions as ``conditional`` instead).
    """
    from cardcage.hooks.loader import PlatformChoice, excluded_distributions

    selector = selector_value(profile)
    if not selector:
        return set()
    match = next((ep for ep in snapshot.group(profile.platform_group) if ep.name == selector), None)
    choice = PlatformChoice(selector, match.dist_name if match else None, profile.selector_env)
    return excluded_distributions(choice, profile, snapshot)
