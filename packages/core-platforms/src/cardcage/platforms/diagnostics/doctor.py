"""``cardcage doctor``: problems a CI gate should catch before the runtime starts.

Severity says what a problem does to startup: an error breaks or silently changes it, a warning
matters once the plugin is selected or allowed, info never affects it (``--strict`` fails on
errors and warnings only). So a general plugin that startup never imports (the plugins of a
platform distribution that was not selected) has its problems reported as info, and one whose
``register()`` ran and registered nothing gets an info finding ("executed, 0 hooks
registered"). A plugin written for SGLang's own runtime (it imports ``sglang`` where SGLang is
absent, or hands cardcage an SGLang platform class) gets ``plugin-targets-sglang``, whichever
step found it, with both ways out.

The platform checks are the selection engine's own (``cardcage.platforms.selection``'s
``diagnose_selection``): the rules startup enforces, run in startup's order, with doctor going on
after the first error. So doctor reports an error exactly where ``current_platform`` raises, and
the first one is the one it raises.

The report also says, per runtime, what doctor concluded startup would do (``startup``): the
platform it selects (or that it cannot tell, and why) and the distributions whose general
plugins it excludes, by cardcage's rule, automatic mode included.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks.loader import allowlist_scope
from cardcage.hooks.spelling import closest

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from cardcage.hooks.errors import RuntimeRegistrationError
    from cardcage.hooks.loader import PlatformChoice
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry, HookSource
    from cardcage.hooks.runtimes import Runtime
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.selection import SelectionOutcome, SelectionPolicy

from cardcage.platforms.findings import DistRef, Finding, Severity

from ._common import (
    allowlist_value,
    choose_runtimes,
    current_snapshot,
    describe_ep,
    ep_dist,
    exc_line,
    group_roles,
    hosted,
    kind_of_unknown_group,
    normalize,
    selector_value,
    to_json,
    watched_groups,
)
from .env import env_registries, env_row
from .hooks import KernelRow, kernel_rows
from .host_releases import HostRelease, release_findings


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
    #: The kernels the class declares, with the host ops each is meant for (as ``cardcage
    #: hooks`` lists them); () when it declares none or does not load.
    kernels: tuple[KernelRow, ...] = ()


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
    #: The built-in alias startup selects: the one the selector names, or in automatic mode the
    #: first of the fallback chain whose probe matches; None otherwise.
    builtin: str | None
    #: Whether platform selection raises at startup (the first error the engine found).
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
    #: The installed host runtimes (SGLang) by release, read from their metadata.
    hosts: tuple[HostRelease, ...] = ()

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
            "hosts": to_json(self.hosts),
            "findings": to_json(self.findings),
        }


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
        close = closest(name, known)
        hint = f" Did you mean {close!r}?" if close else ""
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


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


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


#: The selection a runtime would make is not known (startup fails before plugins load, or
#: several platforms activate): general plugins are checked as if none were excluded.
_UNKNOWN: Any = object()


@dataclass(frozen=True)
class _PlatformCheck:
    """What the selection engine found for one runtime, and the platform startup would select
    as the general-plugin loader sees it (``_UNKNOWN`` when startup would fail before loading
    general plugins, ``unknown`` then saying why)."""

    outcome: SelectionOutcome
    choice: PlatformChoice | None
    unknown: str = ""

    @property
    def findings(self) -> list[Finding]:
        """The engine's findings, less a variable that does not parse (a probe reading it
        raised): ``invalid-env-var`` reports every such variable once."""
        from cardcage.hooks.errors import InvalidEnvVarError

        return [f for f in self.outcome.findings if not isinstance(f.error, InvalidEnvVarError)]

    @property
    def fails(self) -> bool:
        """Startup's platform selection raises."""
        return self.outcome.first_error() is not None


