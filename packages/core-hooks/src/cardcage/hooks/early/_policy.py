"""The failure policy: record every early-patch failure; raise those of the selected platform.

Nothing can be aborted cleanly at interpreter start, so a failure is logged, isolated and kept.
Once a runtime knows its platform, ``check_selected_platform()`` raises the first recorded
failure of the distribution that supplied it (DESIGN §2: a selected platform's plugins are part
of its contract), and from then on ``fail()`` raises such a failure from the import that reveals
it. Failures of any other distribution stay logged and skipped.
"""

from __future__ import annotations

from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES
from cardcage.hooks.errors import EarlyPatchError, InvalidEnvVarError
from cardcage.hooks.snapshot import normalize_dist_name

from ._log import say
from ._records import EarlyFailure
from ._state import state

__all__ = ["check_selected_platform", "fail", "failures"]


def _norm(dist: str | None) -> str | None:
    return normalize_dist_name(dist) if dist else None


def _named(plugin: str | None, dist: str | None) -> str:
    """``'name' (distribution d)``: how messages name an early patch."""
    if plugin is None:
        return "registered outside an entry point"
    return f"{plugin!r} (distribution {dist})" if dist else repr(plugin)


def _fatal_error(failure: EarlyFailure) -> EarlyPatchError:
    return EarlyPatchError(
        f"Early patch {_named(failure.plugin, failure.dist_name)} failed {failure.line()}. "
        "It ships with the "
        f"selected platform ({state.fatal_reason}), so the runtime cannot start without it: "
        f"fix or reinstall {failure.dist_name}, remove {failure.plugin!r} from "
        f"{CARDCAGE_EARLY_PATCHES.name}, or select another platform.",
        plugin=failure.plugin,
        distribution=failure.dist_name,
        step=failure.step,
        targets=failure.targets,
    )


def fail(failure: EarlyFailure) -> None:
    """Record and log a failure; raise when it belongs to the known selected platform."""
    with state.lock:
        state.failures.append(failure)
        fatal = state.fatal_dists is not None and _norm(failure.dist_name) in state.fatal_dists
    if fatal:
        raise _fatal_error(failure) from failure.error
    import logging

    say(
        logging.ERROR,
        f"Early patch {_named(failure.plugin, failure.dist_name)} failed {failure.line()}; "
        "it is skipped, the other early patches go on. Fix or "
        f"reinstall {failure.dist_name or 'its distribution'}, or remove {failure.plugin!r} "
        f"from {CARDCAGE_EARLY_PATCHES.name}.",
        failure.error,
    )


def failures() -> tuple[EarlyFailure, ...]:
    """Every early-patch failure recorded in this process, in order."""
    with state.lock:
        return tuple(state.failures)


def check_selected_platform(dist_name: str | None, reason: str) -> None:
    """Apply the failure policy now that a runtime selected a platform (``load_plugins()``).

    Raises the recorded configuration error (a ``CARDCAGE_EARLY_PATCHES`` that does not parse,
    a name two distributions provide), then ``EarlyPatchError`` for the first recorded failure
    of ``dist_name``, the distribution that supplied the selected platform. From now on a
    failure of that distribution (a target imported later) raises from the import that reveals
    it. ``reason`` says how the platform was selected, for the message.
    """
    import logging

    with state.lock:
        if state.config_error is None and not state.booted and CARDCAGE_EARLY_PATCHES.raw():
            try:
                names = CARDCAGE_EARLY_PATCHES.get()
            except InvalidEnvVarError as exc:
                state.config_error = exc
            else:
                if names and not state.warned_not_booted:
                    state.warned_not_booted = True
                    say(
                        logging.WARNING,
                        f"{CARDCAGE_EARLY_PATCHES.name} names {', '.join(map(repr, names))}, but "
                        "no early patch ran at interpreter start: the .pth file of "
                        "cardcage-core-hooks was not processed (python -S, or cardcage-core-hooks "
                        "is not installed in a site-packages directory: pip --target and "
                        "PYTHONPATH skip .pth files). Install cardcage-core-hooks into the "
                        "environment's site-packages.",
                    )
        error = state.config_error
        if dist_name:
            if state.fatal_dists is None:
                state.fatal_dists = set()
            state.fatal_dists.add(normalize_dist_name(dist_name))
            state.fatal_reason = reason
        key = _norm(dist_name)
        owned = [f for f in state.failures if key is not None and _norm(f.dist_name) == key]
    if error is not None:
        raise error
    if owned:
        raise _fatal_error(owned[0]) from owned[0].error
