"""docs/platforms/contract.md's tables, asked of cardcage's base: the page and the code agree.

Each row of the conformance table names one SGLang 0.5.23 name, a question (a Python expression
over ``platform``, an ``SRTPlatform()``, and ``oot``, an out-of-tree subclass's instance) and the
answer the page documents for cardcage's base; this test asks the question and compares. The old
names table must list exactly the names ``cardcage.platforms._contract.DEPRECATED`` deprecates,
with the same successors. The scenario-sglang session asks SGLang's own classes the same
questions (tests_integration/sglang/test_sglang_conformance.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from contract_table import (
    CONTRACT_MD,
    ConformanceRow,
    ask,
    conformance_rows,
    mismatch,
    old_name_rows,
)
from contract_table import namespace as host_namespace

from cardcage.platforms import _contract, device_mixin, interface
from cardcage.platforms.device_mixin import DeviceMixin
from cardcage.platforms.errors import TorchNotInstalledError
from cardcage.platforms.interface import SRTPlatform

pytestmark = pytest.mark.skipif(
    not CONTRACT_MD.exists(), reason="docs/platforms/contract.md is not next to the tests"
)

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None


def namespace() -> dict[str, Any]:
    """What the table's questions may use, from cardcage."""
    return host_namespace(interface, device_mixin)


def _rows() -> list[ConformanceRow]:
    return conformance_rows() if CONTRACT_MD.exists() else []


def _needs_torch(row: ConformanceRow) -> bool:
    return "torch" in row.answer


def _params() -> list[Any]:
    # Rows whose answer needs torch also run in the torch session (``-m torch``).
    return [
        pytest.param(row, id=row.asked_as, marks=[pytest.mark.torch] if _needs_torch(row) else [])
        for row in _rows()
    ]


@pytest.mark.parametrize("row", _params())
def test_cardcage_base_answers_as_the_page_says(row: ConformanceRow) -> None:
    outcome = ask(row, namespace())
    if _needs_torch(row) and not TORCH_INSTALLED:
        # Without the torch extra, the lazy import says what to install (differences 4 and 5).
        assert isinstance(outcome.error, TorchNotInstalledError), outcome
        return

    assert mismatch(row, outcome, namespace()) is None, mismatch(row, outcome, namespace())


def test_the_table_lists_every_public_name_of_cardcages_base_that_sglang_has_too() -> None:
    # Every public member of SRTPlatform and DeviceMixin is either in the conformance table or
    # one of the seed's old names (the second table), or one of cardcage's own: each host's
    # adapter hooks (its base class, the vendor's vLLM section), the declared identity and the
    # declared kernels (each its own section or page; SGLang has no such name).
    listed = {row.name.split(".", 1)[1] for row in _rows() if "." in row.name}
    old = set(_contract.DEPRECATED)
    ours = {
        name
        for klass in (SRTPlatform, DeviceMixin)
        for name in vars(klass)
        if not name.startswith("_")
    }
    assert ours - listed - old == {
        "sglang_base_class",
        "vllm_base_class",
        "vllm_section",
        "behaves_as",
        "kernels",
    }


def test_every_status_has_a_reason_unless_it_is_same() -> None:
    for row in _rows():
        if row.status != "same":
            assert row.why, f"{row.name} is {row.status} but the page gives no reason"


def test_interface_exports_every_module_level_name_the_table_lists() -> None:
    modules = {
        "interface": interface,
        "device_mixin": importlib.import_module(DeviceMixin.__module__),
    }
    for row in _rows():
        module, _, attr = row.name.partition(".")
        if module in modules:
            assert hasattr(modules[module], attr), row.name
            if module == "interface":
                assert attr in interface.__all__, row.name


def test_old_names_table_lists_every_deprecated_name_with_its_successor() -> None:
    rows = old_name_rows()

    assert [r.name for r in rows] == list(_contract.DEPRECATED)
    for row in rows:
        assert row.successor == _contract.DEPRECATED[row.name].successor, row


def test_every_old_name_is_still_a_method_of_the_base() -> None:
    for row in old_name_rows():
        assert callable(getattr(SRTPlatform, row.name)), row.name