def _check_platforms(policy: SelectionPolicy, snapshot: EntryPointSnapshot) -> _PlatformCheck:
    """Run the selection engine thoroughly (every check, every entry point) and tell, from what
    it concluded, which platform the general-plugin loader would see selected."""
    from cardcage.hooks.loader import PlatformChoice
    from cardcage.platforms.selection import diagnose_selection

    outcome = diagnose_selection(policy, snapshot)
    env = policy.profile.selector_env
    selector = outcome.selector
    considered = [a for a in outcome.activations if a.considered]
    activated = [a for a in considered if a.qualname is not None]
    failed = [a for a in considered if a.qualname is None and a.finding is not None]
    if selector:
        # The selector names what startup selects, even when selecting it then fails.
        if outcome.selected is not None:
            ep = outcome.selected.ep
            return _PlatformCheck(
                outcome, PlatformChoice(selector, ep.dist_name, f"{env}={selector}")
            )
        builtin = policy.builtin_named(selector)
        if builtin is not None and builtin.explicit_allowed:
            return _PlatformCheck(outcome, PlatformChoice(None, None, f"{env}={selector}"))
        unknown = (
            f"{env}={selector!r} names no platform entry point and no built-in platform it "
            "accepts, so platform selection fails"
        )
        return _PlatformCheck(outcome, _UNKNOWN, unknown)
    if failed:
        unknown = (
            f"platform plugin {describe_ep(failed[0].ep)} fails in automatic selection, so "
            "startup aborts before it loads general plugins"
        )
        return _PlatformCheck(outcome, _UNKNOWN, unknown)
    if len(activated) > 1:
        unknown = (
            f"{len(activated)} platform plugins activate and {env} is not set, so automatic "
            "selection refuses to guess"
        )
        return _PlatformCheck(outcome, _UNKNOWN, unknown)
    if activated:  # a bad class still says which platform startup means to use
        ep = activated[0].ep
        return _PlatformCheck(
            outcome, PlatformChoice(ep.name, ep.dist_name, "automatic platform selection")
        )
    return _PlatformCheck(outcome, PlatformChoice(None, None, "automatic platform selection"))


def _startup_summary(startup: _Startup, check: _PlatformCheck) -> RuntimeStartup:
    """``startup``'s conclusion, with the selected plugin's activation, as a report row."""
    profile = startup.profile
    outcome = check.outcome
    selector = outcome.selector
    env = profile.selector_env
    fails = check.fails
    platform: SelectedPlatform | None = None
    builtin: str | None = None
    if not startup.known:
        what = check.unknown or "doctor cannot tell which platform startup selects"
        detail = (
            f"which platform it selects is unknown: {what}; doctor grades general plugins as if "
            "none were excluded"
        )
    else:
        chosen = outcome.selected
        if chosen is not None:
            dist = ep_dist(chosen.ep)
            cls = chosen.platform_class
            qualname = f"{cls.__module__}.{cls.__qualname__}" if cls else chosen.qualname
            kernels = kernel_rows(qualname) if cls is not None else ()
            platform = SelectedPlatform(chosen.ep.name, dist.name, dist.version, qualname, kernels)
            detail = (
                f"{env}={selector!r} selects platform plugin {describe_ep(chosen.ep)}"
                if selector
                else f"automatic selection selects platform plugin {describe_ep(chosen.ep)}, the "
                "only one that activates"
            )
        elif outcome.builtin is not None:
            builtin = outcome.builtin.alias
            detail = (
                f"{env}={selector!r} selects the built-in {builtin!r} platform"
                if selector
                else "no platform plugin activates, so automatic selection falls back to the "
                f"built-in {builtin!r} platform, the first whose probe matches"
            )
        elif selector:
            detail = f"{env}={selector!r} selects the built-in {selector.casefold()!r} platform"
        elif outcome.record.qualname:
            detail = (
                "no platform plugin activates and no built-in platform's probe matches, so "
                f"automatic selection falls back to {outcome.record.qualname}"
            )
        else:
            detail = (
                "no platform plugin activates, so automatic selection falls back to the "
                "built-in platforms"
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
        ``loads`` (best effort), or ``unknown`` (the selection is not known): the loader's own
        rules (``plugin_fate``), applied to what start-up would select."""
        from cardcage.hooks.loader import plugin_fate

        return plugin_fate(
            ep,
            allowed=self.allowed,
            excluded=self.excluded if self.known else None,
            fatal={self.selected_dist} if self.selected_dist is not None else set(),
        )

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
    group: str,
    eps: tuple[PluginEntryPoint, ...],
    startup: _Startup | None,
    check_hooks: bool = False,
) -> list[Finding]:
    """Import every general plugin in this process; call ``register()`` of those startup calls.

    Hooks a plugin registers (at import time or in ``register()``) are counted, then discarded:
    a later load_plugins() in the same process would double them. With ``check_hooks``, each
    one is first applied to its target and undone at once (``_dead_hooks``), which imports the
    targets' modules; without it doctor never resolves a target. Problems of plugins that
    startup never imports (the general plugins of platform distributions that were not
    selected) are info; of plugins the allowlist leaves out, warnings.
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
        if check_hooks and registering and problem is None and startup is not None:
            findings.extend(_dead_hooks(group, ep, startup, fate, source))
        dropped = {r: r.discard_source(source) for r in registries if r is not None}
        if problem is not None:
            findings.append(_general_problem(group, ep, startup, fate, problem, registering))
            continue
        # register() ran and succeeded: if it registered nothing, that is worth knowing.
        ran = startup if registering else None
        if ran is not None and ran.registry is not None and dropped[ran.registry] == 0:
            findings.append(_no_hooks(group, ep, ran.profile, ran.registry))
    return findings


def _dead_hooks(
    group: str, ep: PluginEntryPoint, startup: _Startup, fate: str, source: HookSource
) -> list[Finding]:
    """The hooks ``source`` registered that startup could not apply, one finding per target.

    Each hook is registered again with a throw-away registry of its own, applied there without
    propagation and undone at once, so the runtime's registry and every module end as they
    began; what is left is the exception apply() met (the target's module is not installed,
    the attribute does not exist, the hook type does not fit the target).
    """
    import logging
    import warnings
    from types import MappingProxyType

    from cardcage.hooks.errors import HookApplyWarning
    from cardcage.hooks.registry import BaseHookRegistry

    registry = startup.registry
    if registry is None:
        return []
    mine = {
        target: [r for r in records if r.source == source]
        for target, records in registry.registrations().items()
    }
    probe: type[BaseHookRegistry] = type(
        "_DoctorHookProbe", (BaseHookRegistry,), {"host_registries": MappingProxyType({})}
    )
    for target, records in mine.items():
        for record in records:
            probe.register(target, record.hook, record.hook_type, source=source)
    quiet = logging.getLogger("cardcage.hooks.registry")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # the finding reports it; no traceback on stderr
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HookApplyWarning)
            report = probe.apply(propagate=False)
    finally:
        probe.unapply()
        quiet.setLevel(level)
    consequence = (
        "It ships with the selected platform, so load_plugins() aborts startup."
        if fate == "fatal"
        else "load_plugins() logs the failure at startup and the hook never runs."
    )
    dist = ep.dist_name or "<distribution>"
    return [
        Finding(
            code="hook-cannot-apply",
            severity="error",
            message=(
                f"General plugin {describe_ep(ep)} in group {group!r} registers "
                f"{len(mine[target])} hook(s) on {target!r} "
                f"({', '.join(r.hook_type.name for r in mine[target])}), which cannot be "
                f"applied: {exc_line(exc)}. {consequence}"
            ),
            fix=(
                f"Fix the target path in {dist}'s register() (it must name an existing "
                "function, method or class of a module that is installed where the plugin "
                "runs), register the hook only where its module exists, or uninstall "
                f"{dist}."
            ),
            group=group,
            plugin=ep.name,
            distributions=(ep_dist(ep),),
            traceback=_tb(exc),
        )
        for target, exc in sorted(report.failed.items())
    ]


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


