"""The named tuples on the start-up path, and the deprecated ``cardcage.hooks.records`` bases.

Users unpack, compare, pickle and ``_replace`` the hook sources, registrations, loaded plugins and
device capabilities they get from cardcage; each test holds one of those uses against the
standard library's own named tuple with the same fields (they were ``TupleRecord``s in 0.1 and
are ``typing.NamedTuple``s now, so these tests are what says nothing changed for their users).

``Record``, ``FrozenRecord`` and ``TupleRecord`` are deprecated in 0.2.0 and removed in 0.3.0: a
class of a 0.1.x package built on them keeps working and is warned about where it is defined.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from typing import NamedTuple

import pytest

from cardcage.hooks.loader import LoadedPlugin
from cardcage.hooks.records import FrozenRecord, Record, TupleRecord
from cardcage.hooks.registry import HookRecord, HookSource, HookType


class _StdSource(NamedTuple):
    plugin_name: str
    dist_name: str | None = None


def test_fields_defaults_and_positions_match_a_standard_named_tuple() -> None:
    ours = HookSource("alpha")
    theirs = _StdSource("alpha")

    assert ours == theirs == ("alpha", None)
    assert hash(ours) == hash(theirs)
    assert ours._fields == theirs._fields
    assert ours._field_defaults == theirs._field_defaults
    assert (ours.plugin_name, ours.dist_name) == (theirs.plugin_name, theirs.dist_name)
    assert ours._asdict() == theirs._asdict()
    assert HookSource.__match_args__ == _StdSource.__match_args__


def test_repr_names_the_class_and_every_field() -> None:
    assert (
        repr(HookSource("alpha", "dist-a")) == "HookSource(plugin_name='alpha', dist_name='dist-a')"
    )


def test_fields_are_read_only() -> None:
    source = HookSource("alpha", "dist-a")

    with pytest.raises(AttributeError):
        source.plugin_name = "beta"  # type: ignore[misc]


def test_replace_and_make_build_new_records_of_the_same_class() -> None:
    source = HookSource("alpha", "dist-a")

    replaced = source._replace(dist_name="dist-b")
    made = HookSource._make(["beta", None])

    assert type(replaced) is HookSource
    assert replaced == ("alpha", "dist-b")
    assert type(made) is HookSource
    assert made == ("beta", None)


def test_replace_with_an_unknown_field_and_make_with_a_wrong_length_raise() -> None:
    with pytest.raises(ValueError, match="unexpected field names: \\['plugin'\\]"):
        HookSource("alpha")._replace(plugin="beta")
    with pytest.raises(TypeError, match="Expected 2 arguments, got 3"):
        HookSource._make(["a", "b", "c"])


def test_records_pickle_and_copy_as_their_own_class() -> None:
    record = HookRecord(HookType.BEFORE, len, HookSource("alpha", "dist-a"))
    loaded = LoadedPlugin(len, "dist-a")

    for value in (record, loaded):
        for clone in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(clone) is type(value)
            assert clone == value


def test_a_record_unpacks_and_matches_by_position_and_by_name() -> None:
    hook_type, hook, source = HookRecord(HookType.AROUND, len, None)
    assert (hook_type, hook, source) == (HookType.AROUND, len, None)

    match HookSource("alpha", "dist-a"):
        case HookSource(name, dist_name="dist-a"):
            matched = name
        case _:
            matched = None
    assert matched == "alpha"


def test_a_subclass_of_a_user_gets_its_own_field_properties() -> None:
    with pytest.warns(DeprecationWarning, match="TupleRecord"):

        class Point(TupleRecord):
            __slots__ = ()
            _fields = ("x", "y")

            x: int
            y: int

            def __new__(cls, x: int, y: int) -> Point:
                return tuple.__new__(cls, (x, y))

    point = Point(1, 2)

    assert (point.x, point.y) == (1, 2)
    assert point._asdict() == {"x": 1, "y": 2}
    assert repr(point) == "Point(x=1, y=2)"


# -- the deprecation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "instead"),
    [
        (Record, "@dataclasses.dataclass"),
        (FrozenRecord, "@dataclasses.dataclass(frozen=True)"),
        (TupleRecord, "typing.NamedTuple"),
    ],
)
def test_subclassing_a_deprecated_base_names_its_replacement_and_the_release_that_removes_it(
    base: type, instead: str
) -> None:
    with pytest.warns(DeprecationWarning, match=base.__name__) as warned:
        type("Legacy", (base,), {"__slots__": (), "_fields": ()})

    [warning] = warned
    message = str(warning.message)
    assert f"subclasses cardcage.hooks.records.{base.__name__}" in message
    assert "deprecated since cardcage-core-hooks 0.2.0" in message
    assert "removed in 0.3.0" in message
    assert instead in message


def test_the_warning_points_at_the_class_statement_of_the_subclass() -> None:
    with pytest.warns(DeprecationWarning, match="Record") as warned:

        class Legacy(Record):
            __slots__ = ()

    assert warned[0].filename == __file__


def test_a_frozen_record_of_a_0_1_package_keeps_its_behaviour() -> None:
    with pytest.warns(DeprecationWarning, match="FrozenRecord"):

        class Pair(FrozenRecord):
            _fields = ("left", "right")
            __slots__ = _fields

            left: int
            right: int

            def __init__(self, left: int, right: int) -> None:
                object.__setattr__(self, "left", left)
                object.__setattr__(self, "right", right)

    pair = Pair(1, 2)

    assert pair == Pair(1, 2)
    assert hash(pair) == hash(Pair(1, 2))
    assert repr(pair).endswith(".<locals>.Pair(left=1, right=2)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.left = 3  # type: ignore[misc]
    assert copy.copy(pair) == pair


def test_importing_the_records_module_warns_nothing() -> None:
    # 0.1.x code that only imports the bases (an isinstance check) runs quietly until 0.3.0.
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import cardcage.hooks.records"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
