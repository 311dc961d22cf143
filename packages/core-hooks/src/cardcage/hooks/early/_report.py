"""``report()``: what early patches did in this process, as ``cardcage hooks`` shows it.

It reads the recorded state and the entry-point snapshot, and imports no plugin: an installed
early patch that was not named is listed as ``not-requested``, never loaded. Each armed patch
becomes one row with its source and status, a failure's message included.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES
from cardcage.hooks.errors import InvalidEnvVarError
from cardcage.hooks.snapshot import entry_point_snapshot

from ._records import EarlyPatch, EarlyPatchReport, EarlyPlugin, who
from ._registry import EarlyPatchRegistry
from ._running import EARLY_PATCHES_GROUP
from ._state import state

if TYPE_CHECKING:
    from cardcage.hooks.snapshot import EntryPointSnapshot

    from ._stand_ins import StandIn
    from ._values import ValuePatch

__all__ = ["report"]


def report(snapshot: EntryPointSnapshot | None = None) -> EarlyPatchReport:
    """What early patches did in this process, and which are installed but not requested.

    Reads the ``cardcage.early_patches`` group from the snapshot (no plugin is imported).
    """
    error: str | None = None
    try:
        requested = CARDCAGE_EARLY_PATCHES.get()
    except InvalidEnvVarError as exc:
        requested, error = (), str(exc)
    eps = (snapshot or entry_point_snapshot()).group(EARLY_PATCHES_GROUP)
    with state.lock:
        if state.config_error is not None:
            error = str(state.config_error)
        plugins = dict(state.plugins)
        values = list(state.values)
        stand_ins = list(state.stand_ins.values())
        hook_failures = dict(state.hook_failures)
        booted = state.booted
    rows: list[EarlyPlugin] = []
    for ep in eps:
        row = plugins.pop(ep.name, None)
        rows.append(row or EarlyPlugin(ep.name, ep.value, ep.dist_name, "not-requested"))
    rows.extend(plugins.values())  # not-found names
    return EarlyPatchReport(
        CARDCAGE_EARLY_PATCHES.name,
        requested,
        booted,
        error,
        rows,
        [
            *_hook_rows(hook_failures),
            *(_value_row(v) for v in values),
            *(_stand_in_row(s) for s in stand_ins),
        ],
    )


def _hook_rows(hook_failures: dict[str, str]) -> list[EarlyPatch]:
    applied = set(EarlyPatchRegistry.applied_targets())
    pending = EarlyPatchRegistry.pending_targets()
    rows = []
    for target, records in sorted(EarlyPatchRegistry.registrations().items()):
        if target in hook_failures:
            status, error = "failed", hook_failures[target]
        elif target in applied:
            status, error = "applied", None
        elif target in pending:
            status, error = "pending", None
        else:
            status, error = "undone", None
        for record in records:
            rows.append(
                EarlyPatch(
                    "hook",
                    target,
                    record.hook_type.name,
                    *who(record.source),
                    status,
                    pending.get(target),
                    error,
                    getattr(record.hook, "__qualname__", "") or repr(record.hook),
                )
            )
    return rows


def _value_row(patch: ValuePatch) -> EarlyPatch:
    failure = next(
        (
            f
            for f in reversed(state.failures)
            if patch.target in f.targets and f.step.startswith("setting")
        ),
        None,
    )
    return EarlyPatch(
        "value",
        patch.target,
        "VALUE",
        *who(patch.source),
        patch.status,
        patch.module if patch.status == "pending" else None,
        f"{type(failure.error).__name__}: {failure.error}" if failure else None,
        "computed from the original" if patch.compute is not None else "",
    )


def _stand_in_row(entry: StandIn) -> EarlyPatch:
    imported = sys.modules.get(entry.name)
    if entry.status == "pending" and imported is not None and imported is not entry.module:
        # A finder before ours imported the real module: ours was never asked.
        entry.status = "real-module"
        entry.detail = f"the real module was imported ({getattr(imported, '__file__', None)})"
    failure = next((f for f in reversed(state.failures) if entry.name in f.targets), None)
    return EarlyPatch(
        "stand-in",
        entry.name,
        "STAND-IN",
        *who(entry.source),
        entry.status,
        entry.name if entry.status == "pending" else None,
        f"{type(failure.error).__name__}: {failure.error}"
        if failure and entry.status == "failed"
        else None,
        entry.detail,
    )