def _check_early_patches(snapshot: EntryPointSnapshot, selected: set[str]) -> list[Finding]:
    """Early patches (``cardcage.hooks.early``), as this process ran them at interpreter start.

    ``CARDCAGE_EARLY_PATCHES`` is inherited by doctor's process like any other, so the ``.pth``
    line ran the named patches there: a name that matches no entry point, a variable set where
    the ``.pth`` did not run, and every recorded failure are reported. A failure of a
    distribution in ``selected`` (it supplies a selected platform) is an error: startup's
    ``load_plugins()`` raises ``EarlyPatchError`` for it. A variable that does not parse is
    ``invalid-env-var``; two distributions with one name are ``duplicate-entry-point``.
    """
    from cardcage.hooks import early
    from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES
    from cardcage.hooks.errors import InvalidEnvVarError
    from cardcage.platforms.selection_checks import check_duplicates

    eps = snapshot.group(early.EARLY_PATCHES_GROUP)
    findings = list(check_duplicates(early.EARLY_PATCHES_GROUP, eps))
    try:
        requested = CARDCAGE_EARLY_PATCHES.get()
    except InvalidEnvVarError:
        return findings
    known = sorted({ep.name for ep in eps})
    findings += [_early_unmatched(name, known) for name in requested if name not in known]
    if requested and not early.report(snapshot).booted:
        findings.append(_early_not_run(requested))
    versions = {normalize(ep.dist_name): ep.dist.version for ep in eps if ep.dist and ep.dist_name}
    findings += [_early_failed(f, selected, versions) for f in early.failures()]
    return findings


