"""``cardcage_demo_cuda.envs``: strict parsing, and a README that lists every variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardcage.hooks.errors import InvalidEnvVarError
from cardcage_demo_cuda.envs import CARDCAGE_DEMO_CUDA_ALLOW_TF32, ENV_VARS

README = Path(__file__).parents[1] / "README.md"


def test_tf32_is_left_to_torch_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not CARDCAGE_DEMO_CUDA_ALLOW_TF32.is_set()
    monkeypatch.setenv("CARDCAGE_DEMO_CUDA_ALLOW_TF32", "true")
    assert CARDCAGE_DEMO_CUDA_ALLOW_TF32.get() is True


@pytest.mark.parametrize("raw", ["yes", "2", "on"])
def test_a_malformed_boolean_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CUDA_ALLOW_TF32", raw)
    with pytest.raises(InvalidEnvVarError, match="CARDCAGE_DEMO_CUDA_ALLOW_TF32"):
        CARDCAGE_DEMO_CUDA_ALLOW_TF32.get()


def test_every_variable_has_the_plugins_prefix() -> None:
    assert all(var.name.startswith("CARDCAGE_DEMO_CUDA") for var in ENV_VARS)


@pytest.mark.skipif(not README.exists(), reason="README.md is not next to the tests")
def test_the_readme_documents_every_variable() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [var.name for var in ENV_VARS if f"`{var.name}`" not in text]
    assert not missing
