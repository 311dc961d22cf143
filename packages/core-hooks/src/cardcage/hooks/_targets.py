"""Turning a target path into the object to patch, with or without importing anything.

Targets are written ``pkg.mod.Cls.method`` or ``pkg.mod:Cls.method``. The colon form says where
the module ends; the dotted form is resolved like ``pkgutil.resolve_name``: import the longest
prefix that is a module, then walk attributes. In deferred mode nothing is imported: resolution
stops at the first module that is not in ``sys.modules`` yet and reports it, so the caller can wait
for that import. Once the owner is found, ``find_attribute`` says what the target names (a
function, a method's descriptor, a property, a class) and what a hook would wrap.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import InvalidTargetError

# The error classes are imported where a target is found wrong: a SGLang or vLLM process whose
# plugins hand cardcage well-formed targets never loads them.

__all__ = [
    "MISSING",
    "Found",
    "Located",
    "NotYetImported",
    "TargetPath",
    "find_attribute",
    "is_home",
    "locate",
    "parse_target",
    "redescribe",
]

#: "No such attribute": the value of an attribute a class only inherits.
MISSING: Any = object()


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
        from .errors import InvalidTargetError  # the error classes load only for a bad target

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
    from .errors import InvalidTargetError

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


class Found:
    """What a target names: the raw attribute, its kind, and the object hooks wrap.

    ``kind`` is ``"function"`` (any other callable too), ``"classmethod"``, ``"staticmethod"``,
    ``"property"`` or ``"class"``; ``original`` is the callable under the descriptor (its
    ``__func__`` or getter), or ``raw`` itself.
    """

    __slots__ = ("kind", "original", "raw")

    def __init__(self, raw: Any, kind: str, original: Any) -> None:
        self.raw = raw
        self.kind = kind
        self.original = original


def find_attribute(owner: Any, attr: str, target: str) -> Found:
    """Find the raw attribute (walking the MRO for classes) and say what kind it is.

    Raises ``AttributeError`` when it does not exist and ``HookTargetError`` when it is
    something hooks cannot wrap in place.
    """
    raw: Any = MISSING
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in klass.__dict__:
                raw = klass.__dict__[attr]
                break
    if raw is MISSING:
        raw = getattr(owner, attr)
    if isinstance(raw, classmethod):
        return Found(raw, "classmethod", raw.__func__)
    if isinstance(raw, staticmethod):
        return Found(raw, "staticmethod", raw.__func__)
    if isinstance(raw, property):
        if raw.fget is None:
            from .errors import HookTargetError

            raise HookTargetError(
                f"Target {target!r} is a property without a getter; nothing to hook.",
                target=target,
            )
        return Found(raw, "property", raw.fget)
    if isinstance(raw, (functools.cached_property, functools.partialmethod)):
        from .errors import HookTargetError

        raise HookTargetError(
            f"Target {target!r} is a {type(raw).__name__}, which cardcage cannot wrap in place. "
            "Hook the function it calls, or REPLACE the class that defines it.",
            target=target,
        )
    if isinstance(raw, type):
        return Found(raw, "class", raw)
    if not callable(raw):
        from .errors import HookTargetError

        raise HookTargetError(
            f"Target {target!r} is a {type(raw).__name__}, not a function, method or class; "
            "hooks can only wrap callables.",
            target=target,
        )
    return Found(raw, "function", raw)


def is_home(owner: Any, attr: str, original: Any) -> bool:
    """The owner holds the original itself: not inherited, not a module's re-export."""
    if isinstance(owner, type):
        return attr in owner.__dict__
    return getattr(original, "__module__", None) == getattr(owner, "__name__", None)


def redescribe(kind: str, plain: Any, raw: Any) -> Any:
    """Put the patched callable back in the descriptor type the target had."""
    if kind == "classmethod":
        return classmethod(plain)
    if kind == "staticmethod":
        return staticmethod(plain)
    if kind == "property":
        return property(plain, raw.fset, raw.fdel, raw.__doc__)
    return plain
