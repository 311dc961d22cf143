"""The one object that holds what early patches did in this process, and its lock.

Every sibling module reads and writes this state, never module globals of its own, so that
``reset()`` forgets all of it at once and ``report()`` reads one consistent picture. The lock is
re-entrant (arming a value may apply it at once, which records a failure under the same lock)
and replaced in a forked child, where a thread of the parent may have held it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._records import EarlyFailure, EarlyPlugin
    from ._stand_ins import StandIn, StandInFinder
    from ._values import ValuePatch

__all__ = ["EarlyState", "state"]


class EarlyState:
    """What ran, what is armed, what failed, and what the selected platform makes fatal."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.booted = False
        self.requested: tuple[str, ...] = ()
        self.config_error: Exception | None = None
        self.plugins: dict[str, EarlyPlugin] = {}
        self.values: list[ValuePatch] = []
        self.stand_ins: dict[str, StandIn] = {}
        self.hook_failures: dict[str, str] = {}
        self.failures: list[EarlyFailure] = []
        self.fatal_dists: set[str] | None = None  # known once a selection is checked
        self.fatal_reason = ""
        self.finder: StandInFinder | None = None
        #: While an entry point's callback runs: the patches it armed, to discard on failure.
        self.running: list[ValuePatch | StandIn | str] | None = None
        self.warned_not_booted = False

    def forget(self) -> None:
        """Everything but the lock as in a process where no early patch ran (``reset()``)."""
        fresh = EarlyState()
        for name, value in fresh.__dict__.items():
            if name != "lock":
                setattr(self, name, value)


state = EarlyState()


def _reinit_lock_after_fork() -> None:
    state.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_after_fork)
