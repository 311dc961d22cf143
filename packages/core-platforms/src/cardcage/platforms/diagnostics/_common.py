"""Shared pieces of the diagnostics: JSON, schemas, entry-point and profile facts."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks.records import Record
from cardcage.platforms import findings as _findings

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.runtimes import Runtime
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint


#: The commands with a JSON document, each described by ``schemas/<command>.schema.json``.
COMMANDS = ("plugins", "platform", "hooks", "env", "doctor", "deps")

#: The registry of the variables every runtime's plugin loading reads (core-hooks'); each
#: registered runtime adds its own (``Runtime.env_registries``).
CORE_ENV_MODULE = "cardcage.hooks.envs"

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


def registered() -> tuple[Runtime, ...]:
    """Every runtime registered in ``cardcage.runtimes`` that loads, SRT first."""
    from cardcage.hooks.runtimes import registered_runtimes

    return registered_runtimes(current_snapshot())


def present() -> tuple[Runtime, ...]:
    """The registered runtimes a command covers without ``--runtime``: those present here
    (``Runtime.present_if``; vLLM's is present where vLLM is installed), SRT first."""
    return tuple(r for r in registered() if r.is_present())


def hosted(policy: object) -> ModuleType | None:
    """The diagnosis of a runtime whose platform a host selects by its own rules.

    Such a runtime's policy names its host (``host = "vllm"``), whose room holds the module that
    explains it by that host's rules (``cardcage.platforms.hosts.diagnosis``); None for a
    runtime that cardcage's selection engine serves.
    """
    host = getattr(policy, "host", None)
    if not isinstance(host, str) or not host:
        return None
    from cardcage.platforms import hosts

    module = hosts.diagnosis(host)
    if module is None:
        raise LookupError(f"the {host!r} room of cardcage.platforms.hosts has no diagnosis module")
    return module


def runtime_profiles() -> tuple[RuntimeProfile, ...]:
    """The present runtimes' profiles, SRT first."""
    return tuple(r.profile for r in present())


def known_profiles() -> tuple[RuntimeProfile, ...]:
    """The registered runtimes' profiles, then SGLang's own runtime profiles not among them.

    SGLang's profiles are the wire contract: their groups mean something (SGLang itself may be
    the host) even where no installed cardcage runtime reads them.
    """
    from cardcage.hooks.profile import SGLANG_PROFILES

    found = {p.name: p for p in runtime_profiles()}
    for profile in SGLANG_PROFILES:
        found.setdefault(profile.name, profile)
    return tuple(found.values())


def runtime_names() -> tuple[str, ...]:
    """The ``--runtime`` choices: every registered runtime's name, SRT first (imports nothing)."""
    from cardcage.hooks.runtimes import registered_runtime_names

    return registered_runtime_names(current_snapshot())


def choose_runtimes(names: Sequence[str] | None) -> tuple[Runtime, ...]:
    """The runtimes named by ``--runtime`` (None: every registered one), in the order given.

    A name no registered runtime has raises ``LookupError`` with the message the CLI shows.
    """
    runtimes = registered()
    if names is None:
        return tuple(r for r in runtimes if r.is_present())
    by_name = {r.name: r for r in runtimes}
    chosen: list[Runtime] = []
    for name in names:
        runtime = by_name.get(name)
        if runtime is None:
            raise LookupError(not_installed_message(name))
        chosen.append(runtime)
    return tuple(chosen)


def not_installed_message(name: str) -> str:
    """Why ``--runtime name`` cannot be served, and what to do."""
    from cardcage.hooks.runtimes import RUNTIMES_GROUP, broken_runtimes

    broken = next((e for e in broken_runtimes(current_snapshot()) if e.plugin == name), None)
    if broken is not None:
        return str(broken)
    runtimes = registered()
    installed = ", ".join(r.name for r in runtimes if r.is_present()) or "none"
    absent = [r.name for r in runtimes if not r.is_present()]
    if name in {p.name for p in known_profiles()}:
        what = f"the {name} runtime is not installed"
    else:
        what = f"no runtime named {name!r} is installed"
    also = (
        f" (also registered, explained by its host's rules where the host is not installed: "
        f"{', '.join(absent)})"
        if absent
        else ""
    )
    return (
        f"{what} (installed: {installed}). A runtime is installed by a distribution that "
        f"registers it in the {RUNTIMES_GROUP!r} entry-point group; install it, or choose one "
        f"of the installed runtimes with --runtime{also}"
    )


def group_roles(
    profiles: tuple[RuntimeProfile, ...],
) -> dict[str, tuple[RuntimeProfile, PluginKind]]:
    roles: dict[str, tuple[RuntimeProfile, PluginKind]] = {}
    for profile in profiles:
        roles.setdefault(profile.platform_group, (profile, "platform"))
        roles.setdefault(profile.plugin_group, (profile, "general"))
    return roles


def watched_groups(snapshot: EntryPointSnapshot, profiles: tuple[RuntimeProfile, ...]) -> list[str]:
    """The profiles' groups (even when empty), then those of SGLang's own profiles present."""
    groups: list[str] = []
    for profile in profiles:
        groups.extend((profile.platform_group, profile.plugin_group))
    present = set(snapshot.groups())
    for profile in known_profiles():
        groups.extend(g for g in (profile.platform_group, profile.plugin_group) if g in present)
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
