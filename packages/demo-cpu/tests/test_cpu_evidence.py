"""The evidence record of the SRT half: opt-in lines with a value, from the code SGLang calls.

The launcher of SGLang's ``Engine`` cannot see its scheduler's counters, so the scenario
``scenario-sglang-engine`` reads these lines; these tests pin what each line says.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from cardcage_demo_cpu import evidence
from cardcage_demo_cpu.diffusion import evidence as diffusion_evidence
from cardcage_demo_cpu.evidence import EVIDENCE, read_evidence
from cardcage_demo_cpu.hooks import SGLANG_DEVICE_MEMORY, time_device_memory_query
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

if TYPE_CHECKING:
    from pathlib import Path

VARIABLE = "CARDCAGE_DEMO_CPU_EVIDENCE"
TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
MIB = 1 << 20


@pytest.fixture
def evidence_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    return path


def test_both_halves_share_one_record() -> None:
    assert diffusion_evidence.EVIDENCE is evidence.EVIDENCE
    assert diffusion_evidence.read_evidence is evidence.read_evidence


def test_the_device_memory_answer_is_recorded_with_its_bytes(evidence_file: Path) -> None:
    total = DemoCpuSRTPlatform().get_device_total_memory()
    (line,) = read_evidence(evidence_file)
    assert (line["event"], line["key"], line["value"]) == ("device_total_memory", "0", total)
    assert EVIDENCE.count("device_total_memory") == 1


@pytest.mark.skipif(TORCH_INSTALLED, reason="checks the record when torch is absent")
def test_init_backend_without_torch_is_recorded_without_a_value(evidence_file: Path) -> None:
    DemoCpuSRTPlatform().init_backend()
    (line,) = read_evidence(evidence_file)
    assert (line["event"], line["key"]) == ("init_backend", "srt")
    assert "value" not in line  # nothing was set up


@pytest.mark.torch
@pytest.mark.skipif(not TORCH_INSTALLED, reason="needs PyTorch (the torch extra)")
def test_init_backend_is_recorded_with_the_threads_it_set(
    evidence_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv("CARDCAGE_DEMO_CPU_THREADS", "1")
    before = torch.get_num_threads()
    try:
        DemoCpuSRTPlatform().init_backend()
    finally:
        torch.set_num_threads(before)
    (line,) = read_evidence(evidence_file)
    assert (line["event"], line["key"], line["value"]) == ("init_backend", "srt", 1)


def test_the_sglang_memory_hook_records_what_sglang_was_told(evidence_file: Path) -> None:
    answer = 24151.5

    def get_device_memory_capacity(device: str | None = None) -> float:
        return answer

    assert time_device_memory_query(get_device_memory_capacity, "cpu") == answer
    (line,) = read_evidence(evidence_file)
    assert (line["event"], line["key"], line["value"]) == ("hook", SGLANG_DEVICE_MEMORY, answer)


def test_without_the_variable_the_srt_half_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    platform = DemoCpuSRTPlatform()
    platform.get_device_total_memory()
    time_device_memory_query(lambda: 1.0)
    assert EVIDENCE.count("device_total_memory") == EVIDENCE.count("hook") == 1
    assert list(tmp_path.iterdir()) == []


def test_each_process_writes_its_own_line(evidence_file: Path) -> None:
    code = (
        "import os; from cardcage_demo_cpu.platform import DemoCpuSRTPlatform; "
        "DemoCpuSRTPlatform().get_device_total_memory(); print(os.getpid())"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    pids = {int(done.stdout) for done in runs}
    assert len(pids) == 2
    assert {line["pid"] for line in read_evidence(evidence_file)} == pids


def test_the_record_is_import_cheap() -> None:
    code = (
        "import json, sys; import cardcage_demo_cpu.evidence, cardcage_demo_cpu.platform, "
        "cardcage_demo_cpu.hooks; heavy = ('torch', 'numpy', 'zmq', 'sglang'); "
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
