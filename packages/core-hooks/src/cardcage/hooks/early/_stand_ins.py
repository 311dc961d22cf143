"""Stand-ins: a module provided only when no finder can import the real one.

Hosts probe optional dependencies with ``try: import x``, at import, before any plugin loads.
A stand-in answers that import, but it must never hide a real module: its finder sits last on
``sys.meta_path`` and, before answering, asks every finder placed after it. A stand-in is a
package (an empty ``__path__``), so stand-ins for its submodules work too. A ``fill`` that
raises leaves the importer with the ``ModuleNotFoundError`` it would have had without one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from cardcage.hooks._deferred import watcher
from cardcage.hooks.registry import format_source, plugin_source

from ._log import logger
from ._policy import fail
from ._records import EarlyFailure, who
from ._state import state

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from cardcage.hooks.registry import HookSource

__all__ = ["StandIn", "StandInFinder", "arm_stand_in"]


class StandIn:
    """A module to provide when no finder can import the real one."""

    __slots__ = ("detail", "fill", "module", "name", "source", "status")

    def __init__(
        self, name: str, fill: Callable[[ModuleType], object], source: HookSource | None
    ) -> None:
        self.name = name
        self.fill = fill
        self.source = source
        self.status = "pending"
        self.detail = ""
        self.module: ModuleType | None = None

    def undo(self) -> None:
        module = self.module
        if module is not None and sys.modules.get(self.name) is module:
            del sys.modules[self.name]
            parent_name, _, child = self.name.rpartition(".")
            parent = sys.modules.get(parent_name) if parent_name else None
            if parent is not None and getattr(parent, child, None) is module:
                delattr(parent, child)
        self.module = None
        if self.status in ("pending", "provided"):
            self.status = "undone"


class StandInFinder:
    """Last on ``sys.meta_path``: answers only for stand-in names no other finder resolves."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        entry = state.stand_ins.get(fullname)
        if entry is None or entry.status != "pending":
            return None
        # Finders inserted after this one get their turn first: the real module always wins.
        real = _find_real(fullname, path, after=self)
        if real is not None:
            entry.status = "real-module"
            entry.detail = f"the real module is importable ({real.origin or real.name})"
            logger.info(
                "Stand-in for %s not used: %s [%s]",
                fullname,
                entry.detail,
                format_source(entry.source),
            )
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(
            fullname,
            self,  # type: ignore[arg-type]  # a Loader by protocol (create/exec_module)
            origin="cardcage stand-in",
            is_package=True,
        )

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        entry = state.stand_ins[module.__name__]
        module.__cardcage_stand_in__ = entry.source  # type: ignore[attr-defined]
        try:
            with plugin_source(entry.source):
                entry.fill(module)
        except Exception as exc:
            entry.status = "failed"
            failure = EarlyFailure(
                *who(entry.source), f"filling the stand-in for {entry.name}", exc, (entry.name,)
            )
            fail(failure)  # raises when it is the selected platform's
            # Isolated: the importer sees what it would have seen without the stand-in.
            raise ModuleNotFoundError(
                f"No module named {entry.name!r} (its early-patch stand-in failed: "
                f"{type(exc).__name__}: {exc})",
                name=entry.name,
            ) from exc
        entry.module = module
        entry.status = "provided"
        logger.debug("Provided the stand-in for %s [%s]", entry.name, format_source(entry.source))


def _find_real(
    name: str, path: Sequence[str] | None, *, after: object | None = None
) -> ModuleSpec | None:
    """The spec another finder gives ``name`` (only those after ``after``, if given)."""
    finders = list(sys.meta_path)
    if after is not None and after in finders:
        finders = finders[finders.index(after) + 1 :]
    for finder in finders:
        if finder is state.finder or finder is watcher:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:  # a broken finder must not break the stand-in decision
            continue
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


def arm_stand_in(entry: StandIn) -> None:
    """Wait for the first import of ``entry.name``, unless the real module is already there."""
    with state.lock:
        previous = state.stand_ins.get(entry.name)
        if previous is not None and previous.status in ("pending", "provided"):
            logger.warning(
                "Two stand-ins for %s: %s [%s] replaces %s [%s]",
                entry.name,
                getattr(entry.fill, "__qualname__", entry.fill),
                format_source(entry.source),
                getattr(previous.fill, "__qualname__", previous.fill),
                format_source(previous.source),
            )
        state.stand_ins[entry.name] = entry
        if entry.name in sys.modules:
            real = sys.modules[entry.name]
            entry.status = "real-module"
            entry.detail = f"the real module is already imported ({getattr(real, '__file__', '')})"
        else:
            parent, _, _ = entry.name.rpartition(".")
            known = not parent or parent in sys.modules
            search = getattr(sys.modules.get(parent), "__path__", None) if parent else None
            spec = _find_real(entry.name, search) if known else None
            if spec is not None:
                entry.status = "real-module"
                entry.detail = f"the real module is importable ({spec.origin or spec.name})"
        if entry.status == "real-module":
            logger.info(
                "Stand-in for %s not used: %s; the real module wins [%s]",
                entry.name,
                entry.detail,
                format_source(entry.source),
            )
            return
        if state.finder is None:
            state.finder = StandInFinder()
        if state.finder not in sys.meta_path:
            sys.meta_path.append(state.finder)  # last: every real finder goes first
