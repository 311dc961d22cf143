"""The platform selection engine: one engine, configured per runtime by a ``SelectionPolicy``.

The SRT and diffusion chains are data: the entry-point group and selector variable come from the
runtime profile, the built-in platforms and their probes from the policy. The rules are checks
that return findings (``cardcage.platforms.selection_checks``); this module runs them in the order
startup meets them:

1. entry-point names, before anything is loaded: a name provided by two distributions, or one
   that collides with a built-in alias (in any case), is an error;
2. explicit mode (selector set): a built-in alias (in any case) selects that built-in (checking
   its hardware where the policy says so); any other name loads and activates that one entry
   point only — not found, None, or an exception are errors naming the plugin and its
   distribution;
3. automatic mode: every platform entry point that passes the allowlist (where the policy
   applies it) is activated, in (distribution, name) order; an exception aborts (never a silent
   fallback to a built-in that would run the work on the wrong hardware); two or more → error;
   none → the built-in chain;
4. the class, before anything is published: a subclass of the runtime's base, and for external
   platforms ``_enum = OOT`` with a real ``device_name`` and ``device_type``; then it is
   constructed with no arguments.

``select_platform`` stops at the first error and raises its typed exception. ``diagnose_selection``
(``cardcage doctor``) runs the same checks in the same order but goes on, activating the entry
points startup would not call too, and returns every finding with what startup would select.
Everything selection saw goes into a ``SelectionRecord`` for ``cardcage platform``.

Its records are plain classes with ``__slots__`` that write out their comparison, hash and
``repr``, not dataclasses: they are defined inside the start-up window that
``benchmarks/bench_platforms.py`` budgets (docs/reference/records.md says what each one keeps).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cardcage.hooks.loader import read_allowlist
from cardcage.hooks.log import get_logger
from cardcage.hooks.profile import RuntimeProfile
from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint, entry_point_snapshot

from .platform_class import activating_plugin, load_platform_class, who
from .selection_checks import (
    Activation,
    activate_entry_point,
    check_auto_probe,
    check_builtin_class,
    check_builtin_selector,
    check_class,
    check_construction,
    check_declined,
    check_multiple,
    check_names,
    check_no_platform,
    check_unknown_selector,
)

# The error classes (``.errors``) are imported where a problem is found: a successful selection,
# the path every process takes, never needs them.

if TYPE_CHECKING:
    from collections.abc import Callable
    from traceback import StackSummary
    from typing import Self

    from .findings import Finding

__all__ = [
    "BuiltinPlatform",
    "Candidate",
    "SelectionOutcome",
    "SelectionPolicy",
    "SelectionRecord",
    "activating_plugin",
    "diagnose_selection",
    "load_platform_class",
    "select_platform",
]

logger = get_logger(__name__)


class BuiltinPlatform:
    """A platform that ships with the runtime, with the probes that decide if it can run."""

    __match_args__ = (
        "alias",
        "qualname",
        "auto_probe",
        "explicit_probe",
        "explicit_allowed",
        "requirement",
    )
    __slots__ = __match_args__

    alias: str
    qualname: str
    auto_probe: Callable[[], bool]
    explicit_probe: Callable[[], bool] | None  # None: explicit selection skips probing
    explicit_allowed: bool
    requirement: str  # what the probe looks for, shown when it does not match

    def __init__(
        self,
        alias: str,
        qualname: str,
        auto_probe: Callable[[], bool],
        explicit_probe: Callable[[], bool] | None = None,
        explicit_allowed: bool = True,
        requirement: str = "",
    ) -> None:
        init = object.__setattr__
        init(self, "alias", alias)
        init(self, "qualname", qualname)
        init(self, "auto_probe", auto_probe)
        init(self, "explicit_probe", explicit_probe)
        init(self, "explicit_allowed", explicit_allowed)
        init(self, "requirement", requirement)

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.alias,
            self.qualname,
            self.auto_probe,
            self.explicit_probe,
            self.explicit_allowed,
            self.requirement,
        )

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


class SelectionPolicy:
    """How one runtime selects its platform."""

    __match_args__ = (
        "profile",
        "base_class",
        "builtins",
        "default_qualname",
        "allowlist_filters_automatic",
    )
    __slots__ = __match_args__

    profile: RuntimeProfile
    base_class: type
    builtins: tuple[BuiltinPlatform, ...]  # in fallback order
    default_qualname: str | None  # used when no built-in probe matches
    allowlist_filters_automatic: bool

    def __init__(
        self,
        profile: RuntimeProfile,
        base_class: type,
        builtins: tuple[BuiltinPlatform, ...],
        default_qualname: str | None,
        allowlist_filters_automatic: bool = True,
    ) -> None:
        init = object.__setattr__
        init(self, "profile", profile)
        init(self, "base_class", base_class)
        init(self, "builtins", builtins)
        init(self, "default_qualname", default_qualname)
        init(self, "allowlist_filters_automatic", allowlist_filters_automatic)

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.profile,
            self.base_class,
            self.builtins,
            self.default_qualname,
            self.allowlist_filters_automatic,
        )

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

    def aliases(self) -> dict[str, BuiltinPlatform]:
        return {b.alias: b for b in self.builtins}

    # The two naming rules, written once: selection enforces them and `cardcage doctor` reports
    # them through these same methods, so the two can never disagree on a spelling.
    def builtin_named(self, selector: str) -> BuiltinPlatform | None:
        """The built-in a selector value names, if any: aliases ignore case, plugin names don't."""
        return self.aliases().get(selector.casefold())

    def reserves(self, name: str) -> bool:
        """Whether an entry-point name is taken by a built-in alias, in any case (``CPU`` too)."""
        return self.builtin_named(name) is not None

    def automatic_allowlist(self) -> frozenset[str] | None:
        """The entry-point names automatic mode may activate (None: every one). The SRT runtime
        filters automatic discovery with its allowlist variable; the diffusion runtime does not."""
        return read_allowlist(self.profile) if self.allowlist_filters_automatic else None


