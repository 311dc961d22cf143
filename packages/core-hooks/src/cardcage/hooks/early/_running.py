"""Running the entry points ``CARDCAGE_EARLY_PATCHES`` names: ``boot()`` and ``run()``.

What runs is named, never discovered: an early patch runs before any platform is selected, in
every Python process of the environment, so installing one must change nothing until someone
names it. Each named callback runs once, in (distribution, name) order like general plugins,
with its entry point as the source of everything it arms; a callback that fails arms nothing.
``boot()`` is what the ``.pth`` line runs at interpreter start, so it never raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES
from cardcage.hooks.errors import DuplicatePluginError, InvalidEnvVarError
from cardcage.hooks.registry import HookSource, plugin_source
from cardcage.hooks.snapshot import entry_point_snapshot

from ._arming import arm_all
from ._log import logger, say
from ._policy import fail
from ._records import EarlyFailure, EarlyPlugin
from ._registry import EarlyPatchRegistry
from ._state import state

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint

    from ._stand_ins import StandIn
    from ._values import ValuePatch

__all__ = ["EARLY_PATCHES_GROUP", "boot", "run"]

#: The entry-point group of early patches: ``name = module:callable``, called with no arguments.
EARLY_PATCHES_GROUP = "cardcage.early_patches"

_RAN = ("executed", "failed-import", "failed-register")


def boot() -> None:
    """Run the early patches ``CARDCAGE_EARLY_PATCHES`` names, once; never raises.

    Called by cardcage-core-hooks' ``.pth`` line at interpreter start when the variable is set.
    A variable that does not parse is recorded (``load_plugins()`` raises it) and logged.
    """
    with state.lock:
        if state.booted:
            return
        state.booted = True
    try:
        names = CARDCAGE_EARLY_PATCHES.get()
    except InvalidEnvVarError as exc:
        import logging

        state.config_error = exc
        say(logging.ERROR, f"{exc} No early patch runs.")
        return
    try:
        run(names)
    except Exception as exc:  # a bug of ours must not break every Python process
        import logging

        say(logging.ERROR, f"Running early patches failed: {type(exc).__name__}: {exc}", exc)


def _suggest(name: str, known: Iterable[str]) -> str:
    from cardcage.hooks.spelling import closest

    close = closest(name, known)
    return f"Did you mean {close!r}? " if close else ""


def run(names: Sequence[str], *, snapshot: EntryPointSnapshot | None = None) -> None:
    """Run the named early-patch entry points now (``boot()`` calls this); skip those that ran.

    Names are looked up in ``cardcage.early_patches``; a name no entry point has is warned about
    with a close match; a name two distributions provide runs neither (recorded as
    ``DuplicatePluginError``). Each callback runs with its entry point as the source of what it
    arms, in (distribution, name) order, like general plugins; what it arms takes effect when
    it returns without raising.
    """
    import logging

    eps = (snapshot or entry_point_snapshot()).group(EARLY_PATCHES_GROUP)
    with state.lock:
        state.requested = tuple(dict.fromkeys((*state.requested, *names)))
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    chosen: list[PluginEntryPoint] = []
    for name in names:
        found = by_name.get(name, [])
        if not found:
            detail = (
                f"{_suggest(name, by_name)}Installed: "
                f"{', '.join(sorted(repr(n) for n in by_name)) or 'none'}."
            )
            state.plugins[name] = EarlyPlugin(name, "", None, "not-found", detail)
            say(
                logging.WARNING,
                f"{CARDCAGE_EARLY_PATCHES.name} names {name!r}, which no entry point of group "
                f"{EARLY_PATCHES_GROUP!r} has. {detail} Fix the spelling, or install the "
                "distribution that provides it.",
            )
            continue
        if len(found) > 1:
            error = DuplicatePluginError(EARLY_PATCHES_GROUP, name, [ep.dist_name for ep in found])
            state.config_error = state.config_error or error
            state.plugins[name] = EarlyPlugin(name, found[0].value, None, "duplicate", str(error))
            say(logging.ERROR, f"{error} Neither runs.")
            continue
        chosen.append(found[0])
    chosen.sort(key=lambda ep: (ep.dist.normalized_name if ep.dist else "", ep.name))
    for ep in chosen:
        previous = state.plugins.get(ep.name)
        if previous is not None and previous.status in _RAN:
            continue
        _run_one(ep)


def _run_one(ep: PluginEntryPoint) -> None:
    source = HookSource(ep.name, ep.dist_name)
    step = f"importing {ep.value}"
    armed: list[ValuePatch | StandIn | str] = []
    with state.lock:
        state.running = armed
    try:
        with plugin_source(source):
            callback = ep.load()
            if not callable(callback):
                raise TypeError(f"{ep.value} is a {type(callback).__name__}, not callable")
            step = f"in its callback ({ep.value})"
            callback()
    except Exception as exc:
        with state.lock:
            state.running = None
        EarlyPatchRegistry.discard_source(source)
        status = "failed-import" if step.startswith("importing") else "failed-register"
        state.plugins[ep.name] = EarlyPlugin(
            ep.name, ep.value, ep.dist_name, status, f"{type(exc).__name__}: {exc}"
        )
        fail(EarlyFailure(ep.name, ep.dist_name, step, exc))
        return
    with state.lock:
        state.running = None
    state.plugins[ep.name] = EarlyPlugin(ep.name, ep.value, ep.dist_name, "executed")
    arm_all(armed)
    logger.debug("Ran early patch %s (%d patch(es) armed)", ep.name, len(armed))