def _early_unmatched(name: str, known: list[str]) -> Finding:
    """``CARDCAGE_EARLY_PATCHES`` names ``name``, which no early-patch entry point has."""
    from cardcage.hooks.early import EARLY_PATCHES_GROUP
    from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES

    variable = CARDCAGE_EARLY_PATCHES.name
    close = closest(name, known)
    hint = f" Did you mean {close!r}?" if close else ""
    return Finding(
        code="early-patch-unmatched",
        severity="warning",
        message=f"{variable} names {name!r}, which matches no entry point in "
        f"{EARLY_PATCHES_GROUP}.{hint}",
        fix=(
            f"Fix the spelling in {variable}, remove {name!r} from it, or install the "
            f"distribution that provides it (installed: "
            f"{', '.join(repr(n) for n in known) or 'none'})."
        ),
        group=EARLY_PATCHES_GROUP,
        plugin=name,
    )


def _early_not_run(requested: Sequence[str]) -> Finding:
    """Early patches are requested, but the ``.pth`` line did not run at interpreter start."""
    from cardcage.hooks.early import EARLY_PATCHES_GROUP
    from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES

    return Finding(
        code="early-patch-not-run",
        severity="warning",
        message=(
            f"{CARDCAGE_EARLY_PATCHES.name} names {', '.join(map(repr, requested))}, but no early "
            "patch ran at this interpreter's start: the .pth file of cardcage-core-hooks was not "
            "processed (python -S, or cardcage-core-hooks is installed outside site-packages: "
            "pip --target and PYTHONPATH skip .pth files)."
        ),
        fix="Install cardcage-core-hooks into the environment's site-packages.",
        group=EARLY_PATCHES_GROUP,
    )


def _early_failed(failure: Any, selected: set[str], versions: dict[str, str]) -> Finding:
    """One recorded early-patch failure: an error when its distribution supplies a selected
    platform (startup raises ``EarlyPatchError``), a warning otherwise."""
    from cardcage.hooks.early import EARLY_PATCHES_GROUP
    from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES

    key = normalize(failure.dist_name) if failure.dist_name else None
    fatal = key is not None and key in selected
    consequence = (
        "It ships with a selected platform, so load_plugins() raises EarlyPatchError and "
        "startup fails."
        if fatal
        else "Startup goes on without it (logged and isolated)."
    )
    return Finding(
        code="early-patch-failed",
        severity="error" if fatal else "warning",
        message=(
            f"Early patch {failure.plugin!r} ({failure.dist_name}) failed {failure.line()}. "
            f"{consequence}"
        ),
        fix=(
            f"Fix or reinstall {failure.dist_name}, remove {failure.plugin!r} from "
            f"{CARDCAGE_EARLY_PATCHES.name}" + (", or select another platform." if fatal else ".")
        ),
        group=EARLY_PATCHES_GROUP,
        plugin=failure.plugin,
        distributions=(DistRef(failure.dist_name, versions.get(key or "")),)
        if failure.dist_name
        else (),
        traceback=_tb(failure.error),
    )


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


def _groups(profile: RuntimeProfile) -> tuple[str, str]:
    return (profile.platform_group, profile.plugin_group)


def _registry(runtime: Runtime) -> type[BaseHookRegistry] | None:
    """The hook registry of ``runtime``; None when it cannot be imported (doctor then imports
    that runtime's general plugins without calling their ``register()``)."""
    try:
        return runtime.load_hook_registry()
    except Exception:
        return None


def _load_policies(
    chosen: Sequence[Runtime], findings: list[Finding]
) -> tuple[list[SelectionPolicy], dict[str, RuntimeStartup]]:
    """Each runtime's selection policy; a runtime whose policy does not import is a finding and
    a startup row saying it cannot start."""
    policies: list[SelectionPolicy] = []
    broken: dict[str, RuntimeStartup] = {}
    for runtime in chosen:
        try:
            policies.append(runtime.load_policy())
        except Exception as exc:
            findings.append(_runtime_broken(runtime.distribution, runtime.profile, exc))
            broken[runtime.name] = _broken_startup(runtime.profile)
    return policies, broken


def _check_names(
    groups: Sequence[str],
    policies: Sequence[SelectionPolicy],
    hosted_groups: set[str],
    snapshot: EntryPointSnapshot,
) -> list[Finding]:
    """Duplicate entry-point names in the groups no selection check or host already covers."""
    from cardcage.platforms.selection_checks import check_duplicates

    selecting = {policy.profile.platform_group for policy in policies}  # the engine checks them
    return [
        finding
        for group in groups
        if group not in selecting and group not in hosted_groups
        for finding in check_duplicates(group, snapshot.group(group))
    ]