class Candidate:
    """One platform candidate and what happened to it."""

    __match_args__ = ("name", "kind", "outcome", "dist_name", "dist_version", "value", "detail")
    __slots__ = __match_args__
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    name: str
    kind: str  # "entry-point" or "built-in"
    outcome: str  # selected | activated | declined | not-allowed | not-loaded | unavailable
    dist_name: str | None
    dist_version: str | None
    value: str | None
    detail: str

    def __init__(
        self,
        name: str,
        kind: str,
        outcome: str,
        dist_name: str | None = None,
        dist_version: str | None = None,
        value: str | None = None,
        detail: str = "",
    ) -> None:
        self.name = name
        self.kind = kind
        self.outcome = outcome
        self.dist_name = dist_name
        self.dist_version = dist_version
        self.value = value
        self.detail = detail

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.name,
            self.kind,
            self.outcome,
            self.dist_name,
            self.dist_version,
            self.value,
            self.detail,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())


class SelectionRecord:
    """Why this process runs on the platform it runs on.

    ``first_access_stack`` is the stack of the first ``current_platform`` access, formatted like
    ``traceback.format_stack()``. Only the frames are captured at that access; their source lines
    are read, and the text formatted, the first time the attribute is read (``cardcage platform``).
    """

    __match_args__ = (
        "runtime",
        "mode",
        "selector_env",
        "selector",
        "qualname",
        "plugin_name",
        "dist_name",
        "dist_version",
        "builtin",
        "reason",
        "candidates",
        "first_access_stack",
    )
    __slots__ = (*__match_args__[:-1], "_first_access_stack", "_first_access_frames")
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    runtime: str
    mode: str  # "explicit" or "automatic"
    selector_env: str
    selector: str
    qualname: str
    plugin_name: str | None
    dist_name: str | None
    dist_version: str | None
    builtin: str | None
    reason: str
    candidates: list[Candidate]

    def __init__(
        self,
        runtime: str,
        mode: str,
        selector_env: str,
        selector: str,
        qualname: str = "",
        plugin_name: str | None = None,
        dist_name: str | None = None,
        dist_version: str | None = None,
        builtin: str | None = None,
        reason: str = "",
        candidates: list[Candidate] | None = None,
        first_access_stack: str = "",
    ) -> None:
        self.runtime = runtime
        self.mode = mode
        self.selector_env = selector_env
        self.selector = selector
        self.qualname = qualname
        self.plugin_name = plugin_name
        self.dist_name = dist_name
        self.dist_version = dist_version
        self.builtin = builtin
        self.reason = reason
        self.candidates = [] if candidates is None else candidates
        self._first_access_stack = first_access_stack
        self._first_access_frames: StackSummary | None = None

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.runtime,
            self.mode,
            self.selector_env,
            self.selector,
            self.qualname,
            self.plugin_name,
            self.dist_name,
            self.dist_version,
            self.builtin,
            self.reason,
            self.candidates,
            self.first_access_stack,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())

    @property
    def first_access_stack(self) -> str:
        """Where ``current_platform`` was first accessed, formatted like ``format_stack()``."""
        frames = self._first_access_frames
        if frames is not None:
            self._first_access_stack = "".join(frames.format())
            self._first_access_frames = None
        return self._first_access_stack

    @first_access_stack.setter
    def first_access_stack(self, value: str) -> None:
        self._first_access_stack = value
        self._first_access_frames = None

    def _set_first_access_frames(self, frames: StackSummary) -> None:
        """Keep the (unformatted) frames of the first access; formatted when first read."""
        self._first_access_frames = frames

    def as_dict(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "mode": self.mode,
            "selector_env": self.selector_env,
            "selector": self.selector,
            "platform": self.qualname,
            "plugin": self.plugin_name,
            "distribution": self.dist_name,
            "version": self.dist_version,
            "builtin": self.builtin,
            "reason": self.reason,
            "candidates": [{n: getattr(c, n) for n in c.__match_args__} for c in self.candidates],
            "first_access_stack": self.first_access_stack,
        }


