"""The platform-selection rules, each written once as a check that returns findings.

``select_platform`` (``cardcage.platforms.selection``) runs these checks in startup order and
raises the ``error`` of the first finding of severity ``error``; ``cardcage doctor`` runs the same
checks through the same engine and reports every finding. A finding's ``message`` and ``fix`` are
what doctor prints; its ``error`` is the typed exception startup raises, with the message the
runtime has always raised.

The checks never raise for a plugin's fault: importing an entry point, calling its
``activate()``, loading (``cardcage.platforms.platform_class``) and constructing the class it
names all run here, and whatever they raise becomes a finding. Plugin code runs as cardcage's
selection runs it (``activating_context``), so code asking
``cardcage.platforms.host.platform_host()`` learns that cardcage is the host.

Import-safe and on the first ``current_platform`` path: stdlib and ``cardcage.hooks`` only at
module scope; the error classes, ``difflib`` and ``traceback`` are imported where a problem is
found.

``Activation`` is a plain class with ``__slots__`` that writes out its comparison, hash and
``repr``, not a dataclass: it is defined inside the start-up window that
``benchmarks/bench_platforms.py`` budgets (docs/reference/records.md says what it keeps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .platform_class import (
    activating_context,
    load_platform_class,
    sglang_fix,
    who,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from cardcage.hooks.snapshot import PluginEntryPoint

    from .findings import Finding, Severity
    from .selection import BuiltinPlatform, SelectionPolicy

__all__ = [
    "Activation",
    "activate_entry_point",
    "check_auto_probe",
    "check_builtin_class",
    "check_builtin_selector",
    "check_class",
    "check_construction",
    "check_declined",
    "check_duplicates",
    "check_multiple",
    "check_names",
    "check_no_platform",
    "check_unknown_selector",
]

# -- helpers ------------------------------------------------------------------------------------


def _by_name(eps: Sequence[PluginEntryPoint]) -> list[tuple[str, list[PluginEntryPoint]]]:
    """The entry points grouped by name, names sorted."""
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    return sorted(by_name.items())


def _reraise_unless_platform_error(exc: Exception) -> None:
    """What ``load_platform_class`` raises for a bad class is a ``PlatformError``, a finding;
    anything else is a bug, not a verdict on the plugin. (The error classes are imported here,
    on the error path, so a successful selection never imports them.)"""
    from .errors import PlatformError

    if not isinstance(exc, PlatformError):
        raise exc


def _exc_line(exc: BaseException) -> str:
    """``Type: message`` for use inside a sentence: the caller ends the sentence, so the
    message's own final period is dropped (``... unset ACME_NPU_PRESENT. Startup ...``, never
    ``ACME_NPU_PRESENT.. Startup``)."""
    return f"{type(exc).__name__}: {str(exc).rstrip('.')}"


def _tb(exc: BaseException) -> str:
    import traceback  # the error path only

    return "".join(traceback.format_exception(exc))


def _severity(considered: bool) -> tuple[Severity, str]:
    """A problem of a plugin startup calls is an error; of one it calls only once it is
    selected (or allowed), a warning. The second value is "when" for the message."""
    return ("error", "at startup") if considered else ("warning", "if it is selected")


def _suggest(selected: str, names: Sequence[str]) -> str | None:
    from cardcage.hooks.spelling import closest  # the error path only

    return closest(selected, names)


def _sglang_finding(
    severity: Severity,
    message: str,
    fix: str,
    group: str,
    ep: PluginEntryPoint,
    exc: BaseException,
    error: BaseException | None,
) -> Finding:
    """A plugin written for SGLang's own runtime: one code whichever step found it."""
    from .findings import Finding, ep_dist

    return Finding(
        code="plugin-targets-sglang",
        severity=severity,
        message=message,
        fix=fix,
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(exc),
        error=error,
    )


# -- names: checked before anything is loaded --------------------------------------------------


def check_duplicates(group: str, eps: Sequence[PluginEntryPoint]) -> list[Finding]:
    """An entry-point name provided twice in one group: plugin loading and selection refuse."""
    return [_duplicate(group, name, found) for name, found in _by_name(eps) if len(found) > 1]


