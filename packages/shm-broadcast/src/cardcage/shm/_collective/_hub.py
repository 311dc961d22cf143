"""The writer's side of the collective region: gather the local readers' contributions, release
the result to them, and abort a collective for all of them.

The writer is the hub of the star, so this is the one place that waits for many peers at once
(the slowest contribution, the slowest acknowledgement) and judges them: a reader that closed,
died or posted another collective's piece makes it raise ``_AbortError``, which the caller turns
into an abort for everybody.

Must never: store a word a reader owns (its up words, down acknowledgement, parked flag), or
wait on a reader the writer excluded.
"""

from __future__ import annotations

from cardcage.shm import _sys
from cardcage.shm._layout import (
    ATTACHED,
    C_ABORT,
    C_ABORT_CODE,
    C_ABORT_PID,
    C_ABORT_RANK,
    C_ABORT_TAG,
    C_DSEQ,
    C_UACK,
    C_WPARKED,
    C_WTAG,
    CR_DACK,
    CR_PARKED,
    CR_USEQ,
    DETACHED,
    LAST,
    R_PID,
    R_PIDNS,
    R_START,
    R_STATE,
    WEAK,
    W,
    load_acquire,
)
from cardcage.shm._writer import RingWriter

from . import _pieces
from ._pacer import Missing, Pacer, PacerFor
from ._protocol import ABORT_CLOSED, ABORT_DIED, ABORT_MISMATCH, _AbortError
from ._round import Round

__all__ = ["Hub"]


