"""core-hooks' records keep the behaviour they had as ``cardcage.hooks.records`` subclasses.

They are plain classes with ``__slots__`` (the ones defined on the path of the first
``current_platform`` access and ``load_plugins()``), dataclasses or named tuples now; what a
user can observe stays: immutable ones compare and hash by value and refuse assignment with
``dataclasses.FrozenInstanceError``, mutable ones compare by value and are unhashable, every one
pickles and copies as its own class, and none compares equal to a tuple of its values or to
an instance of another class.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.early import EarlyFailure, EarlyPatch, EarlyPatchReport, EarlyPlugin
from cardcage.hooks.envs import EnvVar, parse_bool
from cardcage.hooks.host import Host, Rehearsal
from cardcage.hooks.loader import PlatformChoice, PluginLoadReport, PluginStatus
from cardcage.hooks.profile import SRT_PROFILE, RuntimeProfile
from cardcage.hooks.runtimes import Runtime

if TYPE_CHECKING:
    from collections.abc import Callable


def _profile() -> RuntimeProfile:
    return RuntimeProfile("toy", "toy.platforms", "toy.plugins", "TOY_PLATFORM", "TOY_PLUGINS")


FROZEN: list[Callable[[], Any]] = [
    lambda: PlatformChoice("demo", "demo-dist", "SGLANG_PLATFORM=demo"),
    lambda: EnvVar("CC_FLAG", False, parse_bool, "boolean", "A flag."),
    _profile,
    lambda: Runtime(_profile(), "Toy", "toy-dist", "toy.policy:make", "toy.current"),
]

MUTABLE: list[Callable[[], Any]] = [
    lambda: PluginStatus("p", "sglang.srt.plugins", "p:register", "p-dist", "executed"),
    lambda: PluginLoadReport(SRT_PROFILE, PlatformChoice(None, None)),
    lambda: EarlyFailure("p", "p-dist", "import", None, ("a.b",)),  # type: ignore[arg-type]
    lambda: EarlyPlugin("p", "p:register", "p-dist", "executed"),
    lambda: EarlyPatch("hook", "a.b", "AROUND", "p", "p-dist", "applied"),
    lambda: EarlyPatchReport("CARDCAGE_EARLY_PATCHES", ("p",), True, None, [], []),
]


def _ids(makers: list[Callable[[], Any]]) -> list[str]:
    return [type(make()).__name__ for make in makers]


def _values(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in type(record).__match_args__)


def _assert_pickles_and_copies_as_itself(record: object) -> None:
    for clone in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert type(clone) is type(record)
        assert clone == record


@pytest.mark.parametrize("make", FROZEN, ids=_ids(FROZEN))
def test_an_immutable_record_compares_and_hashes_by_value(make: Callable[[], Any]) -> None:
    record, same = make(), make()

    assert record == same
    assert record is not same
    assert hash(record) == hash(same)
    assert record != _values(record)
    assert record != object()


@pytest.mark.parametrize("make", FROZEN, ids=_ids(FROZEN))
def test_an_immutable_record_refuses_assignment_and_deletion(make: Callable[[], Any]) -> None:
    record = make()
    field = type(record).__match_args__[0]

    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, "other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(record, field)
    with pytest.raises(AttributeError):
        record.not_a_field = 1


@pytest.mark.parametrize("make", FROZEN + MUTABLE, ids=_ids(FROZEN + MUTABLE))
def test_a_record_pickles_and_copies_as_its_own_class(make: Callable[[], Any]) -> None:
    _assert_pickles_and_copies_as_itself(make())


@pytest.mark.parametrize("make", FROZEN + MUTABLE, ids=_ids(FROZEN + MUTABLE))
def test_a_record_repr_names_its_class_and_every_field(make: Callable[[], Any]) -> None:
    record = make()
    names = type(record).__match_args__

    assert repr(record).startswith(f"{type(record).__qualname__}({names[0]}=")
    assert all(f"{name}=" in repr(record) for name in names)


@pytest.mark.parametrize("make", MUTABLE, ids=_ids(MUTABLE))
def test_a_mutable_record_compares_by_value_and_is_unhashable(make: Callable[[], Any]) -> None:
    record, same = make(), make()

    assert record == same
    assert record != _values(record)
    with pytest.raises(TypeError, match="unhashable"):
        hash(record)
    setattr(record, type(record).__match_args__[-1], "changed")
    assert record != same
    with pytest.raises(AttributeError):
        record.not_a_field = 1  # __slots__: no instance dictionary


def test_the_profile_keys_a_dict_and_matches_by_name() -> None:
    # The loader keys its per-profile state on the profile.
    state = {SRT_PROFILE: "srt"}

    assert state[RuntimeProfile(*_values(SRT_PROFILE))] == "srt"
    match PlatformChoice("demo", "demo-dist"):
        case PlatformChoice(name, dist_name="demo-dist"):
            matched = name
        case _:
            matched = None
    assert matched == "demo"


def test_a_rehearsal_is_a_named_tuple() -> None:
    rehearsal = Rehearsal(Host.VLLM)

    assert rehearsal == (Host.VLLM, None)
    assert isinstance(rehearsal, tuple)
    assert rehearsal._replace(selected="a.B").selected == "a.B"
    _assert_pickles_and_copies_as_itself(rehearsal)
