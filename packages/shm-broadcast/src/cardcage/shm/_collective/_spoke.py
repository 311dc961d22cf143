"""A local reader's side of the collective region: post this reader's contribution up, receive
the writer's result down.

A spoke waits only for the writer (its acknowledgement of the last piece posted, its next piece
of the result), and learns of every fault from it: the abort words, the closed flag, or the
writer's pid gone. It never judges the other readers; the writer does, and aborts.

Must never: store a word outside its own reader line (up words, down acknowledgement, parked
flag), or act on a counter that moved before checking the abort word.
"""

from __future__ import annotations

from collections.abc import Callable

from cardcage.shm import _sys
from cardcage.shm._layout import (
    ATTACHED,
    C_ABORT,
    C_UACK,
    C_WPARKED,
    C_WTAG,
    CR_DACK,
    CR_USEQ,
    CR_UTAG,
    H_CLOSED,
    LAST,
    R_STATE,
    W,
    load_acquire,
)
from cardcage.shm._reader import RingReader
from cardcage.shm.errors import CollectiveMismatchError, QueueClosedError, WriterDiedError

from . import _pieces
from ._pacer import Pacer
from ._protocol import WRITER_RANK, abort_error, describe, read_abort
from ._round import Round

__all__ = ["Spoke"]


class Spoke:
    """A local reader's side of the collective region."""

    def __init__(self, rd: RingReader, group_ranks: list[int]) -> None:
        self.rd = rd
        lay = rd.lay
        self.u = rd.u
        self.c = lay.coll
        self.r = rd.rank
        self.line = lay.coll_readers + rd.rank * W
        self.up = _pieces.up_slot(lay, rd.rank)
        self.down = _pieces.down_slot(lay)
        self.useq = int(self.u[self.line + CR_USEQ])
        self.dack = int(self.u[self.line + CR_DACK])
        self.group_ranks = group_ranks
        self.n_reader = rd.ring.n_reader

    def _interrupt(self, rnd: Round, word: int, need: int) -> bool:
        """Raise if the writer aborted the collective, or closed the queue before ``u[word]``
        reached ``need``; True if it has reached it."""
        self._check_abort()
        if load_acquire(self.u, H_CLOSED):  # closed is stored after the last publish
            if self.u[word] >= need:  # published, then closed
                return True
            raise QueueClosedError(
                f"the writer closed the queue before completing {describe(rnd.tag)}"
            )
        return False

    def _check_writer(self, rnd: Round, ready: Callable[[], bool]) -> None:
        rd = self.rd
        if rd.check_writer and not _sys.pid_alive(rd.writer_pid, rd.writer_start):
            # reading /proc is a system call: a full barrier, so ready() loads fresh words
            if ready():
                return
            rd.ring.unlink()  # survivor cleanup, as in RingReader.wait
            raise WriterDiedError(rd.writer_pid, rd.delivered, during=describe(rnd.tag))

    def missing(self, rnd: Round) -> tuple[str, tuple[int, ...]]:
        """Who has not arrived at ``rnd`` yet, as far as shared memory shows."""
        u = self.u
        lay = self.rd.lay
        late: list[int] = []
        if u[self.c + C_WTAG] != rnd.tag:
            late.append(WRITER_RANK)
        for q in range(self.n_reader):
            if q == self.r or u[lay.reader(q) + R_STATE] != ATTACHED:
                continue
            if u[lay.coll_readers + q * W + CR_UTAG] != rnd.tag:
                late.append(self.group_ranks[q])
        names = ", ".join("the writer" if q == WRITER_RANK else f"local reader {q}" for q in late)
        if late:
            return f"Not arrived yet: {names} (remote readers are not visible here).", tuple(late)
        return "Every local participant arrived; waiting for the writer's release.", ()

    def _wait(self, rnd: Round, pacer: Pacer, word: int, need: int) -> None:
        """Return once ``u[word] >= need`` (a counter the writer owns) and the collective was
        not aborted; raise if the writer aborted, closed the queue or died first."""
        u = self.u

        def ready() -> bool:
            return bool(u[word] >= need or u[self.c + C_ABORT] or u[H_CLOSED])

        pacer.tick = lambda: self._check_writer(rnd, ready)
        while not u[word] >= need:
            if self._interrupt(rnd, word, need):
                break
            pacer.pause(word, int(u[word]), ready)
        load_acquire(u, word)  # the abort word and the fragment are loaded after the counter
        self._check_abort()

    def _check_abort(self) -> None:
        abort = read_abort(self.u, self.c)
        if abort is not None:
            tag, code, rank, pid, got = abort
            raise abort_error(code, rank, pid, got, tag)

    def post(self, rnd: Round, pacer: Pacer) -> None:
        """Post this reader's contribution, piece by piece, each once the writer took the last."""
        total = len(rnd.payload)
        writer_parked = (self.c + C_WPARKED,)
        while not rnd.posted:
            j = self.useq + 1
            self._wait(rnd, pacer, self.c + C_UACK + self.r, j - 1)
            rnd.up_pos = _pieces.publish(self.rd, self.up, rnd.payload, rnd.up_pos, rnd.tag, j)
            self.useq = j
            rnd.posted = rnd.up_pos >= total
            _pieces.wake(self.rd, self.up.seq, writer_parked)

    def receive(self, rnd: Round, pacer: Pacer) -> bytes:
        """The writer's result for ``rnd``, piece by piece, acknowledging each."""
        u = self.u
        slot = self.down
        while True:
            j = self.dack + 1
            self._wait(rnd, pacer, slot.seq, j)  # ends with load_acquire of down_seq
            tag, n, flags = _pieces.read_header(u, slot)
            if tag != rnd.tag:
                raise CollectiveMismatchError(
                    WRITER_RANK, describe(rnd.tag), describe(tag), "(the writer's call)"
                )
            if n > slot.size:
                raise _pieces.oversized(tag, n, slot.size, "the writer published")
            piece = self.rd.raw[slot.off : slot.off + n]
            whole, rnd.received = _pieces.add_piece(rnd.received, piece, flags)
            self.dack = j
            _pieces.acknowledge(self.rd, self.line + CR_DACK, j, (self.c + C_WPARKED,))
            if flags & LAST:
                assert whole is not None
                return whole
