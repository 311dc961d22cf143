"""Small value classes without ``dataclasses``: slots, equality, a readable repr, immutability.

Public: core-platforms and the diffusion runtime build their selection and probe records on
these bases, and a runtime that embeds cardcage may do the same.

The first ``current_platform`` access defines every class on its path, and a ``@dataclass``
costs far more to define than a plain class (its methods are generated with ``exec``; a frozen
one takes over a millisecond), besides importing ``dataclasses`` (which pulls in ``inspect``).
These bases give the records on that path what they used from dataclasses, for the price of
a plain class.

A subclass lists its fields, in constructor order, as ``_fields`` (and in ``__slots__``, with
any private slots) and writes its own ``__init__``. ``Record`` compares field by field
with an instance of the same class and is unhashable, as a mutable ``@dataclass`` is;
``FrozenRecord`` also hashes and refuses assignment with ``dataclasses.FrozenInstanceError`` (an
``AttributeError``), as ``@dataclass(frozen=True)`` does; its ``__init__`` sets fields through
``object.__setattr__``. Both pickle and copy by calling the class with the field values.

``TupleRecord`` does the same for ``typing.NamedTuple``, whose definition runs ``exec`` too (a
fifth of a millisecond per class in a fresh process): a tuple subclass that lists ``_fields``,
annotates them and writes ``__new__`` gets the field properties, ``_make``, ``_asdict``,
``_replace``, ``__match_args__``, a named tuple's repr, pickling and copying.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

__all__ = ["FrozenRecord", "Record", "TupleRecord"]


class Record:
    """Base of a mutable record: ``__eq__``, ``__repr__``, no hash (like ``@dataclass``)."""

    __slots__ = ()

    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
    """Base of an immutable record: also hashable; assignment raises ``FrozenInstanceError``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())


class TupleRecord(tuple[Any, ...]):
    """Base of a named tuple: a subclass lists ``_fields`` (and ``_field_defaults``), annotates
    each field for the type checker and writes ``__new__``; each field becomes a read-only
    property over its position, as in a ``typing.NamedTuple``."""

    __slots__ = ()

    _fields: ClassVar[tuple[str, ...]] = ()
    _field_defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