class Hub:
    """The writer's side of the collective region."""

    def __init__(self, w: RingWriter) -> None:
        self.w = w
        lay = w.lay
        self.u = w.u
        self.c = lay.coll
        n_reader = w.ring.n_reader
        self.lines = [lay.coll_readers + r * W for r in range(n_reader)]
        self.parked = [line + CR_PARKED for line in self.lines]
        self.down = _pieces.down_slot(lay)
        self.ups = [_pieces.up_slot(lay, r) for r in range(n_reader)]
        self.uack = [int(self.u[self.c + C_UACK + r]) for r in range(n_reader)]
        self.dseq = int(self.u[self.c + C_DSEQ])

    def participants(self) -> list[int]:
        return [r for r in range(len(self.lines)) if r not in self.w.excluded]

    def rank(self, r: int) -> int:
        """Reader ``r``'s rank in the queue's group (what results and errors name)."""
        return self.w.group_ranks[r]

    def _pid(self, r: int) -> int:
        return int(self.u[self.w.reader_lines[r] + R_PID])

    def _named(self, readers: list[int]) -> str:
        return ", ".join(f"local reader {self.rank(r)} (pid {self._pid(r)})" for r in readers)

    def check(self, readers: list[int]) -> None:
        """Raise ``_AbortError`` for the first of ``readers`` that closed its end or died."""
        u = self.u
        w = self.w
        for r in readers:
            line = w.reader_lines[r]
            state = u[line + R_STATE]
            if state == DETACHED:
                raise _AbortError(ABORT_CLOSED, self.rank(r), self._pid(r))
            if state != ATTACHED or u[line + R_PIDNS] != w.pidns:
                continue  # another pid namespace: rely on timeouts
            if not _sys.pid_alive(int(u[line + R_PID]), int(u[line + R_START])):
                raise _AbortError(ABORT_DIED, self.rank(r), self._pid(r))

    def enter(self, tag: int) -> None:
        """Announce that the writer is in collective ``tag`` (only read for diagnostics)."""
        self.u[self.c + C_WTAG] = tag

    # -- gather ----------------------------------------------------------------------------------

    def _take(self, r: int, rnd: Round) -> bool | None:
        """Consume reader ``r``'s next up fragment: None if it has not posted one, True once
        its contribution is complete."""
        u = self.u
        slot = self.ups[r]
        j = self.uack[r] + 1
        if load_acquire(u, slot.seq) < j:  # the fragment's words and bytes: after it
            return None
        tag, n, flags = _pieces.read_header(u, slot)
        if tag != rnd.tag:
            raise _AbortError(ABORT_MISMATCH, self.rank(r), self._pid(r), tag)
        if n > slot.size:
            raise _pieces.oversized(tag, n, slot.size, f"reader {self.rank(r)} posted")
        piece = self.w.raw[slot.off : slot.off + n]
        whole, held = _pieces.add_piece(rnd.pieces.pop(r, None), piece, flags)
        if held is not None:
            rnd.pieces[r] = held
        elif whole is not None:
            rnd.got[self.rank(r)] = whole
        self.uack[r] = j
        _pieces.acknowledge(self.w, self.c + C_UACK + r, j, (self.parked[r],))
        return bool(flags & LAST)

    def gather(self, rnd: Round, pacer_for: PacerFor) -> None:
        """Collect every local participant's contribution into ``rnd.got``."""
        pending = [r for r in self.participants() if self.rank(r) not in rnd.got]
        self.check([r for r in pending if self.u[self.w.reader_lines[r] + R_STATE] != ATTACHED])
        if not pending:
            return
        u = self.u

        def missing() -> tuple[str, tuple[int, ...]]:
            ranks = tuple(self.rank(r) for r in pending)
            return f"Not arrived yet: {self._named(pending)}.", ranks

        pacer = pacer_for(self.c + C_WPARKED, lambda: self.check(pending), missing)
        while True:
            for r in list(pending):
                while (done := self._take(r, rnd)) is not None:
                    if done:
                        pending.remove(r)
                        break
            if not pending:
                return
            # park on a reader that is half-way through its contribution, if any: it is the
            # one that will post next
            target = next((r for r in pending if r in rnd.pieces), pending[0])
            word = self.lines[target] + CR_USEQ
            need = self.uack[target] + 1
            pacer.pause(word, int(u[word]), lambda w=word, k=need: u[w] >= k)  # type: ignore[misc]

    # -- release ---------------------------------------------------------------------------------

    def release(self, rnd: Round, pacer_for: PacerFor) -> None:
        """Publish ``rnd.result`` to local readers, one down fragment at a time."""
        assert rnd.result is not None
        data = rnd.result
        u = self.u
        readers = self.participants()
        pacer: Pacer | None = None
        while True:
            j = self.dseq + 1
            lagging = [r for r in readers if u[self.lines[r] + CR_DACK] < j - 1]
            if lagging:
                if pacer is None:
                    missing = self._lagging(readers, j)
                    pacer = pacer_for(self.c + C_WPARKED, lambda: self.check(readers), missing)
                word = self.lines[lagging[0]] + CR_DACK
                pacer.pause(word, int(u[word]), lambda w=word, k=j - 1: u[w] >= k)  # type: ignore[misc]
                continue
            rnd.down_pos = _pieces.publish(self.w, self.down, data, rnd.down_pos, rnd.tag, j)
            self.dseq = j
            _pieces.wake(self.w, self.down.seq, self.parked)
            if rnd.down_pos >= len(data):
                return

    def _lagging(self, readers: list[int], j: int) -> Missing:
        """Who has not acknowledged piece ``j - 1`` of the result yet, for the pacer."""
        u = self.u

        def missing() -> tuple[str, tuple[int, ...]]:
            late = [r for r in readers if u[self.lines[r] + CR_DACK] < j - 1]
            return (
                f"Still reading the previous piece of the result: {self._named(late)}.",
                tuple(self.rank(r) for r in late),
            )

        return missing

    # -- abort -----------------------------------------------------------------------------------

    def abort(self, tag: int, fault: _AbortError) -> None:
        """Record why collective ``tag`` is abandoned and wake every local reader."""
        u = self.u
        c = self.c
        u[c + C_ABORT_CODE] = fault.code
        u[c + C_ABORT_RANK] = fault.rank & 0xFFFFFFFFFFFFFFFF
        u[c + C_ABORT_PID] = fault.pid
        u[c + C_ABORT_TAG] = fault.got
        if WEAK:
            _sys.fence()
        u[c + C_ABORT] = tag
        # Move every counter a reader may wait on, so no wake-up can be lost; readers check the
        # abort word before they act on any of them.
        if WEAK:
            _sys.fence()
        u[c + C_DSEQ] = self.dseq = self.dseq + 1
        for r in range(len(self.lines)):
            u[c + C_UACK + r] = self.uack[r] = self.uack[r] + 1
        _sys.fence()
        base = self.w.base
        _sys.futex_wake(base + (c + C_DSEQ) * 8)
        for r in range(len(self.lines)):
            _sys.futex_wake(base + (c + C_UACK + r) * 8)
