"""The evidence log of the diffusion half: cardcage's ``Evidence`` under demo_cuda's name and
variable; no torch needed."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from cardcage_demo_cuda.diffusion.evidence import EVIDENCE, read_evidence

if TYPE_CHECKING:
    from pathlib import Path


def test_the_first_occurrence_in_a_process_is_written_under_demo_cudas_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv("CARDCAGE_DEMO_CUDA_EVIDENCE", str(path))
    for _ in range(3):
        EVIDENCE.record("forward", "Op")
    assert read_evidence(path) == [
        {"pid": os.getpid(), "event": "forward", "key": "Op", "platform": "demo_cuda"}
    ]
    assert EVIDENCE.count("forward", "Op") == 3


def test_demo_cpus_variable_does_not_steer_demo_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU_EVIDENCE", str(tmp_path / "cpu.jsonl"))
    EVIDENCE.record("forward", "Op")
    assert list(tmp_path.iterdir()) == []
