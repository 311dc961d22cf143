"""Deprecated: ``Record``, ``FrozenRecord`` and ``TupleRecord``, hand-written stand-ins for
``dataclasses`` and ``typing.NamedTuple``.

Deprecated in cardcage-core-hooks 0.2.0, removed in 0.3.0. cardcage's own records no longer use
them: they are dataclasses, named tuples or plain classes with ``__slots__``
(docs/reference/records.md says which, type by type). A class that subclasses one of these bases
keeps working for this one minor release and gets a ``DeprecationWarning`` when it is defined,
naming the standard-library construct to use instead:

* ``Record`` -> ``@dataclasses.dataclass`` (equality field by field, unhashable);
* ``FrozenRecord`` -> ``@dataclasses.dataclass(frozen=True)`` (also hashable; assignment raises
  ``dataclasses.FrozenInstanceError``);
* ``TupleRecord`` -> ``typing.NamedTuple`` (or ``collections.namedtuple``).

Importing this module warns about nothing, so code that only reads it (an ``isinstance`` check
on records of 0.1.x packages) keeps running quietly until 0.3.0.

What the bases do, for the subclasses that still use them: a subclass lists its fields, in
constructor order, as ``_fields`` (and in ``__slots__``, with any private slots) and writes its
own ``__init__``. ``Record`` compares field by field with an instance of the same class and is
unhashable; ``FrozenRecord`` also hashes and refuses assignment with
``dataclasses.FrozenInstanceError``, and its ``__init__`` sets fields through
``object.__setattr__``. Both pickle and copy by calling the class with the field values. A
``TupleRecord`` subclass lists ``_fields``, annotates them and writes ``__new__``; it gets the
field properties, ``_make``, ``_asdict``, ``_replace``, ``__match_args__``, a named tuple's repr,
pickling and copying.
"""

from __future__ import annotations

import warnings
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

__all__ = ["FrozenRecord", "Record", "TupleRecord"]

_REMOVED_IN = "0.3.0"

_INSTEAD = {
    "Record": "@dataclasses.dataclass (or a plain class with __slots__)",
    "FrozenRecord": "@dataclasses.dataclass(frozen=True) (or a plain class with __slots__)",
    "TupleRecord": "typing.NamedTuple (or collections.namedtuple)",
}


def _warn_subclass(cls: type) -> None:
    """Warn that ``cls`` subclasses a deprecated base; the bases of this module are exempt."""
    if cls.__module__ == __name__:
        return
    base = next(b.__name__ for b in cls.__mro__ if b.__module__ == __name__)
    warnings.warn(
        f"{cls.__module__}.{cls.__qualname__} subclasses cardcage.hooks.records.{base}, which is "
        f"deprecated since cardcage-core-hooks 0.2.0 and will be removed in {_REMOVED_IN}: "
        f"define it with {_INSTEAD[base]} instead",
        DeprecationWarning,
        stacklevel=3,
    )


class Record:
    """Deprecated base of a mutable record (use ``@dataclasses.dataclass``): ``__eq__``,
    ``__repr__``, no hash."""

    __slots__ = ()

    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _warn_subclass(cls)
        cls.__match_args__ = cls._fields  # type: ignore[attr-defined, misc]

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._values())


def _frozen(name: str) -> AttributeError:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


class FrozenRecord(Record):
    """Deprecated base of an immutable record (use ``@dataclasses.dataclass(frozen=True)``):
    also hashable; assignment raises ``FrozenInstanceError``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())


class TupleRecord(tuple[Any, ...]):
    """Deprecated base of a named tuple (use ``typing.NamedTuple``): a subclass lists
    ``_fields`` (and ``_field_defaults``), annotates each field for the type checker and writes
    ``__new__``; each field becomes a read-only property over its position."""

    __slots__ = ()

    _fields: ClassVar[tuple[str, ...]] = ()
    _field_defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _warn_subclass(cls)
        cls.__match_args__ = cls._fields  # type: ignore[attr-defined, misc]
        for index, name in enumerate(cls._fields):
            setattr(cls, name, property(itemgetter(index), doc=f"Alias for field number {index}"))

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Self:
        values = tuple(iterable)
        if len(values) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(values)}")
        return cls(*values)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))

    def _replace(self, **changes: Any) -> Self:
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise ValueError(f"Got unexpected field names: {sorted(unknown)!r}")
        return type(self)(**{**self._asdict(), **changes})

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({fields})"