def _check_allowlists(
    profiles: Sequence[RuntimeProfile], hosted_runtimes: set[str], snapshot: EntryPointSnapshot
) -> list[Finding]:
    """Each allowlist variable once (the first runtime reading it), hosts' runtimes aside."""
    first_per_allowlist = {
        p.allowlist_env: p for p in reversed(profiles) if p.name not in hosted_runtimes
    }
    return [f for p in first_per_allowlist.values() for f in _check_allowlist(p, snapshot)]


@dataclass
class _RuntimeChecks:
    """What the platform checks of every runtime found, and what each runtime's startup means
    for its general plugins (keyed by plugin group)."""

    findings: list[Finding]
    startups: dict[str, _Startup]
    checks: dict[str, _PlatformCheck]
    hosted: dict[str, RuntimeStartup]

    def selected_dists(self) -> set[str]:
        return {s.selected_dist for s in self.startups.values() if s.selected_dist is not None}

    def summaries(self) -> dict[str, RuntimeStartup]:
        return {
            s.profile.name: _startup_summary(s, self.checks[s.profile.name])
            for s in self.startups.values()
        }


def _check_runtimes(
    policies: Sequence[SelectionPolicy],
    hosts: dict[str, tuple[ModuleType, SelectionPolicy]],
    by_name: dict[str, Runtime],
    snapshot: EntryPointSnapshot,
    check_hooks: bool,
) -> _RuntimeChecks:
    """Each runtime's platform checks: the selection engine's, or its host's own rules."""
    checked = _RuntimeChecks([], {}, {}, {})
    for policy in policies:
        profile = policy.profile
        if profile.name in hosts:
            found, checked.hosted[profile.name] = hosts[profile.name][0].doctor(
                policy, snapshot, check_hooks=check_hooks
            )
            checked.findings += found
            continue
        check = _check_platforms(policy, snapshot)
        checked.findings += check.findings
        checked.findings += _not_checked(policy, check)
        checked.checks[profile.name] = check
        checked.startups[profile.plugin_group] = _Startup(
            profile, check.choice, _registry(by_name[profile.name]), snapshot
        )
    return checked


def _not_checked(policy: SelectionPolicy, check: _PlatformCheck) -> list[Finding]:
    """Platform plugins whose ``activate()`` returned None here, in automatic selection.

    Their class is never loaded and their distribution's general plugins are excluded, so
    neither the class ``activate()`` would name nor the hooks of those plugins were checked: on
    a machine without the device, "no problems" would say more than doctor knows.
    """
    profile = policy.profile
    if check.outcome.selector:
        return []
    return [
        Finding(
            code="platform-not-checked",
            severity="info",
            message=(
                f"Platform plugin {describe_ep(a.ep)}: activate() returned None here (its "
                "hardware is absent), so doctor checked neither the platform class it names nor "
                f"the hooks of {a.ep.dist_name or 'its distribution'}'s general plugins, which "
                "startup excludes on this machine."
            ),
            fix=(
                f"Check them where the device is present, or with it faked present as the "
                f"plugin documents (a plugin made by cardcage new: <PREFIX>_PRESENT=1): "
                f"{profile.selector_env}={a.ep.name} cardcage doctor --strict --hooks."
            ),
            group=profile.platform_group,
            plugin=a.ep.name,
            distributions=(ep_dist(a.ep),),
        )
        for a in check.outcome.activations
        if a.considered and a.declined
    ]


def _reported_as_variable(finding: Finding, earlier: Sequence[Finding]) -> bool:
    """Whether ``finding`` is an ``activate()`` refusing a variable that a registry declares and
    an earlier ``invalid-env-var`` finding already reports (the plugin names its registry in
    ``cardcage.env_registries``): one finding per bad value."""
    cause = finding.error.__cause__ if finding.error is not None else None
    variable = getattr(cause, "variable", None)
    if finding.code != "invalid-env-var" or variable is None:
        return False
    return any(f.code == finding.code and f.message.startswith(f"{variable}=") for f in earlier)


