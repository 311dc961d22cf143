"""``cardcage hooks``: run each runtime's ``load_plugins()`` and report every hook and its state.

Every registered runtime (``cardcage.hooks.runtimes``) is covered, each with its own profile and
hook registry (as named by its record), so a hook registered through one runtime's API is listed
under that runtime only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.registry import BaseHookRegistry, HookRecord
    from cardcage.hooks.runtimes import Runtime

from ._common import (
    ErrorInfo,
    choose_runtimes,
    current_snapshot,
    dist_versions,
    error_info,
    exc_line,
    hosted,
    to_json,
    version_of,
)


@dataclass(frozen=True)
class PluginStatusRow:
    """What ``load_plugins()`` did with one general plugin."""

    group: str
    name: str
    value: str
    distribution: str | None
    version: str | None
    status: str  # executed | loaded | not-allowed | excluded | failed-import | failed-register
    detail: str


@dataclass(frozen=True)
class HookRow:
    """One registered hook; ``position`` is its place in the target's chain (1 = innermost)."""

    target: str
    type: str
    hook: str
    position: int
    plugin: str | None
    distribution: str | None
    version: str | None
    status: str  # applied | failed | pending | registered
    error: str | None
    pending_module: str | None


@dataclass(frozen=True)
class ChoiceInfo:
    """The platform choice ``load_plugins()`` used to exclude other platforms' plugins."""

    entry_point: str | None
    distribution: str | None
    version: str | None
    reason: str
    #: The selected class and whether it is a built-in, from the runtime's selection record
    #: (None when the runtime keeps none): what tells a built-in from the fallback base class.
    platform: str | None = None
    builtin: str | None = None


@dataclass(frozen=True)
class KernelTarget:
    """Where a declared kernel runs in one host, for a range of its releases."""

    host: str
    releases: str
    host_op: str
    mechanism: str


@dataclass(frozen=True)
class KernelRow:
    """One kernel the selected platform declares (``cardcage.platforms.kernels``).

    ``status`` is ``registered`` (the op is known; ``targets`` lists the host ops meant to run
    it) or ``unknown-op``. Whether it is *in effect* is answered in the host's own process
    (``cardcage.platforms.kernels.in_effect()``), not here, where no host runs.
    """

    op: str
    kernel: str
    platform: str
    status: str
    targets: tuple[KernelTarget, ...]


@dataclass(frozen=True)
class RuntimeHooks:
    """One runtime's ``load_plugins()`` outcome: its platform choice, plugins and hooks."""

    runtime: str
    selection: ChoiceInfo | None
    plugins: tuple[PluginStatusRow, ...]
    hooks: tuple[HookRow, ...]
    rebound: int | None
    error: ErrorInfo | None
    #: How messages name the runtime (its record's ``display_name``); not in the JSON document.
    display_name: str = ""
    #: The kernels the selected platform declares, with the host ops each is meant for.
    kernels: tuple[KernelRow, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def counts(self) -> dict[str, int]:
        """How many hooks are in each status."""
        counts: dict[str, int] = {}
        for row in self.hooks:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"ok": self.ok, **to_json(self)}
        del document["display_name"]
        return document


@dataclass(frozen=True)
class EarlyPluginRow:
    """One entry point of the ``cardcage.early_patches`` group and what became of it."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    #: executed | failed-import | failed-register | not-requested | not-found | duplicate
    status: str
    detail: str


@dataclass(frozen=True)
class EarlyPatchRow:
    """One patch an early-patch callback armed: a hook, a module value or a stand-in."""

    kind: str  # hook | value | stand-in
    target: str
    type: str  # BEFORE | AFTER | AROUND | REPLACE | VALUE | STAND-IN
    plugin: str | None
    distribution: str | None
    version: str | None
    status: str  # applied | provided | pending | failed | real-module | undone
    pending_module: str | None
    error: str | None
    detail: str


@dataclass(frozen=True)
class EarlyPatches:
    """The process's early patches (``cardcage.hooks.early``): requested, run, armed."""

    variable: str
    requested: tuple[str, ...]
    #: Whether the ``.pth`` line ran them at this process's interpreter start.
    booted: bool
    error: str | None
    plugins: tuple[EarlyPluginRow, ...]
    patches: tuple[EarlyPatchRow, ...]


