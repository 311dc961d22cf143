"""Collectives over a MessageQueue: ``barrier()`` and ``all_gather_object()`` across the writer
and every reader, local and remote.

The queue itself only carries messages from the writer to its readers, so a collective needs a
way back. It is a star with the writer at the centre, in two phases:

1. *Gather*: every reader posts its contribution (an empty one for a barrier, the pickle of its
   object for an all-gather) to the writer. A local reader posts into its own up slot in the
   segment's collective region (see ``_layout``), in pieces of at most ``coll_bytes`` that
   the writer acknowledges one by one; a remote reader sends one upstream message on its
   existing CURVE-authenticated ZeroMQ connection (its socket is an XSUB, which may send to the
   writer's XPUB).
2. *Release*: the writer, once it holds every contribution, publishes the result (nothing for a
   barrier; for an all-gather, a table of ranks and lengths followed by every participant's
   pickle, the writer's first, then the readers' in ascending rank order): local readers read it
   from the down slot, in pieces they acknowledge; remote readers get it as one message in the
   writer's sequenced stream, after the messages enqueued before it.

Every word of the collective region has one writing process, as in the ring: the writer owns
the down words, the up acknowledgements and the abort words; reader ``r`` owns its up words, its
down acknowledgement and its parked flag. Counters (up fragments posted / acknowledged, down
fragments published / acknowledged) only grow, so a waiter compares a counter with the number it
needs and parks on that very word, and the kernel's futex compare makes a lost wake-up
impossible there. Each collective is numbered (1, 2, ...) and tagged with its operation; a
fragment carries the tag, which is how a mismatch (a barrier meeting an all-gather, or counts
that drifted apart) is detected. A dead, closed or mismatched participant makes the writer
*abort* the collective: it records who and why in the abort words (and sends it to remote
readers), so every participant raises the same typed error promptly instead of timing out; the
queue's collectives stay broken afterwards (the participants no longer agree on where they are),
while ``enqueue``/``dequeue`` keep working.

A call that times out (``QueueTimeoutError``) or is cancelled leaves its collective pending on
this queue object: calling the same collective again carries on where it stopped (an
all-gather's new ``obj`` is ignored; the first call's object was already sent).

Must never: touch the ring's hot words (``enqueue``/``dequeue`` do not know this module), import
zmq unless the queue has remote readers, or wait without ``timeout=``, ``shutdown()``,
liveness checks and the package's spin-then-yield-then-park.
"""

from __future__ import annotations

import os
import pickle
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from cardcage.hooks.log import get_logger

from . import _sys
from ._layout import (
    ATTACHED,
    C_ABORT,
    C_ABORT_CODE,
    C_ABORT_PID,
    C_ABORT_RANK,
    C_ABORT_TAG,
    C_DINFO,
    C_DSEQ,
    C_DTAG,
    C_DTOTAL,
    C_UACK,
    C_WPARKED,
    C_WTAG,
    CR_DACK,
    CR_PARKED,
    CR_UINFO,
    CR_USEQ,
    CR_UTAG,
    CR_UTOTAL,
    DETACHED,
    FLAG_SHIFT,
    H_CLOSED,
    LIVENESS_S,
    NBYTES_MASK,
    PARK_S,
    R_PID,
    R_PIDNS,
    R_START,
    R_STATE,
    WEAK,
    W,
    load_acquire,
)
from ._reader import RingReader
from ._segment import Endpoint
from ._writer import RingWriter
from .errors import (
    CancelledError,
    CollectiveMismatchError,
    QueueClosedError,
    QueueTimeoutError,
    ReaderDiedError,
    ShmBroadcastError,
    WriterDiedError,
)

if TYPE_CHECKING:
    from ._remote import RemotePublisher, RemoteSubscriber
    from .queue import MessageQueue

__all__ = ["OP_BARRIER", "OP_GATHER", "Collectives"]

logger = get_logger(__name__)