def _duplicate(group: str, name: str, found: list[PluginEntryPoint]) -> Finding:
    from cardcage.hooks.errors import DuplicatePluginError

    from .findings import Finding, ep_dist

    ordered = sorted(found, key=lambda ep: ((ep.dist_name or "").lower(), ep.name))
    dists = tuple(ep_dist(ep) for ep in ordered)
    shown = ", ".join(
        f"{d.name} {d.version or '?'} ({ep.value})" for d, ep in zip(dists, ordered, strict=True)
    )
    return Finding(
        code="duplicate-entry-point",
        severity="error",
        message=(
            f"Duplicate entry-point name {name!r} in group {group!r}: entry-point names must be "
            f"unique within a group, and {len(found)} entry points have it: {shown}. Plugin "
            "loading and platform selection refuse to start."
        ),
        fix=(
            f"Uninstall all but one of {', '.join(sorted({str(d.name) for d in dists}))}, or "
            "rename the entry point in one distribution's pyproject.toml."
        ),
        group=group,
        plugin=name,
        distributions=dists,
        error=DuplicatePluginError(group, name, [ep.dist_name for ep in found]),
    )


def check_names(policy: SelectionPolicy, eps: Sequence[PluginEntryPoint]) -> list[Finding]:
    """The platform group's names, name by name: provided twice, or a built-in alias (in any
    case: ``CPU`` would read as the built-in to every user)."""
    group = policy.profile.platform_group
    findings: list[Finding] = []
    for name, found in _by_name(eps):
        if len(found) > 1:
            findings.append(_duplicate(group, name, found))
        if policy.reserves(name):
            findings.extend(_reserved(policy, ep) for ep in found)
    return findings


def _reserved(policy: SelectionPolicy, ep: PluginEntryPoint) -> Finding:
    from .errors import ReservedPlatformNameError
    from .findings import Finding, describe_ep, ep_dist

    group = policy.profile.platform_group
    reserved = ", ".join(sorted(policy.aliases()))
    fix = (
        f"Rename the entry point in {ep.dist_name or 'its distribution'}'s pyproject.toml "
        f"(reserved: {reserved})."
    )
    return Finding(
        code="reserved-platform-name",
        severity="error",
        message=(
            f"Platform entry point {describe_ep(ep)} in group {group!r} uses the built-in name "
            f"{ep.name!r}; platform selection refuses to start."
        ),
        fix=fix,
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        error=ReservedPlatformNameError(
            f"Platform entry point {who(ep)} in group {group!r} uses the built-in name "
            f"{ep.name!r}, which is reserved for the in-tree platform. {fix}",
            group=group,
            plugin=ep.name,
            distribution=ep.dist_name,
        ),
    )


# -- the selector --------------------------------------------------------------------------------


def check_builtin_selector(
    policy: SelectionPolicy,
    selector: str,
    builtin: BuiltinPlatform,
    eps: Sequence[PluginEntryPoint] = (),
) -> list[Finding]:
    """A selector naming a built-in: one this runtime detects automatically only, or one whose
    hardware probe fails (or raises). ``eps``: the platform entry points (named in the fix)."""
    profile = policy.profile
    env = profile.selector_env
    if not builtin.explicit_allowed:
        from .errors import UnsupportedSelectorError

        error: BaseException = UnsupportedSelectorError(
            env, selector, builtin.requirement or "its hardware", group=profile.platform_group
        )
        return [
            _unknown_selector(
                policy,
                selector,
                f"the built-in {selector!r} platform, which is detected automatically only: "
                f"{env} does not accept it.",
                _selectable(policy, eps),
                error,
            )
        ]
    if builtin.explicit_probe is None:
        return []
    try:
        if builtin.explicit_probe():
            return []
    except Exception as exc:
        problem = f"probing its hardware raised {_exc_line(exc)}"
        error = exc  # startup lets the probe's own exception through
    else:
        from .errors import PlatformUnavailableError

        problem = "its hardware is not available on this machine"
        error = PlatformUnavailableError(
            f"{env}={selector!r} selects an in-tree platform, but that hardware is not available "
            "on this machine. Unset the variable to let cardcage pick what is present, or run on "
            "a machine with that hardware.",
            group=profile.platform_group,
            plugin=selector,
        )
    from .findings import Finding

    return [
        Finding(
            code="selected-platform-unavailable",
            severity="error",
            message=(
                f"{env}={selector!r} selects the built-in platform, but {problem}. Platform "
                "selection fails at startup."
            ),
            fix=(
                f"Unset {env} to use what is present, or install what the platform needs "
                f"({builtin.requirement or 'its hardware and drivers'})."
            ),
            group=profile.platform_group,
            plugin=selector,
            error=error,
        )
    ]


