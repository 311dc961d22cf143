"""A once-per-process phase: NOT_STARTED -> RUNNING -> COMPLETE | FAILED.

Plugin registration and hook application must each happen exactly once per process, whichever
thread or entry point gets there first, and a plugin callback may call back into the phase that
is running it. The rules:

* the first caller runs the work; a re-entrant call from the same thread returns False at once
  (the outer call finishes the work);
* another thread blocks until the work ends and then sees its outcome;
* a failure is sticky: every later call raises ``PhaseFailedError`` ("<phase> previously failed:
  <error>"), chained from the original exception, instead of half-running the work again;
* after ``fork`` the child gets fresh locks; a phase that another thread of the parent was still
  running goes back to NOT_STARTED in the child, since that thread does not exist there.
"""

from __future__ import annotations

import os
import threading
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["COMPLETE", "FAILED", "NOT_STARTED", "RUNNING", "Once"]

NOT_STARTED = "not_started"
RUNNING = "running"
COMPLETE = "complete"
FAILED = "failed"

_all_gates: weakref.WeakSet[Once] = weakref.WeakSet()


class Once:
    """Run a piece of work once per process; see the module docstring for the rules."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self._cond = threading.Condition(threading.Lock())
        self._state = NOT_STARTED
        self._owner: int | None = None
        self._error: BaseException | None = None
        _all_gates.add(self)

    @property
    def state(self) -> str:
        return self._state

    @property
    def error(self) -> BaseException | None:
        return self._error

    def run(self, work: Callable[[], object]) -> bool:
        """Run ``work`` if no call has; True when this call ran it and it completed."""
        me = threading.get_ident()
        with self._cond:
            while True:
                if self._state == COMPLETE:
                    return False
                if self._state == FAILED:
                    assert self._error is not None
                    from .errors import PhaseFailedError  # a failed phase only

                    raise PhaseFailedError(self.phase, self._error) from self._error
                if self._state == NOT_STARTED:
                    self._state = RUNNING
                    self._owner = me
                    break
                if self._owner == me:  # re-entered from inside the work
                    return False
                self._cond.wait()
        try:
            work()
        except BaseException as exc:
            with self._cond:
                self._state = FAILED
                self._error = exc
                self._owner = None
                self._cond.notify_all()
            raise
        with self._cond:
            self._state = COMPLETE
            self._owner = None
            self._cond.notify_all()
        return True

    def reset(self) -> None:
        """Forget the outcome (tests only; a running phase is left alone)."""
        with self._cond:
            if self._state != RUNNING:
                self._state = NOT_STARTED
                self._error = None

    def _after_fork_in_child(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        # Only the thread that called fork() survives in the child. If it was running the
        # work, it still is; if another thread was, nobody will finish it here.
        if self._state == RUNNING and self._owner != threading.get_ident():
            self._state = NOT_STARTED
            self._owner = None

    def __repr__(self) -> str:
        return f"Once({self.phase!r}, state={self._state})"


def _reinit_after_fork() -> None:
    for gate in list(_all_gates):
        gate._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
