"""``cardcage doctor``: problems a CI gate should catch before the runtime starts."""

from __future__ import annotations

import difflib
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cardcage.hooks.loader import allowlist_scope

if TYPE_CHECKING:
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.selection import SelectionPolicy

from ._common import (
    DistRef,
    Severity,
    allowlist_value,
    current_snapshot,
    describe_ep,
    ep_dist,
    ep_order,
    exc_line,
    group_roles,
    kind_of_unknown_group,
    runtime_profiles,
    runtime_selection,
    selector_value,
    to_json,
    watched_groups,
)
from .env import env_registries, env_row


@dataclass(frozen=True)
class Finding:
    """One problem: what is wrong, who it concerns, and the exact fix."""

    code: str
    severity: Severity
    message: str
    fix: str
    group: str | None = None
    plugin: str | None = None
    distributions: tuple[DistRef, ...] = ()
    traceback: str | None = None


@dataclass(frozen=True)
class DoctorReport:
    profiles: tuple[str, ...]
    groups: tuple[str, ...]
    entry_points: int
    findings: tuple[Finding, ...]

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def problems(self) -> int:
        """Errors and warnings: what ``doctor --strict`` fails on."""
        return self.count("error") + self.count("warning")

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": "cardcage.doctor/1",
            "ok": self.problems == 0,
            "summary": {
                "errors": self.count("error"),
                "warnings": self.count("warning"),
                "info": self.count("info"),
            },
            "checked": {
                "profiles": list(self.profiles),
                "groups": list(self.groups),
                "entry_points": self.entry_points,
            },
            "findings": to_json(self.findings),
        }


def _check_duplicates(group: str, eps: tuple[PluginEntryPoint, ...]) -> list[Finding]:
    """A name provided twice in one group: the loader refuses to start."""
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    findings = []
    for name in sorted(by_name):
        found = sorted(by_name[name], key=ep_order)
        if len(found) < 2:
            continue
        dists = tuple(ep_dist(ep) for ep in found)
        shown = ", ".join(
            f"{d.name} {d.version or '?'} ({ep.value})" for d, ep in zip(dists, found, strict=True)
        )
        findings.append(
            Finding(
                code="duplicate-entry-point",
                severity="error",
                message=(
                    f"Entry-point name {name!r} in group {group!r} is provided by "
                    f"{len(found)} entry points: {shown}. Plugin loading and platform selection "
                    "refuse to start."
                ),
                fix=(
                    f"Uninstall all but one of {', '.join(sorted({str(d.name) for d in dists}))}"
                    ", or rename the entry point in one distribution's pyproject.toml."
                ),
                group=group,
                plugin=name,
                distributions=dists,
            )
        )
    return findings


def _check_reserved(policy: SelectionPolicy, eps: tuple[PluginEntryPoint, ...]) -> list[Finding]:
    """A platform entry point named like a built-in alias: selection refuses to start."""
    aliases = policy.aliases()
    group = policy.profile.platform_group
    return [
        Finding(
            code="reserved-platform-name",
            severity="error",
            message=(
                f"Platform entry point {describe_ep(ep)} in group {group!r} uses the built-in name "
                f"{ep.name!r}; platform selection refuses to start."
            ),
            fix=(
                f"Rename the entry point in {ep.dist_name or 'its distribution'}'s pyproject.toml "
                f"(reserved: {', '.join(sorted(aliases))})."
            ),
            group=group,
            plugin=ep.name,
            distributions=(ep_dist(ep),),
        )
        for ep in eps
        if ep.name in aliases
    ]


