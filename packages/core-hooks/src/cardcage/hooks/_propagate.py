"""Rebinding stale ``from x import f`` copies, in one pass over ``sys.modules`` per batch.

A module that did ``from runtime.ops import rope`` before hooks were applied still holds the
original function. After a batch of targets is patched, every module global that *is* (identity)
one of the originals is rebound to its patched replacement. SGLang walks every module once per
target; cardcage walks once per batch with a dict lookup per global, skips the modules that define
the hooks (a plugin that subclasses the class it replaces must keep seeing the original), and can be
scoped to module prefixes. Every rebinding is recorded so ``unapply()`` can undo it.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["Rebind", "Replacement", "propagate"]


class Replacement:
    """One patched object: what to look for, what to put instead, and where not to."""

    __slots__ = ("original", "replacement", "skip_modules", "skip_packages")

    def __init__(
        self,
        original: object,
        replacement: object,
        skip_modules: frozenset[str],
        skip_packages: frozenset[str] = frozenset(),
    ) -> None:
        self.original = original
        self.replacement = replacement
        self.skip_modules = skip_modules
        self.skip_packages = skip_packages  # top-level packages of the plugins that hook it

    def skips(self, module_name: str) -> bool:
        if module_name in self.skip_modules:
            return True
        return module_name.partition(".")[0] in self.skip_packages


class Rebind:
    """One module global that was rebound: enough to put the original back."""

    __slots__ = ("module", "name", "original", "replacement")

    def __init__(
        self, module: types.ModuleType, name: str, original: object, replacement: object
    ) -> None:
        self.module = module
        self.name = name
        self.original = original
        self.replacement = replacement

    def undo(self) -> None:
        # Only undo if nobody rebound the name since; never clobber a later change.
        if self.module.__dict__.get(self.name, None) is self.replacement:
            setattr(self.module, self.name, self.original)

    def redo(self) -> None:
        # Only redo if the name still holds the original that undo() put back.
        if self.module.__dict__.get(self.name, None) is self.original:
            setattr(self.module, self.name, self.replacement)


def _in_scope(module_name: str, scope: Sequence[str] | None) -> bool:
    if scope is None:
        return True
    return any(module_name == p or module_name.startswith(p + ".") for p in scope)


def propagate(
    replacements: Mapping[int, Replacement],
    *,
    scope: Sequence[str] | None = None,
) -> list[Rebind]:
    """Rebind every alias of every original in one pass; return what was rebound."""
    if not replacements:
        return []
    rebinds: list[Rebind] = []
    lookup = replacements.get
    module_type = types.ModuleType
    entries: list[tuple[str, object]] = list(sys.modules.items())
    for module_name, module in entries:
        # sys.modules may hold None (failed or blocked imports) and non-module objects.
        if not isinstance(module, module_type):
            continue
        if scope is not None and not _in_scope(module_name, scope):
            continue
        try:
            namespace = module.__dict__
            items = list(namespace.items())
        except (AttributeError, TypeError, RuntimeError):
            continue
        for name, value in items:
            entry = lookup(id(value))
            if entry is None or entry.original is not value:
                continue
            if entry.skips(module_name):
                continue
            try:
                setattr(module, name, entry.replacement)
            except (AttributeError, TypeError):
                continue
            rebinds.append(Rebind(module, name, value, entry.replacement))
    return rebinds
