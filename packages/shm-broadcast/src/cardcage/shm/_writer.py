"""The ring's writing end: reserve a descriptor, place the bytes in a data slot, publish.

The protocol, the layout and the fences it issues are described once, in ``_layout``; this
module only implements the writer's half (flow control against the slowest reader, the
slot-placement rule, streaming large fragments piece by piece, and closing).

Must never: import torch or zmq, allocate per-message Python objects on the hot path beyond the
payload itself, or store a word another process owns (the one exception, :meth:`RingWriter.exclude`,
writes the line of a reader that provably never attached).
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

from cardcage.hooks.log import get_logger

from . import _sys
from ._layout import (
    ABORTED,
    ATTACHED,
    C_DSEQ,
    C_UACK,
    CR_PARKED,
    DETACHED,
    FIRST,
    FLAG_SHIFT,
    H_CLOSED,
    H_READY,
    H_WRITER_PARKED,
    LAST,
    LIVENESS_S,
    PARK_S,
    PICKLED,
    PIECE,
    R_PARKED,
    R_PID,
    R_PIDNS,
    R_SEQ,
    R_START,
    R_STATE,
    S_DSLOT,
    S_INFO,
    S_PBYTES,
    S_PSEQ,
    S_TOTAL,
    STREAM_MIN,
    UNATTACHED,
    WEAK,
    W,
    fence_acquire,
    fence_release,
)
from ._segment import Endpoint, ShmRingBuffer
from .errors import CancelledError, QueueTimeoutError, ReaderDiedError

__all__ = ["RingWriter"]

logger = get_logger(__name__)

#: A fragment at least this large makes the writer look whether the ring is empty, so that it
#: can go back to data slot 0 (see RingWriter.place); below it the cached view decides.
_HOT_MIN: Final = 64 << 10


class _Gather:
    """A read position in a message made of several buffers, copied out in any pieces."""

    __slots__ = ("index", "offset", "views")

    def __init__(self, parts: list[Any]) -> None:
        self.views = [memoryview(p) for p in parts]
        self.index = 0  # the part to copy from next
        self.offset = 0  # how much of it is already copied

    def copy_to(self, raw: memoryview, at: int, n: int) -> None:
        """Copy the message's next ``n`` bytes to ``raw[at : at + n]``."""
        views = self.views
        index, offset = self.index, self.offset
        while n:
            view = views[index]
            m = min(n, view.nbytes - offset)
            raw[at : at + m] = view[offset : offset + m]
            at += m
            n -= m
            offset += m
            if offset == view.nbytes:
                index, offset = index + 1, 0
        self.index, self.offset = index, offset


