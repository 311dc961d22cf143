"""The once-per-process phase: NOT_STARTED -> RUNNING -> COMPLETE | FAILED."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardcage.hooks.errors import PhaseFailedError
from cardcage.hooks.once import COMPLETE, FAILED, NOT_STARTED, RUNNING, Once

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

JOIN_TIMEOUT = 10.0


class _OopsError(Exception):
    pass


def _fail() -> None:
    raise _OopsError("it broke")


def _wait_or_fail(event: threading.Event, what: str) -> None:
    assert event.wait(JOIN_TIMEOUT), f"timed out waiting for {what}"


class _Runner(threading.Thread):
    """Calls ``gate.run(work)`` in a thread; keeps the result or the exception."""

    def __init__(self, gate: Once, work: Callable[[], object], *, on_wait: threading.Event) -> None:
        super().__init__(daemon=True)
        self.gate = gate
        self.work = work
        self.on_wait = on_wait
        self.result: bool | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        # Signal when this thread blocks on the gate's condition: a deterministic handshake,
        # no sleeping. Condition.wait is entered with the lock held, so a notify cannot be missed.
        def tracer(frame: FrameType, event: str, arg: object) -> None:
            if (
                event == "call"
                and frame.f_code.co_name == "wait"
                and frame.f_locals.get("self") is self.gate._cond
            ):
                self.on_wait.set()

        previous = sys.gettrace()  # a coverage tracer, say: put it back afterwards
        sys.settrace(tracer)
        try:
            self.result = self.gate.run(self.work)
        except BaseException as exc:
            self.error = exc
        finally:
            sys.settrace(previous)


def _held_phase(gate: Once, *, fail: bool = False) -> tuple[threading.Thread, threading.Event]:
    """Start ``gate``'s work in a thread and hold it RUNNING until the returned event is set."""
    started, release = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        _wait_or_fail(release, "release")
        if fail:
            _fail()

    def target() -> None:
        with contextlib.suppress(_OopsError):
            gate.run(work)

    owner = threading.Thread(target=target, daemon=True)
    owner.start()
    _wait_or_fail(started, "the phase to start")
    return owner, release


# -- single thread ------------------------------------------------------------------------------


def test_a_new_phase_has_not_started() -> None:
    assert Once("phase").state == NOT_STARTED


def test_the_first_run_runs_the_work_and_completes() -> None:
    gate = Once("phase")
    ran: list[int] = []

    assert gate.run(lambda: ran.append(1)) is True
    assert (gate.state, ran) == (COMPLETE, [1])


def test_the_phase_is_running_while_its_work_runs() -> None:
    gate = Once("phase")
    seen: list[str] = []

    gate.run(lambda: seen.append(gate.state))

    assert seen == [RUNNING]


def test_a_completed_phase_does_not_run_again() -> None:
    gate = Once("phase")
    gate.run(lambda: None)
    ran: list[int] = []

    assert gate.run(lambda: ran.append(1)) is False
    assert ran == []


def test_a_reentrant_run_from_the_same_thread_returns_false_without_running() -> None:
    gate = Once("phase")
    inner: list[object] = []

    def outer() -> None:
        inner.append(gate.run(lambda: inner.append("inner work ran")))

    assert gate.run(outer) is True
    assert inner == [False]


def test_a_failing_work_raises_its_own_exception_and_fails_the_phase() -> None:
    gate = Once("phase")

    with pytest.raises(_OopsError):
        gate.run(_fail)

    assert gate.state == FAILED
    assert isinstance(gate.error, _OopsError)


def test_a_failure_is_sticky_and_names_the_phase() -> None:
    gate = Once("SRT plugin registration")
    with pytest.raises(_OopsError):
        gate.run(_fail)
    ran: list[int] = []

    with pytest.raises(PhaseFailedError, match=r"^SRT plugin registration previously failed:"):
        gate.run(lambda: ran.append(1))
    assert ran == []


def test_a_sticky_failure_is_chained_from_the_original_exception() -> None:
    gate = Once("phase")
    with pytest.raises(_OopsError) as original:
        gate.run(_fail)

    with pytest.raises(PhaseFailedError) as info:
        gate.run(lambda: None)

    assert info.value.__cause__ is original.value
    assert (info.value.phase, info.value.cause) == ("phase", original.value)