OP_BARRIER: Final = 1
OP_GATHER: Final = 2
_OP_NAMES: Final = {OP_BARRIER: "barrier", OP_GATHER: "all_gather_object"}

# fragment flags (bits of an info word above FLAG_SHIFT, as in the ring)
_FIRST: Final = 1
_LAST: Final = 2

# why a collective was aborted; _REMOTE marks a remote reader
ABORT_DIED: Final = 1
ABORT_CLOSED: Final = 2
ABORT_MISMATCH: Final = 3
ABORT_DUPLICATE: Final = 4
_REMOTE: Final = 0x100

WRITER_RANK: Final = -1  # how results, errors and ``missing`` name the writer

_COUNT = struct.Struct("<I")
_ENTRY = struct.Struct("<qQ")  # rank, pickle length
ABORT_INFO = struct.Struct("<qqqQ")  # code, rank, pid, tag the culprit posted


def tag_of(gen: int, op: int) -> int:
    """The word that names collective number ``gen`` and its operation."""
    return gen << 8 | op


def describe(tag: int) -> str:
    """``"barrier #3"``: a collective's operation and number, for messages."""
    return f"{_OP_NAMES.get(tag & 0xFF, f'operation {tag & 0xFF}')} #{tag >> 8}"


def abort_error(code: int, rank: int, pid: int, got: int, tag: int) -> ShmBroadcastError:
    """The error every participant raises for collective ``tag`` aborted with ``code``."""
    during = describe(tag)
    remote = bool(code & _REMOTE)
    kind = code & 0xFF
    if kind == ABORT_DIED:
        return ReaderDiedError(rank, pid, 0, during=during, remote=remote)
    if kind == ABORT_CLOSED:
        return QueueClosedError(
            f"reader {rank} (pid {pid}) closed its end of the queue before completing "
            f"{during}; the collective cannot complete"
        )
    if kind == ABORT_MISMATCH:
        return CollectiveMismatchError(rank, during, describe(got))
    if kind == ABORT_DUPLICATE:
        return ShmBroadcastError(
            f"{during}: rank {rank} is claimed by two readers (one is pid {pid}); collectives "
            "need every reader attached with its own rank (create_from_handle(handle, rank))"
        )
    return ShmBroadcastError(f"{during} was aborted by the writer (code {code})")


class _AbortError(Exception):
    """Raised inside the writer's phases: abort the collective for everybody, then raise."""

    def __init__(self, code: int, rank: int, pid: int, got: int = 0) -> None:
        super().__init__(code, rank, pid, got)
        self.code = code
        self.rank = rank
        self.pid = pid
        self.got = got


def pack_result(entries: list[tuple[int, bytes]]) -> bytes:
    """The all-gather result: a count, ``(rank, length)`` per entry, then the pickles."""
    head = [_COUNT.pack(len(entries))]
    head.extend(_ENTRY.pack(rank, len(data)) for rank, data in entries)
    return b"".join(head + [data for _, data in entries])


def unpack_result(data: bytes | memoryview, own_rank: int, own: Any) -> list[Any]:
    """The objects of a packed result, ``own`` in place of the caller's own entry."""
    view = memoryview(data)
    try:
        (n,) = _COUNT.unpack_from(view, 0)
        pos = _COUNT.size + n * _ENTRY.size
        out: list[Any] = []
        for i in range(n):
            rank, length = _ENTRY.unpack_from(view, _COUNT.size + i * _ENTRY.size)
            if pos + length > len(view):
                raise struct.error("entry runs past the result")
            out.append(own if rank == own_rank else pickle.loads(view[pos : pos + length]))
            pos += length
    except struct.error as exc:
        raise ShmBroadcastError(f"malformed all_gather_object result: {exc}") from None
    return out


class _Pacer:
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
        missing: Callable[[], tuple[str, tuple[int, ...]]],
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


