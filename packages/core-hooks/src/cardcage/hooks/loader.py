"""General-plugin loading: discover, filter, import, register, apply — once per process.

``load_plugins()`` is SGLang's documented entry point and runs two once-per-process phases:

1. registration: read the plugin group from the entry-point snapshot; drop names not in the
   allowlist; drop distributions that provide a platform entry point but did not supply the
   selected platform; fail on duplicate names; import each plugin and call its ``register()`` in
   (distribution, name) order with the plugin recorded as the source of every hook it registers;
2. application: ``registry.apply()``.

Failure policy: a plugin shipped by the selected platform's distribution is part of that
platform's contract, so failing to import, failing in ``register()`` or leaving a hook target
unapplied raises ``PluginLoadError``. Any other plugin is logged with its traceback, its partial
registrations are discarded, and the rest go on: a broken third-party plugin never takes the
process down. A plugin written for SGLang's own runtime, whose import (or ``register()``) fails
because ``sglang`` is not installed, is named as such, with both ways out (run SGLang's runtime,
or port the plugin): a warning without a traceback, or ``SGLangPluginLoadError`` when fatal.

The selected platform comes from the runtime registered for the profile (``cardcage.runtimes``:
its ``current_platform`` resolves it, automatic mode included) when there is one, else from the
selector variable, resolved from metadata only. Nothing here imports a platform package at module
scope.

Its records are plain classes with ``__slots__`` that write out their comparison, hash and
``repr``, not dataclasses: they are defined inside the start-up window that
``benchmarks/bench_platforms.py`` budgets (docs/reference/records.md says what each one keeps).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

from .envs import (
    CARDCAGE_DEFERRED_HOOKS,
    CARDCAGE_EARLY_PATCHES,
    CARDCAGE_STRICT_HOOKS,
    parse_allowlist,
    parse_str,
)
from .log import get_logger
from .once import COMPLETE, Once
from .profile import SGLANG_PROFILES, SRT_PROFILE, RuntimeProfile
from .registry import (
    ApplyReport,
    BaseHookRegistry,
    HookRegistry,
    HookSource,
    plugin_source,
)
from .runtimes import Runtime, registered_runtimes, runtime_for
from .snapshot import (
    EntryPointSnapshot,
    PluginEntryPoint,
    entry_point_snapshot,
    normalize_dist_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
    from typing import Self

__all__ = [
    "GENERAL_PLUGINS_GROUP",
    "PLATFORM_PLUGINS_GROUP",
    "LoadedPlugin",
    "PlatformChoice",
    "PluginLoadReport",
    "PluginStatus",
    "excluded_distributions",
    "apply_registered_hooks",
    "execute_plugin_callbacks",
    "load_plugins",
    "load_plugins_by_group",
    "plugin_fate",
    "read_allowlist",
    "register_plugins",
    "reset_plugin_state",
    "resolve_platform_choice",
    "runtime_platform_choice",
]

logger = get_logger(__name__)

PLATFORM_PLUGINS_GROUP = SRT_PROFILE.platform_group
GENERAL_PLUGINS_GROUP = SRT_PROFILE.plugin_group


class _Unset:
    """Marks "no selection passed": resolve it (None is a valid selection: nothing selected)."""


_UNSET = _Unset()


class LoadedPlugin(NamedTuple):
    """A plugin's loaded callback and its distribution (the seed's ``(func, dist_name)`` pair)."""

    callback: Callable[[], object]
    dist_name: str | None


class PlatformChoice:
    """The platform a runtime selected, as far as plugin filtering needs to know it.

    ``entry_point`` is None for a built-in platform; ``dist_name`` is the distribution that
    supplied the selected entry point (None for built-ins, or when nothing matched the selector).
    Immutable; compares and hashes by value.
    """

    __match_args__ = ("entry_point", "dist_name", "reason")
    __slots__ = __match_args__

    entry_point: str | None
    dist_name: str | None
    reason: str

    def __init__(
        self, entry_point: str | None, dist_name: str | None, reason: str = "SGLANG_PLATFORM"
    ) -> None:
        init = object.__setattr__
        init(self, "entry_point", entry_point)
        init(self, "dist_name", dist_name)
        init(self, "reason", reason)

    def _astuple(self) -> tuple[object, ...]:
        return (self.entry_point, self.dist_name, self.reason)

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


class PluginStatus:
    """What happened to one discovered plugin in this process."""

    __match_args__ = ("name", "group", "value", "dist_name", "status", "detail")
    __slots__ = __match_args__
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    name: str
    group: str
    value: str
    dist_name: str | None
    status: str  # executed | loaded | not-allowed | excluded | failed-import | failed-register
    detail: str

    def __init__(
        self,
        name: str,
        group: str,
        value: str,
        dist_name: str | None,
        status: str,
        detail: str = "",
    ) -> None:
        self.name = name
        self.group = group
        self.value = value
        self.dist_name = dist_name
        self.status = status
        self.detail = detail

    def _astuple(self) -> tuple[object, ...]:
        return (self.name, self.group, self.value, self.dist_name, self.status, self.detail)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())


class PluginLoadReport:
    """The outcome of ``load_plugins()`` for one runtime profile."""

    __match_args__ = ("profile", "selection", "plugins", "apply")
    __slots__ = __match_args__
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    profile: RuntimeProfile
    selection: PlatformChoice | None
    plugins: list[PluginStatus]
    apply: ApplyReport | None

    def __init__(
        self,
        profile: RuntimeProfile,
        selection: PlatformChoice | None = None,
        plugins: list[PluginStatus] | None = None,
        apply: ApplyReport | None = None,
    ) -> None:
        self.profile = profile
        self.selection = selection
        self.plugins = [] if plugins is None else plugins
        self.apply = apply

    def _astuple(self) -> tuple[object, ...]:
        return (self.profile, self.selection, self.plugins, self.apply)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())

    def names(self, status: str) -> list[str]:
        return [p.name for p in self.plugins if p.status == status]


def read_allowlist(profile: RuntimeProfile = SRT_PROFILE) -> frozenset[str] | None:
    """The profile's allowlist: None means no filter, an empty set allows nothing."""
    return parse_allowlist(profile.allowlist_env, os.environ.get(profile.allowlist_env, ""))


