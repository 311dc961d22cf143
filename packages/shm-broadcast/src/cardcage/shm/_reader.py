"""The ring's reading end: wait for a fragment, copy it out, release its slot.

The protocol, the layout and the fences are described once, in ``_layout``; every sequence word
this module acts on is loaded through :func:`~cardcage.shm._layout.load_acquire`. A message that
arrives in several fragments is held in exactly one place, ``RingReader.partial``: a *sink* that
takes the message's bytes in order, straight from shared memory, and decodes them once the last
one is in (:class:`_RawSink` into the ``bytes`` it returns, :class:`_ScratchSink` into a reused
scratch buffer, :class:`~cardcage.shm._payload.OobReceiver` into an out-of-band pickle's
buffers). A message that fits one fragment is decoded in place.

Must never: import torch or zmq, deliver a half-filled object (a message whose writer died, or
that it aborted, is dropped), or store a word other than this reader's own line.
"""

from __future__ import annotations

import math
import os
import pickle
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from cardcage.hooks.log import get_logger

from . import _sys
from ._layout import (
    ABORTED,
    ATTACHED,
    DETACHED,
    FIRST,
    FLAG_SHIFT,
    H_CLOSED,
    H_CREATOR_PID,
    H_CREATOR_PIDNS,
    H_CREATOR_START,
    H_READY,
    H_WRITER_PARKED,
    LAST,
    LIVENESS_S,
    NBYTES_MASK,
    OOB,
    PARK_S,
    PICKLED,
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
    UNATTACHED,
    WEAK,
    fence_acquire,
    fence_release,
    load_acquire,
)
from ._payload import OobReceiver, WireError
from ._segment import Endpoint, ShmRingBuffer
from .errors import (
    AttachError,
    CancelledError,
    QueueClosedError,
    QueueTimeoutError,
    ShmBroadcastError,
    WriterDiedError,
)

__all__ = ["RingReader"]

logger = get_logger(__name__)

_WHOLE: Final = -2  # RingReader.wait: only a fully published fragment will do
_STARTED: Final = -1  # RingReader.wait: a fragment whose streaming has started will do
_ABANDONED: Final = object()  # the message being read was aborted by the writer
_PENDING: Final = object()  # the fragment is consumed, its message not complete yet


class _Sink(Protocol):
    """Where a message's bytes go as they arrive, in order (see the module docstring)."""

    @property
    def total(self) -> int: ...

    @property
    def fed(self) -> int: ...

    def take(self, off: int, n: int) -> None: ...

    def result(self) -> Any: ...


class _RawSink:
    """Receives a raw message, fed in order, straight into the ``bytes`` it is returned as."""

    __slots__ = ("addr", "base", "fed", "obj", "total")

    def __init__(self, obj: bytes, addr: int, base: int, total: int) -> None:
        self.obj = obj  # uninitialised until every byte is in; never handed out before that
        self.addr = addr
        self.base = base
        self.total = total
        self.fed = 0

    def take(self, off: int, n: int) -> None:
        """Copy the message's next ``n`` bytes from offset ``off`` of the segment."""
        if self.fed + n > self.total:  # a raw copy past the object would corrupt memory
            raise WireError(f"runs {self.fed + n - self.total} bytes past its declared length")
        _sys.memmove(self.addr + self.fed, self.base + off, n)
        self.fed += n

    def result(self) -> bytes:
        if self.fed != self.total:
            raise WireError(f"ended {self.total - self.fed} bytes short of its declared length")
        return self.obj


class _ScratchSink:
    """Receives a message into a scratch buffer that the reader reuses across messages, then
    decodes it: an in-band pickle is unpickled from the buffer, a raw message (only where
    uninitialised ``bytes`` are not available, see :func:`_sys.new_bytes`) copied out of it.

    Reusing the buffer spares large pickles fresh-allocation page faults on every receive.
    """

    __slots__ = ("buf", "fed", "pickled", "raw", "total")

    def __init__(self, buf: memoryview, raw: memoryview, pickled: bool) -> None:
        self.buf = buf  # exactly the message's length
        self.raw = raw
        self.pickled = pickled
        self.total = buf.nbytes
        self.fed = 0

    def take(self, off: int, n: int) -> None:
        """Copy the message's next ``n`` bytes from offset ``off`` of the segment."""
        pos = self.fed
        if pos + n > self.total:
            raise WireError(f"runs {pos + n - self.total} bytes past its declared length")
        self.buf[pos : pos + n] = self.raw[off : off + n]
        self.fed = pos + n

    def result(self) -> Any:
        if self.fed != self.total:
            raise WireError(f"ended {self.total - self.fed} bytes short of its declared length")
        with self.buf as view:  # released: the scratch buffer may be replaced later
            return pickle.loads(view) if self.pickled else view.tobytes()


