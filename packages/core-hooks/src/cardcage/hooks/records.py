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
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["FrozenRecord", "Record"]


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
