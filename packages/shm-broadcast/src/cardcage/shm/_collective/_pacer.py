"""How a collective waits: the package's spin, then ``sched_yield``, then futex park, with the
timeout, cancellation, liveness checks and the slow-wait warning of one call.

A module of its own because both sides wait the same way (the writer for contributions and
acknowledgements, a local reader for acknowledgements and the result); only the words they park
on and the peers they check differ, and those come in as arguments.

Must never: park without first raising the parked flag and re-checking (the fence between them
is what makes a lost wake-up impossible), or sleep longer than ``PARK_S`` at a time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from cardcage.hooks.log import get_logger
from cardcage.shm import _sys
from cardcage.shm._layout import LIVENESS_S, PARK_S
from cardcage.shm._segment import Endpoint
from cardcage.shm.errors import CancelledError, QueueTimeoutError

__all__ = ["Missing", "Pacer", "PacerFor"]

logger = get_logger(__name__)

#: Who a waiter still waits for: a sentence for messages, and the ranks for ``missing``.
Missing = Callable[[], tuple[str, tuple[int, ...]]]


class Pacer:
    """The package's wait for one collective call: poll for ``spin_s``, ``sched_yield`` until
    ``busy_s``, then park on a futex (bounded by ``PARK_S``); liveness checks every
    ``LIVENESS_S`` and a warning every ``warn_s``."""

    def __init__(
        self,
        ep: Endpoint,
        parked: int,
        deadline: float | None,
        timeout: float | None,
        what: str,
        tick: Callable[[], None],
        missing: Missing,
    ) -> None:
        self.ep = ep
        self.parked = parked
        self.deadline = deadline
        self.timeout = timeout
        self.what = what
        self.tick = tick
        self.missing = missing
        self.start = start = time.monotonic()
        self.spin_end = start + ep.spin_s
        if deadline is not None and deadline < self.spin_end:
            self.spin_end = deadline  # timeout=0 stays a poll
        self.busy_end = start + ep.busy_s
        self.next_check = start + LIVENESS_S
        self.next_warn = start + ep.warn_s if ep.warn_s > 0 else float("inf")

    def pause(self, word: int, observed: int, done: Callable[[], bool]) -> None:
        """Wait a little for ``u[word]`` to move from ``observed`` (``done()`` re-checks every
        condition the caller waits for, after the parked flag is up)."""
        ep = self.ep
        if ep.cancelled:
            raise CancelledError
        now = time.monotonic()
        if now < self.spin_end:
            return
        deadline = self.deadline
        if deadline is not None and now >= deadline:
            detail, missing = self.missing()
            raise QueueTimeoutError(self.what, self.timeout or 0.0, detail, missing)
        if now < self.busy_end:
            os.sched_yield()
            return
        if now >= self.next_check:
            self.tick()
            self.next_check = now + LIVENESS_S
        if now >= self.next_warn:
            logger.warning(
                "%s (pid %d) has waited %.0f s. %s",
                self.what,
                os.getpid(),
                now - self.start,
                self.missing()[0],
            )
            self.next_warn = now + ep.warn_s
        u = ep.u
        u[self.parked] = 1
        _sys.fence()  # the parked store must not pass the loads below (see _layout: parking)
        if u[word] == observed and not done() and not ep.cancelled:
            addr = ep.base + word * 8
            ep.park_addr = addr
            wait = PARK_S if deadline is None else min(PARK_S, deadline - now)
            _sys.futex_wait(addr, observed, wait)
            ep.park_addr = 0
        u[self.parked] = 0


#: Makes the pacer of one wait of a call: ``(parked flag word, liveness tick, missing)``.
PacerFor = Callable[[int, Callable[[], None], Missing], Pacer]