def _check_allowlist(profile: RuntimeProfile, snapshot: EntryPointSnapshot) -> list[Finding]:
    """Allowlist names that match no entry point: usually a typo that silently drops a plugin.

    The loader's own scope: every runtime that reads the same variable (SRT and diffusion
    both read ``SGLANG_PLUGINS``), so a name is unmatched only when none of their groups has it.
    """
    allowed = allowlist_value(profile)
    if not allowed:
        return []
    groups, known = allowlist_scope(profile, snapshot)
    findings = []
    for name in sorted(allowed - known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        findings.append(
            Finding(
                code="allowlist-unmatched",
                severity="warning",
                message=(
                    f"{profile.allowlist_env} names {name!r}, which matches no entry point in "
                    f"{', '.join(groups[:-1])} or {groups[-1]}.{hint}"
                ),
                fix=(
                    f"Fix the spelling in {profile.allowlist_env}, remove {name!r} from it, or "
                    "install the distribution that provides it (installed: "
                    f"{', '.join(sorted(repr(n) for n in known)) or 'none'})."
                ),
                plugin=name,
            )
        )
    return findings


def _check_selector(policy: SelectionPolicy, eps: tuple[PluginEntryPoint, ...]) -> list[Finding]:
    """A selector that names neither an entry point nor a built-in: startup fails."""
    profile = policy.profile
    selector = selector_value(profile)
    aliases = {a for a, b in policy.aliases().items() if b.explicit_allowed}
    names = {ep.name for ep in eps}
    if selector in aliases:
        return _check_builtin_selected(policy, selector)
    if not selector or selector in names:
        return []
    choices = sorted(names | aliases)
    close = difflib.get_close_matches(selector, choices, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "no platform entry point and no built-in platform"
    if selector in policy.aliases():
        what = (
            f"the built-in {selector!r} platform, which is detected automatically only: "
            f"{profile.selector_env} does not accept it"
        )
        hint = ""
    return [
        Finding(
            code="unknown-platform-selector",
            severity="error",
            message=(
                f"{profile.selector_env}={selector!r} names {what}.{hint} Platform selection "
                "fails at startup."
            ),
            fix=(
                f"Set {profile.selector_env} to one of: {', '.join(repr(c) for c in choices)}; "
                "or install the distribution that provides it; or unset it for automatic "
                "selection."
            ),
            group=profile.platform_group,
            plugin=selector,
        )
    ]


def _check_builtin_selected(policy: SelectionPolicy, alias: str) -> list[Finding]:
    """An explicitly selected built-in whose hardware probe fails: startup fails."""
    profile = policy.profile
    builtin = policy.aliases()[alias]
    if builtin.explicit_probe is None:
        return []
    try:
        present = builtin.explicit_probe()
        problem = "" if present else "its hardware is not available on this machine"
    except Exception as exc:
        problem = f"probing its hardware raised {exc_line(exc)}"
    if not problem:
        return []
    return [
        Finding(
            code="selected-platform-unavailable",
            severity="error",
            message=(
                f"{profile.selector_env}={alias!r} selects the built-in platform, but {problem}. "
                "Platform selection fails at startup."
            ),
            fix=(
                f"Unset {profile.selector_env} to use what is present, or install what the "
                f"platform needs ({builtin.requirement or 'its hardware and drivers'})."
            ),
            group=profile.platform_group,
            plugin=alias,
        )
    ]


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


@dataclass(frozen=True)
class _Activation:
    ep: PluginEntryPoint
    considered: bool  # called at startup in the current mode
    qualname: str | None = None
    finding: Finding | None = None


def _activate_one(policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool) -> _Activation:
    """Call one ``activate()`` and validate what it names, catching whatever it raises."""
    from cardcage.platforms.errors import PlatformError
    from cardcage.platforms.selection import load_platform_class

    group = policy.profile.platform_group
    severity: Severity = "error" if considered else "warning"
    when = "at startup" if considered else "if it is selected"
    try:
        result = ep.load()()  # type: ignore[operator]
    except (Exception, SystemExit) as exc:
        return _Activation(
            ep,
            considered,
            finding=Finding(
                code="platform-activation-failed",
                severity=severity,
                message=(
                    f"Platform plugin {describe_ep(ep)}: activate() raised {exc_line(exc)}. "
                    f"Platform selection aborts {when}."
                ),
                fix=(
                    f"Fix or uninstall {ep.dist_name or ep.value}; activate() must return None "
                    "when its hardware is absent, never raise."
                ),
                group=group,
                plugin=ep.name,
                distributions=(ep_dist(ep),),
                traceback=_tb(exc),
            ),
        )
    if result is None:
        return _Activation(ep, considered)
    if not isinstance(result, str) or not result.strip():
        return _Activation(
            ep,
            considered,
            finding=Finding(
                code="platform-activation-invalid",
                severity=severity,
                message=(
                    f"Platform plugin {describe_ep(ep)}: activate() returned "
                    f"{type(result).__name__} {result!r:.80}; it must return the platform "
                    "class's qualified name (str) or None."
                    f" Platform selection aborts {when}."
                ),
                fix=f"Fix activate() in {ep.dist_name or ep.value}.",
                group=group,
                plugin=ep.name,
                distributions=(ep_dist(ep),),
            ),
        )
    qualname = result.strip()
    try:
        load_platform_class(policy, qualname, ep)
    except PlatformError as exc:
        return _Activation(
            ep,
            considered,
            qualname,
            Finding(
                code="invalid-platform-class",
                severity=severity,
                message=f"{exc} Platform selection aborts {when}.",
                fix=(
                    f"Make {qualname} importable, a subclass of "
                    f"{policy.base_class.__module__}.{policy.base_class.__qualname__} with "
                    f"_enum = PlatformEnum.OOT, device_name and device_type; fix it in "
                    f"{ep.dist_name or ep.value}."
                ),
                group=group,
                plugin=ep.name,
                distributions=(ep_dist(ep),),
                traceback=_tb(exc),
            ),
        )
    return _Activation(ep, considered, qualname)


def _check_platforms(policy: SelectionPolicy, eps: tuple[PluginEntryPoint, ...]) -> list[Finding]:
    """Activate every platform entry point; report raising ones and ambiguous automatic picks."""
    profile = policy.profile
    selector = selector_value(profile)
    allowed = allowlist_value(profile) if policy.allowlist_filters_automatic else None
    results = []
    for ep in sorted(eps, key=ep_order):
        # Who startup would call: the selected entry point, or every allowed one.
        considered = ep.name == selector if selector else allowed is None or ep.name in allowed
        results.append(_activate_one(policy, ep, considered))
    findings = [r.finding for r in results if r.finding is not None]
    for r in results:
        if selector and r.considered and r.qualname is None and r.finding is None:
            findings.append(
                Finding(
                    code="selected-platform-unavailable",
                    severity="error",
                    message=(
                        f"{profile.selector_env}={selector!r} selects platform plugin "
                        f"{describe_ep(r.ep)}, but its activate() returned None (hardware not "
                        "available on this machine?). Platform selection fails at startup."
                    ),
                    fix=(
                        f"Unset {profile.selector_env} to use what is present, or check the "
                        "vendor's driver and runtime installation."
                    ),
                    group=profile.platform_group,
                    plugin=r.ep.name,
                    distributions=(ep_dist(r.ep),),
                )
            )
    activated = [r for r in results if r.considered and r.qualname is not None]
    if not selector and len(activated) > 1:
        names = ", ".join(describe_ep(r.ep) for r in activated)
        findings.append(
            Finding(
                code="multiple-platforms",
                severity="error",
                message=(
                    f"{len(activated)} platform plugins activate on this machine and "
                    f"{profile.selector_env} is not set: {names}. Automatic selection refuses "
                    "to guess."
                ),
                fix=(
                    f"Set {profile.selector_env} to one of: "
                    f"{', '.join(repr(r.ep.name) for r in activated)}; or uninstall the "
                    "distributions you do not need."
                ),
                group=profile.platform_group,
                distributions=tuple(ep_dist(r.ep) for r in activated),
            )
        )
    return findings


def _check_imports(group: str, eps: tuple[PluginEntryPoint, ...]) -> list[Finding]:
    """Import every general plugin in this process; report the ones that fail or are unusable."""
    from cardcage.hooks.registry import HookRegistry, HookSource, plugin_source

    findings = []
    for ep in eps:
        source = HookSource(ep.name, ep.dist_name)
        problem: str | None = None
        trace: str | None = None
        try:
            with plugin_source(source):
                callback = ep.load()
        except (Exception, SystemExit) as exc:
            problem, trace = f"failed to import: {exc_line(exc)}", _tb(exc)
        else:
            if not callable(callback):
                problem = f"names {type(callback).__name__} {callback!r:.60}, which is not callable"
        # Hooks registered at import time stay out of this process's registry: doctor never
        # applies them, and a later load_plugins() in the same process would double them.
        HookRegistry.discard_source(source)
        if problem is None:
            continue
        findings.append(
            Finding(
                code="plugin-import-failed",
                severity="error",
                message=(
                    f"General plugin {describe_ep(ep)} in group {group!r} ({ep.value}) {problem}. "
                    "load_plugins() skips it (or aborts startup if it ships with the selected "
                    "platform)."
                ),
                fix=(
                    f"Fix or reinstall {ep.dist_name or 'its distribution'} (pip install "
                    f"--force-reinstall {ep.dist_name or '<distribution>'}), or uninstall it."
                ),
                group=group,
                plugin=ep.name,
                distributions=(ep_dist(ep),),
                traceback=trace,
            )
        )
    return findings


def _check_env_vars() -> list[Finding]:
    """Declared variables whose value does not parse: the runtime raises when it reads them."""
    findings = []
    for module, registry in env_registries():
        for var in registry:
            row = env_row(module, registry, var)
            if row.error is not None:
                findings.append(
                    Finding(
                        code="invalid-env-var",
                        severity="error",
                        message=row.error,
                        fix=f"Set {var.name} to a valid {var.kind} value, or unset it.",
                    )
                )
    return findings


def _runtime_broken(dist: str, profile: RuntimeProfile, exc: BaseException) -> Finding:
    """An installed runtime whose selection policy cannot be imported: it cannot start."""
    return Finding(
        code="runtime-import-failed",
        severity="error",
        message=(
            f"The {profile.name} runtime is installed but its platform selection could not be "
            f"imported: {exc_line(exc)}. That runtime cannot select a platform."
        ),
        fix=f"Reinstall it (pip install --force-reinstall {dist}), or uninstall it.",
        group=profile.platform_group,
        distributions=(DistRef(dist, None),),
        traceback=_tb(exc),
    )


def run_doctor() -> DoctorReport:
    """Every check, in the order a reader would want them: names, variables, platforms, imports.

    Platform checks run for every installed runtime whose selection policy is known (SRT, and
    diffusion once cardcage-diffusion-runtime is installed), each with that runtime's policy:
    its built-in aliases, the aliases its selector accepts, whether its allowlist filters
    automatic discovery. Name and import checks cover every watched group.
    """
    snapshot = current_snapshot()
    profiles = runtime_profiles()
    groups = watched_groups(snapshot, profiles)
    roles = group_roles(profiles)
    findings: list[Finding] = []
    policies: list[SelectionPolicy] = []
    for profile in profiles:
        ref = runtime_selection(profile)
        if ref is None:
            continue
        try:
            policies.append(ref.load_policy())
        except Exception as exc:
            findings.append(_runtime_broken(ref.distribution, profile, exc))
    for group in groups:
        findings.extend(_check_duplicates(group, snapshot.group(group)))
    for policy in policies:
        findings.extend(_check_reserved(policy, snapshot.group(policy.profile.platform_group)))
    findings.extend(_check_env_vars())
    first_per_allowlist = {p.allowlist_env: p for p in reversed(profiles)}  # one report each
    for profile in first_per_allowlist.values():
        findings.extend(_check_allowlist(profile, snapshot))
    for policy in policies:
        platform_eps = snapshot.group(policy.profile.platform_group)
        findings.extend(_check_selector(policy, platform_eps))
        findings.extend(_check_platforms(policy, platform_eps))
    for group in groups:
        role = roles.get(group)
        kind = role[1] if role is not None else kind_of_unknown_group(group)
        if kind == "general":
            findings.extend(_check_imports(group, snapshot.group(group)))
    return DoctorReport(
        profiles=tuple(p.name for p in profiles),
        groups=tuple(groups),
        entry_points=sum(len(snapshot.group(g)) for g in groups),
        findings=tuple(findings),
    )
