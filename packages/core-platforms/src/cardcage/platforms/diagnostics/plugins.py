"""``cardcage plugins list``: every entry point, its runtime, distribution and status.

No plugin is imported. The registered runtimes' selection policies are (they are import-safe and
torch-free): whether an allowlist filters automatic platform discovery is the policy's call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.runtimes import Runtime
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint

from ._common import (
    PluginKind,
    allowlist_value,
    choose_runtimes,
    current_snapshot,
    dist_location,
    ep_dist,
    ep_order,
    excluded_dists,
    group_roles,
    hosted,
    kind_of_unknown_group,
    known_profiles,
    normalize,
    selector_value,
    to_json,
    watched_groups,
)


@dataclass(frozen=True)
class ProfileInfo:
    """One runtime profile and the values of its selector and allowlist variables."""

    name: str
    platform_group: str
    plugin_group: str
    selector_env: str
    selector: str | None
    allowlist_env: str
    allowlist: tuple[str, ...] | None


@dataclass(frozen=True)
class PluginRow:
    """One entry point and what the loader would do with it (decided without importing it)."""

    group: str
    name: str
    value: str
    distribution: str | None
    version: str | None
    location: str | None
    kind: PluginKind
    #: allowed | conditional | not-allowed | excluded | selected | not-selected | unused
    status: str
    detail: str
    #: The runtime profile whose group this is ("srt", "diffusion"), even when that runtime is
    #: not installed; None for a group no profile names.
    runtime: str | None = None


@dataclass(frozen=True)
class PluginsReport:
    profiles: tuple[ProfileInfo, ...]
    groups: tuple[str, ...]
    plugins: tuple[PluginRow, ...]

    def as_json(self) -> dict[str, Any]:
        return {"schema": "cardcage.plugins/1", **to_json(self)}


def _profile_info(profile: RuntimeProfile) -> ProfileInfo:
    allowed = allowlist_value(profile)
    return ProfileInfo(
        name=profile.name,
        platform_group=profile.platform_group,
        plugin_group=profile.plugin_group,
        selector_env=profile.selector_env,
        selector=selector_value(profile) or None,
        allowlist_env=profile.allowlist_env,
        allowlist=tuple(sorted(allowed)) if allowed is not None else None,
    )


def _platform_status(
    ep: PluginEntryPoint, profile: RuntimeProfile, allowlist_filters: bool
) -> tuple[str, str]:
    selector = selector_value(profile)
    env = profile.selector_env
    if selector:
        if ep.name == selector:
            return "selected", (
                f"{env}={selector!r} names it: only this platform entry point is loaded; whether "
                "its activate() finds the hardware is checked by cardcage platform (plugins list "
                "never calls it)"
            )
        return "not-selected", f"{env}={selector!r} selects another platform; never loaded"
    allowed = allowlist_value(profile) if allowlist_filters else None
    if allowed is not None and ep.name not in allowed:
        return "not-allowed", f"not in {profile.allowlist_env}; skipped by automatic selection"
    return "allowed", "activate() is called by automatic selection"


@dataclass(frozen=True)
class _GeneralRules:
    """What decides a runtime's general-plugin statuses, read once per runtime."""

    profile: RuntimeProfile
    #: Explicit mode: the distributions excluded by the selector (known from metadata).
    excluded: set[str]
    #: ``{normalised distribution: its platform entry points automatic selection activates}``
    #: for every distribution providing a platform entry point of this runtime.
    platforms: dict[str, tuple[str, ...]]


def _general_rules(
    profile: RuntimeProfile, snapshot: EntryPointSnapshot, allowlist_filters: bool
) -> _GeneralRules:
    allowed = allowlist_value(profile) if allowlist_filters else None
    platforms: dict[str, list[str]] = {}
    for ep in snapshot.group(profile.platform_group):
        if ep.dist_name is None:
            continue
        names = platforms.setdefault(normalize(ep.dist_name), [])
        if allowed is None or ep.name in allowed:
            names.append(ep.name)
    return _GeneralRules(
        profile,
        excluded_dists(profile, snapshot),
        {d: tuple(sorted(n)) for d, n in platforms.items()},
    )


