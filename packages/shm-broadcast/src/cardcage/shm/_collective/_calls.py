"""``Collectives``: the collective state of one MessageQueue object, and the call that takes one
round through its phases on the writer, a local reader or a remote reader.

This is where the sides meet: the writer gathers through its hub (local readers) and the remote
publisher, then releases through both; a reader posts and receives through its spoke, or over
its remote connection. It also keeps what outlives a call: the round a timed-out call left
pending, and the error that broke the queue's collectives for good.

Must never: keep a reference to the queue (its finalizer closes it), or give a new collective a
number before its object is pickled.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cardcage.hooks.log import get_logger
from cardcage.shm._layout import CR_PARKED
from cardcage.shm._segment import Endpoint
from cardcage.shm.errors import (
    CancelledError,
    CollectiveMismatchError,
    QueueTimeoutError,
    ShmBroadcastError,
)

from ._hub import Hub
from ._pacer import Missing, Pacer, PacerFor
from ._protocol import (
    ABORT_INFO,
    OP_BARRIER,
    OP_GATHER,
    OP_NAMES,
    WRITER_RANK,
    _AbortError,
    abort_error,
    describe,
    pack_result,
    tag_of,
    unpack_result,
)
from ._round import Round
from ._spoke import Spoke

if TYPE_CHECKING:
    from cardcage.shm._remote import RemotePublisher, RemoteSubscriber
    from cardcage.shm.queue import MessageQueue

__all__ = ["Collectives"]

logger = get_logger(__name__)


class Collectives:
    """The collective state of one MessageQueue object (writer or reader)."""

    def __init__(self, queue: MessageQueue) -> None:
        # No reference to the queue itself: it must stay collectable (its finalizer closes it).
        self.is_writer = queue._is_writer
        self.rank = queue._rank
        self.gen = 0  # collectives started on this object
        self.pending: Round | None = None
        self.broken: ShmBroadcastError | None = None
        self.hub = None if queue._writer is None else Hub(queue._writer)
        reader = queue._reader
        self.spoke = None if reader is None else Spoke(reader, list(queue.local_reader_ranks))
        self.pub: RemotePublisher | None = queue._remote_pub
        self.sub: RemoteSubscriber | None = queue._remote_sub

    def run(self, op: int, obj: Any, timeout: float | None) -> list[Any] | None:
        """One ``barrier`` / ``all_gather_object`` call (see MessageQueue for the contract)."""
        if self.broken is not None:
            raise self.broken
        rnd = self._round(op, obj)
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        try:
            if self.is_writer:
                self._run_writer(rnd, deadline, timeout)
            else:
                data = self._run_reader(rnd, deadline, timeout)
        except ShmBroadcastError as exc:
            if not isinstance(exc, QueueTimeoutError | CancelledError):
                self.broken = exc
                self.pending = None
            raise
        # Anything else (a KeyboardInterrupt in a wait) also leaves the collective pending:
        # the protocol is half-way and only carrying on can finish it.
        self.pending = None  # complete on every side: decoding errors below change nothing
        if op == OP_BARRIER:
            return None
        # rnd.obj: after a timeout, the object the others received is the first call's
        if self.is_writer:
            return [rnd.obj] + [pickle.loads(rnd.got[r]) for r in sorted(rnd.got)]
        return unpack_result(data, self.rank, rnd.obj)

    def _round(self, op: int, obj: Any) -> Round:
        """The pending round if it is this operation's, else a new one (numbered)."""
        rnd = self.pending
        if rnd is None:
            # pickled first: an unpicklable object must not use up a collective number
            payload = b"" if op == OP_BARRIER else pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
            self.gen += 1
            rnd = self.pending = Round(tag_of(self.gen, op), payload, obj)
        elif rnd.tag & 0xFF != op:
            raise CollectiveMismatchError(
                WRITER_RANK if self.is_writer else self.rank,
                describe(rnd.tag),
                OP_NAMES[op],
                "This process left the former pending after a timeout: call it again to finish "
                "it first.",
            )
        return rnd

    def _pacer(
        self,
        ep: Endpoint,
        rnd: Round,
        deadline: float | None,
        timeout: float | None,
        side: str,
    ) -> PacerFor:
        def make(parked: int, tick: Callable[[], None], missing: Missing) -> Pacer:
            return Pacer(
                ep, parked, deadline, timeout, f"{describe(rnd.tag)} ({side})", tick, missing
            )

        return make

    # -- writer ----------------------------------------------------------------------------------

    def _run_writer(self, rnd: Round, deadline: float | None, timeout: float | None) -> None:
        hub, pub = self.hub, self.pub
        try:
            if rnd.result is None:
                if hub is not None:
                    hub.enter(rnd.tag)
                    hub.gather(rnd, self._pacer(hub.w, rnd, deadline, timeout, "writer"))
                if pub is not None:
                    pub.gather(rnd.tag, rnd.got, self._local_ranks(), deadline, timeout)
                rnd.result = _result(rnd)
            if pub is not None and not rnd.remote_sent:
                pub.send_result(rnd.tag, 0, rnd.result, deadline, timeout)
                rnd.remote_sent = True
            if hub is not None:
                hub.release(rnd, self._pacer(hub.w, rnd, deadline, timeout, "writer"))
        except _AbortError as fault:
            raise self._abort(rnd, fault) from None

    def _local_ranks(self) -> set[int]:
        hub = self.hub
        return set() if hub is None else {hub.rank(r) for r in hub.participants()}

    def _abort(self, rnd: Round, fault: _AbortError) -> ShmBroadcastError:
        exc = abort_error(fault.code, fault.rank, fault.pid, fault.got, rnd.tag)
        logger.error("abandoning %s on every participant: %s", describe(rnd.tag), exc)
        if self.hub is not None:
            self.hub.abort(rnd.tag, fault)
        if self.pub is not None:
            info = ABORT_INFO.pack(fault.code, fault.rank, fault.pid, fault.got)
            try:
                self.pub.send_result(rnd.tag, 1, info, time.monotonic() + 1.0, 1.0)
            except (QueueTimeoutError, CancelledError):
                logger.warning("could not tell remote readers that %s was abandoned", rnd.tag)
        return exc

    # -- readers ---------------------------------------------------------------------------------

    def _run_reader(
        self, rnd: Round, deadline: float | None, timeout: float | None
    ) -> bytes | memoryview:
        """Post this reader's contribution and return the writer's (packed) result."""
        spoke = self.spoke
        if spoke is None:
            return self._run_remote_reader(rnd, deadline, timeout)
        make = self._pacer(spoke.rd, rnd, deadline, timeout, "reader")
        pacer = make(spoke.line + CR_PARKED, lambda: None, lambda: spoke.missing(rnd))
        spoke.post(rnd, pacer)
        return spoke.receive(rnd, pacer)

    def _run_remote_reader(
        self, rnd: Round, deadline: float | None, timeout: float | None
    ) -> bytes | memoryview:
        """The same over this reader's ZeroMQ connection: one message up, one back."""
        sub = self.sub
        assert sub is not None
        if not rnd.posted:
            sub.send_up(self.rank, rnd.tag, rnd.payload)
            rnd.posted = True
        tag, flags, data = sub.recv_result(
            deadline, timeout, f"{describe(rnd.tag)} (remote reader)"
        )
        if flags & 1:
            code, rank, pid, got = ABORT_INFO.unpack_from(data)
            raise abort_error(code, rank, pid, got, tag)
        if tag != rnd.tag:
            raise CollectiveMismatchError(
                WRITER_RANK, describe(rnd.tag), describe(tag), "(the writer's call)"
            )
        return data


def _result(rnd: Round) -> bytes:
    """What the writer releases once it holds every contribution: nothing for a barrier; for an
    all-gather the writer's pickle, then the readers' in ascending rank order."""
    if rnd.tag & 0xFF == OP_GATHER:
        ranks = sorted(rnd.got)
        return pack_result([(WRITER_RANK, rnd.payload)] + [(r, rnd.got[r]) for r in ranks])
    return b""