def _norm(dist: str | None) -> str | None:
    return normalize_dist_name(dist) if dist else dist


def _dist_key(ep: PluginEntryPoint) -> str | None:
    """The entry point's normalised distribution name, known without reading its METADATA."""
    return ep.dist.normalized_name if ep.dist is not None else None


def runtime_platform_choice(runtime: Runtime) -> PlatformChoice:
    """Resolve ``runtime``'s ``current_platform`` (if not yet) and describe it for the loader.

    Reads the runtime's selection record through its accessor module; a platform installed by a
    test harness without a record is described as such.
    """
    accessor = runtime.accessor_module()
    accessor.get_current_platform()
    record = accessor.get_selection_record()
    if record is None:  # installed by testing.set_current_platform without a record
        return PlatformChoice(None, None, reason="the platform set by the test harness")
    reason = (
        f"{record.selector_env}={record.selector}"
        if record.mode == "explicit"
        else "automatic platform selection"
    )
    return PlatformChoice(record.plugin_name, record.dist_name, reason=reason)


def resolve_platform_choice(
    profile: RuntimeProfile = SRT_PROFILE, snapshot: EntryPointSnapshot | None = None
) -> PlatformChoice | None:
    """The selected platform, or None when it cannot be known without activating platforms.

    When a runtime is registered for ``profile`` (``cardcage.hooks.runtimes``), its own
    ``current_platform`` decides, automatic mode included; otherwise the selector variable is
    matched against the platform group's metadata, without importing any plugin.
    """
    runtime = runtime_for(profile, snapshot)
    if runtime is not None:
        return runtime_platform_choice(runtime)
    selector = parse_str(profile.selector_env, os.environ.get(profile.selector_env, ""))
    if not selector:
        return None
    eps = (snapshot or entry_point_snapshot()).group(profile.platform_group)
    for ep in eps:
        if ep.name == selector:
            return PlatformChoice(selector, ep.dist_name, profile.selector_env)
    logger.warning(
        "%s=%r matches no entry point in group %s (available: %s); general plugins of every "
        "platform distribution are skipped",
        profile.selector_env,
        selector,
        profile.platform_group,
        ", ".join(sorted(repr(ep.name) for ep in eps)) or "none",
    )
    return PlatformChoice(selector, None, profile.selector_env)