class _Round:
    """One collective as this participant sees it; kept across a timed-out call."""

    def __init__(self, tag: int, payload: bytes, obj: Any) -> None:
        self.tag = tag
        self.payload = payload  # what this participant contributes
        self.obj = obj
        # writer: contributions by rank, pieces of local ones, the result and how far it went
        self.got: dict[int, bytes] = {}
        self.pieces: dict[int, bytearray] = {}
        self.result: bytes | None = None
        self.remote_sent = False
        self.down_pos = 0
        # reader: how much of the contribution is posted, and the result as it comes in
        self.up_pos = 0
        self.posted = False
        self.received: bytearray | None = None


class _Hub:
    """The writer's side of the collective region."""

    def __init__(self, w: RingWriter) -> None:
        self.w = w
        lay = w.lay
        self.u = w.u
        self.c = lay.coll
        self.lines = [lay.coll_readers + r * W for r in range(w.ring.n_reader)]
        self.size = lay.coll_bytes
        self.down_off = lay.coll_data
        self.up_offs = [lay.coll_data + (r + 1) * lay.coll_bytes for r in range(w.ring.n_reader)]
        self.uack = [int(self.u[self.c + C_UACK + r]) for r in range(w.ring.n_reader)]
        self.dseq = int(self.u[self.c + C_DSEQ])

    def participants(self) -> list[int]:
        return [r for r in range(len(self.lines)) if r not in self.w.excluded]

    def _rank(self, r: int) -> int:
        return self.w.group_ranks[r]

    def _pid(self, r: int) -> int:
        return int(self.u[self.w.reader_lines[r] + R_PID])

    def check(self, readers: list[int]) -> None:
        """Raise ``_AbortError`` for the first of ``readers`` that closed its end or died."""
        u = self.u
        w = self.w
        for r in readers:
            line = w.reader_lines[r]
            state = u[line + R_STATE]
            if state == DETACHED:
                raise _AbortError(ABORT_CLOSED, self._rank(r), self._pid(r))
            if state != ATTACHED or u[line + R_PIDNS] != w.pidns:
                continue  # another pid namespace: rely on timeouts
            if not _sys.pid_alive(int(u[line + R_PID]), int(u[line + R_START])):
                raise _AbortError(ABORT_DIED, self._rank(r), self._pid(r))

    def enter(self, tag: int) -> None:
        """Announce that the writer is in collective ``tag`` (only read for diagnostics)."""
        self.u[self.c + C_WTAG] = tag

    # -- gather ----------------------------------------------------------------------------------

    def _take(self, r: int, rnd: _Round) -> bool | None:
        """Consume reader ``r``'s next up fragment: None if it has not posted one, True once
        its contribution is complete."""
        u = self.u
        line = self.lines[r]
        j = self.uack[r] + 1
        if load_acquire(u, line + CR_USEQ) < j:  # the fragment's words and bytes: after it
            return None
        tag = int(u[line + CR_UTAG])
        info = int(u[line + CR_UINFO])
        if tag != rnd.tag:
            raise _AbortError(ABORT_MISMATCH, self._rank(r), self._pid(r), tag)
        n = info & NBYTES_MASK
        flags = info >> FLAG_SHIFT
        if n > self.size:
            raise ShmBroadcastError(
                f"{describe(tag)}: reader {self._rank(r)} posted {n} bytes in a "
                f"{self.size}-byte slot; the segment was overwritten by something else"
            )
        off = self.up_offs[r]
        rank = self._rank(r)
        last = bool(flags & _LAST)
        if flags & _FIRST and last:
            rnd.got[rank] = self.w.raw[off : off + n].tobytes()
        else:
            if flags & _FIRST:
                rnd.pieces[r] = bytearray()
            rnd.pieces[r] += self.w.raw[off : off + n]
            if last:
                rnd.got[rank] = bytes(rnd.pieces.pop(r))
        if WEAK:
            _sys.fence()  # the loads above complete before the slot is handed back
        addr = self.c + C_UACK + r
        u[addr] = j
        self.uack[r] = j
        _sys.fence()  # the parked load must not pass the ack store
        if u[line + CR_PARKED]:
            _sys.futex_wake(self.w.base + addr * 8)
        return last

    def gather(self, rnd: _Round, pacer_for: Callable[..., _Pacer]) -> None:
        """Collect every local participant's contribution into ``rnd.got``."""
        pending = [r for r in self.participants() if self._rank(r) not in rnd.got]
        self.check([r for r in pending if self.u[self.w.reader_lines[r] + R_STATE] != ATTACHED])
        if not pending:
            return
        u = self.u

        def missing() -> tuple[str, tuple[int, ...]]:
            ranks = tuple(self._rank(r) for r in pending)
            named = ", ".join(f"local reader {self._rank(r)} (pid {self._pid(r)})" for r in pending)
            return f"Not arrived yet: {named}.", ranks

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

    def release(self, rnd: _Round, pacer_for: Callable[..., _Pacer]) -> None:
        """Publish ``rnd.result`` to local readers, one down fragment at a time."""
        assert rnd.result is not None
        data = rnd.result
        total = len(data)
        u = self.u
        c = self.c
        readers = self.participants()
        pacer: _Pacer | None = None
        while True:
            j = self.dseq + 1
            lagging = [r for r in readers if u[self.lines[r] + CR_DACK] < j - 1]
            if lagging:
                if pacer is None:

                    def missing(j: int = j) -> tuple[str, tuple[int, ...]]:
                        late = [r for r in readers if u[self.lines[r] + CR_DACK] < j - 1]
                        named = ", ".join(
                            f"local reader {self._rank(r)} (pid {self._pid(r)})" for r in late
                        )
                        return (
                            f"Still reading the previous piece of the result: {named}.",
                            tuple(self._rank(r) for r in late),
                        )

                    pacer = pacer_for(c + C_WPARKED, lambda: self.check(readers), missing)
                word = self.lines[lagging[0]] + CR_DACK
                pacer.pause(word, int(u[word]), lambda w=word, k=j - 1: u[w] >= k)  # type: ignore[misc]
                continue
            pos = rnd.down_pos
            n = min(self.size, total - pos)
            off = self.down_off
            self.w.raw[off : off + n] = data[pos : pos + n]
            flags = (_FIRST if pos == 0 else 0) | (_LAST if pos + n >= total else 0)
            u[c + C_DTAG] = rnd.tag
            u[c + C_DINFO] = n | flags << FLAG_SHIFT
            if flags & _FIRST:
                u[c + C_DTOTAL] = total
            if WEAK:
                _sys.fence()  # bytes and words before the publish
            u[c + C_DSEQ] = j
            self.dseq = j
            rnd.down_pos = pos + n
            self._wake(c + C_DSEQ)
            if flags & _LAST:
                return

    def _wake(self, word: int) -> None:
        _sys.fence()  # the parked loads must not pass the store just made
        u = self.u
        for line in self.lines:
            if u[line + CR_PARKED]:
                _sys.futex_wake(self.w.base + word * 8)
                return

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


