"""``cardcage_demo_cpu.envs``: strict parsing, and a README that lists every variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardcage.hooks.errors import InvalidEnvVarError
from cardcage_demo_cpu.envs import CARDCAGE_DEMO_CPU_THREADS, ENV_VARS, parse_thread_count

README = Path(__file__).parents[1] / "README.md"


@given(st.integers(min_value=0, max_value=10_000))
def test_thread_count_accepts_whole_numbers(count: int) -> None:
    assert parse_thread_count("X", f" {count} ") == count


@pytest.mark.parametrize("raw", ["", "  "])
def test_an_empty_thread_count_means_all_usable_cpus(raw: str) -> None:
    assert parse_thread_count("X", raw) == 0


@pytest.mark.parametrize("raw", ["-1", "two", "1.5", "0x10"])
def test_a_malformed_thread_count_is_an_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(InvalidEnvVarError, match="CARDCAGE_DEMO_CPU_THREADS"):
        parse_thread_count("CARDCAGE_DEMO_CPU_THREADS", raw)


def test_thread_count_defaults_to_automatic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARDCAGE_DEMO_CPU_THREADS", raising=False)
    assert CARDCAGE_DEMO_CPU_THREADS.get() == 0


def test_every_variable_has_the_plugins_prefix() -> None:
    assert all(var.name.startswith("CARDCAGE_DEMO_CPU") for var in ENV_VARS)


@pytest.mark.skipif(not README.exists(), reason="README.md is not next to the tests")
def test_the_readme_documents_every_variable() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [var.name for var in ENV_VARS if f"`{var.name}`" not in text]
    assert not missing
