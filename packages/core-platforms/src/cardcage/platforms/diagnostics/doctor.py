"""``cardcage doctor``: problems a CI gate should catch before the runtime starts.

Severity says what a problem does to startup: an error breaks or silently changes it, a warning
matters once the plugin is selected or allowed, info never affects it (``--strict`` fails on
errors and warnings only). So a general plugin that startup never imports (the plugins of a
platform distribution that was not selected) has its problems reported as info, and one whose
``register()`` ran and registered nothing gets an info finding ("executed, 0 hooks
registered"). A plugin written for SGLang's own runtime (it imports ``sglang`` where SGLang is
absent, or hands cardcage an SGLang platform class) gets ``plugin-targets-sglang``, whichever
step found it, with both ways out.

The report also says, per runtime, what doctor concluded startup would do (``startup``): the
platform it selects (or that it cannot tell, and why) and the distributions whose general
plugins it excludes, by cardcage's rule, automatic mode included.
"""

from __future__ import annotations

import difflib
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks.loader import allowlist_scope

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.errors import RuntimeRegistrationError
    from cardcage.hooks.loader import PlatformChoice
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry
    from cardcage.hooks.runtimes import Runtime
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.selection import SelectionPolicy

from ._common import (
    DistRef,
    Severity,
    allowlist_value,
    choose_runtimes,
    current_snapshot,
    describe_ep,
    ep_dist,
    ep_order,
    exc_line,
    group_roles,
    kind_of_unknown_group,
    normalize,
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
class SelectedPlatform:
    """The platform plugin startup would select: entry point, distribution and class."""

    plugin: str
    distribution: str | None
    version: str | None
    #: ``module.Class``, as ``cardcage platform`` names it, once the class loads and passes
    #: validation; else what ``activate()`` returned, verbatim; None when ``activate()`` did
    #: not return a name.
    qualname: str | None


@dataclass(frozen=True)
class RuntimeStartup:
    """What doctor concluded one runtime's startup would do: which platform it selects and whose
    general plugins it excludes (the same conclusion that grades the general plugins)."""

    runtime: str
    mode: Literal["explicit", "automatic"]
    selector_env: str
    selector: str | None
    #: Whether doctor can tell what startup selects. False when startup fails before it loads
    #: general plugins for a reason that leaves the selection open (``detail`` says which).
    known: bool
    #: The selected platform plugin; None for a built-in platform or when not ``known``.
    platform: SelectedPlatform | None
    #: The built-in alias the selector names; None otherwise (automatic mode does not say which
    #: built-in of the fallback chain matches: ``cardcage platform`` does).
    builtin: str | None
    #: Whether doctor reported an error in this runtime's platform group: selection aborts.
    selection_fails: bool
    #: Sorted names of the distributions whose general plugins startup excludes (they provide a
    #: platform entry point but did not supply the selected platform); None when not ``known``.
    excluded_distributions: tuple[str, ...] | None
    #: The conclusion in words.
    detail: str


@dataclass(frozen=True)
class DoctorReport:
    profiles: tuple[str, ...]
    groups: tuple[str, ...]
    entry_points: int
    findings: tuple[Finding, ...]
    #: Per checked runtime, the selection and exclusions doctor concluded (SRT first).
    startup: tuple[RuntimeStartup, ...] = ()

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
            "startup": to_json(self.startup),
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
        if policy.reserves(ep.name)
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
    builtin = policy.builtin_named(selector) if selector else None
    if builtin is not None and builtin.explicit_allowed:
        return _check_builtin_selected(policy, builtin.alias)
    if not selector or selector in names:
        return []
    choices = sorted(names | aliases)
    close = difflib.get_close_matches(selector, choices, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "no platform entry point and no built-in platform"
    if builtin is not None:
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
    qualname: str | None = None  # what activate() returned, stripped
    finding: Finding | None = None
    #: ``module.Class`` of the class ``qualname`` names, once it loaded and passed validation.
    platform_class: str | None = None


def _sglang_finding(
    severity: Severity,
    problem: str,
    fix: str,
    group: str,
    ep: PluginEntryPoint,
    exc: BaseException | None,
) -> Finding:
    """A plugin written for SGLang's own runtime (it imports ``sglang.*``, or hands cardcage an
    SGLang class): one code whichever step found it, the step named in the message."""
    return Finding(
        code="plugin-targets-sglang",
        severity=severity,
        message=problem,
        fix=fix,
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(exc) if exc is not None else None,
    )


def _activation_failed(
    policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool, step: str, exc: BaseException
) -> Finding:
    """Importing the entry point (``step="import"``) or calling ``activate()`` raised."""
    from cardcage.hooks.errors import missing_sglang_module, targets_sglang_problem
    from cardcage.platforms.selection import _sglang_fix

    group = policy.profile.platform_group
    severity: Severity = "error" if considered else "warning"
    when = "at startup" if considered else "if it is selected"
    dist = ep.dist_name or ep.value
    sglang_module = missing_sglang_module(exc)
    if sglang_module is not None:
        what = f"importing its entry point ({ep.value})" if step == "import" else "its activate()"
        return _sglang_finding(
            severity,
            targets_sglang_problem(f"Platform plugin {describe_ep(ep)}", what, sglang_module, exc)
            + f" Platform selection aborts {when}.",
            _sglang_fix(policy, ep),
            group,
            ep,
            exc,
        )
    if step == "import":
        return Finding(
            code="platform-import-failed",
            severity=severity,
            message=(
                f"Platform plugin {describe_ep(ep)}: importing its entry point ({ep.value}) "
                f"raised {exc_line(exc)}, so its activate() was never called. Platform "
                f"selection aborts {when}."
            ),
            fix=(
                f"Fix or reinstall {dist} (pip install --force-reinstall {dist}), or uninstall "
                "it; the entry point's module must import on any machine, with or without its "
                "hardware."
            ),
            group=group,
            plugin=ep.name,
            distributions=(ep_dist(ep),),
            traceback=_tb(exc),
        )
    return Finding(
        code="platform-activation-failed",
        severity=severity,
        message=(
            f"Platform plugin {describe_ep(ep)}: activate() raised {exc_line(exc)}. "
            f"Platform selection aborts {when}."
        ),
        fix=(
            f"Fix or uninstall {dist}; activate() must return None when its hardware is absent, "
            "never raise."
        ),
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(exc),
    )


def _activate_one(policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool) -> _Activation:
    """Import one platform entry point, call its ``activate()`` and validate the class it names,
    catching whatever they raise.

    All of it runs as cardcage's selection runs it (``_activating_context``), so plugin code
    asking ``cardcage.platforms.host.platform_host()`` learns that cardcage is the host.
    """
    from cardcage.hooks.errors import TargetsSGLangError
    from cardcage.platforms.errors import PlatformError
    from cardcage.platforms.selection import _activating_context, load_platform_class

    group = policy.profile.platform_group
    severity: Severity = "error" if considered else "warning"
    when = "at startup" if considered else "if it is selected"
    failure: tuple[str, BaseException] | None = None
    result: object = None
    with _activating_context(ep):
        try:
            callback = ep.load()
        except (Exception, SystemExit) as exc:
            failure = ("import", exc)
        else:
            try:
                result = callback()  # type: ignore[operator]
            except (Exception, SystemExit) as exc:
                failure = ("activate", exc)
    if failure is not None:
        return _Activation(
            ep, considered, finding=_activation_failed(policy, ep, considered, *failure)
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
        with _activating_context(ep):
            cls = load_platform_class(policy, qualname, ep)
    except PlatformError as exc:
        if isinstance(exc, TargetsSGLangError):
            finding = _sglang_finding(
                severity,
                f"{exc.problem} Platform selection aborts {when}.",
                exc.fix,
                group,
                ep,
                exc,
            )
        else:
            finding = Finding(
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
            )
        return _Activation(ep, considered, qualname, finding)
    return _Activation(
        ep, considered, qualname, platform_class=f"{cls.__module__}.{cls.__qualname__}"
    )


#: The selection a runtime would make is not known (startup fails before plugins load, or
#: several platforms activate): general plugins are checked as if none were excluded.
_UNKNOWN: Any = object()


@dataclass(frozen=True)
class _PlatformCheck:
    """What ``_check_platforms`` found out: its findings, and the platform startup would select,
    as the general-plugin loader sees it (``_UNKNOWN`` when startup would fail before loading
    general plugins, ``unknown`` then saying why)."""

    findings: list[Finding]
    choice: PlatformChoice | None
    activations: tuple[_Activation, ...]
    unknown: str = ""

    def chosen(self) -> _Activation | None:
        """The activation of the selected platform entry point, when a plugin is selected."""
        choice = self.choice
        if choice is _UNKNOWN or choice is None or choice.entry_point is None:
            return None
        return next(
            (r for r in self.activations if r.considered and r.ep.name == choice.entry_point),
            None,
        )


def _check_platforms(policy: SelectionPolicy, eps: tuple[PluginEntryPoint, ...]) -> _PlatformCheck:
    """Activate every platform entry point; report raising ones and ambiguous automatic picks.

    Also finds the platform startup would select, as the general-plugin loader sees it
    (``_UNKNOWN`` when startup would fail before loading general plugins).
    """
    from cardcage.hooks.loader import PlatformChoice

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
    choice: PlatformChoice | None = _UNKNOWN
    unknown = ""
    failed = [r for r in results if r.considered and r.qualname is None and r.finding is not None]
    if selector:
        match = next((r.ep for r in results if r.ep.name == selector), None)
        if match is not None:
            choice = PlatformChoice(selector, match.dist_name, f"{profile.selector_env}={selector}")
        else:
            builtin = policy.builtin_named(selector)
            if builtin is not None and builtin.explicit_allowed:
                choice = PlatformChoice(None, None, f"{profile.selector_env}={selector}")
            else:
                unknown = (
                    f"{profile.selector_env}={selector!r} names no platform entry point and no "
                    "built-in platform it accepts, so platform selection fails"
                )
    elif failed:
        unknown = (
            f"platform plugin {describe_ep(failed[0].ep)} fails in automatic selection, so "
            "startup aborts before it loads general plugins"
        )
    elif len(activated) == 1:
        # No activate() failed (a bad class still says which platform startup means to use).
        ep = activated[0].ep
        choice = PlatformChoice(ep.name, ep.dist_name, "automatic platform selection")
    elif not activated:
        choice = PlatformChoice(None, None, "automatic platform selection")
    else:
        unknown = (
            f"{len(activated)} platform plugins activate and {profile.selector_env} is not set, "
            "so automatic selection refuses to guess"
        )
    return _PlatformCheck(findings, choice, tuple(results), unknown)


def _startup_summary(
    startup: _Startup, check: _PlatformCheck, findings: list[Finding]
) -> RuntimeStartup:
    """``startup``'s conclusion, with the selected plugin's activation, as a report row."""
    profile = startup.profile
    selector = selector_value(profile)
    env = profile.selector_env
    fails = any(f.severity == "error" and f.group == profile.platform_group for f in findings)
    platform: SelectedPlatform | None = None
    builtin: str | None = None
    if not startup.known:
        what = check.unknown or "doctor cannot tell which platform startup selects"
        detail = (
            f"which platform it selects is unknown: {what}; doctor grades general plugins as if "
            "none were excluded"
        )
    else:
        chosen = check.chosen()
        if chosen is not None:
            dist = ep_dist(chosen.ep)
            platform = SelectedPlatform(
                chosen.ep.name, dist.name, dist.version, chosen.platform_class or chosen.qualname
            )
            detail = (
                f"{env}={selector!r} selects platform plugin {describe_ep(chosen.ep)}"
                if selector
                else f"automatic selection selects platform plugin {describe_ep(chosen.ep)}, the "
                "only one that activates"
            )
        elif selector:
            builtin = selector.casefold()
            detail = f"{env}={selector!r} selects the built-in {builtin!r} platform"
        else:
            detail = (
                "no platform plugin activates, so automatic selection falls back to a built-in "
                "platform (cardcage platform shows which)"
            )
        if fails:
            detail += ", and platform selection fails (see the errors)"
        excluded = startup.excluded_names
        detail += (
            f"; the general plugins of {', '.join(excluded)} are excluded"
            if excluded
            else "; no distribution's general plugins are excluded"
        )
    return RuntimeStartup(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=env,
        selector=selector or None,
        known=startup.known,
        platform=platform,
        builtin=builtin,
        selection_fails=fails,
        excluded_distributions=startup.excluded_names if startup.known else None,
        detail=detail,
    )


def _broken_startup(profile: RuntimeProfile) -> RuntimeStartup:
    """A runtime whose selection policy cannot be imported: nothing about its startup is known."""
    selector = selector_value(profile)
    return RuntimeStartup(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=profile.selector_env,
        selector=selector or None,
        known=False,
        platform=None,
        builtin=None,
        selection_fails=True,
        excluded_distributions=None,
        detail="which platform it selects is unknown: its platform selection cannot be imported",
    )


class _Startup:
    """What startup would do with one runtime's general plugins, as far as doctor can tell."""

    def __init__(
        self,
        profile: RuntimeProfile,
        choice: PlatformChoice | None,
        registry: type[BaseHookRegistry] | None,
        snapshot: EntryPointSnapshot,
    ) -> None:
        from cardcage.hooks.loader import excluded_distributions

        self.profile = profile
        self.choice = choice
        self.registry = registry
        self.allowed = allowlist_value(profile)
        self.known = choice is not _UNKNOWN
        #: The excluded distributions' names as their metadata spells them, sorted.
        self.excluded_names: tuple[str, ...] = ()
        self.excluded: set[str] = set()
        self.selected_dist: str | None = None
        if self.known:
            self.excluded_names = tuple(sorted(excluded_distributions(choice, profile, snapshot)))
            self.excluded = {normalize(d) for d in self.excluded_names}
            if choice is not None and choice.dist_name:
                self.selected_dist = normalize(choice.dist_name)

    def fate(self, ep: PluginEntryPoint) -> str:
        """``not-allowed``, ``excluded``, ``fatal`` (ships with the selected platform),
        ``loads`` (best effort), or ``unknown`` (the selection is not known)."""
        if self.allowed is not None and ep.name not in self.allowed:
            return "not-allowed"
        if not self.known:
            return "unknown"
        dist = normalize(ep.dist_name) if ep.dist_name else None
        if dist is not None and dist in self.excluded:
            return "excluded"
        if dist is not None and dist == self.selected_dist:
            return "fatal"
        return "loads"

    def runs_register(self, fate: str) -> bool:
        """Whether startup calls the plugin's ``register()`` (so doctor does too)."""
        return self.registry is not None and fate in ("loads", "fatal")


def _consequence(startup: _Startup | None, ep: PluginEntryPoint, fate: str) -> tuple[Severity, str]:
    """The severity of a problem with general plugin ``ep``, and what it does at startup."""
    if startup is not None and fate == "not-allowed":
        return (
            "warning",
            f"Startup skips it while {startup.profile.allowlist_env} leaves it out; it breaks "
            "once it is allowed.",
        )
    if startup is not None and fate == "excluded":
        reason = startup.choice.reason if startup.choice is not None else "the selection"
        return (
            "info",
            f"Startup never imports it: {ep.dist_name} provides a platform entry point but not "
            f"the selected platform ({reason}), so its general plugins are excluded. It matters "
            "only once that distribution's platform is selected.",
        )
    if fate == "fatal":
        return ("error", "It ships with the selected platform, so load_plugins() aborts startup.")
    if fate == "loads":
        return ("error", "load_plugins() logs it and skips it at startup.")
    return (
        "error",
        "load_plugins() skips it (or aborts startup if it ships with the selected platform).",
    )


def _check_general(
    group: str, eps: tuple[PluginEntryPoint, ...], startup: _Startup | None
) -> list[Finding]:
    """Import every general plugin in this process; call ``register()`` of those startup calls.

    Hooks a plugin registers (at import time or in ``register()``) are counted, then discarded:
    doctor never applies them, and a later load_plugins() in the same process would double
    them. Problems of plugins that startup never imports (the general plugins of platform
    distributions that were not selected) are info; of plugins the allowlist leaves out,
    warnings.
    """
    from cardcage.hooks.registry import HookRegistry, HookSource, plugin_source

    fates = {ep: startup.fate(ep) if startup is not None else "unknown" for ep in eps}
    # A duplicate name among the plugins startup loads stops load_plugins() before any import
    # (reported as duplicate-entry-point): then no register() runs at startup, nor here.
    running = [ep.name for ep in eps if startup is not None and startup.runs_register(fates[ep])]
    blocked = len(running) != len(set(running))
    findings = []
    for ep in eps:
        fate = fates[ep]
        source = HookSource(ep.name, ep.dist_name)
        problem: BaseException | str | None = None
        registering = False
        try:
            with plugin_source(source):
                callback = ep.load()
        except (Exception, SystemExit) as exc:
            problem = exc
        else:
            if not callable(callback):
                problem = f"names {type(callback).__name__} {callback!r:.60}, which is not callable"
            elif startup is not None and startup.runs_register(fate) and not blocked:
                registering = True
                try:
                    with plugin_source(source):
                        callback()
                except (Exception, SystemExit) as exc:
                    problem = exc
        registries = dict.fromkeys(
            [startup.registry if startup is not None else None, HookRegistry]
        )
        dropped = {r: r.discard_source(source) for r in registries if r is not None}
        if problem is not None:
            findings.append(_general_problem(group, ep, startup, fate, problem, registering))
            continue
        # register() ran and succeeded: if it registered nothing, that is worth knowing.
        ran = startup if registering else None
        if ran is not None and ran.registry is not None and dropped[ran.registry] == 0:
            findings.append(_no_hooks(group, ep, ran.profile, ran.registry))
    return findings


def _general_problem(
    group: str,
    ep: PluginEntryPoint,
    startup: _Startup | None,
    fate: str,
    problem: BaseException | str,
    registering: bool,
) -> Finding:
    """A general plugin that failed to import (``registering`` False) or in ``register()``."""
    from cardcage.hooks.errors import (
        missing_sglang_module,
        targets_sglang_fix,
        targets_sglang_problem,
    )

    severity, consequence = _consequence(startup, ep, fate)
    subject = f"General plugin {describe_ep(ep)} in group {group!r}"
    dist = ep.dist_name or "<distribution>"
    if isinstance(problem, BaseException):
        sglang_module = missing_sglang_module(problem)
        if sglang_module is not None:
            step = "its register()" if registering else f"importing it ({ep.value})"
            return _sglang_finding(
                severity,
                f"{targets_sglang_problem(subject, step, sglang_module, problem)} {consequence}",
                f"{targets_sglang_fix()}; or uninstall {dist}.",
                group,
                ep,
                problem,
            )
        what = (
            f"raised {exc_line(problem)} in register()"
            if registering
            else (f"failed to import: {exc_line(problem)}")
        )
    else:
        what = problem
    return Finding(
        code="plugin-register-failed" if registering else "plugin-import-failed",
        severity=severity,
        message=f"{subject} ({ep.value}) {what}. {consequence}",
        fix=(
            f"Fix register() in {dist} (the hooks it registered before raising are discarded), "
            "or uninstall it."
            if registering
            else f"Fix or reinstall {dist} (pip install --force-reinstall {dist}), or uninstall it."
        ),
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(problem) if isinstance(problem, BaseException) else None,
    )


def _no_hooks(
    group: str, ep: PluginEntryPoint, profile: RuntimeProfile, registry: type[BaseHookRegistry]
) -> Finding:
    """A general plugin whose ``register()`` ran and registered nothing: info, not a problem."""
    from cardcage.hooks.errors import SGLANG_PORTING_GUIDE

    name = f"{registry.__module__}.{registry.__qualname__}"
    return Finding(
        code="plugin-registered-no-hooks",
        severity="info",
        message=(
            f"General plugin {describe_ep(ep)} in group {group!r} ({ep.value}): executed, 0 "
            f"hooks registered. Its register() ran without error and registered no hook with "
            f"{name}, the {profile.name} runtime's registry, so under cardcage it changes nothing "
            "through hooks. That is expected of a plugin that only has side effects (registering "
            "an op, setting defaults); a plugin written for SGLang's own runtime registers with "
            "SGLang's registry, which cardcage never applies."
        ),
        fix=(
            f"Nothing, if that is what the plugin means to do. To hook a function under "
            f"cardcage, register the hook with {name} in register(); to port a plugin written "
            f"for SGLang, follow the porting guide ({SGLANG_PORTING_GUIDE})."
        ),
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
    )


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


def _registration_broken(exc: RuntimeRegistrationError) -> Finding:
    """A ``cardcage.runtimes`` entry point that gives no usable runtime: it cannot start."""
    return Finding(
        code="runtime-import-failed",
        severity="error",
        message=str(exc),
        fix=(
            f"Reinstall {exc.distribution} (pip install --force-reinstall {exc.distribution}), "
            "or uninstall it."
            if exc.distribution
            else "Reinstall or remove the distribution that registers it."
        ),
        group=exc.group,
        plugin=exc.plugin,
        distributions=(DistRef(exc.distribution, None),) if exc.distribution else (),
        traceback=_tb(exc.__cause__) if exc.__cause__ is not None else None,
    )


def _registry(runtime: Runtime) -> type[BaseHookRegistry] | None:
    """The hook registry of ``runtime``; None when it cannot be imported (doctor then imports
    that runtime's general plugins without calling their ``register()``)."""
    try:
        return runtime.load_hook_registry()
    except Exception:
        return None


def run_doctor(runtimes: Sequence[str] | None = None) -> DoctorReport:
    """Every check, in the order a reader would want them: names, variables, platforms, imports.

    ``runtimes`` names the registered runtimes to check (default: every one, SRT first; a name
    that is not registered raises ``LookupError``). Platform checks run for each, with that
    runtime's policy:
    its built-in aliases, the aliases its selector accepts, whether its allowlist filters
    automatic discovery. Name and import checks cover every watched group. What the platform
    checks find out about the selection (which distribution startup would select, if any)
    decides, per runtime, which general plugins startup would exclude, skip or run: doctor calls
    ``register()`` only of those it would run, and grades the problems of the others lower. The
    report's ``startup`` states that conclusion per runtime (selected platform, excluded
    distributions), so a consumer can compare it with ``cardcage platform`` or another host.
    """
    from cardcage.hooks.runtimes import broken_runtimes

    snapshot = current_snapshot()
    chosen = choose_runtimes(runtimes)
    by_name = {r.name: r for r in chosen}
    profiles = tuple(r.profile for r in chosen)
    groups = (
        watched_groups(snapshot, profiles)
        if runtimes is None
        else [g for p in profiles for g in (p.platform_group, p.plugin_group)]
    )
    roles = group_roles(profiles)
    findings: list[Finding] = []
    if runtimes is None:
        findings.extend(_registration_broken(exc) for exc in broken_runtimes(snapshot))
    policies: list[SelectionPolicy] = []
    broken: dict[str, RuntimeStartup] = {}
    for runtime in chosen:
        try:
            policies.append(runtime.load_policy())
        except Exception as exc:
            findings.append(_runtime_broken(runtime.distribution, runtime.profile, exc))
            broken[runtime.name] = _broken_startup(runtime.profile)
    for group in groups:
        findings.extend(_check_duplicates(group, snapshot.group(group)))
    for policy in policies:
        findings.extend(_check_reserved(policy, snapshot.group(policy.profile.platform_group)))
    findings.extend(_check_env_vars())
    first_per_allowlist = {p.allowlist_env: p for p in reversed(profiles)}  # one report each
    for profile in first_per_allowlist.values():
        findings.extend(_check_allowlist(profile, snapshot))
    startups: dict[str, _Startup] = {}
    checks: dict[str, _PlatformCheck] = {}
    for policy in policies:
        profile = policy.profile
        platform_eps = snapshot.group(profile.platform_group)
        findings.extend(_check_selector(policy, platform_eps))
        check = _check_platforms(policy, platform_eps)
        findings.extend(check.findings)
        checks[profile.name] = check
        startups[profile.plugin_group] = _Startup(
            profile, check.choice, _registry(by_name[profile.name]), snapshot
        )
    for group in groups:
        role = roles.get(group)
        kind = role[1] if role is not None else kind_of_unknown_group(group)
        if kind == "general":
            findings.extend(_check_general(group, snapshot.group(group), startups.get(group)))
    summaries = {
        s.profile.name: _startup_summary(s, checks[s.profile.name], findings)
        for s in startups.values()
    }
    summaries.update(broken)
    return DoctorReport(
        profiles=tuple(p.name for p in profiles),
        groups=tuple(groups),
        entry_points=sum(len(snapshot.group(g)) for g in groups),
        findings=tuple(findings),
        startup=tuple(summaries[p.name] for p in profiles if p.name in summaries),
    )