def _selectable(
    policy: SelectionPolicy, eps: Sequence[PluginEntryPoint]
) -> list[tuple[str, str | None]]:
    """What the selector accepts: every entry point, then the built-ins it may name."""
    return [(ep.name, ep.dist_name) for ep in eps] + [
        (b.alias, None) for b in policy.builtins if b.explicit_allowed
    ]


def check_unknown_selector(
    policy: SelectionPolicy, selector: str, eps: Sequence[PluginEntryPoint]
) -> list[Finding]:
    """A selector that names no entry point and no built-in: startup fails (a close name is
    suggested)."""
    if any(ep.name == selector for ep in eps) or policy.builtin_named(selector) is not None:
        return []
    from .errors import PlatformNotFoundError

    profile = policy.profile
    available = _selectable(policy, eps)
    suggestion = _suggest(selector, sorted({name for name, _ in available}))
    error = PlatformNotFoundError(
        profile.selector_env,
        selector,
        available,
        group=profile.platform_group,
        suggestion=suggestion,
    )
    hint = f" Did you mean {suggestion!r}?" if suggestion else ""
    what = f"no platform entry point and no built-in platform.{hint}"
    return [_unknown_selector(policy, selector, what, available, error)]


def _unknown_selector(
    policy: SelectionPolicy,
    selector: str,
    what: str,
    available: list[tuple[str, str | None]],
    error: BaseException,
) -> Finding:
    from .findings import Finding

    profile = policy.profile
    choices = sorted({name for name, _ in available})
    return Finding(
        code="unknown-platform-selector",
        severity="error",
        message=(
            f"{profile.selector_env}={selector!r} names {what} Platform selection fails at startup."
        ),
        fix=(
            f"Set {profile.selector_env} to one of: {', '.join(repr(c) for c in choices)}; or "
            "install the distribution that provides it; or unset it for automatic selection."
        ),
        group=profile.platform_group,
        plugin=selector,
        error=error,
    )


# -- one platform entry point: import, activate(), class ----------------------------------------


class Activation:
    """What importing one platform entry point and calling its ``activate()`` gave.

    ``considered``: startup calls this entry point in the current mode (the selected one, or an
    allowed one in automatic mode); problems of the others are warnings. ``qualname``: what
    ``activate()`` returned, stripped (None: it declined, or failed). ``platform_class``: the
    class ``qualname`` names, once loaded and valid. ``finding``: what went wrong, if anything.
    """

    __match_args__ = ("ep", "considered", "qualname", "platform_class", "finding")
    __slots__ = __match_args__

    ep: PluginEntryPoint
    considered: bool
    qualname: str | None
    platform_class: type | None
    finding: Finding | None

    def __init__(
        self,
        ep: PluginEntryPoint,
        considered: bool,
        qualname: str | None = None,
        platform_class: type | None = None,
        finding: Finding | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "ep", ep)
        init(self, "considered", considered)
        init(self, "qualname", qualname)
        init(self, "platform_class", platform_class)
        init(self, "finding", finding)

    def _astuple(self) -> tuple[object, ...]:
        return (self.ep, self.considered, self.qualname, self.platform_class, self.finding)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())

    @property
    def declined(self) -> bool:
        """``activate()`` ran and returned None: its hardware is absent."""
        return self.qualname is None and self.finding is None


def activate_entry_point(
    policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool = True
) -> Activation:
    """Import ``ep`` and call its ``activate()``; what they raise or return wrong is a finding.

    Importing the entry point's module and calling ``activate()`` give different findings (and
    errors), so the reader knows which of the two to fix.
    """
    failure: tuple[str, BaseException] | None = None
    result: object = None
    with activating_context(ep):
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
        return Activation(
            ep, considered, finding=_activation_failed(policy, ep, considered, *failure)
        )
    if result is None:
        return Activation(ep, considered)
    if not isinstance(result, str) or not result.strip():
        return Activation(ep, considered, finding=_invalid_result(policy, ep, considered, result))
    return Activation(ep, considered, result.strip())


