"""The evidence log of the diffusion half: exact counters, one line per first occurrence and
process, never fatal. Needs neither torch nor the runtime."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

import pytest

from cardcage_demo_cpu.diffusion.evidence import EVIDENCE, Evidence, read_evidence

if TYPE_CHECKING:
    from pathlib import Path

VARIABLE = "CARDCAGE_DEMO_CPU_EVIDENCE"


def test_counters_are_exact_under_concurrent_recording() -> None:
    evidence = Evidence()

    def work() -> None:
        for _ in range(1000):
            evidence.record("forward", "Op")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert evidence.count("forward", "Op") == 8000
    assert evidence.as_dict() == {"forward": {"Op": 8000}}


def test_count_without_a_key_sums_over_keys() -> None:
    evidence = Evidence()
    evidence.record("dispatch", "A -> f")
    evidence.record("dispatch", "B -> g")
    evidence.record("forward", "A")
    assert evidence.count("dispatch") == 2
    assert evidence.keys("dispatch") == ["A -> f", "B -> g"]


def test_without_the_variable_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Evidence().record("forward", "Op")
    assert list(tmp_path.iterdir()) == []


def test_only_the_first_occurrence_in_a_process_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    evidence = Evidence()
    for _ in range(5):
        evidence.record("forward", "Op")
    evidence.record("dispatch", "Op -> f")
    assert read_evidence(path) == [
        {"pid": os.getpid(), "event": "forward", "key": "Op", "platform": "demo_cpu"},
        {"pid": os.getpid(), "event": "dispatch", "key": "Op -> f", "platform": "demo_cpu"},
    ]
    assert evidence.count("forward", "Op") == 5


def test_an_unwritable_file_warns_once_and_keeps_counting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VARIABLE, str(tmp_path / "missing-dir" / "evidence.jsonl"))
    evidence = Evidence()
    with caplog.at_level(logging.WARNING, logger="cardcage_demo_cpu"):
        evidence.record("forward", "A")
        evidence.record("forward", "B")
    assert evidence.count("forward") == 2
    warnings = [r for r in caplog.records if VARIABLE in r.getMessage()]
    assert len(warnings) == 1


def test_a_missing_file_reads_as_no_evidence(tmp_path: Path) -> None:
    assert read_evidence(tmp_path / "none.jsonl") == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_writes_its_own_first_occurrences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    EVIDENCE.record("init_backend", "demo_cpu")  # the parent's line
    pid = os.fork()
    if pid == 0:  # the child: record the same event, then leave without pytest's teardown
        EVIDENCE.record("init_backend", "demo_cpu")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [(r["pid"], r["event"]) for r in read_evidence(path)] == [
        (os.getpid(), "init_backend"),
        (pid, "init_backend"),
    ]