class RingWriter(Endpoint):
    """The writing end: reserve a slot, fill it, publish it."""

    def __init__(self, ring: ShmRingBuffer, group_ranks: list[int] | None = None) -> None:
        super().__init__(ring)
        #: how errors and warnings name local reader r (its rank in the caller's group)
        self.group_ranks = group_ranks or list(range(ring.n_reader))
        self.min_read = 0  # cached lower bound of every attached reader's read_seq
        self.cursor = 0  # the data slot the next fragment takes unless the ring is empty
        self.reader_lines = [self.lay.reader(r) for r in range(ring.n_reader)]
        self.pidns = _sys.pid_namespace()
        self.parked_words = [line + R_PARKED for line in self.reader_lines]
        self.excluded: set[int] = set()  # local readers that read over ZeroMQ instead
        #: whether small messages wake parked readers before their copy (see _wake_early)
        self.wake_first = self.spin_s > 0

    # -- readiness -------------------------------------------------------------------------------

    def unattached_ranks(self) -> list[int]:
        u = self.u
        return [r for r, line in enumerate(self.reader_lines) if u[line + R_STATE] == UNATTACHED]

    def mark_ready(self) -> None:
        self.u[H_READY] = 1

    def exclude(self, rank: int) -> None:
        """Stop waiting for local reader ``rank``, which never attached (it reads remotely).

        The reader line's only writer is its reader; one that never attached never writes it,
        so the writer may mark it detached without a race.
        """
        self.excluded.add(rank)
        self.u[self.reader_lines[rank] + R_STATE] = DETACHED

    # -- flow control ----------------------------------------------------------------------------

    def _scan(self) -> tuple[int, int]:
        """(min read_seq over readers that have not detached, the rank holding it or -1)."""
        u = self.u
        low, who = 1 << 62, -1
        for r, line in enumerate(self.reader_lines):
            if u[line + R_STATE] == DETACHED:
                continue
            s = u[line + R_SEQ]
            if s < low:
                low, who = s, r
        return low, who

    def reserve(self, k: int, deadline: float | None, timeout: float | None) -> None:
        """Return once fragment ``k`` may overwrite its slot; raise on timeout/death/cancel."""
        need = k - self.n_slots
        if need <= self.min_read:
            return
        low, _ = self._scan()
        if low >= need:
            self.min_read = low
            return
        self._wait_writable(need, deadline, timeout)

    def _wait_writable(self, need: int, deadline: float | None, timeout: float | None) -> None:
        u = self.u
        start = time.monotonic()
        spin_end, busy_end = start + self.spin_s, start + self.busy_s
        next_check = start + LIVENESS_S
        next_warn = start + self.warn_s if self.warn_s > 0 else float("inf")
        while True:
            low, who = self._scan()
            if low >= need:
                self.min_read = low
                return
            if self.cancelled:
                raise CancelledError
            now = time.monotonic()
            if now < spin_end:
                continue
            if deadline is not None and now >= deadline:
                raise QueueTimeoutError(
                    "enqueue (waiting for a free slot)",
                    timeout or 0.0,
                    f"Lagging reader(s): {self._lagging(need)}.",
                )
            if now < busy_end:
                os.sched_yield()
                continue
            if now >= next_check:
                self._check_readers(need)
                next_check = now + LIVENESS_S
            if now >= next_warn:
                logger.warning(
                    "shm broadcast writer (pid %d) has waited %.0f s for a free slot; lagging "
                    "reader(s): %s",
                    os.getpid(),
                    now - start,
                    self._lagging(need),
                )
                next_warn = now + self.warn_s
            word = self.reader_lines[who] + R_SEQ
            addr = self.base + word * 8
            u[H_WRITER_PARKED] = 1
            _sys.fence()
            observed = u[word]
            if observed < need and not self.cancelled:
                self.park_addr = addr
                wait = PARK_S if deadline is None else min(PARK_S, deadline - now)
                _sys.futex_wait(addr, observed, wait)
                self.park_addr = 0
            u[H_WRITER_PARKED] = 0

    def _lagging(self, need: int) -> str:
        u = self.u
        parts = []
        for r, line in enumerate(self.reader_lines):
            if u[line + R_STATE] != DETACHED and u[line + R_SEQ] < need:
                state = "not attached" if u[line + R_STATE] == UNATTACHED else "attached"
                parts.append(
                    f"rank {self.group_ranks[r]} (pid {u[line + R_PID]}, {state}, "
                    f"{self.seq - u[line + R_SEQ]} unread)"
                )
        return ", ".join(parts) or "none"

    def _check_readers(self, need: int) -> None:
        u = self.u
        for r, line in enumerate(self.reader_lines):
            if u[line + R_STATE] != ATTACHED or u[line + R_SEQ] >= need:
                continue
            if u[line + R_PIDNS] != self.pidns:
                continue  # another pid namespace: its pid means nothing here; rely on timeouts
            pid = int(u[line + R_PID])
            if not _sys.pid_alive(pid, int(u[line + R_START])):
                raise ReaderDiedError(self.group_ranks[r], pid, self.seq - int(u[line + R_SEQ]))

    # -- publishing ------------------------------------------------------------------------------

    def place(self, k: int, nbytes: int) -> int:
        """The data slot for fragment ``k`` of ``nbytes`` (after ``reserve(k)``): the next one
        in turn, or slot 0 again whenever every reader has released every earlier fragment.

        Going back to slot 0 on an empty ring keeps a queue used one message at a time on the
        same memory, which stays in the CPUs' caches: cycling through six 4 MiB slots made the
        two back-to-back copies of a pickled 1 MiB message about 2x slower on a 2-vCPU VM. Safe:
        since the last restart, fragments took slots 0, 1, 2, ... in turn, so the fragment
        that last used this slot is ``k - n_slots`` or older, or predates the restart; either
        way every reader has released it (``reserve(k)`` saw ``k - n_slots`` released). The
        turn only advances when ``k`` is published (:meth:`_taken`): a placement abandoned
        without a publish (an exception inside ``acquire_write``) must not skip a slot, or the
        next fragment would land on one released one fragment too late.
        """
        if self.min_read < k - 1 and nbytes >= _HOT_MIN:
            low, _ = self._scan()
            self.min_read = max(self.min_read, low)
        return 0 if self.min_read >= k - 1 else self.cursor

    def _taken(self, slot: int) -> None:
        """Fragment ``self.seq + 1`` is being published in data slot ``slot``."""
        self.cursor = slot + 1 if slot + 1 < self.n_slots else 0

    def publish(self, slot: int, nbytes: int, flags: int) -> None:
        """Make fragment ``self.seq + 1`` (already copied into data slot ``slot``) visible."""
        u = self.u
        k = self.seq + 1
        d = self.desc_words[(k - 1) % self.n_slots]
        u[d + S_DSLOT] = slot
        u[d + S_INFO] = nbytes | (flags << FLAG_SHIFT)
        self._taken(slot)
        self._publish_seq(d, k)

    def _publish_seq(self, d: int, k: int) -> None:
        """Store ``seq = k`` in descriptor word ``d`` (every other word of ``k`` is stored) and
        wake parked readers; :meth:`send` inlines the same steps for small messages."""
        u = self.u
        if WEAK:
            _sys.fence()
        u[d] = k
        self.seq = k
        fence_acquire()  # full fence: the parked-flag loads must not pass the seq store
        fence_release()
        for w in self.parked_words:
            if u[w]:
                _sys.futex_wake(self.base + d * 8)
                break

    def _wake_early(self, k: int) -> None:
        """Wake parked readers now, before fragment ``k`` is copied in and published.

        A parked reader takes 100 µs or more to run again after an idle spell (benchmarks/
        bench_shm.py's cold-wake floor rows), so the writer starts that wake first and copies
        and publishes while it happens; a woken reader spins and yields for its busy window
        again (``RingReader.wait``) instead of parking, sees the publish and needs no second
        wake. The publish still checks the parked flags (a reader may park in between), so this
        is only an earlier start, never the wake that correctness rests on. Streamed fragments
        need none: announcing the stream wakes them before the copy already.

        Only when the queue's processes fit the CPUs (``wake_first``, the same test that turns
        the initial spin on): with more processes than CPUs a woken reader is often put on the
        writer's own CPU, runs before the message is there and costs two more switches (2-3
        readers on 2 vCPUs: cold wakes 8-37 % slower, measured), where a reader on another CPU
        wakes while the writer copies (1 reader: the writer's part of the cold wake fell from
        ~36 to ~22 µs).
        """
        if not self.wake_first:
            return
        u = self.u
        for w in self.parked_words:
            if u[w]:
                _sys.futex_wake(self.base + self.desc_words[(k - 1) % self.n_slots] * 8)
                return

    def stream(self, slot: int, src: memoryview, flags: int) -> None:
        """Copy fragment ``self.seq + 1`` into data slot ``slot`` piece by piece, then publish it.

        Readers may copy each piece out while the next one is copied in. Before the first piece
        the descriptor gets the fragment's ``info``, ``pbytes = 0`` and then ``pseq = k``; after
        each piece ``pbytes`` grows; ``seq = k`` publishes the whole fragment as usual. A parked
        reader is woken at the start (best effort: the publish wakes it again if it missed it).
        """
        u = self.u
        raw = self.raw
        n = src.nbytes
        k, d = self._start_stream(slot, n, flags)
        off = self.data_offs[slot]
        piece = PIECE
        pos = 0
        end = n - piece
        try:
            while pos < end:
                nxt = pos + piece
                raw[off + pos : off + nxt] = src[pos:nxt]
                if WEAK:
                    _sys.fence()
                u[d + S_PBYTES] = pos = nxt
            raw[off + pos : off + n] = src[pos:n]
        except BaseException:
            self._abort_stream(d, k)
            raise
        self._publish_seq(d, k)

    def _start_stream(self, slot: int, n: int, flags: int) -> tuple[int, int]:
        """Announce fragment ``self.seq + 1`` of ``n`` bytes in data slot ``slot`` as streaming
        (``pbytes = 0``, then ``pseq``) and wake parked readers; returns ``(k, d)``."""
        u = self.u
        k = self.seq + 1
        d = self.desc_words[(k - 1) % self.n_slots]
        u[d + S_DSLOT] = slot
        u[d + S_INFO] = n | (flags << FLAG_SHIFT)
        u[d + S_PBYTES] = 0
        self._taken(slot)  # k is used up from here: published whole or as ABORTED
        if WEAK:
            _sys.fence()
        u[d + S_PSEQ] = k
        fence_acquire()
        fence_release()
        for w in self.parked_words:
            if u[w]:
                _sys.futex_wake(self.base + d * 8)
                break
        return k, d

    def _abort_stream(self, d: int, k: int) -> None:
        """Publish streaming fragment ``k`` as aborted (no data) after a failed copy.

        Readers may already hold pieces of it: the flag makes them drop its message, and ``k``
        is never reused for other bytes.
        """
        self.u[d + S_INFO] = ABORTED << FLAG_SHIFT
        self._publish_seq(d, k)

    def stream_parts(self, slot: int, src: _Gather, n: int, flags: int) -> None:
        """:meth:`stream` for the next ``n`` bytes of a message made of several parts (an
        out-of-band pickle: header, pickle stream, then each buffer).

        Not merged with :meth:`stream`: routing raw ``bytes`` through :class:`_Gather` made
        their copy 10-20 µs per MiB slower on the benchmark VM, and raw 1 MiB is a budget row.
        """
        u = self.u
        k, d = self._start_stream(slot, n, flags)
        off = self.data_offs[slot]
        piece = PIECE
        pos = 0
        end = n - piece
        try:
            while pos < end:
                src.copy_to(self.raw, off + pos, piece)
                pos += piece
                if WEAK:
                    _sys.fence()
                u[d + S_PBYTES] = pos
            src.copy_to(self.raw, off + pos, n - pos)
        except BaseException:
            self._abort_stream(d, k)
            raise
        self._publish_seq(d, k)

    def send(self, data: bytes, flags: int, timeout: float | None) -> None:
        """Broadcast one message (the hot path: one slot, flattened; larger ones stream)."""
        n = len(data)
        if n > self.slot_bytes:
            self.write(memoryview(data), flags, timeout)
            return
        k = self.seq + 1
        if k - self.n_slots > self.min_read:
            self.reserve(k, self._deadline(timeout), timeout)
        slot = self.place(k, n)
        if n >= STREAM_MIN and not flags & PICKLED:
            self.stream(slot, memoryview(data), flags | FIRST | LAST)
            return
        u = self.u
        d = self.desc_words[(k - 1) % self.n_slots]
        if self.wake_first:  # _wake_early, inlined
            for w in self.parked_words:
                if u[w]:
                    _sys.futex_wake(self.base + d * 8)
                    break
        off = self.data_offs[slot]
        self.raw[off : off + n] = data
        u[d + S_DSLOT] = slot
        u[d + 1] = n | ((flags | 3) << 56)  # 3 == FIRST | LAST
        self.cursor = slot + 1 if slot + 1 < self.n_slots else 0  # _taken(), inlined
        if WEAK:
            _sys.fence()
        u[d] = k
        self.seq = k
        fence_acquire()
        fence_release()
        for w in self.parked_words:
            if u[w]:
                _sys.futex_wake(self.base + d * 8)
                break

    def write(self, payload: memoryview, flags: int, timeout: float | None) -> None:
        """Copy ``payload`` into the ring as one message (several fragments if it is large)."""
        total = payload.nbytes
        size = self.slot_bytes
        deadline = self._deadline(timeout)
        n_slots = self.n_slots
        raw = self.raw
        first = FIRST
        pos = 0
        while True:
            k = self.seq + 1
            self.reserve(k, deadline, timeout)
            n = min(size, total - pos)
            slot = self.place(k, n)
            last = LAST if pos + n >= total else 0
            if first:
                self.u[self.desc_words[(k - 1) % n_slots] + S_TOTAL] = total
            if n >= STREAM_MIN and not flags & PICKLED:
                self.stream(slot, payload[pos : pos + n], flags | first | last)
                pos += n
            else:
                if first:
                    self._wake_early(k)
                off = self.data_offs[slot]
                raw[off : off + n] = payload[pos : pos + n]
                pos += n
                self.publish(slot, n, flags | first | last)
            if last:
                return
            first = 0

    def send_parts(self, parts: list[Any], total: int, flags: int, timeout: float | None) -> None:
        """Copy ``parts`` (bytes or 'B' views) back to back into the ring as one message.

        Each part is copied once, straight from the caller's memory into the slots. A message
        larger than a slot goes as several fragments, as in :meth:`write`, and every fragment of
        at least ``STREAM_MIN`` bytes is streamed (readers rebuild the buffers while the copy is
        still running; see :class:`~cardcage.shm._payload.OobReceiver`).
        """
        raw = self.raw
        if total <= self.slot_bytes and total < STREAM_MIN:
            k = self.seq + 1
            if k - self.n_slots > self.min_read:
                self.reserve(k, self._deadline(timeout), timeout)
            slot = self.place(k, total)
            self._wake_early(k)
            pos = self.data_offs[slot]
            for part in parts:
                n = len(part) if type(part) is bytes else part.nbytes
                raw[pos : pos + n] = part
                pos += n
            self.publish(slot, total, flags | FIRST | LAST)
            return
        deadline = self._deadline(timeout)
        size = self.slot_bytes
        src = _Gather(parts)
        sent = 0
        first = FIRST
        while True:
            k = self.seq + 1
            self.reserve(k, deadline, timeout)
            n = min(size, total - sent)
            slot = self.place(k, n)
            sent += n
            last = LAST if sent >= total else 0
            if first:
                self.u[self.desc_words[(k - 1) % self.n_slots] + S_TOTAL] = total
            if n >= STREAM_MIN:
                self.stream_parts(slot, src, n, flags | first | last)
            else:
                if first:
                    self._wake_early(k)
                src.copy_to(raw, self.data_offs[slot], n)
                self.publish(slot, n, flags | first | last)
            if last:
                return
            first = 0

    def close(self) -> None:
        """Publish the closed flag after every message and wake parked readers (also those
        waiting in a collective)."""
        u = self.u
        u[H_CLOSED] = 1
        _sys.fence()
        k = self.seq + 1
        _sys.futex_wake(self.base + (self.lay.desc + ((k - 1) % self.n_slots) * W) * 8)
        coll = self.lay.coll
        for r in range(self.ring.n_reader):
            if u[self.lay.coll_readers + r * W + CR_PARKED]:
                _sys.futex_wake(self.base + (coll + C_DSEQ) * 8)
                _sys.futex_wake(self.base + (coll + C_UACK + r) * 8)