def excluded_distributions(
    choice: PlatformChoice | None,
    profile: RuntimeProfile = SRT_PROFILE,
    snapshot: EntryPointSnapshot | None = None,
) -> set[str]:
    """Distributions that provide a platform entry point but did not supply the selected one.

    A distribution that supplied the selected platform is never excluded, even when it also
    provides other platform entry points. With no known selection nothing is excluded.
    """
    if choice is None:
        return set()
    eps = (snapshot or entry_point_snapshot()).group(profile.platform_group)
    providers = {ep.dist_name for ep in eps if ep.dist_name}
    keep = {_norm(choice.dist_name)} if choice.dist_name else set()
    return {d for d in providers if _norm(d) not in keep}


def _check_duplicates(group: str, eps: Iterable[PluginEntryPoint]) -> None:
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    for name in sorted(by_name):
        found = by_name[name]
        if len(found) > 1:
            from ._load_failures import duplicate_names

            duplicate_names(group, name, found)


def _fatal(dist: str | None, fatal_dists: Collection[str]) -> bool:
    return dist is not None and _norm(dist) in {_norm(d) for d in fatal_dists}


def plugin_fate(
    ep: PluginEntryPoint,
    *,
    allowed: Collection[str] | None,
    excluded: Collection[str] | None,
    fatal: Collection[str],
) -> str:
    """What start-up does with a general plugin before importing it: the loader's filter rules.

    ``allowed`` is the allowlist (None: no filter); ``excluded`` and ``fatal`` hold normalised
    distribution names (``excluded`` None: the platform selection is not known). The answer is
    ``not-allowed``, ``unknown``, ``excluded``, ``fatal`` (it ships with the selected platform:
    a failure aborts start-up) or ``loads`` (a failure is logged and skipped). The loader filters
    with it and ``cardcage doctor`` predicts with it, so the two cannot drift apart.
    """
    if allowed is not None and ep.name not in allowed:
        return "not-allowed"
    if excluded is None:
        return "unknown"
    key = _dist_key(ep)
    if key is not None and key in excluded:
        return "excluded"
    if key is not None and key in fatal:
        return "fatal"
    return "loads"


def load_plugins_by_group(
    group: str,
    excluded_dists: Collection[str] | None = None,
    *,
    exclusion_reason: str = "SGLANG_PLATFORM",
    profile: RuntimeProfile = SRT_PROFILE,
    fatal_dists: Collection[str] = (),
    registry: type[BaseHookRegistry] | None = None,
    snapshot: EntryPointSnapshot | None = None,
    statuses: list[PluginStatus] | None = None,
) -> dict[str, LoadedPlugin]:
    """Import the plugins of ``group`` that pass the filters; return ``{name: (callback, dist)}``.

    Filters, none of which imports a plugin: the profile's allowlist, then ``excluded_dists``.
    Duplicate names among the survivors raise ``DuplicatePluginError`` before any import. An
    import failure is fatal for ``fatal_dists`` and logged-and-skipped for everyone else (hooks
    the failed module registered while importing are discarded from ``registry``).
    """
    eps = (snapshot or entry_point_snapshot()).group(group)
    if not eps:
        logger.debug("No plugins found for group %s.", group)
        return {}
    survivors, ships_with_platform = _filter_plugins(
        group, eps, profile, excluded_dists, fatal_dists, exclusion_reason, statuses
    )
    _check_duplicates(group, survivors)
    survivors.sort(key=lambda ep: (_dist_key(ep) or "", ep.name))
    owner = HookRegistry if registry is None else registry
    loaded: dict[str, LoadedPlugin] = {}
    for ep in survivors:
        plugin = _import_plugin(ep, group, owner, statuses, fatal=ep.name in ships_with_platform)
        if plugin is not None:
            loaded[ep.name] = plugin
    return loaded