def _activation_failed(
    policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool, step: str, exc: BaseException
) -> Finding:
    """Importing the entry point (``step="import"``) or calling ``activate()`` raised."""
    from cardcage.hooks.errors import missing_sglang_module

    sglang_module = missing_sglang_module(exc)
    if sglang_module is not None:
        return _activation_needs_sglang(policy, ep, considered, step, exc, sglang_module)
    from .errors import PlatformActivationError
    from .findings import Finding, ep_dist, misconfiguration

    profile = policy.profile
    severity, when = _severity(considered)
    dist = ep.dist_name or ep.value
    happened = (
        f"could not be imported ({ep.value}): {_exc_line(exc)}"
        if step == "import"
        else f"failed to activate: {_exc_line(exc)}"
    )
    misconfigured = misconfiguration(exc) if step == "activate" else None
    remedy = (
        misconfigured[1]
        if misconfigured is not None
        else f"Fix or uninstall {dist}, or select another platform with {profile.selector_env}"
    )
    error = PlatformActivationError(
        f"Platform plugin {who(ep)} {happened}. Startup stops here rather than fall "
        f"back to a built-in platform, which would run the work on the wrong hardware. {remedy}.",
        group=profile.platform_group,
        plugin=ep.name,
        distribution=ep.dist_name,
    )
    error.__cause__ = exc
    if step == "import":
        code, message, fix = _import_failed_text(ep, exc, when, dist)
    elif misconfigured is not None:
        code, message, fix = _misconfigured_text(ep, misconfigured, when, dist)
    else:
        code, message, fix = _activate_raised_text(ep, exc, when, dist)
    return Finding(
        code=code,
        severity=severity,
        message=message,
        fix=fix,
        group=profile.platform_group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(exc),
        error=error,
    )


def _import_failed_text(
    ep: PluginEntryPoint, exc: BaseException, when: str, dist: str
) -> tuple[str, str, str]:
    from .findings import describe_ep

    return (
        "platform-import-failed",
        f"Platform plugin {describe_ep(ep)}: importing its entry point ({ep.value}) raised "
        f"{_exc_line(exc)}, so its activate() was never called. Platform selection aborts "
        f"{when}.",
        f"Fix or reinstall {dist} (pip install --force-reinstall {dist}), or uninstall it; the "
        "entry point's module must import on any machine, with or without its hardware.",
    )


def _activate_raised_text(
    ep: PluginEntryPoint, exc: BaseException, when: str, dist: str
) -> tuple[str, str, str]:
    from .findings import ACTIVATE_RULE, describe_ep

    return (
        "platform-activation-failed",
        f"Platform plugin {describe_ep(ep)}: activate() raised {_exc_line(exc)}. "
        f"Platform selection aborts {when}.",
        f"Fix or uninstall {dist}: {ACTIVATE_RULE}.",
    )


def _misconfigured_text(
    ep: PluginEntryPoint, setting: tuple[str, str], when: str, dist: str
) -> tuple[str, str, str]:
    from .findings import describe_ep

    problem, fix = setting
    return (
        "invalid-env-var",
        f"Platform plugin {describe_ep(ep)}: activate() refused this environment: {problem}. "
        f"Platform selection aborts {when}.",
        f"{fix}: it is a setting of this environment, not a fault of {dist}.",
    )


def _activation_needs_sglang(
    policy: SelectionPolicy,
    ep: PluginEntryPoint,
    considered: bool,
    step: str,
    exc: BaseException,
    sglang_module: str,
) -> Finding:
    """A platform plugin written for SGLang's own runtime, where SGLang is not installed."""
    from cardcage.hooks.errors import targets_sglang_problem

    from .errors import SGLangPlatformActivationError
    from .findings import describe_ep

    group = policy.profile.platform_group
    severity, when = _severity(considered)
    fix = sglang_fix(policy, ep)
    error = SGLangPlatformActivationError(
        targets_sglang_problem(
            f"Platform plugin {who(ep)}",
            f"importing it ({ep.value})" if step == "import" else "its activate()",
            sglang_module,
            exc,
        ),
        fix,
        group=group,
        plugin=ep.name,
        distribution=ep.dist_name,
        sglang_module=sglang_module,
    )
    error.__cause__ = exc
    what = f"importing its entry point ({ep.value})" if step == "import" else "its activate()"
    problem = targets_sglang_problem(f"Platform plugin {describe_ep(ep)}", what, sglang_module, exc)
    return _sglang_finding(
        severity, f"{problem} Platform selection aborts {when}.", fix, group, ep, exc, error
    )