class SelectionOutcome:
    """What the engine concluded for one runtime: every finding, and what startup selects.

    ``findings`` are in the order startup meets them, so the first of severity ``error`` is the
    one ``select_platform`` raises. ``activations``: every platform entry point whose
    ``activate()`` ran, in the order it ran. ``selected``: the activation of the entry point
    startup selects (in explicit mode, even when it then fails), with its class once that loads
    and passes validation. ``builtin``: the built-in platform startup selects (the one the
    selector names, or the first whose probe matches). ``platform``: the constructed platform,
    when selection succeeds.
    """

    __match_args__ = (
        "policy",
        "selector",
        "record",
        "findings",
        "activations",
        "selected",
        "builtin",
        "platform",
    )
    __slots__ = __match_args__
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    policy: SelectionPolicy
    selector: str
    record: SelectionRecord
    findings: list[Finding]
    activations: list[Activation]
    selected: Activation | None
    builtin: BuiltinPlatform | None
    platform: Any

    def __init__(self, policy: SelectionPolicy, selector: str, record: SelectionRecord) -> None:
        self.policy = policy
        self.selector = selector
        self.record = record
        self.findings = []
        self.activations = []
        self.selected = None
        self.builtin = None
        self.platform = None

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.policy,
            self.selector,
            self.record,
            self.findings,
            self.activations,
            self.selected,
            self.builtin,
            self.platform,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def first_error(self) -> Finding | None:
        """The finding startup stops at, if any."""
        return next((f for f in self.findings if f.severity == "error"), None)


class _Run:
    """One run of the engine. ``thorough`` (doctor): go on after an error and activate the
    entry points startup would not call too; else (startup): stop at the first error."""

    def __init__(self, outcome: SelectionOutcome, thorough: bool) -> None:
        self.outcome = outcome
        self.policy = outcome.policy
        self.record = outcome.record
        self.thorough = thorough
        self.failed = False

    def add(self, findings: list[Finding]) -> bool:
        """Record ``findings``; True when the run stops here (startup, after an error)."""
        self.outcome.findings.extend(findings)
        if any(f.severity == "error" for f in findings):
            self.failed = True
        return self.failed and not self.thorough

    def activate(self, ep: PluginEntryPoint, considered: bool) -> Activation:
        activation = activate_entry_point(self.policy, ep, considered)
        self.outcome.activations.append(activation)
        return activation

    def check_skipped(self, ep: PluginEntryPoint) -> None:
        """Thorough only: activate an entry point startup does not call, and check the class it
        names; its problems are warnings."""
        activation = self.activate(ep, False)
        if activation.finding is None and activation.qualname is not None:
            activation = check_class(self.policy, activation)
        self.add(_finding_of(activation))


def _finding_of(activation: Activation) -> list[Finding]:
    return [activation.finding] if activation.finding is not None else []