def _filter_plugins(
    group: str,
    eps: Sequence[PluginEntryPoint],
    profile: RuntimeProfile,
    excluded_dists: Collection[str] | None,
    fatal_dists: Collection[str],
    exclusion_reason: str,
    statuses: list[PluginStatus] | None,
) -> tuple[list[PluginEntryPoint], set[str]]:
    """The entry points that pass the allowlist and the exclusion (``plugin_fate``), none of
    them imported, and the names of those whose failure is fatal (they ship with the selected
    platform)."""
    allowed = read_allowlist(profile)
    excluded = {normalize_dist_name(d) for d in excluded_dists or () if d}
    fatal = {normalize_dist_name(d) for d in fatal_dists if d}
    logger.debug("Available plugins for group %s:", group)
    survivors: list[PluginEntryPoint] = []
    ships_with_platform: set[str] = set()
    debug = logger.isEnabledFor(logging.DEBUG)
    for ep in eps:
        if debug:
            logger.debug("  - %s -> %s (%s)", ep.name, ep.value, ep.dist_name)
        fate = plugin_fate(ep, allowed=allowed, excluded=excluded, fatal=fatal)
        if fate == "not-allowed":
            logger.debug("Skipping plugin %s (not in %s)", ep.name, profile.allowlist_env)
            _record(statuses, ep, "not-allowed", f"not in {profile.allowlist_env}")
            continue
        if fate == "excluded":
            logger.debug(
                "Skipping plugin %s (dist %s excluded by %s)",
                ep.name,
                ep.dist_name,
                exclusion_reason,
            )
            _record(statuses, ep, "excluded", f"distribution excluded by {exclusion_reason}")
            continue
        survivors.append(ep)
        if fate == "fatal":
            ships_with_platform.add(ep.name)
    return survivors, ships_with_platform


def _import_plugin(
    ep: PluginEntryPoint,
    group: str,
    owner: type[BaseHookRegistry],
    statuses: list[PluginStatus] | None,
    *,
    fatal: bool,
) -> LoadedPlugin | None:
    """Import one plugin's callback under its source; None when it failed and is skipped."""
    source = HookSource(ep.name, ep.dist_name)
    try:
        with plugin_source(source):
            callback = ep.load()
        if not callable(callback):
            raise TypeError(f"{ep.value} is a {type(callback).__name__}, which is not callable")
    except Exception as exc:
        # Hooks the module registered while importing belong to a plugin that is not loaded.
        owner.discard_source(source)
        from ._load_failures import import_failed

        import_failed(ep, group, exc, statuses, fatal=fatal)
        return None
    _record(statuses, ep, "loaded")
    logger.debug("Loaded plugin %s from group %s", ep.name, group)
    return LoadedPlugin(callback, ep.dist_name)


def _record(
    statuses: list[PluginStatus] | None, ep: PluginEntryPoint, status: str, detail: str = ""
) -> None:
    if statuses is not None:
        statuses.append(PluginStatus(ep.name, ep.group, ep.value, ep.dist_name, status, detail))


def execute_plugin_callbacks(
    plugins: Mapping[str, LoadedPlugin | tuple[Callable[[], object], str | None]],
    registry: type[BaseHookRegistry] = HookRegistry,
    log: logging.Logger | None = None,
    plugin_label: str = "general",
    *,
    group: str | None = None,
    fatal_dists: Collection[str] = (),
    statuses: list[PluginStatus] | None = None,
) -> None:
    """Call each plugin's ``register()`` with the plugin recorded as the source of its hooks.

    A failure discards every hook the plugin registered; it is fatal for ``fatal_dists`` and
    logged for everyone else. Unlike SGLang's helper this does not apply hooks: application is
    its own phase, so the diffusion runtime can run the two at different times.
    """
    out = log or logger
    for name, (callback, dist_name) in plugins.items():
        source = HookSource(name, dist_name)
        try:
            with plugin_source(source):
                callback()
        except Exception as exc:
            dropped = registry.discard_source(source)
            from ._load_failures import callback_failed

            callback_failed(
                name,
                dist_name,
                exc,
                dropped,
                plugin_label=plugin_label,
                group=group,
                fatal=_fatal(dist_name, fatal_dists),
                statuses=statuses,
                log=out,
            )
            continue
        _set_status(statuses, name, "executed")
        out.debug("Executed %s plugin: %s", plugin_label, name)


