"""``cardcage plugins list``: every entry point, its distribution and status; no imports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.snapshot import PluginEntryPoint

from ._common import (
    PluginKind,
    allowlist_value,
    current_snapshot,
    dist_location,
    ep_dist,
    ep_order,
    excluded_dists,
    group_roles,
    kind_of_unknown_group,
    runtime_profiles,
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
    status: str  # allowed | not-allowed | excluded | selected | not-selected | unused
    detail: str


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


def _platform_status(ep: PluginEntryPoint, profile: RuntimeProfile) -> tuple[str, str]:
    selector = selector_value(profile)
    env = profile.selector_env
    if selector:
        if ep.name == selector:
            return "selected", f"{env}={selector!r}: only this platform entry point is loaded"
        return "not-selected", f"{env}={selector!r} selects another platform; never loaded"
    allowed = allowlist_value(profile)
    if allowed is not None and ep.name not in allowed:
        return "not-allowed", f"not in {profile.allowlist_env}; skipped by automatic selection"
    return "allowed", "activate() is called by automatic selection"


def _general_status(
    ep: PluginEntryPoint, profile: RuntimeProfile, excluded: set[str]
) -> tuple[str, str]:
    allowed = allowlist_value(profile)
    if allowed is not None and ep.name not in allowed:
        return "not-allowed", f"not in {profile.allowlist_env}"
    if ep.dist_name is not None and ep.dist_name in excluded:
        selector = selector_value(profile)
        return (
            "excluded",
            f"{ep.dist_name} provides a platform other than the one "
            f"{profile.selector_env}={selector!r} selects",
        )
    return "allowed", "imported and register() called by load_plugins()"


def collect_plugins(group: str | None = None) -> PluginsReport:
    """Every entry point of the runtimes' groups and of any other ``sglang.*`` group.

    Statuses come from metadata and the environment only (allowlist, selector, exclusion of
    distributions providing an unselected platform); no plugin is imported.
    """
    snapshot = current_snapshot()
    profiles = runtime_profiles()
    roles = group_roles(profiles)
    groups = [group] if group is not None else watched_groups(snapshot, profiles)
    excluded = {p.name: excluded_dists(p, snapshot) for p in profiles}
    rows: list[PluginRow] = []
    for name in groups:
        role = roles.get(name)
        for ep in sorted(snapshot.group(name), key=lambda e: (e.name, ep_order(e))):
            if role is None:
                kind = kind_of_unknown_group(name)
                status, detail = "unused", f"no installed cardcage runtime reads group {name}"
            elif role[1] == "platform":
                kind, (status, detail) = "platform", _platform_status(ep, role[0])
            else:
                kind = "general"
                status, detail = _general_status(ep, role[0], excluded[role[0].name])
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
                )
            )
    return PluginsReport(
        profiles=tuple(_profile_info(p) for p in profiles),
        groups=tuple(groups),
        plugins=tuple(rows),
    )