def _activation_order(ep: PluginEntryPoint) -> tuple[str, str]:
    """Entry points are activated in (distribution, entry-point name) order."""
    return (ep.dist.normalized_name if ep.dist else "", ep.name)


def diagnose_selection(
    policy: SelectionPolicy, snapshot: EntryPointSnapshot | None = None, *, thorough: bool = True
) -> SelectionOutcome:
    """Run every selection check for ``policy`` as startup would; return what they found.

    ``thorough`` (the default, ``cardcage doctor``'s way) goes on after an error and also
    activates the platform entry points startup would not call (their problems are warnings);
    without it the run stops at the first error, as ``select_platform`` does. Plugin code runs
    either way (entry points are imported, ``activate()`` is called, the selected class is
    constructed); nothing is published as ``current_platform``.
    """
    profile = policy.profile
    snap = snapshot or entry_point_snapshot()
    eps = snap.group(profile.platform_group)
    selector = os.environ.get(profile.selector_env, "").strip()
    record = SelectionRecord(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=profile.selector_env,
        selector=selector,
    )
    run = _Run(SelectionOutcome(policy, selector, record), thorough)
    if not run.add(check_names(policy, eps)):
        if selector:
            _explicit(run, eps)
        else:
            _automatic(run, eps)
    return run.outcome


def select_platform(
    policy: SelectionPolicy, snapshot: EntryPointSnapshot | None = None
) -> tuple[Any, SelectionRecord]:
    """Run the selection chain once; return the platform instance and the record of why.

    Raises the typed error of the first problem startup meets (``cardcage.platforms.errors``);
    its ``selection_record`` holds what selection saw up to there.
    """
    outcome = diagnose_selection(policy, snapshot, thorough=False)
    failure = outcome.first_error()
    if failure is not None:
        error = failure.error
        if error is None:  # pragma: no cover - every error finding of the engine carries one
            raise RuntimeError(failure.message)
        from .errors import PlatformError

        if isinstance(error, PlatformError):
            # What was seen before the failure: `cardcage platform` shows it next to the error.
            error.selection_record = outcome.record
        raise error
    record = outcome.record
    if record.plugin_name is not None:
        logger.info(
            "%s platform: %s from plugin %s (%s %s) — %s",
            policy.profile.name.upper(),
            record.qualname,
            record.plugin_name,
            record.dist_name,
            record.dist_version,
            record.reason,
        )
    else:
        logger.info(
            "%s platform: %s — %s", policy.profile.name.upper(), record.qualname, record.reason
        )
    return outcome.platform, record


def _explicit(run: _Run, eps: tuple[PluginEntryPoint, ...]) -> None:
    policy, record, selector = run.policy, run.record, run.outcome.selector
    env = policy.profile.selector_env
    builtin = policy.builtin_named(selector)
    if builtin is not None:
        record.candidates.extend(_candidate(ep, "not-loaded", f"{env} set") for ep in eps)
        if run.add(check_builtin_selector(policy, selector, builtin, eps)):
            return
        if run.thorough:
            for ep in sorted(eps, key=_activation_order):
                run.check_skipped(ep)
        if run.failed:
            return
        cls = _builtin_class(run, builtin.qualname)
        if cls is None:
            return
        run.outcome.builtin = builtin
        record.builtin = builtin.alias
        record.candidates.append(Candidate(builtin.alias, "built-in", "selected"))
        record.reason = f"{env}={selector!r} selects the built-in platform"
        _publish(run, cls, None)
        return
    record.candidates.extend(
        _candidate(ep, "not-loaded", f"{env} set") for ep in eps if ep.name != selector
    )
    if run.add(check_unknown_selector(policy, selector, eps)):
        return
    chosen: Activation | None = None
    for ep in sorted(eps, key=_activation_order):
        if ep.name == selector and chosen is None:
            chosen = run.activate(ep, True)
        elif run.thorough:
            run.check_skipped(ep)
    if chosen is None:
        return
    run.outcome.selected = chosen
    if chosen.declined:
        record.candidates.append(_candidate(chosen.ep, "declined", "activate() returned None"))
    if run.add(_finding_of(chosen)) or run.add(check_declined(policy, selector, chosen)):
        return
    chosen = run.outcome.selected = check_class(policy, chosen)
    if run.add(_finding_of(chosen)) or chosen.platform_class is None or run.failed:
        return
    record.candidates.append(_candidate(chosen.ep, "selected", f"activate() -> {chosen.qualname}"))
    record.reason = f"{env}={selector!r} selects platform plugin {who(chosen.ep)}"
    _publish(run, chosen.platform_class, chosen.ep)