def _set_status(
    statuses: list[PluginStatus] | None, name: str, status: str, detail: str = ""
) -> None:
    if statuses is None:
        return
    for entry in statuses:
        if entry.name == name and entry.status == "loaded":
            entry.status = status
            entry.detail = detail
            return


class _ProfileState:
    """Once gates and the last report for one (profile, registry) pair."""

    def __init__(self, profile: RuntimeProfile) -> None:
        label = profile.name.upper()
        self.registration = Once(f"{label} plugin registration")
        self.application = Once(f"{label} hook application")
        self.report = PluginLoadReport(profile)


_states: dict[tuple[RuntimeProfile, int], _ProfileState] = {}


def _state(profile: RuntimeProfile, registry: type[BaseHookRegistry]) -> _ProfileState:
    key = (profile, id(registry))
    state = _states.get(key)
    if state is None:
        state = _states.setdefault(key, _ProfileState(profile))
    return state


def allowlist_scope(
    profile: RuntimeProfile, snapshot: EntryPointSnapshot
) -> tuple[list[str], set[str]]:
    """The entry-point groups ``profile``'s allowlist variable filters, and the names in them.

    One variable can filter several runtimes (``SGLANG_PLUGINS`` filters SRT and diffusion
    plugins alike), so the groups are those of ``profile``, of SGLang's own runtime profiles and
    of every registered runtime (``cardcage.hooks.runtimes``) that read the same variable: a name
    that belongs to another of them is not a typo. The loader's warning and ``cardcage doctor``
    both use this.
    """
    candidates = (*SGLANG_PROFILES, *(r.profile for r in registered_runtimes(snapshot)))
    sharing = [profile]
    for other in candidates:
        if other.allowlist_env == profile.allowlist_env and other not in sharing:
            sharing.append(other)
    groups = [group for p in sharing for group in (p.plugin_group, p.platform_group)]
    return list(dict.fromkeys(groups)), {
        ep.name for group in groups for ep in snapshot.group(group)
    }


def _warn_unmatched_allowlist(profile: RuntimeProfile, snapshot: EntryPointSnapshot) -> None:
    allowed = read_allowlist(profile)
    if not allowed:
        return
    # The profile's own groups first: the usual case (every name is there) imports no runtime.
    own = {
        ep.name for g in (profile.plugin_group, profile.platform_group) for ep in snapshot.group(g)
    }
    if allowed <= own:
        return
    groups, known = allowlist_scope(profile, snapshot)
    unmatched = sorted(allowed - known)
    if unmatched:
        logger.warning(
            "%s names %s, which match no entry point in %s (installed: %s). Check the "
            "spelling, or install the plugin's distribution.",
            profile.allowlist_env,
            ", ".join(repr(n) for n in unmatched),
            ", ".join(groups),
            ", ".join(sorted(repr(n) for n in known)) or "none",
        )


def _check_early_patches(choice: PlatformChoice | None) -> None:
    """Early patches' failure policy, now that the selection is known (``cardcage.hooks.early``).

    A process that neither ran early patches nor asks for them imports nothing here.
    """
    asked = (CARDCAGE_EARLY_PATCHES.raw() or "").strip()
    if not asked and "cardcage.hooks.early" not in sys.modules:
        return
    from . import early

    if choice is None or not choice.dist_name:
        early.check_selected_platform(None, "")
        return
    who = repr(choice.entry_point) if choice.entry_point else "the platform"
    early.check_selected_platform(choice.dist_name, f"{who} selected by {choice.reason}")


