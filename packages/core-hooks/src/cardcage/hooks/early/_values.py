"""Value patches: a module attribute replaced right after its module executes.

A hook cannot reach a constant the host computes at import (``_is_cpu = ...``): by the time any
loader runs, the importers have copied it. The import watcher calls back once the module's body
has executed and before the importing line continues, which is the one moment the new value
reaches every ``from module import attr``. A patch only replaces an attribute the module
defines: a missing one is a typo or another version of the host, reported as a failure.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cardcage.hooks._deferred import watcher
from cardcage.hooks.registry import format_source

from ._log import logger
from ._policy import fail
from ._records import EarlyFailure, who
from ._state import state

if TYPE_CHECKING:
    from collections.abc import Callable

    from cardcage.hooks.registry import HookSource

__all__ = ["MISSING", "ValuePatch", "arm_value", "on_value_module"]

#: "No value given" (``set_value``) and "no such attribute", distinct from any real value.
MISSING: Any = object()


class ValuePatch:
    """A module attribute to set right after its module executes, and how to put it back."""

    __slots__ = ("attrs", "compute", "module", "previous", "source", "status", "target", "value")

    def __init__(
        self,
        target: str,
        module: str,
        attrs: tuple[str, ...],
        value: Any,
        compute: Callable[[Any], Any] | None,
        source: HookSource | None,
    ) -> None:
        self.target = target
        self.module = module
        self.attrs = attrs
        self.value = value
        self.compute = compute
        self.source = source
        self.status = "registered"
        self.previous: Any = MISSING

    def owner(self) -> Any:
        obj: Any = sys.modules[self.module]
        for name in self.attrs[:-1]:
            obj = getattr(obj, name)
        return obj

    def apply(self) -> None:
        owner = self.owner()
        attr = self.attrs[-1]
        previous = getattr(owner, attr, MISSING)
        if previous is MISSING:  # a typo, or another version of the module: never a new one
            raise AttributeError(
                f"{self.module} has no attribute {'.'.join(self.attrs)!r} once it has executed; "
                "set_value() only replaces a value the module defines"
            )
        value = self.compute(previous) if self.compute is not None else self.value
        setattr(owner, attr, value)
        self.previous = previous
        self.value = value
        self.status = "applied"

    def undo(self) -> None:
        if self.status != "applied":
            if self.status == "pending":
                self.status = "undone"
            return
        module = sys.modules.get(self.module)
        if module is not None:
            owner = self.owner()
            attr = self.attrs[-1]
            if getattr(owner, attr, MISSING) is self.value:
                setattr(owner, attr, self.previous)
            else:
                logger.warning(
                    "Not restoring %s: it was changed after the early patch set it [%s]",
                    self.target,
                    format_source(self.source),
                )
        self.status = "undone"


def arm_value(patch: ValuePatch) -> None:
    """Apply ``patch`` now if its module is imported, else right after it executes."""
    with state.lock:
        state.values.append(patch)
        patch.status = "pending"
    if patch.module in sys.modules:
        _apply_value(patch)
    else:
        watcher.watch(patch.module, on_value_module)
        if patch.module in sys.modules:  # imported by another thread meanwhile
            on_value_module(patch.module)


def _apply_value(patch: ValuePatch) -> None:
    try:
        patch.apply()
    except Exception as exc:
        patch.status = "failed"
        fail(EarlyFailure(*who(patch.source), f"setting {patch.target}", exc, (patch.target,)))
        return
    logger.debug("Early value %s set [%s]", patch.target, format_source(patch.source))


def on_value_module(module: str) -> None:
    """The watcher's callback: ``module`` has executed; apply the values waiting for it."""
    with state.lock:
        ready = [p for p in state.values if p.module == module and p.status == "pending"]
    for patch in ready:
        _apply_value(patch)