@dataclass(frozen=True)
class HooksReport:
    """Every requested runtime's hooks, SRT first, and the process's early patches.

    The JSON document keeps the single-runtime layout of ``cardcage.hooks/1`` at the top level
    (the fields of ``runtimes[0]``) and lists every runtime under ``runtimes``; its ``ok`` is
    true only when every runtime's ``load_plugins()`` succeeded. ``early_patches`` is not per
    runtime: early patches run at interpreter start, before any runtime exists.
    """

    runtimes: tuple[RuntimeHooks, ...]
    early: EarlyPatches | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runtimes)

    def as_json(self) -> dict[str, Any]:
        runtimes = [r.as_json() for r in self.runtimes]
        first = {k: v for k, v in runtimes[0].items() if k != "ok"}
        return {
            "schema": "cardcage.hooks/1",
            "ok": self.ok,
            **first,
            "runtimes": runtimes,
            "early_patches": to_json(self.early),
        }


def _qualname(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or repr(obj)
    return f"{module}.{name}" if module else name


def _chain_order(records: tuple[HookRecord, ...]) -> list[HookRecord]:
    """The order the registry builds a chain in: REPLACE first, then registration order."""
    return sorted(records, key=lambda r: r.hook_type.name != "REPLACE")


def hook_rows(
    registry: type[BaseHookRegistry],
    failed: dict[str, BaseException],
    versions: dict[str, str],
    sources: set[tuple[str, str | None]] | None = None,
) -> tuple[HookRow, ...]:
    """Every hook of ``registry`` (only those whose (plugin, distribution) is in ``sources``,
    when given: a host's runtime shares the registry with cardcage's)."""
    applied = set(registry.applied_targets())
    pending = registry.pending_targets()
    rows: list[HookRow] = []
    for target, records in sorted(registry.registrations().items()):
        if target in failed:
            status, error = "failed", exc_line(failed[target])
        elif target in applied:
            status, error = "applied", None
        elif target in pending:
            status, error = "pending", None
        else:
            status, error = "registered", None
        for position, record in enumerate(_chain_order(records), start=1):
            source = record.source
            if sources is not None and (
                source is None or (source.plugin_name, source.dist_name) not in sources
            ):
                continue
            dist = source.dist_name if source is not None else None
            rows.append(
                HookRow(
                    target=target,
                    type=record.hook_type.name,
                    hook=_qualname(record.hook),
                    position=position,
                    plugin=source.plugin_name if source is not None else None,
                    distribution=dist,
                    version=version_of(dist, versions),
                    status=status,
                    error=error,
                    pending_module=pending.get(target),
                )
            )
    return tuple(rows)


def _host_of(runtime: Runtime) -> Any:
    """The diagnostics module of a host's runtime (``_common.hosted``), or None."""
    try:
        policy = runtime.load_policy()
    except Exception:  # a broken install: load_plugins() below reports it
        return None
    return hosted(policy)


def _selection_record(runtime: Runtime) -> object | None:
    """The runtime's selection record, once ``load_plugins()`` has resolved its platform.

    Read only from an accessor already imported (the one the runtime's loader used), so this
    never resolves a platform that start-up would not have; None when there is none.
    """
    try:
        current = runtime.accessor_module()
        getter = getattr(current, "get_selection_record", None)
        return getter() if callable(getter) else None
    except Exception:  # a runtime without a record, or one whose selection failed
        return None


def kernel_rows(qualname: str | None) -> tuple[KernelRow, ...]:
    """The kernels the platform class ``qualname`` declares, each with the host ops every host
    room maps its op to (data: no host is imported); () for no class or one that does not
    load (the platform checks report that)."""
    if not qualname:
        return ()
    import pkgutil

    from cardcage.platforms import hosts
    from cardcage.platforms.kernels import OPS, declared_kernels

    try:
        cls = pkgutil.resolve_name(qualname)
    except Exception:
        return ()
    # A platform class that knows its runtime's ops (a diffusion platform's) answers itself;
    # an SRT platform's kernels go where the host rooms map them.
    own = getattr(cls, "kernel_targets", None)
    rows = []
    for op, path in declared_kernels(cls).items():
        found = (
            own(op)
            if callable(own)
            else [
                target
                for host in hosts.ROOMS
                for target in getattr(hosts.room(host), "kernel_targets", lambda _op: [])(op)
            ]
        )
        targets = [KernelTarget(**target) for target in found]
        status = "registered" if op in OPS else "unknown-op"
        rows.append(KernelRow(op, path, qualname, status, tuple(targets)))
    return tuple(rows)


def _collect_runtime(runtime: Runtime, versions: dict[str, str]) -> RuntimeHooks:
    from cardcage.hooks.loader import PluginLoadReport, load_plugins

    host = _host_of(runtime)
    if host is not None:  # a host's runtime (vLLM): its own loader, by its own rules
        hooks: RuntimeHooks = host.collect_runtime_hooks(runtime, versions)
        return hooks

    report: PluginLoadReport | None = None
    error: ErrorInfo | None = None
    registry: type[BaseHookRegistry] | None = None
    try:
        registry = runtime.load_hook_registry()
        report = load_plugins(runtime.profile, registry)
    except Exception as exc:
        error = error_info(exc, versions)
    failed = dict(report.apply.failed) if report and report.apply else {}
    choice = report.selection if report else None
    record = _selection_record(runtime) if report is not None else None
    return RuntimeHooks(
        runtime=runtime.name,
        selection=ChoiceInfo(
            entry_point=choice.entry_point,
            distribution=choice.dist_name,
            version=version_of(choice.dist_name, versions),
            reason=choice.reason,
            platform=getattr(record, "qualname", None),
            builtin=getattr(record, "builtin", None),
        )
        if choice is not None
        else None,
        plugins=tuple(
            PluginStatusRow(
                group=p.group,
                name=p.name,
                value=p.value,
                distribution=p.dist_name,
                version=version_of(p.dist_name, versions),
                status=p.status,
                detail=p.detail,
            )
            for p in (report.plugins if report else ())
        ),
        hooks=hook_rows(registry, failed, versions) if registry is not None else (),
        rebound=report.apply.rebound if report and report.apply else None,
        error=error,
        display_name=runtime.display_name,
        kernels=kernel_rows(getattr(record, "qualname", None)),
    )


def collect_hooks(runtimes: Sequence[str] | None = None) -> HooksReport:
    """Run each runtime's ``load_plugins()`` (registration and application); list every hook.

    ``runtimes`` names the registered runtimes to load (default: every one, SRT first); a name
    that is not registered raises ``LookupError``.
    """
    versions = dist_versions(current_snapshot())
    chosen = choose_runtimes(runtimes)
    if not chosen:
        raise LookupError(
            "no runtime is registered in the 'cardcage.runtimes' entry-point group; reinstall "
            "cardcage-core-platforms (it registers 'srt')"
        )
    runtimes_hooks = tuple(_collect_runtime(runtime, versions) for runtime in chosen)
    return HooksReport(runtimes_hooks, collect_early(versions))


def collect_early(versions: dict[str, str]) -> EarlyPatches:
    """The early patches of this process (run at its interpreter start when the variable is
    set), and the installed early-patch entry points that were not requested (never imported)."""
    from cardcage.hooks import early

    report = early.report(current_snapshot())
    return EarlyPatches(
        variable=report.variable,
        requested=report.requested,
        booted=report.booted,
        error=report.error,
        plugins=tuple(
            EarlyPluginRow(
                name=p.name,
                value=p.value,
                distribution=p.dist_name,
                version=version_of(p.dist_name, versions),
                status=p.status,
                detail=p.detail,
            )
            for p in report.plugins
        ),
        patches=tuple(
            EarlyPatchRow(
                kind=p.kind,
                target=p.target,
                type=p.type,
                plugin=p.plugin,
                distribution=p.dist_name,
                version=version_of(p.dist_name, versions),
                status=p.status,
                pending_module=p.pending_module,
                error=p.error,
                detail=p.detail,
            )
            for p in report.patches
        ),
    )
