"""The tables of docs/platforms/contract.md that tests hold the code to, read from the page.

The page is the one place the data lives: ``<!-- conformance-table -->`` lists every name of
SGLang 0.5.23's SRT contract with the question that checks it ("asked as", a Python expression),
cardcage's base answer and its status (same / mapped / different); ``<!-- old-names-table -->``
lists the seed's old names with their successors. ``test_conformance_table.py`` asks cardcage's
base each question; ``tests_integration/sglang/test_sglang_conformance.py`` loads this module by
path and asks SGLang 0.5.23's own classes the same questions, in a process where SGLang is
installed. So this module imports neither cardcage nor SGLang: the caller gives the namespace.

Answer cells take four forms: ``` `EXPR` ``` (equal to the expression's value), ``raises `Name` ``
(an exception that is an instance of the builtin ``Name``), ``yields `EXPR` `` (a context manager
that enters as the value) and ``an instance of `EXPR` ``.
"""

from __future__ import annotations

import builtins
import enum
import importlib.util
import re
import typing
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, NamedTuple

CONTRACT_MD = Path(__file__).resolve().parents[3] / "docs" / "platforms" / "contract.md"
CONFORMANCE_MARKER = "<!-- conformance-table -->"
OLD_NAMES_MARKER = "<!-- old-names-table -->"
STATUSES = ("same", "mapped", "different")

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_CODE = re.compile(r"^`([^`]+)`$")
_FORMS = (
    ("raises", re.compile(r"^raises `([A-Za-z_][A-Za-z0-9_]*)`$")),
    ("yields", re.compile(r"^yields `([^`]+)`$")),
    ("instance", re.compile(r"^an instance of `([^`]+)`$")),
)


class ConformanceRow(NamedTuple):
    name: str  # "SRTPlatform.get_kv_pool_cls", "interface.KVPoolKind", ...
    asked_as: str  # a Python expression
    answer: str  # the answer cell, one of the four forms
    status: str
    why: str


class OldNameRow(NamedTuple):
    name: str  # "support_cuda_graph", without the parentheses
    successor: str | None  # the successor as code, or None for "none"
    cells: tuple[str, ...]


def _table(marker: str, text: str | None = None) -> list[list[str]]:
    """The body rows of the Markdown table right after ``marker``, as stripped cells."""
    lines = (text if text is not None else CONTRACT_MD.read_text(encoding="utf-8")).splitlines()
    start = lines.index(marker) + 1
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:  # skip the header and its separator
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(line.strip())[1:-1]]
        rows.append(cells)
    return rows


def _code(cell: str) -> str:
    match = _CODE.match(cell)
    if match is None:
        raise ValueError(f"expected one code span, got {cell!r}")
    return match.group(1)


def conformance_rows(text: str | None = None) -> list[ConformanceRow]:
    rows = []
    for cells in _table(CONFORMANCE_MARKER, text):
        name, asked_as, answer, status, why = cells
        if status not in STATUSES:
            raise ValueError(f"{name}: status {status!r} is none of {STATUSES}")
        rows.append(ConformanceRow(_code(name), _code(asked_as), answer, status, why))
    return rows


def old_name_rows(text: str | None = None) -> list[OldNameRow]:
    rows = []
    for cells in _table(OLD_NAMES_MARKER, text):
        name = _code(cells[0]).removesuffix("()")
        successor = None if cells[1] == "none" else _code(cells[1])
        rows.append(OldNameRow(name, successor, tuple(cells)))
    return rows


