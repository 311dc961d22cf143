"""The "did you mean" candidate of every message: case and separators first, then typos."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cardcage.hooks.spelling import closest, normalised


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("ACME_NPU", "acme_npu"),  # a case difference: difflib alone scores it below its cutoff
        ("acme-npu", "acme_npu"),
        (" acme_npu ", "acme_npu"),
        ("acme_nup", "acme_npu"),  # a typo
        ("Acme_Nup", "acme_npu"),  # both
    ],
)
def test_the_candidate_meant_is_found(typed: str, meant: str) -> None:
    assert closest(typed, ["demo_cpu", "acme_npu", "other"]) == meant


def test_nothing_close_means_no_suggestion() -> None:
    assert closest("zzz", ["acme_npu", "demo_cpu"]) is None
    assert closest("acme", []) is None


def test_the_name_itself_is_never_suggested() -> None:
    assert closest("acme", ["acme"]) is None


def test_a_spelling_match_wins_over_a_closer_looking_typo() -> None:
    assert closest("DEMO_CPU", ["demo_cpu", "DEMO_CPX"]) == "demo_cpu"


def test_normalised_spelling() -> None:
    assert normalised("  Acme-NPU ") == "acme_npu"


def test_importing_it_does_not_import_difflib() -> None:
    code = "import sys, cardcage.hooks.spelling; print('difflib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
