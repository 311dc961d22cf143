"""A vendor's evidence record: exact counters, one line per first occurrence and process, a value
in the first line only, never fatal. demo-cpu and demo-cuda each keep one under their own name."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks.envs import EnvVar, parse_str
from cardcage.platforms.evidence import Evidence, read_evidence

if TYPE_CHECKING:
    from pathlib import Path

VARIABLE = "CCTEST_VENDOR_EVIDENCE"
PATH_VAR = EnvVar(VARIABLE, "", parse_str, "file path", "where the test vendor's evidence goes")


@pytest.fixture(autouse=True)
def no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)


def _evidence() -> Evidence:
    return Evidence("vendor", PATH_VAR)


def test_counters_are_exact_under_concurrent_recording() -> None:
    evidence = _evidence()

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
    evidence = _evidence()
    evidence.record("dispatch", "A -> f")
    evidence.record("dispatch", "B -> g")
    evidence.record("forward", "A")
    assert evidence.count("dispatch") == 2
    assert evidence.keys("dispatch") == ["A -> f", "B -> g"]


def test_without_the_variable_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _evidence().record("forward", "Op")
    assert list(tmp_path.iterdir()) == []


def test_only_the_first_occurrence_in_a_process_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    evidence = _evidence()
    for _ in range(5):
        evidence.record("forward", "Op")
    evidence.record("dispatch", "Op -> f")
    assert read_evidence(path) == [
        {"pid": os.getpid(), "event": "forward", "key": "Op", "platform": "vendor"},
        {"pid": os.getpid(), "event": "dispatch", "key": "Op -> f", "platform": "vendor"},
    ]
    assert evidence.count("forward", "Op") == 5


def test_an_unwritable_file_warns_once_and_keeps_counting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VARIABLE, str(tmp_path / "missing-dir" / "evidence.jsonl"))
    evidence = _evidence()
    with caplog.at_level(logging.WARNING, logger="cardcage.platforms.evidence"):
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
    evidence = _evidence()
    evidence.record("init_backend", "vendor")  # the parent's line
    pid = os.fork()
    if pid == 0:  # the child: record the same event, then leave without pytest's teardown
        evidence.record("init_backend", "vendor")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [(r["pid"], r["event"]) for r in read_evidence(path)] == [
        (os.getpid(), "init_backend"),
        (pid, "init_backend"),
    ]


def test_a_value_goes_into_the_first_line_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    evidence = _evidence()
    evidence.record("hook", "target", 1.5)
    evidence.record("hook", "target", 2.5)  # counted, not written
    evidence.record("register", "target")  # no value: no "value" field
    assert read_evidence(path) == [
        {"pid": os.getpid(), "event": "hook", "key": "target", "platform": "vendor", "value": 1.5},
        {"pid": os.getpid(), "event": "register", "key": "target", "platform": "vendor"},
    ]
    assert evidence.count("hook", "target") == 2


def test_reset_forgets_counters_and_writes_first_occurrences_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "evidence.jsonl"
    monkeypatch.setenv(VARIABLE, str(path))
    evidence = _evidence()
    evidence.record("forward", "Op")
    evidence.reset()
    assert evidence.as_dict() == {}
    evidence.record("forward", "Op")
    assert [r["key"] for r in read_evidence(path)] == ["Op", "Op"]