def register_plugins(
    profile: RuntimeProfile = SRT_PROFILE,
    registry: type[BaseHookRegistry] = HookRegistry,
    *,
    selection: PlatformChoice | _Unset | None = _UNSET,
) -> PluginLoadReport:
    """Phase 1 only: import the profile's general plugins and run their callbacks, once."""
    state = _state(profile, registry)

    def work() -> None:
        snapshot = entry_point_snapshot()
        choice = (
            resolve_platform_choice(profile, snapshot)
            if isinstance(selection, _Unset)
            else selection
        )
        state.report = PluginLoadReport(profile, choice)
        _check_early_patches(choice)
        _warn_unmatched_allowlist(profile, snapshot)
        fatal = [choice.dist_name] if choice is not None and choice.dist_name else []
        reason = choice.reason if choice is not None else profile.selector_env
        plugins = load_plugins_by_group(
            profile.plugin_group,
            excluded_distributions(choice, profile, snapshot),
            exclusion_reason=reason,
            profile=profile,
            fatal_dists=fatal,
            registry=registry,
            snapshot=snapshot,
            statuses=state.report.plugins,
        )
        execute_plugin_callbacks(
            plugins,
            registry,
            plugin_label="general",
            group=profile.plugin_group,
            fatal_dists=fatal,
            statuses=state.report.plugins,
        )

    state.registration.run(work)
    return state.report


def _enforce_failure_policy(
    report: ApplyReport,
    registry: type[BaseHookRegistry],
    profile: RuntimeProfile,
    choice: PlatformChoice | None,
    strict: bool,
) -> None:
    """Raise if a failed target belongs to the selected platform's distribution (or strict)."""
    if report.failed:
        from ._load_failures import enforce_failure_policy

        enforce_failure_policy(report, registry, profile, choice, strict)


def apply_registered_hooks(
    profile: RuntimeProfile = SRT_PROFILE,
    registry: type[BaseHookRegistry] = HookRegistry,
    *,
    strict: bool | None = None,
    deferred: bool | None = None,
) -> PluginLoadReport:
    """Phase 2 only: apply the registry's hooks once; enforce the failure policy.

    In deferred mode the policy also holds for targets patched later, when their module is
    first imported: a failure that is fatal here makes that import raise.
    """
    state = _state(profile, registry)

    def work() -> None:
        use_deferred = CARDCAGE_DEFERRED_HOOKS.get() if deferred is None else deferred
        use_strict = CARDCAGE_STRICT_HOOKS.get() if strict is None else strict
        choice = state.report.selection
        if use_deferred:

            def on_deferred(report: ApplyReport) -> None:
                _enforce_failure_policy(report, registry, profile, choice, use_strict)

            registry.set_deferred_failure_handler(on_deferred)
        report = registry.apply(deferred=use_deferred, warn=False)  # the policy reports
        state.report.apply = report
        _enforce_failure_policy(report, registry, profile, choice, use_strict)

    state.application.run(work)
    return state.report


def load_plugins(
    profile: RuntimeProfile = SRT_PROFILE,
    registry: type[BaseHookRegistry] = HookRegistry,
    *,
    selection: PlatformChoice | _Unset | None = _UNSET,
    strict: bool | None = None,
    deferred: bool | None = None,
) -> PluginLoadReport:
    """Load the runtime's general plugins and apply their hooks, once per process.

    Safe to call from every process entry point and from inside a plugin callback (a re-entrant
    call returns at once; the outer call finishes the work). ``selection`` overrides the
    platform choice (normally resolved by the profile's provider or the selector variable).
    """
    state = _state(profile, registry)
    register_plugins(profile, registry, selection=selection)
    if state.registration.state != COMPLETE:
        return state.report  # re-entered from a plugin callback
    first = state.application.state != COMPLETE
    apply_registered_hooks(profile, registry, strict=strict, deferred=deferred)
    if first and state.application.state == COMPLETE:
        executed = state.report.names("executed")
        failed = [p.name for p in state.report.plugins if p.status.startswith("failed")]
        logger.info(
            "%s plugins: %d loaded (%s)%s",
            profile.name.upper(),
            len(executed),
            ", ".join(executed) or "none",
            f", {len(failed)} failed ({', '.join(failed)})" if failed else "",
        )
    return state.report


def reset_plugin_state(
    profile: RuntimeProfile = SRT_PROFILE, registry: type[BaseHookRegistry] = HookRegistry
) -> None:
    """Forget that plugins were loaded (tests only); the registry itself is left as it is."""
    _states.pop((profile, id(registry)), None)
