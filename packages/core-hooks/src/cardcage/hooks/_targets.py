"""Turning a target path into the object to patch, with or without importing anything.

Targets are written ``pkg.mod.Cls.method`` or ``pkg.mod:Cls.method``. The colon form says where
the module ends; the dotted form is resolved like ``pkgutil.resolve_name``: import the longest
prefix that is a module, then walk attributes. In deferred mode nothing is imported: resolution
stops at the first module that is not in ``sys.modules`` yet and reports it, so the caller can wait
for that import.
"""

from __future__ import annotations

import importlib
import sys
import types

from .errors import InvalidTargetError

__all__ = ["Located", "NotYetImported", "TargetPath", "locate", "parse_target"]


class TargetPath:
    """A parsed target: the module part (if the colon form gave it) and the attribute chain."""

    __slots__ = ("attrs", "module", "text")

    def __init__(self, text: str, module: str | None, attrs: tuple[str, ...]) -> None:
        self.text = text
        self.module = module
        self.attrs = attrs

    @property
    def owner_text(self) -> str:
        """The path of the object that holds the patched attribute."""
        if self.module is not None:
            head = self.attrs[:-1]
            return f"{self.module}:{'.'.join(head)}" if head else self.module
        return ".".join(self.attrs[:-1])

    @property
    def attr(self) -> str:
        return self.attrs[-1]

    @property
    def dotted(self) -> str:
        """The all-dots spelling (``pkg.mod.Cls.method``), the only one SGLang's registry reads."""
        attrs = ".".join(self.attrs)
        return attrs if self.module is None else f"{self.module}.{attrs}"


def parse_target(target: object) -> TargetPath:
    """Validate a target's syntax (no import); raise ``InvalidTargetError`` when malformed."""
    if not isinstance(target, str):
        raise InvalidTargetError(
            f"Hook target must be a str like 'package.module.function', got {target!r}.",
            target=None,
        )
    text = target.strip()
    module: str | None = None
    rest = text
    if ":" in text:
        module, _, rest = text.partition(":")
        if not _valid_dotted(module) or not _valid_dotted(rest):
            raise _invalid(target)
        return TargetPath(text, module, tuple(rest.split(".")))
    if not _valid_dotted(rest) or "." not in rest:
        raise _invalid(target)
    return TargetPath(text, None, tuple(rest.split(".")))


def _valid_dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _invalid(target: str) -> InvalidTargetError:
    return InvalidTargetError(
        f"Invalid target path (need at least module.attr): {target!r}. Write it as "
        "'package.module.attr', 'package.module.Class.method' or 'package.module:Class.method'.",
        target=target,
    )


class Located:
    """The owner (module or class) that holds the attribute a target names."""

    __slots__ = ("owner",)

    def __init__(self, owner: object) -> None:
        self.owner = owner


class NotYetImported:
    """Deferred resolution stopped: ``module`` must be imported before the target exists."""

    __slots__ = ("module",)

    def __init__(self, module: str) -> None:
        self.module = module


def locate(path: TargetPath, *, import_missing: bool) -> Located | NotYetImported:
    """Find the owner of ``path.attr``; import modules on the way unless deferred.

    Raises ``ImportError`` or ``AttributeError`` when the path does not exist.
    """
    chain = path.attrs[:-1]
    if path.module is not None:
        obj = _module(path.module, import_missing)
        if isinstance(obj, NotYetImported):
            return obj
        for name in chain:
            obj = getattr(obj, name)
        return Located(obj)
    # Dotted form: the first component is always a module.
    current_name = chain[0]
    obj = _module(current_name, import_missing)
    if isinstance(obj, NotYetImported):
        return obj
    for name in chain[1:]:
        try:
            obj = getattr(obj, name)
            current_name = f"{current_name}.{name}"
            continue
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                raise
        current_name = f"{current_name}.{name}"
        obj = _module(current_name, import_missing)
        if isinstance(obj, NotYetImported):
            return obj
    return Located(obj)


def _module(name: str, import_missing: bool) -> types.ModuleType | NotYetImported:
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not import_missing:
        return NotYetImported(name)
    return importlib.import_module(name)