def _general_status(ep: PluginEntryPoint, rules: _GeneralRules) -> tuple[str, str]:
    """The loader's filters, in its order: allowlist, then platform-distribution exclusion.

    In automatic mode the selected platform is known only once platforms are activated, which
    this command never does: a general plugin of a distribution whose platform automatic
    selection may pick is ``conditional``; of one whose platforms it never activates (the
    allowlist leaves them all out), ``excluded``.
    """
    profile = rules.profile
    allowed = allowlist_value(profile)
    if allowed is not None and ep.name not in allowed:
        return "not-allowed", f"not in {profile.allowlist_env}"
    selector = selector_value(profile)
    env = profile.selector_env
    if selector:
        if ep.dist_name is not None and ep.dist_name in rules.excluded:
            return (
                "excluded",
                f"{ep.dist_name} provides a platform other than the one {env}={selector!r} selects",
            )
        return "allowed", "imported and register() called by load_plugins()"
    activatable = rules.platforms.get(normalize(ep.dist_name)) if ep.dist_name else None
    if activatable is None:
        return "allowed", "imported and register() called by load_plugins()"
    if not activatable:
        return (
            "excluded",
            f"{ep.dist_name} provides a platform, but automatic selection skips every one of "
            f"them (not in {profile.allowlist_env}), so it cannot supply the selected platform",
        )
    names = ", ".join(repr(n) for n in activatable)
    return (
        "conditional",
        f"runs only if {ep.dist_name}'s platform ({names}) is selected (load_plugins() excludes "
        "the general plugins of platform distributions that did not supply it); run cardcage "
        "platform to see which one automatic selection picks",
    )


def _allowlist_filters_platforms(runtime: Runtime) -> bool:
    """Whether the runtime's allowlist filters automatic platform discovery (its policy says)."""
    try:
        filters: bool = runtime.load_policy().allowlist_filters_automatic
    except Exception:  # a broken runtime install: cardcage platform and doctor report it
        return True
    return filters


def _host(runtime: Runtime) -> Any:
    """The diagnostics module of a host's runtime (vLLM), which rules its rows; else None."""
    try:
        return hosted(runtime.load_policy())
    except Exception:  # a broken runtime install: cardcage platform and doctor report it
        return None


def _unused_detail(group: str, owner: str | None) -> str:
    if owner is None:
        return f"no installed cardcage runtime reads group {group}"
    return (
        f"the {owner} runtime that reads group {group} is not installed (no distribution "
        "registers it in the 'cardcage.runtimes' entry-point group)"
    )


def collect_plugins(
    group: str | None = None, runtimes: Sequence[str] | None = None
) -> PluginsReport:
    """Every entry point of the runtimes' groups and of SGLang's own runtimes' groups.

    ``runtimes`` limits the listing to those registered runtimes' groups (default: every
    registered runtime, plus the groups of SGLang's own runtimes that have entry points).

    Statuses come from metadata and the environment only (allowlist, selector, exclusion of
    distributions providing an unselected platform); no plugin is imported. In automatic mode a
    general plugin of a platform distribution is ``conditional``: whether it runs depends on
    which platform activates, which only ``cardcage platform`` (or doctor) finds out.
    """
    snapshot = current_snapshot()
    chosen = choose_runtimes(runtimes)
    profiles = tuple(r.profile for r in chosen)
    roles = group_roles(profiles)
    if group is not None:
        groups = [group]
    elif runtimes is not None:
        groups = [g for p in profiles for g in (p.platform_group, p.plugin_group)]
    else:
        groups = watched_groups(snapshot, profiles)
    filters = {r.name: _allowlist_filters_platforms(r) for r in chosen}
    rules = {p.name: _general_rules(p, snapshot, filters[p.name]) for p in profiles}
    owners = {g: p.name for p in known_profiles() for g in (p.platform_group, p.plugin_group)}
    hosts = {r.name: h for r in chosen if (h := _host(r)) is not None}
    for runtime_name, host in hosts.items():  # the other groups a host reads (vLLM's three)
        for extra in host.extra_groups():
            owners.setdefault(extra, runtime_name)
            if group is None and extra not in groups:
                groups.append(extra)
    rows: list[PluginRow] = []
    for name in groups:
        role = roles.get(name)
        host = hosts.get(role[0].name if role is not None else owners.get(name, ""))
        for ep in sorted(snapshot.group(name), key=lambda e: (e.name, ep_order(e))):
            if host is not None:
                kind, status, detail = host.plugin_status(ep)
            elif role is None:
                kind = kind_of_unknown_group(name)
                status, detail = "unused", _unused_detail(name, owners.get(name))
            elif role[1] == "platform":
                kind = "platform"
                status, detail = _platform_status(ep, role[0], filters[role[0].name])
            else:
                kind = "general"
                status, detail = _general_status(ep, rules[role[0].name])
            dist = ep_dist(ep)
            rows.append(
                PluginRow(
                    group=name,
                    name=ep.name,
                    value=ep.value,
                    distribution=dist.name,
                    version=dist.version,
                    location=dist_location(dist.name) if dist.name else None,
                    kind=kind,
                    status=status,
                    detail=detail,
                    runtime=role[0].name if role is not None else owners.get(name),
                )
            )
    infos = []
    for profile in profiles:
        info = _profile_info(profile)
        host = hosts.get(profile.name)
        if host is not None:  # its variables as the host reads them
            _, selector, allowed = host.platform_fields(profile)
            info = dataclasses.replace(info, selector=selector, allowlist=allowed)
        infos.append(info)
    return PluginsReport(
        profiles=tuple(infos),
        groups=tuple(groups),
        plugins=tuple(rows),
    )
