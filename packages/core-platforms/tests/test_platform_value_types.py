"""core-platforms' records keep the behaviour they had as ``cardcage.hooks.records`` subclasses.

The records of the selection engine (``BuiltinPlatform``, ``SelectionPolicy``, ``Candidate``,
``SelectionRecord``, ``SelectionOutcome``, ``HardwareProbes``, ``Activation``) are plain classes
with ``__slots__``; ``Finding``, ``DistRef`` and vLLM's prediction records are dataclasses;
``DeviceCapability`` and ``TargetStats`` are ``typing.NamedTuple``s. What a user can observe
stays: immutable ones compare and hash by value and refuse assignment with
``dataclasses.FrozenInstanceError``, mutable ones compare by value and are unhashable, every one
pickles and copies as its own class. And no module of cardcage warns that it builds on the
deprecated bases.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.platforms.callstats import TargetStats
from cardcage.platforms.device_mixin import DeviceCapability
from cardcage.platforms.findings import DistRef, Finding
from cardcage.platforms.hosts.vllm.current import PredictedPlatform
from cardcage.platforms.hosts.vllm.rules import VllmActivation, VllmPrediction
from cardcage.platforms.probes import HardwareProbes
from cardcage.platforms.selection import (
    BuiltinPlatform,
    Candidate,
    SelectionOutcome,
    SelectionRecord,
)
from cardcage.platforms.selection_checks import Activation
from cardcage.platforms.srt import srt_policy

if TYPE_CHECKING:
    from collections.abc import Callable

# A stand-in entry point: PluginEntryPoint compares by identity, so a pickled copy of a record
# holding one would never equal the original; a string compares by value.
_EP: Any = "demo = demo_pkg:activate"


def _finding() -> Finding:
    return Finding(
        "CC-TEST",
        "warning",
        "something is off",
        "fix it",
        group="sglang.srt.platforms",
        plugin="demo",
        distributions=(DistRef("demo-dist", "1.0"),),
    )


def _record() -> SelectionRecord:
    return SelectionRecord(
        "srt",
        "automatic",
        "SGLANG_PLATFORM",
        "",
        candidates=[Candidate("cpu", "built-in", "selected")],
    )


FROZEN: list[Callable[[], Any]] = [
    lambda: BuiltinPlatform("cpu", "cardcage.platforms.cpu:CpuSRTPlatform", lambda: True),
    srt_policy,
    HardwareProbes,
    lambda: Activation(_EP, True, "demo_pkg.platform.Demo"),
    _finding,
    lambda: DistRef("demo-dist", "1.0"),
    lambda: VllmActivation(_EP, True, returned="demo_pkg.Demo"),
    lambda: VllmPrediction("cuda", None, (), "builtins", None, None),
    lambda: PredictedPlatform("demo_pkg.Demo", "demo", "cpu", "OOT"),
]

MUTABLE: list[Callable[[], Any]] = [
    lambda: Candidate("demo", "entry-point", "declined", "demo-dist", "1.0", "demo_pkg:activate"),
    _record,
    lambda: SelectionOutcome(srt_policy(), "", _record()),
]

# BuiltinPlatform's probe above is a lambda: equal only to itself, and not picklable.
PICKLED = [make for make in FROZEN + MUTABLE if make is not FROZEN[0]]


def _ids(makers: list[Callable[[], Any]]) -> list[str]:
    return [type(make()).__name__ for make in makers]


def _values(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in type(record).__match_args__)


@pytest.mark.parametrize("make", FROZEN, ids=_ids(FROZEN))
def test_an_immutable_record_compares_and_hashes_by_value(make: Callable[[], Any]) -> None:
    record = make()
    same = type(record).__new__(type(record))
    for name in type(record).__match_args__:
        object.__setattr__(same, name, getattr(record, name))

    assert record == same
    assert hash(record) == hash(same)
    assert record != _values(record)
    assert record != object()


@pytest.mark.parametrize("make", FROZEN, ids=_ids(FROZEN))
def test_an_immutable_record_refuses_assignment(make: Callable[[], Any]) -> None:
    record = make()
    field = type(record).__match_args__[0]

    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, "other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(record, field)


@pytest.mark.parametrize("make", PICKLED, ids=_ids(PICKLED))
def test_a_record_pickles_and_copies_as_its_own_class(make: Callable[[], Any]) -> None:
    record = make()

    for clone in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert type(clone) is type(record)
        assert clone == record


@pytest.mark.parametrize("make", MUTABLE, ids=_ids(MUTABLE))
def test_a_mutable_record_compares_by_value_and_is_unhashable(make: Callable[[], Any]) -> None:
    record, same = make(), make()

    assert record == same
    assert record != _values(record)
    with pytest.raises(TypeError, match="unhashable"):
        hash(record)
    with pytest.raises(AttributeError):
        record.not_a_field = 1  # __slots__: no instance dictionary


def test_a_finding_keeps_its_error_out_of_equality_repr_and_fields() -> None:
    error = ValueError("bad")
    finding = Finding("CC-TEST", "error", "bad", "fix", error=error)

    assert finding.error is error
    assert finding == Finding("CC-TEST", "error", "bad", "fix")
    assert hash(finding) == hash(Finding("CC-TEST", "error", "bad", "fix"))
    assert "bad'" in repr(finding)
    assert "ValueError" not in repr(finding)
    assert [f.name for f in dataclasses.fields(finding)] == [
        "code",
        "severity",
        "message",
        "fix",
        "group",
        "plugin",
        "distributions",
        "traceback",
    ]


def test_a_selection_record_lists_its_candidates_by_field_name() -> None:
    assert _record().as_dict()["candidates"] == [
        {
            "name": "cpu",
            "kind": "built-in",
            "outcome": "selected",
            "dist_name": None,
            "dist_version": None,
            "value": None,
            "detail": "",
        }
    ]


def test_the_named_tuples_stay_tuples() -> None:
    capability = DeviceCapability(9, 0)

    assert capability == (9, 0)
    assert capability >= (8, 9)
    assert isinstance(capability, tuple)
    assert capability._replace(minor=1) == DeviceCapability(9, 1)
    assert TargetStats() == (0, 0, 0.0, 0.0)
    assert TargetStats(calls=2)._asdict()["calls"] == 2


def test_no_module_of_cardcage_builds_on_the_deprecated_records() -> None:
    # Select a platform, load the plugins, then import every module of core-hooks and
    # core-platforms, with cardcage's own deprecation warnings as errors; a module that needs
    # what this venv lacks (torch, a host) is skipped.
    script = """
import importlib, json, pkgutil, sys, warnings
warnings.filterwarnings("error", category=DeprecationWarning, module=r"cardcage\\.")
import cardcage.hooks, cardcage.platforms
str(cardcage.platforms.current_platform)
cardcage.hooks.load_plugins()
imported, skipped = [], []
for package in (cardcage.hooks, cardcage.platforms):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            skipped.append(f"{info.name}: {exc}")
        else:
            imported.append(info.name)
print(json.dumps([imported, skipped]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
    imported, _skipped = json.loads(done.stdout)
    assert "cardcage.platforms.selection" in imported
    assert "cardcage.hooks.loader" in imported
