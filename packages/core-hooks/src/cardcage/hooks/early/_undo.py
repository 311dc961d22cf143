"""Undoing early patches (``unapply``) and forgetting them (``reset``, for tests).

What an early patch changed outlives the callback that armed it: hooks in the registry, values on
host modules, stand-ins in ``sys.modules``, a finder on ``sys.meta_path`` and watches on the
import watcher. Undoing takes each back in one place, so a test leaves the interpreter as it
found it; what stays recorded is reported as ``undone``.
"""

from __future__ import annotations

import sys

from cardcage.hooks._deferred import watcher

from ._registry import EarlyPatchRegistry
from ._state import state
from ._values import on_value_module

__all__ = ["reset", "unapply"]


def unapply() -> None:
    """Undo every early patch: hooks, values and stand-ins, and stop waiting for modules.

    Hooks restore their originals and rebound aliases (``EarlyPatchRegistry.unapply()``);
    values are put back on their modules; stand-ins leave ``sys.modules`` (modules that already
    imported one keep their reference). What stays recorded is reported as ``undone``.
    """
    with state.lock:
        EarlyPatchRegistry.unapply()
        watcher.unwatch_all(on_value_module)
        for patch in reversed(state.values):
            patch.undo()
        for entry in state.stand_ins.values():
            entry.undo()
        if state.finder is not None and state.finder in sys.meta_path:
            sys.meta_path.remove(state.finder)
        state.hook_failures.clear()


def reset() -> None:
    """``unapply()`` and forget everything, as if no early patch had run (tests only)."""
    with state.lock:
        unapply()
        EarlyPatchRegistry.reset()
        state.forget()