def read_abort(u: memoryview, c: int) -> tuple[int, int, int, int, int] | None:
    """(tag, code, rank, pid, got) if the writer aborted a collective, else None."""
    tag = int(load_acquire(u, c + C_ABORT))  # the abort's other words are stored before it
    if not tag:
        return None
    rank = int(u[c + C_ABORT_RANK])
    if rank >= 1 << 63:
        rank -= 1 << 64
    return (
        tag,
        int(u[c + C_ABORT_CODE]),
        rank,
        int(u[c + C_ABORT_PID]),
        int(u[c + C_ABORT_TAG]),
    )


class _Spoke:
    """A local reader's side of the collective region."""

    def __init__(self, rd: RingReader, group_ranks: list[int]) -> None:
        self.rd = rd
        lay = rd.lay
        self.u = rd.u
        self.c = lay.coll
        self.r = rd.rank
        self.line = lay.coll_readers + rd.rank * W
        self.size = lay.coll_bytes
        self.down_off = lay.coll_data
        self.up_off = lay.coll_data + (rd.rank + 1) * lay.coll_bytes
        self.useq = int(self.u[self.line + CR_USEQ])
        self.dack = int(self.u[self.line + CR_DACK])
        self.group_ranks = group_ranks
        self.n_reader = rd.ring.n_reader

    def _interrupt(self, rnd: _Round, word: int, need: int) -> bool:
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

    def _check_writer(self, rnd: _Round, ready: Callable[[], bool]) -> None:
        rd = self.rd
        if rd.check_writer and not _sys.pid_alive(rd.writer_pid, rd.writer_start):
            # reading /proc is a system call: a full barrier, so ready() loads fresh words
            if ready():
                return
            rd.ring.unlink()  # survivor cleanup, as in RingReader.wait
            raise WriterDiedError(rd.writer_pid, rd.delivered, during=describe(rnd.tag))

    def _missing(self, rnd: _Round) -> tuple[str, tuple[int, ...]]:
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

    def _wait(self, rnd: _Round, pacer: _Pacer, word: int, need: int) -> None:
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

    def post(self, rnd: _Round, pacer: _Pacer) -> None:
        """Post this reader's contribution, piece by piece, each once the writer took the last."""
        u = self.u
        line = self.line
        data = rnd.payload
        total = len(data)
        while not rnd.posted:
            j = self.useq + 1
            ack = self.c + C_UACK + self.r
            self._wait(rnd, pacer, ack, j - 1)
            pos = rnd.up_pos
            n = min(self.size, total - pos)
            off = self.up_off
            self.rd.raw[off : off + n] = data[pos : pos + n]
            flags = (_FIRST if pos == 0 else 0) | (_LAST if pos + n >= total else 0)
            u[line + CR_UTAG] = rnd.tag
            u[line + CR_UINFO] = n | flags << FLAG_SHIFT
            if flags & _FIRST:
                u[line + CR_UTOTAL] = total
            if WEAK:
                _sys.fence()  # bytes and words before the publish
            u[line + CR_USEQ] = j
            self.useq = j
            rnd.up_pos = pos + n
            rnd.posted = bool(flags & _LAST)
            _sys.fence()  # the parked load must not pass the up_seq store
            if u[self.c + C_WPARKED]:
                _sys.futex_wake(self.rd.base + (line + CR_USEQ) * 8)

    def receive(self, rnd: _Round, pacer: _Pacer) -> bytes:
        """The writer's result for ``rnd``, piece by piece, acknowledging each."""
        u = self.u
        c = self.c
        line = self.line
        raw = self.rd.raw
        while True:
            j = self.dack + 1
            self._wait(rnd, pacer, c + C_DSEQ, j)  # ends with load_acquire of down_seq
            tag = int(u[c + C_DTAG])
            info = int(u[c + C_DINFO])
            if tag != rnd.tag:
                raise CollectiveMismatchError(
                    WRITER_RANK, describe(rnd.tag), describe(tag), "(the writer's call)"
                )
            n = info & NBYTES_MASK
            flags = info >> FLAG_SHIFT
            if n > self.size:
                raise ShmBroadcastError(
                    f"{describe(tag)}: the writer published {n} bytes in a {self.size}-byte "
                    "slot; the segment was overwritten by something else"
                )
            off = self.down_off
            whole = None
            if flags & _FIRST and flags & _LAST:
                whole = raw[off : off + n].tobytes()
            else:
                if flags & _FIRST or rnd.received is None:
                    rnd.received = bytearray()
                rnd.received += raw[off : off + n]
            if WEAK:
                _sys.fence()  # the loads above complete before the slot is handed back
            u[line + CR_DACK] = j
            self.dack = j
            _sys.fence()
            if u[c + C_WPARKED]:
                _sys.futex_wake(self.rd.base + (line + CR_DACK) * 8)
            if flags & _LAST:
                if whole is not None:
                    return whole
                assert rnd.received is not None
                out = bytes(rnd.received)
                rnd.received = None
                return out