def _invalid_result(
    policy: SelectionPolicy, ep: PluginEntryPoint, considered: bool, result: object
) -> Finding:
    """``activate()`` returned something other than a non-empty str or None."""
    from .errors import InvalidActivateResultError
    from .findings import Finding, describe_ep, ep_dist

    severity, when = _severity(considered)
    shown = f"{type(result).__name__} {result!r:.80}"
    return Finding(
        code="platform-activation-invalid",
        severity=severity,
        message=(
            f"Platform plugin {describe_ep(ep)}: activate() returned {shown}; it must return "
            f"the platform class's qualified name (str) or None. Platform selection aborts {when}."
        ),
        fix=f"Fix activate() in {ep.dist_name or ep.value}.",
        group=policy.profile.platform_group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        error=InvalidActivateResultError(
            f"Platform plugin {who(ep)}: activate() must return the platform class's qualified "
            f"name as a non-empty str (e.g. 'my_plugin.platform:MyPlatform') or None, got "
            f"{shown}.",
            group=policy.profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
        ),
    )


def check_class(policy: SelectionPolicy, activation: Activation) -> Activation:
    """Load and validate the class ``activate()`` named; ``activation`` with the class, or with
    the finding that says why it is not usable."""
    qualname = activation.qualname
    if qualname is None or activation.finding is not None:
        return activation
    ep = activation.ep
    try:
        cls = load_platform_class(policy, qualname, ep)
    except Exception as exc:
        _reraise_unless_platform_error(exc)
        return Activation(
            ep, activation.considered, qualname, finding=_class_finding(policy, activation, exc)
        )
    return Activation(ep, activation.considered, qualname, cls)


def _class_finding(policy: SelectionPolicy, activation: Activation, exc: Exception) -> Finding:
    from cardcage.hooks.errors import TargetsSGLangError

    from .findings import Finding, ep_dist

    ep = activation.ep
    group = policy.profile.platform_group
    severity, when = _severity(activation.considered)
    if isinstance(exc, TargetsSGLangError):
        problem = getattr(exc, "problem", str(exc))
        return _sglang_finding(
            severity,
            f"{problem} Platform selection aborts {when}.",
            getattr(exc, "fix", ""),
            group,
            ep,
            exc,
            exc,
        )
    base = policy.base_class
    return Finding(
        code="invalid-platform-class",
        severity=severity,
        message=f"{exc} Platform selection aborts {when}.",
        fix=(
            f"Make {activation.qualname} importable, a subclass of "
            f"{base.__module__}.{base.__qualname__} with _enum = PlatformEnum.OOT, device_name "
            f"and device_type; fix it in {ep.dist_name or ep.value}."
        ),
        group=group,
        plugin=ep.name,
        distributions=(ep_dist(ep),),
        traceback=_tb(exc),
        error=exc,
    )


def check_declined(policy: SelectionPolicy, selector: str, activation: Activation) -> list[Finding]:
    """The selected entry point's ``activate()`` returned None: its hardware is absent."""
    if not activation.declined:
        return []
    from .errors import PlatformUnavailableError
    from .findings import Finding, describe_ep, ep_dist

    profile = policy.profile
    env = profile.selector_env
    ep = activation.ep
    return [
        Finding(
            code="selected-platform-unavailable",
            severity="error",
            message=(
                f"{env}={selector!r} selects platform plugin {describe_ep(ep)}, but its "
                "activate() returned None (hardware not available on this machine?). Platform "
                "selection fails at startup."
            ),
            fix=(
                f"Unset {env} to use what is present, or check the vendor's driver and runtime "
                "installation."
            ),
            group=profile.platform_group,
            plugin=ep.name,
            distributions=(ep_dist(ep),),
            error=PlatformUnavailableError(
                f"Platform plugin {who(ep)} is installed but activate() returned None (hardware "
                f"not available on this machine?). Unset {env} to fall back to what is present, "
                "or check the vendor's driver and runtime installation.",
                group=profile.platform_group,
                plugin=ep.name,
                distribution=ep.dist_name,
            ),
        )
    ]


def check_multiple(policy: SelectionPolicy, activated: Sequence[Activation]) -> list[Finding]:
    """Automatic mode: two or more platform plugins activate; selection refuses to guess."""
    if len(activated) < 2:
        return []
    from .errors import MultiplePlatformsError
    from .findings import Finding, describe_ep, ep_dist

    profile = policy.profile
    env = profile.selector_env
    names = ", ".join(describe_ep(a.ep) for a in activated)
    return [
        Finding(
            code="multiple-platforms",
            severity="error",
            message=(
                f"{len(activated)} platform plugins activate on this machine and {env} is not "
                f"set: {names}. Automatic selection refuses to guess."
            ),
            fix=(
                f"Set {env} to one of: {', '.join(repr(a.ep.name) for a in activated)}; or "
                "uninstall the distributions you do not need."
            ),
            group=profile.platform_group,
            distributions=tuple(ep_dist(a.ep) for a in activated),
            error=MultiplePlatformsError(
                env,
                [(a.ep.name, a.ep.dist_name) for a in activated],
                group=profile.platform_group,
            ),
        )
    ]