def namespace(interface: ModuleType, device_mixin: ModuleType) -> dict[str, Any]:
    """What the questions may use, from a host's ``interface`` and ``device_mixin`` modules
    (cardcage's or SGLang's: they define the same names).

    ``platform`` is the base ``SRTPlatform()``, ``oot`` an instance of an out-of-tree subclass,
    ``args`` an empty namespace; ``torch`` is there when it is installed.
    """
    base = interface.SRTPlatform
    oot_class = type(
        "Oot",
        (base,),
        {"_enum": device_mixin.PlatformEnum.OOT, "device_name": "oot", "device_type": "oot"},
    )
    found: dict[str, Any] = {
        "platform": base(),
        "oot": oot_class(),
        "args": SimpleNamespace(),
        "typing": typing,
    }
    for name in ("PlatformCapabilities", "KVPoolKind", "require_out_of_tree_impl"):
        found[name] = getattr(interface, name)
    found["reject_out_of_tree_path"] = interface.reject_out_of_tree_path
    for name in ("PlatformEnum", "CpuArchEnum", "DeviceCapability"):
        found[name] = getattr(device_mixin, name)
    if importlib.util.find_spec("torch") is not None:
        import torch

        found["torch"] = torch
    return found


class Outcome(NamedTuple):
    """What asking a question gave: a value, or the exception it raised."""

    value: Any = None
    error: BaseException | None = None


def ask(row: ConformanceRow, namespace: dict[str, Any]) -> Outcome:
    """Evaluate ``row.asked_as``; a ``yields`` row enters the context manager it returns."""
    try:
        value = eval(row.asked_as, dict(namespace))  # the docs page is part of this repository
        if row.answer.startswith("yields "):
            with value as entered:
                value = entered
    except Exception as exc:
        return Outcome(error=exc)
    return Outcome(value=value)


def mismatch(row: ConformanceRow, outcome: Outcome, namespace: dict[str, Any]) -> str | None:
    """Why ``outcome`` is not the answer the row documents, or None when it is."""
    for form, pattern in _FORMS:
        match = pattern.match(row.answer)
        if match is None:
            continue
        if form == "raises":
            wanted = getattr(builtins, match.group(1))
            if isinstance(outcome.error, wanted):
                return None
            return f"expected {wanted.__name__}, got {_show(outcome)}"
        if outcome.error is not None:
            return f"expected a value, got {_show(outcome)}"
        expected = eval(match.group(1), dict(namespace))
        if form == "instance":
            ok = isinstance(outcome.value, expected)
            return None if ok else f"expected an instance of {expected!r}, got {_show(outcome)}"
        return None if outcome.value == expected else f"expected {expected!r}, got {_show(outcome)}"
    if outcome.error is not None:
        return f"expected a value, got {_show(outcome)}"
    expected = eval(_code(row.answer), dict(namespace))
    return None if outcome.value == expected else f"expected {expected!r}, got {_show(outcome)}"


def _show(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"{type(outcome.error).__name__}: {outcome.error}"
    return repr(outcome.value)


def _builtin_base(exc_type: type) -> str:
    for klass in exc_type.__mro__:
        if klass.__module__ == "builtins":
            return klass.__name__
    return exc_type.__name__


def normalise(outcome: Outcome) -> Any:
    """A host-neutral, JSON-able form of an outcome, for comparing cardcage with SGLang.

    Enum members become (enum name, member name); a tuple stays apart from a list; a
    capabilities object (cardcage's class or
    SGLang's msgspec struct) its fields; an exception the builtin it derives from; a class its
    name; anything with no meaningful equality (a context manager such as
    ``torch.inference_mode``) its type's qualified name.
    """
    if outcome.error is not None:
        return ["raises", _builtin_base(type(outcome.error))]
    value = outcome.value
    if isinstance(value, enum.Enum):
        return ["enum", type(value).__name__, value.name]
    if type(value).__name__ == "PlatformCapabilities":
        fields = getattr(type(value), "__struct_fields__", None) or type(value).FIELDS
        return ["capabilities", {f: getattr(value, f) for f in fields}]
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, list):
        return [normalise(Outcome(value=v)) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [normalise(Outcome(value=v)) for v in value]}
    if isinstance(value, type):
        return ["class", value.__name__]
    if type(value).__module__ == "torch" and type(value).__name__ == "device":
        return ["torch.device", str(value)]
    return ["object", f"{type(value).__module__}.{type(value).__qualname__}"]