class _Pace:
    """Where one ``RingReader.wait`` stands: when its polling and its busy window end, when it
    next checks the writer's pid and logs the slow-wait warning."""

    __slots__ = ("busy_end", "next_check", "next_warn", "spin_end", "start")

    def __init__(self, reader: RingReader, deadline: float | None) -> None:
        self.start = start = time.monotonic()
        self.restart(reader, deadline, start)
        self.next_check = start + LIVENESS_S
        self.next_warn = start + reader.warn_s if reader.warn_s > 0 else float("inf")

    def restart(self, reader: RingReader, deadline: float | None, now: float) -> None:
        """Open the polling and busy windows again, from ``now`` (the start, or a wake-up)."""
        self.spin_end, self.busy_end = now + reader.spin_s, now + reader.read_busy_s
        if deadline is not None and deadline < self.spin_end:
            self.spin_end = deadline  # timeout=0 stays a poll


class RingReader(Endpoint):
    """The reading end of local reader ``rank``.

    ``latency_first``: the reader never parks while it waits for a message; it polls, then
    yields the CPU in a loop until the message, its deadline, a close, a dead writer or a
    ``shutdown()`` (the busy window of ``CARDCAGE_SHM_BUSY_US`` without an end). That keeps a
    core busy for as long as it waits, in exchange for reacting to the first message after an
    idle spell in microseconds instead of a futex wake-up.
    """

    def __init__(self, ring: ShmRingBuffer, rank: int, latency_first: bool = False) -> None:
        super().__init__(ring)
        self.latency_first = latency_first
        #: the busy window of a wait for a message: endless in latency-first mode. Collectives
        #: keep ``busy_s`` (they park in both modes, see ``_collective._pacer``).
        self.read_busy_s = math.inf if latency_first else self.busy_s
        if not 0 <= rank < ring.n_reader:
            raise AttachError(ring.name, f"local reader rank {rank} not in [0, {ring.n_reader})")
        self.rank = rank
        self.line = self.lay.reader(rank)
        u = self.u
        state = u[self.line + R_STATE]
        if state != UNATTACHED:
            pid = int(u[self.line + R_PID])
            raise AttachError(ring.name, f"local reader {rank} is already taken by pid {pid}")
        pid = os.getpid()
        u[self.line + R_PID] = pid
        u[self.line + R_START] = _sys.process_start_time(pid)
        u[self.line + R_PIDNS] = _sys.pid_namespace()
        self.seq = int(u[self.line + R_SEQ])
        _sys.fence()
        u[self.line + R_STATE] = ATTACHED
        self.writer_pid = int(u[H_CREATOR_PID])
        self.writer_start = int(u[H_CREATOR_START])
        # Judge the writer's liveness by pid only inside the same pid namespace.
        self.check_writer = u[H_CREATOR_PIDNS] == _sys.pid_namespace()
        #: The message of several fragments being received (None between messages): the one
        #: place a half-received message is held. Dropped, never delivered, when the writer
        #: aborts it, dies or closes, or when a new message starts.
        self.partial: _Sink | None = None
        self.partial_pos = 0  # where the current fragment starts in ``partial``'s message
        self.stream = _sys.NEW_BYTES  # whether fragments may be copied out while streaming
        self.scratch = bytearray()  # _ScratchSink's buffer, reused across messages
        self.delivered = 0
        self.parks = 0  # futex sleeps so far (diagnostics; a latency-first reader never adds one)

    def detach(self) -> None:
        """Tell the writer to stop waiting for this reader."""
        self.u[self.line + R_STATE] = DETACHED
        _sys.fence()
        if self.u[H_WRITER_PARKED]:
            _sys.futex_wake(self.base + (self.line + R_SEQ) * 8)

    def wait_ready(self, deadline: float | None, timeout: float | None) -> None:
        u = self.u
        delay = 50e-6
        while not u[H_READY]:
            if self.cancelled:
                raise CancelledError
            if self._writer_died():
                self.ring.unlink()
                raise WriterDiedError(self.writer_pid, 0)
            if deadline is not None and time.monotonic() >= deadline:
                raise QueueTimeoutError("wait_until_ready (reader)", timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.005)

    # -- consuming -------------------------------------------------------------------------------

    def wait(
        self, k: int, d: int, deadline: float | None, timeout: float | None, have: int = _WHOLE
    ) -> None:
        """Return once fragment ``k`` is published in descriptor word ``d``, or, when ``have``
        is not ``_WHOLE``, once it is being streamed with more than ``have`` bytes in.

        Polls for ``spin_s``, then calls ``sched_yield`` until ``read_busy_s`` has passed, then
        parks on the descriptor's futex (see ``_park``); a latency-first reader's busy window
        never ends, so it yields until the fragment, the deadline, a close, a dead writer or a
        ``shutdown()``. The caller then loads ``seq`` (or ``pseq``) again through
        ``load_acquire`` before it reads the descriptor: this wait only says *when*, never
        orders a load.
        """
        arrived = self._arrival(k, d, have)
        pace = _Pace(self, deadline)
        while not arrived():
            if self.cancelled:
                raise CancelledError
            now = time.monotonic()
            if now < pace.spin_end:
                continue  # poll: a message in flight is a few microseconds away
            if self._stop_waiting(k, d, deadline, timeout, pace, now):
                return
            if now < pace.busy_end:
                os.sched_yield()
            elif self._park(d, arrived, deadline, now):
                pace.restart(self, deadline, time.monotonic())

    def _arrival(self, k: int, d: int, have: int) -> Callable[[], bool]:
        """The test ``wait`` polls: fragment ``k`` is published in descriptor word ``d``, or
        (``have`` not ``_WHOLE``) it is streaming with more than ``have`` bytes in."""
        u = self.u
        if have == _WHOLE:
            return lambda: u[d] == k
        p = d + S_PSEQ
        return lambda: u[d] == k or (u[p] == k and load_acquire(u, p) == k and u[p + 1] > have)

    def _stop_waiting(
        self, k: int, d: int, deadline: float | None, timeout: float | None, pace: _Pace, now: float
    ) -> bool:
        """Raise if the wait for fragment ``k`` must end without it (the queue closed, the
        deadline passed, the writer died); log the slow-wait warning when it is due. True when
        the fragment was published after all, just before the close or the death."""
        u = self.u
        if load_acquire(u, H_CLOSED):  # closed is stored after the last publish
            if u[d] == k:
                return True
            self.partial = None
            raise QueueClosedError
        if deadline is not None and now >= deadline:
            raise QueueTimeoutError("dequeue (waiting for a message)", timeout or 0.0)
        if now >= pace.next_check:
            if self._writer_died():
                # reading /proc is a system call: a full barrier, so this load is fresh
                if u[d] == k:
                    return True
                self.partial = None
                self.ring.unlink()  # survivor cleanup: nobody else will remove the name
                raise WriterDiedError(self.writer_pid, self.delivered)
            pace.next_check = now + LIVENESS_S
        if now >= pace.next_warn:
            logger.warning(
                "shm broadcast reader %d (pid %d) has waited %.0f s for message %d from "
                "writer pid %d",
                self.rank,
                os.getpid(),
                now - pace.start,
                k,
                self.writer_pid,
            )
            pace.next_warn = now + self.warn_s
        return False

    def _writer_died(self) -> bool:
        return self.check_writer and not _sys.pid_alive(self.writer_pid, self.writer_start)

    def _park(
        self, d: int, arrived: Callable[[], bool], deadline: float | None, now: float
    ) -> bool:
        """Sleep on the futex of descriptor word ``d`` for at most ``PARK_S`` (or until the
        deadline), unless the fragment ``arrived()``, the queue closed or the reader was
        cancelled once the parked flag is up. True when the writer woke it (not a timeout)
        before the fragment landed: the writer wakes parked readers before it copies a message
        in (``RingWriter._wake_early``), so the caller spins and yields again rather than park
        before it lands; a timeout does not restart that window, so an idle reader stays asleep.
        """
        u = self.u
        parked = self.line + R_PARKED
        u[parked] = 1
        _sys.fence()  # the parked store must not pass the loads below (_layout: parking)
        observed = u[d]
        woken = False
        if not arrived() and not self.cancelled and not u[H_CLOSED]:
            self.park_addr = self.base + d * 8
            self.parks += 1
            wait = PARK_S if deadline is None else min(PARK_S, deadline - now)
            woken = _sys.futex_wait(self.park_addr, observed, wait) and not arrived()
            self.park_addr = 0
        u[parked] = 0
        return woken

    def published(self, k: int, d: int, deadline: float | None, timeout: float | None) -> int:
        """Wait until fragment ``k`` (descriptor word ``d``) is wholly published and return its
        info word, loaded after ``seq`` (what ``MessageQueue.acquire_read`` builds on)."""
        u = self.u
        if load_acquire(u, d) != k:
            self.wait(k, d, deadline, timeout)
            load_acquire(u, d)
        return u[d + S_INFO]

    def release(self, k: int) -> None:
        """Mark fragment ``k`` consumed: its slot may be overwritten."""
        u = self.u
        if WEAK:
            _sys.fence()
        u[self.line] = k
        self.seq = k
        fence_acquire()
        fence_release()
        if u[H_WRITER_PARKED]:
            _sys.futex_wake(self.base + self.line * 8)

    def read(self, timeout: float | None) -> Any:
        """Receive one message: ``bytes`` for raw payloads, the unpickled object otherwise."""
        u = self.u
        k = self.seq + 1
        d = self.desc_words[(k - 1) % self.n_slots]
        if u[d] != k and (not self.stream or u[d + S_PSEQ] != k):
            self.wait(k, d, self._deadline(timeout), timeout, _STARTED if self.stream else _WHOLE)
        # if set, info is final; else pseq == k was seen (loaded before): it is streaming
        whole = load_acquire(u, d) == k
        info = u[d + 1]
        # FIRST | LAST: the whole message
        if info >> 56 & 3 == 3 and self.partial is None:
            off = self.data_off(k, d)
            end = off + (info & NBYTES_MASK)
            if not whole or info >> 56 & OOB:  # streaming in, or buffers to rebuild
                obj = self._stream_out(k, d, off, info, whole, self._deadline(timeout), timeout)
                if obj is _ABANDONED:
                    self.release(k)
                    return self._read_fragments(timeout)
            elif info >> 56 & PICKLED:
                with self.raw[off:end] as view:
                    obj = pickle.loads(view)
            else:
                obj = self.raw[off:end].tobytes()
            if WEAK:
                _sys.fence()
            u[self.line] = k
            self.seq = k
            fence_acquire()
            fence_release()
            if u[H_WRITER_PARKED]:
                _sys.futex_wake(self.base + self.line * 8)
            self.delivered += 1
            return obj
        return self._read_fragments(timeout)

    def _stream_out(
        self,
        k: int,
        d: int,
        off: int,
        info: int,
        whole: bool,
        deadline: float | None,
        timeout: float | None,
    ) -> Any:
        """Read fragment ``k``, a whole message; one that is still streaming in, or that holds
        out-of-band buffers, goes piece by piece straight into the object(s) it is delivered as.

        ``whole``: ``seq == k`` was loaded before ``info``. Returns ``_ABANDONED`` if the writer
        aborted the fragment. Only raw fragments and out-of-band pickles are ever streamed, so
        an in-band pickle always arrives ``whole``.
        """
        flags = info >> FLAG_SHIFT
        n = info & NBYTES_MASK
        if n > self.slot_bytes:  # checked before anything is allocated for it
            raise self._corrupt(k, f"claims {n} bytes in a {self.slot_bytes}-byte slot")
        if whole and not flags & OOB:
            if flags & PICKLED:
                with self.raw[off : off + n] as view:
                    return pickle.loads(view)
            return self.raw[off : off + n].tobytes()
        try:
            sink = self._sink(flags, n)
            if not self._copy_streamed(k, d, off, sink.take, info, deadline, timeout):
                return _ABANDONED
            return sink.result()
        except WireError as exc:
            raise self._corrupt(k, str(exc)) from None

    def _sink(self, flags: int, total: int) -> _Sink:
        """Where a ``total``-byte message's bytes go as they arrive."""
        if flags & OOB:
            return OobReceiver(total, self.raw, self.base)
        if not flags & PICKLED:
            made = _sys.new_bytes(total)
            if made is not None:
                return _RawSink(made[0], made[1], self.base, total)
        if len(self.scratch) < total:
            self.scratch = bytearray(total)
        return _ScratchSink(memoryview(self.scratch)[:total], self.raw, bool(flags & PICKLED))

    def _copy_streamed(
        self,
        k: int,
        d: int,
        off: int,
        take: Callable[[int, int], None],
        info: int,
        deadline: float | None,
        timeout: float | None,
        have: int = 0,
    ) -> bool:
        """Pass the bytes of fragment ``k`` (slot data at ``off``; length and flags ``info``,
        loaded after ``pseq == k`` or ``seq == k``) to ``take(offset, n)`` in order, each piece
        as soon as the writer has published it, the rest once ``seq == k``; the first ``have``
        were passed before (a wait that timed out). False if the writer aborted the fragment.
        The callers have checked that ``info``'s length fits a slot.

        From ``pseq == k`` on, every value of ``pbytes`` this reader loads belongs to fragment
        ``k``, since the slot cannot be reused before this reader releases ``k``.
        """
        n = info & NBYTES_MASK
        u = self.u
        b = d + S_PBYTES
        while True:
            if u[d] == k:
                load_acquire(u, d)
                if u[d + S_INFO] != info:  # published as ABORTED instead
                    return False
                if n > have:
                    take(off + have, n - have)
                return True
            avail = min(load_acquire(u, b), n)
            if avail > have:
                take(off + have, avail - have)
                have = avail
            else:
                self.wait(k, d, deadline, timeout, have)

    def data_off(self, k: int, d: int) -> int:
        """Where the bytes of fragment ``k`` (descriptor word ``d``, loaded after its ``seq`` or
        ``pseq``) start in the segment."""
        slot = self.u[d + S_DSLOT]
        if slot >= self.n_slots:
            raise self._corrupt(k, f"names data slot {slot} of {self.n_slots}")
        return self.data_offs[slot]

    def _corrupt(self, k: int, what: str) -> ShmBroadcastError:
        return ShmBroadcastError(
            f"shm segment {self.ring.name}: fragment {k} {what}; the segment was overwritten by "
            "something other than its writer (recreate the queue)"
        )

    def _next_fragment(
        self,
        sink: _Sink,
        k: int,
        d: int,
        off: int,
        info: int,
        deadline: float | None,
        timeout: float | None,
    ) -> Any:
        """Pass fragment ``k`` of a multi-fragment message to ``sink`` and release it: the
        message once its last fragment is in, else ``_PENDING`` (also when it was aborted)."""
        n = info & NBYTES_MASK
        if n > self.slot_bytes:
            raise self._corrupt(k, f"claims {n} bytes in a {self.slot_bytes}-byte slot")
        pos = self.partial_pos
        last = info >> FLAG_SHIFT & LAST
        if pos + n > sink.total or (last and pos + n != sink.total):
            self.partial = None
            raise self._corrupt(k, f"does not fit its {sink.total}-byte message")
        try:
            # after a timed-out wait, the first ``sink.fed - pos`` bytes are already passed
            done = self._copy_streamed(
                k, d, off, sink.take, info, deadline, timeout, sink.fed - pos
            )
            self.release(k)
            if not done:
                self.partial = None
                return _PENDING
            self.partial_pos = pos + n
            if not last:
                return _PENDING
            self.partial = None
            return sink.result()
        except WireError as exc:
            self.partial = None
            raise self._corrupt(k, str(exc)) from None

    def _read_fragments(self, timeout: float | None) -> Any:
        deadline = self._deadline(timeout)
        u = self.u
        stream = self.stream
        while True:
            k = self.seq + 1
            d = self.desc_words[(k - 1) % self.n_slots]
            if u[d] != k and (not stream or u[d + S_PSEQ] != k):
                self.wait(k, d, deadline, timeout, _STARTED if stream else _WHOLE)
            whole = load_acquire(u, d) == k  # as in read(): if set, info is final
            info = u[d + S_INFO]
            flags = info >> FLAG_SHIFT
            off = self.data_off(k, d)
            if flags & ABORTED:  # the writer gave up on this message in the middle
                self.partial = None
                self.release(k)
                continue
            if flags & FIRST:
                self.partial = None  # a new message: any half-received one was abandoned
                if flags & LAST:
                    obj = self._stream_out(k, d, off, info, whole, deadline, timeout)
                    self.release(k)
                    if obj is _ABANDONED:
                        continue
                    self.delivered += 1
                    return obj
                self.partial_pos = 0
                try:
                    self.partial = self._sink(flags, int(u[d + S_TOTAL]))
                except WireError as exc:
                    raise self._corrupt(k, str(exc)) from None
            elif self.partial is None:
                # A continuation of a message this reader never saw the start of.
                self.release(k)
                continue
            obj = self._next_fragment(self.partial, k, d, off, info, deadline, timeout)
            if obj is _PENDING:
                continue
            self.delivered += 1
            return obj
