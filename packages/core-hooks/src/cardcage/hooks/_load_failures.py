"""What the loader does when a plugin fails: the failure policy's messages, logs and raises.

``cardcage.hooks.loader`` imports this module only when a plugin has failed (to import, in its
callback, or in leaving a hook target unapplied) or two plugins share a name. A start-up where every
plugin loads never imports it, nor ``cardcage.hooks.errors``: both are on the path of every
first ``load_plugins()``, inside SGLang's start-up too, where each module costs its import.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import (
    SGLANG_PORTING_GUIDE,
    DuplicatePluginError,
    PluginLoadError,
    SGLangPluginLoadError,
    format_plugin,
    missing_sglang_module,
    targets_sglang_fix,
    targets_sglang_problem,
)
from .loader import _norm, _record, _set_status
from .log import get_logger
from .registry import _apply_error, format_source

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .loader import PlatformChoice, PluginStatus
    from .profile import RuntimeProfile
    from .registry import ApplyReport, BaseHookRegistry, HookSource
    from .snapshot import PluginEntryPoint

# The loader's logger: a failure reads as the loader's, as it did before this module existed.
logger = get_logger("cardcage.hooks.loader")


def duplicate_names(group: str, name: str, found: Iterable[PluginEntryPoint]) -> None:
    """Two or more distributions declare ``name`` in ``group``: neither is imported."""
    raise DuplicatePluginError(group, name, [ep.dist_name for ep in found])


def import_failed(
    ep: PluginEntryPoint,
    group: str,
    exc: Exception,
    statuses: list[PluginStatus] | None,
    *,
    fatal: bool,
) -> None:
    """The failure policy for a plugin that did not import: raise when it ships with the
    selected platform, otherwise log it with its traceback and go on."""
    sglang_module = missing_sglang_module(exc)
    if sglang_module is not None:
        # Written for SGLang's own runtime: say so, with both ways out, not a traceback.
        sglang_failure(
            statuses,
            ep.name,
            ep.dist_name,
            group,
            f"importing it ({ep.value})",
            exc,
            sglang_module,
            fatal=fatal,
            status="failed-import",
            entry_point=ep,
        )
        return
    _record(statuses, ep, "failed-import", f"{type(exc).__name__}: {exc}")
    if fatal:
        raise PluginLoadError(
            f"{format_plugin(ep.name, ep.dist_name).capitalize()} in group {group!r} "
            f"failed to import ({ep.value}): {type(exc).__name__}: {exc}. It ships with "
            "the selected platform, so the runtime cannot start without it: fix or "
            f"reinstall {ep.dist_name}, or select another platform.",
            group=group,
            plugin=ep.name,
            distribution=ep.dist_name,
        ) from exc
    logger.error(
        "Failed to load plugin %s from group %s (distribution %s): %s: %s; skipping it",
        ep.name,
        group,
        ep.dist_name,
        type(exc).__name__,
        exc,
        exc_info=exc,
    )


def sglang_failure(
    statuses: list[PluginStatus] | None,
    name: str,
    dist_name: str | None,
    group: str | None,
    step: str,
    exc: BaseException,
    sglang_module: str,
    *,
    fatal: bool,
    status: str,
    entry_point: PluginEntryPoint | None = None,
    log: logging.Logger | None = None,
) -> None:
    """A plugin written for SGLang's runtime failed because SGLang is absent: record, then
    raise (``fatal``: it ships with the selected platform) or log a warning and go on."""
    detail = (
        f"targets SGLang's runtime: {type(exc).__name__}: {exc}. Run it in SGLang's own runtime "
        "(pip install sglang), or port it to cardcage (the porting guide: "
        f"{SGLANG_PORTING_GUIDE})"
    )
    if entry_point is not None:
        _record(statuses, entry_point, status, detail)
    else:
        _set_status(statuses, name, status, detail)
    where = f" in group {group!r}" if group else ""
    problem = targets_sglang_problem(
        f"{format_plugin(name, dist_name).capitalize()}{where}", step, sglang_module, exc
    )
    if fatal:
        raise SGLangPluginLoadError(
            f"{problem} It ships with the selected platform, so the runtime cannot start "
            "without it.",
            f"{targets_sglang_fix()}; or select another platform.",
            group=group,
            plugin=name,
            distribution=dist_name,
            sglang_module=sglang_module,
        ) from exc
    out = log or logger
    out.warning(
        "%s Skipping it. %s.",
        problem,
        targets_sglang_fix(),
        exc_info=out.isEnabledFor(logging.DEBUG),
    )


def callback_failed(
    name: str,
    dist_name: str | None,
    exc: Exception,
    dropped: int,
    *,
    plugin_label: str,
    group: str | None,
    fatal: bool,
    statuses: list[PluginStatus] | None,
    log: logging.Logger,
) -> None:
    """A plugin's callback raised (its hooks are already discarded): raise when it ships with
    the selected platform, otherwise log it with its traceback and go on."""
    sglang_module = missing_sglang_module(exc)
    if sglang_module is not None:
        sglang_failure(
            statuses,
            name,
            dist_name,
            group,
            f"its {plugin_label} plugin callback",
            exc,
            sglang_module,
            fatal=fatal,
            status="failed-register",
            log=log,
        )
        return
    if fatal:
        raise PluginLoadError(
            f"{format_plugin(name, dist_name).capitalize()} failed in its {plugin_label} "
            f"plugin callback: {type(exc).__name__}: {exc}. It ships with the selected "
            f"platform, so the runtime cannot start without it: fix {dist_name}, or "
            "select another platform.",
            group=group,
            plugin=name,
            distribution=dist_name,
        ) from exc
    log.error(
        "Failed to execute %s plugin: %s (distribution %s); discarded its %d hook(s)",
        plugin_label,
        name,
        dist_name,
        dropped,
        exc_info=exc,
    )
    _set_status(statuses, name, "failed-register", f"{type(exc).__name__}: {exc}")


def _owned_by(
    dist: str, failures: Mapping[str, BaseException], registrations: Mapping[str, Any]
) -> dict[str, list[HookSource]]:
    """The failed targets that have hooks from ``dist``, with those hooks' sources."""
    owned: dict[str, list[HookSource]] = {}
    for target in sorted(failures):
        sources = [
            r.source
            for r in registrations.get(target, ())
            if r.source is not None and _norm(r.source.dist_name) == _norm(dist)
        ]
        if sources:
            owned[target] = sources
    return owned


def enforce_failure_policy(
    report: ApplyReport,
    registry: type[BaseHookRegistry],
    profile: RuntimeProfile,
    choice: PlatformChoice | None,
    strict: bool,
) -> None:
    """Raise if a failed target belongs to the selected platform's distribution (or strict).

    The loader calls it only for a report with failed targets."""
    registrations = registry.registrations()
    if choice is not None and choice.dist_name:
        owned = _owned_by(choice.dist_name, report.failed, registrations)
        if owned:
            sources = sorted({format_source(src) for srcs in owned.values() for src in srcs})
            first = next(iter(owned.values()))[0]
            details = "; ".join(
                f"{t}: {type(report.failed[t]).__name__}: {report.failed[t]}" for t in owned
            )
            raise PluginLoadError(
                f"Hooks of the selected platform's distribution {choice.dist_name} "
                f"({', '.join(sources)}) could not be applied: {details}. The platform "
                "depends on them; fix the hook targets in that distribution.",
                group=profile.plugin_group,
                plugin=first.plugin_name,
                distribution=choice.dist_name,
                targets=list(owned),
            )
    if strict:
        raise _apply_error(report.failed, registrations)