def _automatic(run: _Run, eps: tuple[PluginEntryPoint, ...]) -> None:
    policy, record = run.policy, run.record
    allowed = policy.automatic_allowlist()
    activated: list[Activation] = []
    for ep in sorted(eps, key=_activation_order):
        if allowed is not None and ep.name not in allowed:
            record.candidates.append(
                _candidate(ep, "not-allowed", f"not in {policy.profile.allowlist_env}")
            )
            if run.thorough:
                run.check_skipped(ep)
            continue
        activation = run.activate(ep, True)
        if run.add(_finding_of(activation)):
            return
        if activation.declined:
            record.candidates.append(_candidate(ep, "declined", "activate() returned None"))
        elif activation.qualname is not None:
            activated.append(activation)
            record.candidates.append(
                _candidate(ep, "activated", f"activate() -> {activation.qualname}")
            )
    aborted = run.failed  # an activate() failed: startup stopped before choosing
    if run.add(check_multiple(policy, activated)):
        return
    # Every class activate() named is checked (startup: the one it selects).
    checked = [check_class(policy, a) for a in activated]
    if len(checked) == 1 and not aborted:
        run.outcome.selected = checked[0]
    for activation in checked:
        if run.add(_finding_of(activation)):
            return
    if run.failed:
        return
    selected = run.outcome.selected
    if selected is not None and selected.platform_class is not None:
        for candidate in record.candidates:
            if candidate.name == selected.ep.name and candidate.kind == "entry-point":
                candidate.outcome = "selected"
        record.reason = f"platform plugin {who(selected.ep)} is the only one that activated"
        _publish(run, selected.platform_class, selected.ep)
        return
    _builtin_chain(run)


def _builtin_chain(run: _Run) -> None:
    """No platform plugin activated: the first built-in whose probe matches, else the default."""
    policy, record = run.policy, run.record
    for builtin in policy.builtins:
        matched, findings = check_auto_probe(policy, builtin)
        if run.add(findings):
            return
        if matched:
            record.candidates.append(
                Candidate(builtin.alias, "built-in", "selected", detail="detected")
            )
            cls = _builtin_class(run, builtin.qualname)
            if cls is None:
                return
            run.outcome.builtin = builtin
            record.builtin = builtin.alias
            record.reason = (
                "no platform plugin activated; the built-in "
                f"{builtin.alias!r} platform's probe matched"
            )
            _publish(run, cls, None)
            return
        record.candidates.append(
            Candidate(
                builtin.alias,
                "built-in",
                "unavailable",
                detail=f"not detected (needs {builtin.requirement or 'its hardware'})",
            )
        )
    if policy.default_qualname is None:
        run.add(check_no_platform(policy))
        return
    cls = _builtin_class(run, policy.default_qualname)
    if cls is None:
        return
    record.reason = (
        "no platform plugin activated and no accelerator was detected; using the base "
        f"{cls.__qualname__} (set SGLANG_USE_CPU_ENGINE=1 for the CPU platform)"
    )
    _publish(run, cls, None)


def _builtin_class(run: _Run, qualname: str) -> type | None:
    cls, findings = check_builtin_class(run.policy, qualname)
    run.add(findings)
    return cls


def _publish(run: _Run, cls: type, ep: PluginEntryPoint | None) -> None:
    """Construct the selected class, as startup does; on success, complete the record."""
    instance, findings = check_construction(run.policy, cls, ep)
    if run.add(findings):
        return
    record = run.record
    record.qualname = f"{cls.__module__}.{cls.__qualname__}"
    if ep is not None:
        record.plugin_name = ep.name
        record.dist_name = ep.dist_name
        record.dist_version = ep.dist.version if ep.dist else None
    run.outcome.platform = instance


def _candidate(ep: PluginEntryPoint, outcome: str, detail: str = "") -> Candidate:
    return Candidate(
        name=ep.name,
        kind="entry-point",
        outcome=outcome,
        dist_name=ep.dist_name,
        dist_version=ep.dist.version if ep.dist else None,
        value=ep.value,
        detail=detail,
    )
