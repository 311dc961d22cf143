"""docs/diffusion/contract.md's 0.5.23 table, asked of cardcage's diffusion ``Platform``.

The table after ``<!-- conformance-0523 -->`` is the one list of SGLang 0.5.23's diffusion
interface names: each row gives a question (a Python expression), the answer cardcage's base gives
(a value as code, or ``raises `Name` ``) and a status (same / mapped / different, with a reason
for every "different"). This test reads the page, asks each question and compares; nothing here
needs SGLang.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest

from cardcage.diffusion.runtime.platforms import interface
from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum
from cardcage.platforms.errors import TorchNotInstalledError
from cardcage.platforms.torch_import import require_torch

CONTRACT_MD = Path(__file__).resolve().parents[3] / "docs" / "diffusion" / "contract.md"
MARKER = "<!-- conformance-0523 -->"
STATUSES = ("same", "mapped", "different")
TORCH_INSTALLED = importlib.util.find_spec("torch") is not None

pytestmark = pytest.mark.skipif(
    not CONTRACT_MD.exists(), reason="docs/diffusion/contract.md is not next to the tests"
)

_CODE = re.compile(r"^`([^`]+)`$")
_RAISES = re.compile(r"^raises `([A-Za-z_][A-Za-z0-9_]*)`$")


class Row(NamedTuple):
    name: str  # "Platform.get_attn_backend", "AttentionBackendEnum", ...
    asked_as: str
    answer: str
    status: str
    why: str


def _code(cell: str) -> str:
    match = _CODE.match(cell)
    if match is None:
        raise ValueError(f"expected one code span, got {cell!r}")
    return match.group(1)


def read_rows(text: str | None = None) -> list[Row]:
    """The body rows of the table right after the marker."""
    lines = (text if text is not None else CONTRACT_MD.read_text(encoding="utf-8")).splitlines()
    start = lines.index(MARKER) + 1
    rows: list[Row] = []
    for line in lines[start + 2 :]:  # the header and its separator
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            raise ValueError(f"a row of the 0.5.23 table needs 5 cells: {line!r}")
        name, asked_as, answer, status, why = cells
        rows.append(Row(_code(name), _code(asked_as), answer, status, why))
    return rows


class _Oot(Platform):
    """An out-of-tree platform that overrides nothing."""

    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"


class _LazyTorch:
    """``torch`` for the questions that name it, imported when a question reads it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(require_torch("a question of the 0.5.23 table"), name)


def namespace() -> dict[str, Any]:
    return {
        "Platform": Platform,
        "platform": Platform(),
        "oot": _Oot(),
        "vendor_tensor": SimpleNamespace(device=SimpleNamespace(type="vendor"), is_cuda=False),
        "torch": _LazyTorch(),
        "AttentionBackendEnum": interface.AttentionBackendEnum,
        "PlatformEnum": interface.PlatformEnum,
        "CpuArchEnum": interface.CpuArchEnum,
        "DeviceCapability": interface.DeviceCapability,
        "DeviceMixin": interface.DeviceMixin,
        "BASE_DEVICE_COMMUNICATOR": interface.BASE_DEVICE_COMMUNICATOR,
    }


ROWS = read_rows() if CONTRACT_MD.exists() else []


def test_the_table_is_well_formed() -> None:
    assert len(ROWS) >= 70, "the 0.5.23 table lost rows"
    for row in ROWS:
        assert row.status in STATUSES, row
        if row.status == "different":
            assert row.why, f"{row.name}: a 'different' row must say why"
        ast.parse(row.asked_as, mode="eval")
        if not _RAISES.match(row.answer):
            ast.parse(_code(row.answer), mode="eval")


def test_every_row_names_what_cardcage_defines() -> None:
    """Every row names something cardcage has, and the areas of the comparison are there."""
    names = {row.name for row in ROWS}
    for name in names:
        owner, _, attribute = name.partition(".")
        target = getattr(interface, owner)
        if attribute:
            assert hasattr(target, attribute), f"{name}: cardcage's {owner} has no {attribute}"
    # The areas the 0.5.23 comparison is about are all there.
    for required in (
        "Platform.get_attn_backend_cls_str",
        "Platform.get_attn_backend",
        "Platform.get_available_gpu_memory",
        "Platform.get_device_total_memory",
        "Platform.get_current_memory_usage",
        "Platform.get_modelopt_fp4_quantize_op",
        "Platform.get_modelopt_fp4_gemm_op",
        "Platform.get_modelopt_flashinfer_fp4_backend",
        "Platform.has_device_capability",
        "Platform.is_amp_supported",
        "Platform.is_float64_supported",
        "Platform.is_device_type",
        "Platform.supports_distributed_device_id",
        "Platform.get_compile_options",
        "AttentionBackendEnum",
    ):
        assert required in names, f"the 0.5.23 table has no row for {required}"


def _ask(question: str) -> Any:
    try:
        return eval(question, namespace())  # the documented question
    except TorchNotInstalledError:
        if TORCH_INSTALLED:
            raise
        pytest.skip("the question needs torch, which is not installed")


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.asked_as)
def test_cardcage_base_answers_as_the_page_says(row: Row) -> None:
    raises = _RAISES.match(row.answer)
    if raises:
        expected = getattr(builtins, raises.group(1))
        with pytest.raises(expected):
            _ask(row.asked_as)
        return
    assert _ask(row.asked_as) == eval(_code(row.answer), namespace())


def test_the_parser_reads_what_it_is_given() -> None:
    text = "\n".join(
        [
            MARKER,
            "| 0.5.23 name | asked as | cardcage answers | status | why |",
            "|---|---|---|---|---|",
            "| `Platform.device` | `Platform.device` | `None` | same | |",
            "| `Platform.get_device` | `oot.get_device(0)` | raises `NotImplementedError` | same |"
            " |",
            "",
            "| not | part | of | it | |",
        ]
    )
    rows = read_rows(text)
    assert [row.name for row in rows] == ["Platform.device", "Platform.get_device"]
    assert rows[1].answer == "raises `NotImplementedError`"