class Collectives:
    """The collective state of one MessageQueue object (writer or reader)."""

    def __init__(self, queue: MessageQueue) -> None:
        # No reference to the queue itself: it must stay collectable (its finalizer closes it).
        self.is_writer = queue._is_writer
        self.rank = queue._rank
        self.gen = 0  # collectives started on this object
        self.pending: _Round | None = None
        self.broken: ShmBroadcastError | None = None
        self.hub = None if queue._writer is None else _Hub(queue._writer)
        reader = queue._reader
        self.spoke = None if reader is None else _Spoke(reader, list(queue.local_reader_ranks))
        self.pub: RemotePublisher | None = queue._remote_pub
        self.sub: RemoteSubscriber | None = queue._remote_sub

    def run(self, op: int, obj: Any, timeout: float | None) -> list[Any] | None:
        """One ``barrier`` / ``all_gather_object`` call (see MessageQueue for the contract)."""
        if self.broken is not None:
            raise self.broken
        rnd = self.pending
        if rnd is None:
            # pickled first: an unpicklable object must not use up a collective number
            payload = b"" if op == OP_BARRIER else pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
            self.gen += 1
            rnd = self.pending = _Round(tag_of(self.gen, op), payload, obj)
        elif rnd.tag & 0xFF != op:
            raise CollectiveMismatchError(
                WRITER_RANK if self.is_writer else self.rank,
                describe(rnd.tag),
                _OP_NAMES[op],
                "This process left the former pending after a timeout: call it again to finish "
                "it first.",
            )
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

    def _pacer(
        self,
        ep: Endpoint,
        rnd: _Round,
        deadline: float | None,
        timeout: float | None,
        side: str,
    ) -> Callable[..., _Pacer]:
        def make(
            parked: int,
            tick: Callable[[], None],
            missing: Callable[[], tuple[str, tuple[int, ...]]],
        ) -> _Pacer:
            return _Pacer(
                ep, parked, deadline, timeout, f"{describe(rnd.tag)} ({side})", tick, missing
            )

        return make

    # -- writer ----------------------------------------------------------------------------------

    def _run_writer(self, rnd: _Round, deadline: float | None, timeout: float | None) -> None:
        hub, pub = self.hub, self.pub
        try:
            if rnd.result is None:
                if hub is not None:
                    hub.enter(rnd.tag)
                    hub.gather(rnd, self._pacer(hub.w, rnd, deadline, timeout, "writer"))
                if pub is not None:
                    pub.gather(rnd.tag, rnd.got, self._local_ranks(), deadline, timeout)
                ranks = sorted(rnd.got)
                if rnd.tag & 0xFF == OP_GATHER:
                    rnd.result = pack_result(
                        [(WRITER_RANK, rnd.payload)] + [(r, rnd.got[r]) for r in ranks]
                    )
                else:
                    rnd.result = b""
            if pub is not None and not rnd.remote_sent:
                pub.send_result(rnd.tag, 0, rnd.result, deadline, timeout)
                rnd.remote_sent = True
            if hub is not None:
                hub.release(rnd, self._pacer(hub.w, rnd, deadline, timeout, "writer"))
        except _AbortError as fault:
            raise self._abort(rnd, fault) from None

    def _local_ranks(self) -> set[int]:
        hub = self.hub
        return set() if hub is None else {hub._rank(r) for r in hub.participants()}

    def _abort(self, rnd: _Round, fault: _AbortError) -> ShmBroadcastError:
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
        self, rnd: _Round, deadline: float | None, timeout: float | None
    ) -> bytes | memoryview:
        """Post this reader's contribution and return the writer's (packed) result."""
        spoke, sub = self.spoke, self.sub
        if spoke is not None:
            make = self._pacer(spoke.rd, rnd, deadline, timeout, "reader")
            pacer = make(spoke.line + CR_PARKED, lambda: None, lambda: spoke._missing(rnd))
            spoke.post(rnd, pacer)
            data: bytes | memoryview = spoke.receive(rnd, pacer)
        else:
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