def _unknown_kernel(platform: SelectedPlatform, row: KernelRow) -> Finding:
    """A kernel the selected platform declares for an op cardcage does not know: no host runs
    it (each host also logs the WARNING when it installs the platform's kernels)."""
    from cardcage.platforms.kernels import OPS

    close = closest(row.op, sorted(OPS))
    hint = f" Did you mean {close!r}?" if close else ""
    return Finding(
        code="kernel-unknown-op",
        severity="warning",
        message=(
            f"{row.platform} declares kernel {row.kernel} for op {row.op!r}, which cardcage does "
            f"not know, so no host runs it.{hint}"
        ),
        fix=(
            f"Name one of the ops of cardcage.platforms.kernels.OPS ({', '.join(sorted(OPS))}) "
            f"in the kernels of {row.platform}, in {platform.distribution or 'its distribution'}."
        ),
        plugin=platform.plugin,
        distributions=(DistRef(platform.distribution, platform.version),),
    )


def _selected_platforms(
    summaries: dict[str, RuntimeStartup],
) -> dict[str, tuple[str, DistRef, str | None]]:
    """Runtime name -> the platform plugin its startup selects, as the host rooms read it."""
    return {
        name: (s.platform.plugin, DistRef(s.platform.distribution, s.platform.version),
               s.platform.qualname)
        for name, s in summaries.items()
        if s.platform is not None
    }  # fmt: skip


def run_doctor(runtimes: Sequence[str] | None = None, *, check_hooks: bool = False) -> DoctorReport:
    """Every check, in the order a reader would want them: names, variables, platforms, imports.

    ``runtimes`` names the registered runtimes to check (default: every one, SRT first; a name
    that is not registered raises ``LookupError``). Platform checks run for each: the selection
    engine's own checks (``diagnose_selection``) with that runtime's policy, its platform group's
    names first. Name checks of the other watched groups, and import checks, cover every watched
    group. What the platform checks find out about the selection (which distribution startup
    would select, if any) decides, per runtime, which general plugins startup would exclude,
    skip or run: doctor calls ``register()`` only of those it would run, and grades the problems
    of the others lower. The report's ``startup`` states that conclusion per runtime (selected
    platform, excluded distributions), so a consumer can compare it with ``cardcage platform`` or
    another host. ``check_hooks`` also applies (and at once undoes) every hook those
    ``register()`` calls register, reporting each target that cannot be patched
    (``hook-cannot-apply``); it imports the targets' modules, so it is not the default.
    """
    from cardcage.hooks.runtimes import broken_runtimes

    snapshot = current_snapshot()
    chosen = choose_runtimes(runtimes)
    profiles = tuple(r.profile for r in chosen)
    groups = (
        watched_groups(snapshot, profiles)
        if runtimes is None
        else [g for p in profiles for g in (p.platform_group, p.plugin_group)]
    )
    findings: list[Finding] = []
    if runtimes is None:
        findings.extend(_registration_broken(exc) for exc in broken_runtimes(snapshot))
    policies, broken = _load_policies(chosen, findings)
    # A host's runtime (vLLM) is checked by that host's rules, all its groups included.
    hosts = {policy.profile.name: (h, policy) for policy in policies if (h := hosted(policy))}
    own = {g for h, p in hosts.values() for g in (*_groups(p.profile), *h.extra_groups())}
    groups.extend(g for h, _ in hosts.values() for g in h.extra_groups() if g not in groups)
    findings += _check_names(groups, policies, own, snapshot)
    findings += _check_env_vars()
    findings += _check_allowlists(profiles, set(hosts), snapshot)
    checked = _check_runtimes(policies, hosts, {r.name: r for r in chosen}, snapshot, check_hooks)
    findings += [f for f in checked.findings if not _reported_as_variable(f, findings)]
    roles = group_roles(profiles)
    for group in groups:
        role = roles.get(group)
        kind = role[1] if role is not None else kind_of_unknown_group(group)
        if kind == "general" and group not in own:
            findings += _check_general(
                group, snapshot.group(group), checked.startups.get(group), check_hooks
            )
    if runtimes is None:
        findings += _check_early_patches(snapshot, checked.selected_dists())
    summaries = {**checked.summaries(), **broken}
    findings += [
        _unknown_kernel(s.platform, row)
        for s in summaries.values()
        if s.platform is not None
        for row in s.platform.kernels
        if row.status == "unknown-op"
    ]
    host_findings, releases = release_findings(snapshot, _selected_platforms(summaries))
    findings += host_findings
    summaries.update(checked.hosted)
    return DoctorReport(
        profiles=tuple(p.name for p in profiles),
        groups=tuple(groups),
        entry_points=sum(len(snapshot.group(g)) for g in groups),
        findings=tuple(findings),
        startup=tuple(summaries[p.name] for p in profiles if p.name in summaries),
        hosts=releases,
    )