def check_no_platform(policy: SelectionPolicy) -> list[Finding]:
    """Automatic mode: no plugin activated, no built-in probe matched, no default platform."""
    from .errors import PlatformUnavailableError
    from .findings import Finding

    profile = policy.profile
    needs = "; ".join(f"{b.alias}: {b.requirement or 'its hardware'}" for b in policy.builtins)
    return [
        Finding(
            code="no-platform-available",
            severity="error",
            message=(
                "No platform plugin activates and no built-in platform's hardware is present. "
                "Platform selection fails at startup."
            ),
            fix=(
                "Install a platform plugin for this machine's hardware, or what a built-in "
                f"platform needs ({needs})."
            ),
            group=profile.platform_group,
            error=PlatformUnavailableError(
                "No platform plugin activated and no built-in platform is available.",
                group=profile.platform_group,
            ),
        )
    ]


def check_construction(
    policy: SelectionPolicy, cls: type, ep: PluginEntryPoint | None
) -> tuple[Any, list[Finding]]:
    """Construct the selected platform with no arguments, as startup does: the instance, or
    the finding that says why it cannot be constructed."""
    try:
        if ep is not None:
            with activating_context(ep):
                return cls(), []
        return cls(), []
    except Exception as exc:
        from .errors import PlatformActivationError
        from .findings import Finding, describe_ep, ep_dist

        source = f"platform plugin {describe_ep(ep)}" if ep is not None else "the built-in"
        qualname = f"{cls.__module__}.{cls.__qualname__}"
        error = PlatformActivationError(
            f"Platform class {qualname} (from {who(ep) if ep is not None else 'built-in'}) could "
            f"not be constructed with no arguments: {_exc_line(exc)}.",
            group=policy.profile.platform_group,
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        )
        error.__cause__ = exc
        return None, [
            Finding(
                code="platform-construction-failed",
                severity="error",
                message=(
                    f"The platform class {qualname} (from {source}) raised {_exc_line(exc)} when "
                    "constructed with no arguments. Platform selection fails at startup."
                ),
                fix=(
                    "A platform's constructor must take no arguments and must not touch the "
                    "device: move device set-up to init_backend(); fix it in "
                    f"{(ep.dist_name or ep.value) if ep is not None else 'the runtime'}."
                ),
                group=policy.profile.platform_group,
                plugin=ep.name if ep else None,
                distributions=(ep_dist(ep),) if ep is not None else (),
                traceback=_tb(exc),
                error=error,
            )
        ]


def check_auto_probe(
    policy: SelectionPolicy, builtin: BuiltinPlatform
) -> tuple[bool, list[Finding]]:
    """Automatic mode: whether ``builtin``'s probe matches; a probe that raises is a finding
    (startup lets the probe's own exception through)."""
    try:
        return bool(builtin.auto_probe()), []
    except Exception as exc:
        from .findings import Finding

        return False, [
            Finding(
                code="platform-probe-failed",
                severity="error",
                message=(
                    f"Probing the built-in {builtin.alias!r} platform's hardware raised "
                    f"{_exc_line(exc)}. Platform selection fails at startup."
                ),
                fix=(
                    f"Set {policy.profile.selector_env} to the platform to use, or fix what the "
                    f"probe reads ({builtin.requirement or 'its hardware and drivers'})."
                ),
                group=policy.profile.platform_group,
                plugin=builtin.alias,
                traceback=_tb(exc),
                error=exc,
            )
        ]


def check_builtin_class(
    policy: SelectionPolicy, qualname: str
) -> tuple[type | None, list[Finding]]:
    """Load a built-in platform class; one that does not load means a broken installation."""
    try:
        return load_platform_class(policy, qualname, None), []
    except Exception as exc:
        _reraise_unless_platform_error(exc)
        from .findings import Finding

        return None, [
            Finding(
                code="invalid-platform-class",
                severity="error",
                message=f"{exc} Platform selection fails at startup.",
                fix="Reinstall the runtime's distribution (pip install --force-reinstall).",
                group=policy.profile.platform_group,
                traceback=_tb(exc),
                error=exc,
            )
        ]