def test_base_exceptions_fail_the_phase_too() -> None:
    gate = Once("phase")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gate.run(interrupted)

    assert gate.state == FAILED


def test_reset_forgets_a_failure() -> None:
    gate = Once("phase")
    with pytest.raises(_OopsError):
        gate.run(_fail)

    gate.reset()

    assert (gate.state, gate.error) == (NOT_STARTED, None)
    assert gate.run(lambda: None) is True


def test_reset_leaves_a_running_phase_alone() -> None:
    gate = Once("phase")
    seen: list[str] = []

    def work() -> None:
        gate.reset()
        seen.append(gate.state)

    gate.run(work)

    assert seen == [RUNNING]


# -- threads ----------------------------------------------------------------------------------


def test_another_thread_waits_for_the_running_phase_and_sees_it_complete() -> None:
    gate = Once("phase")
    owner, release = _held_phase(gate)
    waiting = threading.Event()
    ran: list[int] = []
    other = _Runner(gate, lambda: ran.append(1), on_wait=waiting)
    other.start()
    _wait_or_fail(waiting, "the second thread to block")
    assert other.is_alive()  # blocked, not returned

    release.set()
    other.join(JOIN_TIMEOUT)
    owner.join(JOIN_TIMEOUT)

    assert (other.result, other.error, ran, gate.state) == (False, None, [], COMPLETE)


def test_another_thread_waiting_on_a_phase_that_fails_gets_phase_failed_error() -> None:
    gate = Once("phase")
    owner, release = _held_phase(gate, fail=True)
    waiting = threading.Event()
    other = _Runner(gate, lambda: None, on_wait=waiting)
    other.start()
    _wait_or_fail(waiting, "the second thread to block")

    release.set()
    other.join(JOIN_TIMEOUT)
    owner.join(JOIN_TIMEOUT)

    assert isinstance(other.error, PhaseFailedError)
    assert isinstance(other.error.__cause__, _OopsError)


# -- fork -------------------------------------------------------------------------------------


def _in_child(action: Callable[[], str]) -> str:
    """Fork; run ``action`` in the child and return what it reported through a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report and leave without running any cleanup of the parent's
        try:
            signal.alarm(int(JOIN_TIMEOUT))  # a child stuck on the gate dies; the pipe closes
            os.close(read_end)
            try:
                message = action()
            except BaseException as exc:
                message = f"error: {type(exc).__name__}: {exc}"
            os.write(write_end, message.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    os.waitpid(pid, 0)
    return report


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads (3.12+)
def test_a_forked_child_can_run_a_phase_another_parent_thread_was_running() -> None:
    gate = Once("phase")
    owner, release = _held_phase(gate)
    try:

        def child() -> str:
            before = gate.state
            ran = gate.run(lambda: None)
            return f"{before} {ran} {gate.state}"

        report = _in_child(child)
    finally:
        release.set()
        owner.join(JOIN_TIMEOUT)

    assert report == f"{NOT_STARTED} True {COMPLETE}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_by_the_running_thread_keeps_the_phase_running() -> None:
    gate = Once("phase")
    reports: list[str] = []

    def work() -> None:
        reports.append(_in_child(lambda: f"{gate.state} {gate.run(lambda: None)}"))

    gate.run(work)

    assert reports == [f"{RUNNING} False"]


# -- property: any sequence of calls ----------------------------------------------------------


@given(st.lists(st.sampled_from(["succeed", "fail", "reenter"]), min_size=1, max_size=8))
def test_only_the_first_call_runs_and_its_outcome_is_final(calls: list[str]) -> None:
    gate = Once("phase")
    ran: list[int] = []

    def reenter() -> None:
        assert gate.run(lambda: ran.append(99)) is False
        ran.append(1)

    def fail() -> None:
        ran.append(1)
        _fail()

    works: dict[str, Callable[[], object]] = {
        "succeed": lambda: ran.append(1),
        "fail": fail,
        "reenter": reenter,
    }
    first_failed = calls[0] == "fail"
    for index, call in enumerate(calls):
        if index == 0 and first_failed:
            with pytest.raises(_OopsError):
                gate.run(works[call])
        elif first_failed:
            with pytest.raises(PhaseFailedError):
                gate.run(works[call])
        else:
            assert gate.run(works[call]) is (index == 0)

    assert ran == [1]
    assert gate.state == (FAILED if first_failed else COMPLETE)
