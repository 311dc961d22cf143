"""The shared-memory ring: segment lifecycle, layout and the sequence-number protocol.

One writer, ``n_reader`` local readers, ``max_chunks`` slots of ``max_chunk_bytes`` each, in one
POSIX shared-memory file under ``/dev/shm`` created with mode 0600 (never through
``multiprocessing.shared_memory``, so CPython's ``resource_tracker`` is never involved: no
"leaked shared_memory" warnings and no tracker unlinking a segment another process still uses).

Must never: import torch or zmq, allocate per-message Python objects on the hot path beyond the
payload itself, or let a forked child unlink its parent's segment (only the process whose pid
created the segment ever unlinks it, plus readers that outlive a dead writer).

Layout (every field an 8-byte little-endian word, every group on its own 64-byte line)::

    page 0   header   line 0: magic, version, epoch, n_reader, n_slots, slot_bytes,
                              creator pid, creator start time
                      line 1: closed, ready, creator pid namespace
                      line 2: writer-parked flag
    page 1+  readers  one line per reader: read_seq, parked, pid, start time, state, pid ns
    page k   slots    one line per slot:   seq, info (nbytes | flags << 56), total length,
                                           pseq, pbytes (streaming progress, see below),
                                           data slot
    page m   data     n_slots * stride bytes (stride = max_chunk_bytes rounded up to 64)
    page c   collectives (``barrier`` / ``all_gather_object``, protocol in ``_collective``):
                      line 0: down_seq, down info, down tag, down total, writer-parked,
                              writer's current tag (diagnostics only)
                      line 1: abort (the aborted collective's tag), code, rank, pid,
                              the tag the culprit posted
                      lines 2+: up_ack, one word per reader, 8 to a line
                      then one line per reader: up_seq, up info, up tag, up total,
                                                down_ack, parked
                      then, line-aligned: the down slot and one up slot per reader,
                      coll_bytes each (min(stride, 64 KiB))

The collective region comes after everything else, so adding it moved no word the hot paths
touch: ``enqueue``/``dequeue`` never read or write it.

Protocol. Message fragments are numbered 1, 2, 3, ... ; fragment ``k`` is described by
descriptor ``(k - 1) % n_slots``. The writer may reuse that descriptor once every attached
reader's ``read_seq >= k - n_slots`` (the fragment that used it before has been read by all).
It copies the bytes into a data slot, stores the data slot's index and ``info`` (length and
flags), then stores ``seq = k`` (the publish). A reader waiting for ``k`` polls ``seq`` of that
descriptor; once it equals ``k`` it reads the descriptor and the bytes, then stores its own
``read_seq = k`` (the release). Every word has exactly one writing process, so no atomic
read-modify-write is needed anywhere.

Data slots are taken in turn (0, 1, 2, ...), except that the writer goes back to slot 0 whenever
every reader has released every fragment: a queue used one message at a time (the common case:
a scheduler broadcasting a request and waiting for the result) keeps reusing the same memory,
which stays in the CPUs' caches, where walking through every slot made the two copies of a
non-streamed 1 MiB message about twice as slow (``RingWriter.place`` has the safety argument).

Streaming. A fragment of at least ``_STREAM_MIN`` bytes of a raw (unpickled) message or of an
out-of-band pickle is also published piece by piece so that readers copy it out while it is still
being copied in (two copies overlap instead of running back to back). Before copying, the writer
stores the data slot and ``info``, then ``pbytes = 0``, then ``pseq = k``; after each ``_PIECE``
bytes it stores ``pbytes`` = bytes copied so far; the final ``seq = k`` is the publish above and is
the only thing that makes the fragment complete. A reader that loads ``pseq == k`` may then load
``pbytes`` and copy that many bytes: ``pbytes = 0`` was stored before ``pseq = k`` and neither the
descriptor nor the data slot can be reused before this reader releases ``k``, so every ``pbytes`` it
loads afterwards belongs to fragment ``k`` and never exceeds what was copied. The reader copies into
the very ``bytes`` object it will return (created uninitialised, see :func:`_sys.new_bytes`), or
into the buffers of an out-of-band pickle (:class:`~cardcage.shm._payload.OobReceiver`), and returns
the message only after loading ``seq == k`` and copying the rest; if the writer dies or the queue
closes first, the half-filled objects are dropped, never delivered (after a timed-out wait, the
next call carries on where it stopped in a message of several fragments, and copies a one-fragment
message again). ``pseq`` and ``pbytes`` have one writer like every other word.

Memory ordering. Two orderings carry the protocol: (1) the writer's data and descriptor stores
must become visible before its ``seq`` store, and a reader's loads of them must not be satisfied
before its load of ``seq``; (2) a reader's loads of a slot must complete before its ``read_seq``
store makes the slot reusable. On x86-64 (TSO) the hardware never reorders store-store,
load-load or load-store, and CPython performs each ``memoryview``/``mmap`` access as a separate C
call in program order that the C compiler cannot move across (the callee is opaque), so program
order is memory order for (1) and (2) with no fence. 8-byte aligned word stores through a
``memoryview.cast('Q')`` are single ``mov`` instructions, hence never torn. On weakly ordered
CPUs (aarch64, ppc64le, riscv) both orderings need barriers: we call :func:`_sys.fence` (an
uncontended ``threading.Lock`` acquire+release, i.e. acquire/release exclusive accesses, which
glibc implements with full-barrier atomics) between the descriptor stores and the ``seq`` store,
after the reader's ``seq`` load, and before its ``read_seq`` store; streaming adds the same
pairs: a fence before ``pseq = k`` and before every ``pbytes`` and ``seq`` store on the writer's
side, and after the reader's loads of ``pseq`` and of ``pbytes``/``seq`` before it copies. That
is the same class of fence vLLM settled on (vllm#30407); it is not a formal C11 ``seq_cst``
fence, so the aarch64 stress test is the proof we require before claiming support there.

Parking needs a third, store-then-load, ordering that even x86 does not give: a waiter stores
its ``parked`` flag and then (inside ``futex_wait``, which the kernel orders with a full barrier)
loads the word it waits on; the waker stores that word and then loads ``parked``. Without a
barrier between the waker's store and load, both could miss each other (a lost wake-up). The
waker therefore calls :func:`_sys.fence` (a locked RMW on x86: a full barrier) between the
two. As defence in depth every park is bounded (``_PARK_S``), so even a lost wake costs at most
one park interval, never liveness. A streamed fragment wakes parked readers twice: at
``pseq = k`` (best effort: the futex word ``seq`` has not changed yet, so a reader that was
about to sleep can miss it) and at ``seq = k`` (the ordinary, never-lost wake-up); a missed
first wake only costs the overlap, since the reader then copies the whole fragment at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import mmap
import os
import pickle
import secrets
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final

from . import _sys
from ._log import get_logger
from ._payload import OobReceiver, WireError
from .envs import CARDCAGE_SHM_BUSY_US, CARDCAGE_SHM_WARNING_INTERVAL
from .errors import (
    AttachError,
    CancelledError,
    QueueClosedError,
    QueueTimeoutError,
    ReaderDiedError,
    ShmBroadcastError,
    ShmSpaceError,
    WriterDiedError,
)

__all__ = ["SHM_DIR", "SHM_PREFIX", "ShmRingBuffer", "sweep_stale"]

logger = get_logger(__name__)

SHM_DIR: Final = "/dev/shm"
SHM_PREFIX: Final = "cardcage-shm-"

_MAGIC: Final = 0x6361726463616765  # b"cardcage" as a big-endian u64
_VERSION: Final = 4  # 2: streamed fragments; 3: data slot named in the descriptor; 4: collectives
_PAGE: Final = mmap.PAGESIZE
_LINE: Final = 64
_W: Final = 8  # words per line

# header words
_H_MAGIC, _H_VERSION, _H_EPOCH, _H_NREADER, _H_NSLOTS, _H_SLOTBYTES = 0, 1, 2, 3, 4, 5
_H_CREATOR_PID, _H_CREATOR_START = 6, 7
_H_CLOSED, _H_READY, _H_CREATOR_PIDNS = 8, 9, 10
_H_WRITER_PARKED = 16
# reader line words
_R_SEQ, _R_PARKED, _R_PID, _R_START, _R_STATE, _R_PIDNS = 0, 1, 2, 3, 4, 5
_UNATTACHED, _ATTACHED, _DETACHED = 0, 1, 2
# slot descriptor words
_S_SEQ, _S_INFO, _S_TOTAL = 0, 1, 2  # total: whole message length, FIRST fragments only
_S_PSEQ, _S_PBYTES = 3, 4  # a streamed fragment: its number, and how many bytes are in so far
_S_DSLOT = 5  # the data slot holding the fragment's bytes
# collective region (see _collective): the writer's two lines, then acks, then reader lines
_C_DSEQ, _C_DINFO, _C_DTAG, _C_DTOTAL, _C_WPARKED, _C_WTAG = 0, 1, 2, 3, 4, 5
_C_ABORT, _C_ABORT_CODE, _C_ABORT_RANK, _C_ABORT_PID, _C_ABORT_TAG = 8, 9, 10, 11, 12
_C_UACK = 16  # + reader rank
_CR_USEQ, _CR_UINFO, _CR_UTAG, _CR_UTOTAL, _CR_DACK, _CR_PARKED = 0, 1, 2, 3, 4, 5
#: Largest piece of a collective's payload that moves through shared memory at once; larger
#: contributions and results go in several pieces, each acknowledged.
_COLL_MAX: Final = 64 << 10
_FLAG_SHIFT: Final = 56
NBYTES_MASK: Final = (1 << _FLAG_SHIFT) - 1

# fragment flags
FIRST: Final = 1
LAST: Final = 2
PICKLED: Final = 4
USER: Final = 8  # published through acquire_write: the whole slot is the payload
OOB: Final = 16  # a pickle with out-of-band buffers (see _payload); always with PICKLED
ABORTED: Final = 32  # a streamed fragment the writer gave up on: no data; drop its message

#: Raw fragments at least this large are streamed: published piece by piece while the writer
#: copies them in, so a reader copies piece i out while piece i+1 goes in. 128 KiB pieces
#: measured best for 1 and 16 MiB messages (64 KiB and 256 KiB were no better; benchmarks/).
_STREAM_MIN: Final = 256 << 10
_PIECE: Final = 128 << 10
#: A fragment at least this large makes the writer look whether the ring is empty, so that it
#: can go back to data slot 0 (see RingWriter.place); below it the cached view decides.
_HOT_MIN: Final = 64 << 10
_WHOLE: Final = -2  # RingReader.wait: only a fully published fragment will do
_STARTED: Final = -1  # RingReader.wait: a fragment whose streaming has started will do
_ABANDONED: Final = object()  # RingReader: the message being read was aborted by the writer
_PENDING: Final = object()  # RingReader: the fragment is consumed, its message not complete yet
_SPIN_S: Final = 20e-6  # tight polling before yielding (skipped when oversubscribed)
_PARK_S: Final = 0.1  # longest single futex sleep: bounds any lost wake-up
_LIVENESS_S: Final = 0.1  # how often a parked waiter checks its peer's pid

_WEAK: Final = _sys.WEAKLY_ORDERED
_fence_acquire = _sys.fence_lock.acquire  # inline full fence: acquire()+release()
_fence_release = _sys.fence_lock.release


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class _Layout:
    """Word offsets of one ring geometry."""

    __slots__ = (
        "coll",
        "coll_bytes",
        "coll_data",
        "coll_readers",
        "data",
        "desc",
        "n_reader",
        "n_slots",
        "readers",
        "slot_bytes",
        "stride",
        "total",
    )

    def __init__(self, n_reader: int, slot_bytes: int, n_slots: int) -> None:
        self.n_reader = n_reader
        self.slot_bytes = slot_bytes
        self.n_slots = n_slots
        self.stride = _align(max(slot_bytes, 1), _LINE)
        readers = _PAGE
        desc = _align(readers + _LINE * n_reader, _PAGE)
        data = _align(desc + _LINE * n_slots, _PAGE)
        self.readers = readers // 8  # word index of reader 0's line
        self.desc = desc // 8  # word index of slot 0's descriptor
        self.data = data  # byte offset of slot 0's data
        coll = _align(data + self.stride * n_slots, _PAGE)
        coll_readers = coll + _C_UACK * 8 + _align(8 * n_reader, _LINE)
        coll_data = coll_readers + _LINE * n_reader
        self.coll = coll // 8  # word index of the collectives' first line
        self.coll_readers = coll_readers // 8  # word index of reader 0's collective line
        self.coll_bytes = min(self.stride, _COLL_MAX)
        self.coll_data = coll_data  # byte offset of the down slot; up slot r follows at r + 1
        self.total = coll_data + self.coll_bytes * (n_reader + 1)

    def reader(self, rank: int) -> int:
        return self.readers + rank * _W

    def slot_desc(self, slot: int) -> int:
        return self.desc + slot * _W

    def slot_data(self, slot: int) -> int:
        return self.data + slot * self.stride


def _free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class _Mapping:
    """The mmap of a segment plus the views exported from it; released in one place."""

    def __init__(self, fd: int, size: int, path: str, creator_pid: int) -> None:
        self.mm: mmap.mmap | None = mmap.mmap(fd, size, mmap.MAP_SHARED)
        self.u: memoryview = memoryview(self.mm).cast("Q")
        self.raw: memoryview = memoryview(self.mm)
        self._anchor: ctypes.c_char | None = ctypes.c_char.from_buffer(self.mm)
        self.base = ctypes.addressof(self._anchor)
        self.path = path
        self.creator_pid = creator_pid
        self.unlinked = False

    def unlink(self) -> None:
        """Remove the name (idempotent); only ever called by the creator or a survivor."""
        if not self.unlinked:
            self.unlinked = True
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def release(self) -> None:
        """Drop the views and unmap; the creator process also unlinks. Safe to call twice."""
        if os.getpid() == self.creator_pid:
            self.unlink()
        if self.mm is None:
            return
        self.u.release()
        self.raw.release()
        self._anchor = None
        try:
            self.mm.close()
        except BufferError:
            # A caller still holds a view (e.g. from acquire_read); the OS unmaps at exit.
            logger.debug("segment %s still has exported views; left mapped", self.path)
        self.mm = None


class ShmRingBuffer:
    """``max_chunks`` slots of ``max_chunk_bytes`` each, for one writer and ``n_reader`` readers.

    ``name=None`` creates a fresh segment (this process becomes its creator and the writer);
    a name attaches to an existing one, which must have the same geometry. Pickling a ring
    re-attaches by name on the other side.
    """

    def __init__(
        self,
        n_reader: int,
        max_chunk_bytes: int,
        max_chunks: int,
        name: str | None = None,
        *,
        _epoch: int | None = None,
    ) -> None:
        if n_reader < 0 or max_chunk_bytes <= 0 or max_chunks <= 0:
            raise ValueError(
                "n_reader must be >= 0, max_chunk_bytes and max_chunks > 0; got "
                f"{n_reader}, {max_chunk_bytes}, {max_chunks}"
            )
        self.n_reader = n_reader
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        self.layout = _Layout(n_reader, max_chunk_bytes, max_chunks)
        self.total_bytes_of_buffer = self.layout.total
        if name is None:
            self.is_creator = True
            self._map = self._create()
            self.name = os.path.basename(self._map.path)
        else:
            self.is_creator = False
            self.name = name
            self._map = self._attach(name, _epoch)
        self._finalizer = weakref.finalize(self, self._map.release)

    # -- lifecycle -------------------------------------------------------------------------------

    def _create(self) -> _Mapping:
        size = self.layout.total
        free = _free_bytes(SHM_DIR)
        if size > free:
            raise ShmSpaceError(SHM_DIR, size, free)
        pid = os.getpid()
        path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{pid}-{secrets.token_hex(8)}")
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, size)
            try:
                # Reserve every page now: ENOSPC here instead of SIGBUS on first touch later.
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                raise ShmSpaceError(SHM_DIR, size, _free_bytes(SHM_DIR)) from exc
            m = _Mapping(fd, size, path, pid)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        finally:
            os.close(fd)
        u = m.u
        u[_H_VERSION] = _VERSION
        u[_H_EPOCH] = secrets.randbits(63)
        u[_H_NREADER] = self.n_reader
        u[_H_NSLOTS] = self.max_chunks
        u[_H_SLOTBYTES] = self.max_chunk_bytes
        u[_H_CREATOR_PID] = pid
        u[_H_CREATOR_START] = _sys.process_start_time(pid)
        u[_H_CREATOR_PIDNS] = _sys.pid_namespace()
        u[_H_MAGIC] = _MAGIC
        return m

    def _attach(self, name: str, epoch: int | None) -> _Mapping:
        if "/" in name or not name:
            raise AttachError(name, "not a segment name")
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise AttachError(
                name,
                f"{path} does not exist: the writer is gone, already unlinked it after "
                "wait_until_ready(), or runs on another node",
            ) from None
        except OSError as exc:
            raise AttachError(
                name, f"cannot open {path} ({exc.strerror}): is it another user's segment?"
            ) from exc
        try:
            size = os.fstat(fd).st_size
            if size < self.layout.total:
                raise AttachError(name, f"segment has {size} bytes, expected {self.layout.total}")
            m = _Mapping(fd, self.layout.total, path, creator_pid=-1)
        finally:
            os.close(fd)
        u = m.u
        expected = (_MAGIC, _VERSION, self.n_reader, self.max_chunks, self.max_chunk_bytes)
        found = (u[_H_MAGIC], u[_H_VERSION], u[_H_NREADER], u[_H_NSLOTS], u[_H_SLOTBYTES])
        if found != expected:
            m.release()
            raise AttachError(name, f"layout mismatch: expected {expected}, found {found}")
        if epoch is not None and u[_H_EPOCH] != epoch:
            m.release()
            raise AttachError(name, "epoch mismatch: the segment was recreated under this name")
        return m

    @property
    def epoch(self) -> int:
        return int(self._map.u[_H_EPOCH])

    @property
    def creator_pid(self) -> int:
        return int(self._map.u[_H_CREATOR_PID])

    def unlink(self) -> None:
        """Remove the segment's name now; attached processes keep their mappings."""
        self._map.unlink()

    def close(self) -> None:
        """Unmap (and, in the creating process, unlink). Idempotent."""
        self._finalizer()

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.n_reader, self.max_chunk_bytes, self.max_chunks, self.name))

    @contextlib.contextmanager
    def get_data(self, current_idx: int) -> Iterator[memoryview]:
        """A view of slot ``current_idx``'s data (seed API); released on exit."""
        start = self.layout.slot_data(current_idx)
        with self._map.raw[start : start + self.max_chunk_bytes] as buf:
            yield buf

    def __repr__(self) -> str:
        return (
            f"ShmRingBuffer(n_reader={self.n_reader}, max_chunk_bytes={self.max_chunk_bytes}, "
            f"max_chunks={self.max_chunks}, name={self.name!r})"
        )


def _wait_params(n_participants: int) -> tuple[float, float]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        cpus = os.cpu_count() or 1
    spin = _SPIN_S if n_participants <= cpus else 0.0
    return spin, CARDCAGE_SHM_BUSY_US.get() / 1e6


class _Endpoint:
    """State shared by the writer and reader ends: views, wait tuning, cancellation."""

    def __init__(self, ring: ShmRingBuffer) -> None:
        self.ring = ring
        self.lay = ring.layout
        self.u = ring._map.u
        self.raw = ring._map.raw
        self.base = ring._map.base
        self.n_slots = ring.max_chunks
        self.slot_bytes = ring.max_chunk_bytes
        self.spin_s, self.busy_s = _wait_params(ring.n_reader + 1)
        self.warn_s = CARDCAGE_SHM_WARNING_INTERVAL.get()
        self.cancelled = False
        self.park_addr = 0
        self.seq = 0  # last fragment written (writer) / read (reader)
        self.data_offs = [self.lay.slot_data(i) for i in range(self.n_slots)]
        self.desc_words = [self.lay.slot_desc(i) for i in range(self.n_slots)]

    def cancel(self) -> None:
        self.cancelled = True
        if self.park_addr:
            _sys.futex_wake(self.park_addr)

    def _deadline(self, timeout: float | None) -> float | None:
        return None if timeout is None else time.monotonic() + max(timeout, 0.0)


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


class RingWriter(_Endpoint):
    """The writing end: reserve a slot, fill it, publish it."""

    def __init__(self, ring: ShmRingBuffer, group_ranks: list[int] | None = None) -> None:
        super().__init__(ring)
        #: how errors and warnings name local reader r (its rank in the caller's group)
        self.group_ranks = group_ranks or list(range(ring.n_reader))
        self.min_read = 0  # cached lower bound of every attached reader's read_seq
        self.cursor = 0  # the data slot the next fragment takes unless the ring is empty
        self.reader_lines = [self.lay.reader(r) for r in range(ring.n_reader)]
        self.pidns = _sys.pid_namespace()
        self.parked_words = [line + _R_PARKED for line in self.reader_lines]
        self.excluded: set[int] = set()  # local readers that read over ZeroMQ instead

    # -- readiness -------------------------------------------------------------------------------

    def unattached_ranks(self) -> list[int]:
        u = self.u
        return [r for r, line in enumerate(self.reader_lines) if u[line + _R_STATE] == _UNATTACHED]

    def mark_ready(self) -> None:
        self.u[_H_READY] = 1

    def exclude(self, rank: int) -> None:
        """Stop waiting for local reader ``rank``, which never attached (it reads remotely).

        The reader line's only writer is its reader; one that never attached never writes it,
        so the writer may mark it detached without a race.
        """
        self.excluded.add(rank)
        self.u[self.reader_lines[rank] + _R_STATE] = _DETACHED

    # -- flow control ----------------------------------------------------------------------------

    def _scan(self) -> tuple[int, int]:
        """(min read_seq over readers that have not detached, the rank holding it or -1)."""
        u = self.u
        low, who = 1 << 62, -1
        for r, line in enumerate(self.reader_lines):
            if u[line + _R_STATE] == _DETACHED:
                continue
            s = u[line + _R_SEQ]
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
        next_check = start + _LIVENESS_S
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
                next_check = now + _LIVENESS_S
            if now >= next_warn:
                logger.warning(
                    "shm broadcast writer (pid %d) has waited %.0f s for a free slot; lagging "
                    "reader(s): %s",
                    os.getpid(),
                    now - start,
                    self._lagging(need),
                )
                next_warn = now + self.warn_s
            word = self.reader_lines[who] + _R_SEQ
            addr = self.base + word * 8
            u[_H_WRITER_PARKED] = 1
            _sys.fence()
            observed = u[word]
            if observed < need and not self.cancelled:
                self.park_addr = addr
                wait = _PARK_S if deadline is None else min(_PARK_S, deadline - now)
                _sys.futex_wait(addr, observed, wait)
                self.park_addr = 0
            u[_H_WRITER_PARKED] = 0

    def _lagging(self, need: int) -> str:
        u = self.u
        parts = []
        for r, line in enumerate(self.reader_lines):
            if u[line + _R_STATE] != _DETACHED and u[line + _R_SEQ] < need:
                state = "not attached" if u[line + _R_STATE] == _UNATTACHED else "attached"
                parts.append(
                    f"rank {self.group_ranks[r]} (pid {u[line + _R_PID]}, {state}, "
                    f"{self.seq - u[line + _R_SEQ]} unread)"
                )
        return ", ".join(parts) or "none"

    def _check_readers(self, need: int) -> None:
        u = self.u
        for r, line in enumerate(self.reader_lines):
            if u[line + _R_STATE] != _ATTACHED or u[line + _R_SEQ] >= need:
                continue
            if u[line + _R_PIDNS] != self.pidns:
                continue  # another pid namespace: its pid means nothing here; rely on timeouts
            pid = int(u[line + _R_PID])
            if not _sys.pid_alive(pid, int(u[line + _R_START])):
                raise ReaderDiedError(self.group_ranks[r], pid, self.seq - int(u[line + _R_SEQ]))

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
        u[d + _S_DSLOT] = slot
        u[d + _S_INFO] = nbytes | (flags << _FLAG_SHIFT)
        self._taken(slot)
        self._publish_seq(d, k)

    def _publish_seq(self, d: int, k: int) -> None:
        """Store ``seq = k`` in descriptor word ``d`` (every other word of ``k`` is stored) and
        wake parked readers; :meth:`send` inlines the same steps for small messages."""
        u = self.u
        if _WEAK:
            _sys.fence()
        u[d] = k
        self.seq = k
        _fence_acquire()  # full fence: the parked-flag loads must not pass the seq store
        _fence_release()
        for w in self.parked_words:
            if u[w]:
                _sys.futex_wake(self.base + d * 8)
                break

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
        piece = _PIECE
        pos = 0
        end = n - piece
        try:
            while pos < end:
                nxt = pos + piece
                raw[off + pos : off + nxt] = src[pos:nxt]
                if _WEAK:
                    _sys.fence()
                u[d + _S_PBYTES] = pos = nxt
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
        u[d + _S_DSLOT] = slot
        u[d + _S_INFO] = n | (flags << _FLAG_SHIFT)
        u[d + _S_PBYTES] = 0
        self._taken(slot)  # k is used up from here: published whole or as ABORTED
        if _WEAK:
            _sys.fence()
        u[d + _S_PSEQ] = k
        _fence_acquire()
        _fence_release()
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
        self.u[d + _S_INFO] = ABORTED << _FLAG_SHIFT
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
        piece = _PIECE
        pos = 0
        end = n - piece
        try:
            while pos < end:
                src.copy_to(self.raw, off + pos, piece)
                pos += piece
                if _WEAK:
                    _sys.fence()
                u[d + _S_PBYTES] = pos
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
        if n >= _STREAM_MIN and not flags & PICKLED:
            self.stream(slot, memoryview(data), flags | FIRST | LAST)
            return
        off = self.data_offs[slot]
        self.raw[off : off + n] = data
        u = self.u
        d = self.desc_words[(k - 1) % self.n_slots]
        u[d + _S_DSLOT] = slot
        u[d + 1] = n | ((flags | 3) << 56)  # 3 == FIRST | LAST
        self.cursor = slot + 1 if slot + 1 < self.n_slots else 0  # _taken(), inlined
        if _WEAK:
            _sys.fence()
        u[d] = k
        self.seq = k
        _fence_acquire()
        _fence_release()
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
                self.u[self.desc_words[(k - 1) % n_slots] + _S_TOTAL] = total
            if n >= _STREAM_MIN and not flags & PICKLED:
                self.stream(slot, payload[pos : pos + n], flags | first | last)
                pos += n
            else:
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
        at least ``_STREAM_MIN`` bytes is streamed (readers rebuild the buffers while the copy is
        still running; see :class:`~cardcage.shm._payload.OobReceiver`).
        """
        raw = self.raw
        if total <= self.slot_bytes and total < _STREAM_MIN:
            k = self.seq + 1
            if k - self.n_slots > self.min_read:
                self.reserve(k, self._deadline(timeout), timeout)
            slot = self.place(k, total)
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
                self.u[self.desc_words[(k - 1) % self.n_slots] + _S_TOTAL] = total
            if n >= _STREAM_MIN:
                self.stream_parts(slot, src, n, flags | first | last)
            else:
                src.copy_to(raw, self.data_offs[slot], n)
                self.publish(slot, n, flags | first | last)
            if last:
                return
            first = 0

    def close(self) -> None:
        """Publish the closed flag after every message and wake parked readers (also those
        waiting in a collective)."""
        u = self.u
        u[_H_CLOSED] = 1
        _sys.fence()
        k = self.seq + 1
        _sys.futex_wake(self.base + (self.lay.desc + ((k - 1) % self.n_slots) * _W) * 8)
        coll = self.lay.coll
        for r in range(self.ring.n_reader):
            if u[self.lay.coll_readers + r * _W + _CR_PARKED]:
                _sys.futex_wake(self.base + (coll + _C_DSEQ) * 8)
                _sys.futex_wake(self.base + (coll + _C_UACK + r) * 8)


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


class RingReader(_Endpoint):
    """The reading end of local reader ``rank``."""

    def __init__(self, ring: ShmRingBuffer, rank: int) -> None:
        super().__init__(ring)
        if not 0 <= rank < ring.n_reader:
            raise AttachError(ring.name, f"local reader rank {rank} not in [0, {ring.n_reader})")
        self.rank = rank
        self.line = self.lay.reader(rank)
        u = self.u
        state = u[self.line + _R_STATE]
        if state != _UNATTACHED:
            pid = int(u[self.line + _R_PID])
            raise AttachError(ring.name, f"local reader {rank} is already taken by pid {pid}")
        pid = os.getpid()
        u[self.line + _R_PID] = pid
        u[self.line + _R_START] = _sys.process_start_time(pid)
        u[self.line + _R_PIDNS] = _sys.pid_namespace()
        self.seq = int(u[self.line + _R_SEQ])
        _sys.fence()
        u[self.line + _R_STATE] = _ATTACHED
        self.writer_pid = int(u[_H_CREATOR_PID])
        self.writer_start = int(u[_H_CREATOR_START])
        # Judge the writer's liveness by pid only inside the same pid namespace.
        self.check_writer = u[_H_CREATOR_PIDNS] == _sys.pid_namespace()
        # A message arriving in several fragments goes straight into the objects it will be
        # delivered as (a raw one into its ``bytes``, an out-of-band pickle into its buffers).
        self.partial_sink: _RawSink | OobReceiver | None = None
        # Otherwise it is assembled first: raw ones (where uninitialised ``bytes`` are not
        # available) in a BytesIO, whose getvalue() hands over its buffer without a copy;
        # in-band pickles in a scratch buffer reused across messages, so large pickles do not
        # pay fresh-allocation page faults on every receive.
        self.partial: io.BytesIO | memoryview | None = None
        self.stream = _sys.NEW_BYTES  # whether fragments may be copied out while streaming
        self.partial_pos = 0  # where the current fragment starts in the message
        self.scratch = bytearray()
        self.delivered = 0

    def detach(self) -> None:
        """Tell the writer to stop waiting for this reader."""
        self.u[self.line + _R_STATE] = _DETACHED
        _sys.fence()
        if self.u[_H_WRITER_PARKED]:
            _sys.futex_wake(self.base + (self.line + _R_SEQ) * 8)

    def wait_ready(self, deadline: float | None, timeout: float | None) -> None:
        u = self.u
        delay = 50e-6
        while not u[_H_READY]:
            if self.cancelled:
                raise CancelledError
            if self.check_writer and not _sys.pid_alive(self.writer_pid, self.writer_start):
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
        is not ``_WHOLE``, once it is being streamed with more than ``have`` bytes in."""
        u = self.u
        p = d + _S_PSEQ
        streaming = have != _WHOLE
        start = time.monotonic()
        spin_end, busy_end = start + self.spin_s, start + self.busy_s
        if deadline is not None and deadline < spin_end:
            spin_end = deadline  # timeout=0 stays a poll
        next_check = start + _LIVENESS_S
        next_warn = start + self.warn_s if self.warn_s > 0 else float("inf")
        parked = self.line + _R_PARKED
        addr = self.base + d * 8
        while True:
            if u[d] == k:
                return
            if streaming and u[p] == k:
                if _WEAK:
                    _sys.fence()
                if u[p + 1] > have:
                    return
            if self.cancelled:
                raise CancelledError
            now = time.monotonic()
            if now < spin_end:
                continue
            if u[_H_CLOSED]:
                if _WEAK:
                    _sys.fence()
                if u[d] == k:
                    return
                self.partial = self.partial_sink = None
                raise QueueClosedError
            if deadline is not None and now >= deadline:
                raise QueueTimeoutError("dequeue (waiting for a message)", timeout or 0.0)
            if now < busy_end:
                os.sched_yield()
                continue
            if now >= next_check:
                if self.check_writer and not _sys.pid_alive(self.writer_pid, self.writer_start):
                    if _WEAK:
                        _sys.fence()
                    if u[d] == k:
                        return
                    self.partial = self.partial_sink = None
                    self.ring.unlink()  # survivor cleanup: nobody else will remove the name
                    raise WriterDiedError(self.writer_pid, self.delivered)
                next_check = now + _LIVENESS_S
            if now >= next_warn:
                logger.warning(
                    "shm broadcast reader %d (pid %d) has waited %.0f s for message %d from "
                    "writer pid %d",
                    self.rank,
                    os.getpid(),
                    now - start,
                    k,
                    self.writer_pid,
                )
                next_warn = now + self.warn_s
            u[parked] = 1
            _sys.fence()
            observed = u[d]
            if (
                observed != k
                and not (streaming and u[p] == k and u[p + 1] > have)
                and not self.cancelled
                and not u[_H_CLOSED]
            ):
                self.park_addr = addr
                wait = _PARK_S if deadline is None else min(_PARK_S, deadline - now)
                _sys.futex_wait(addr, observed, wait)
                self.park_addr = 0
            u[parked] = 0

    def published_info(self, d: int) -> int:
        """Descriptor ``d``'s info word, for a message whose sequence word this reader has seen.

        The fence orders the info and payload loads after that sequence load on weakly ordered
        CPUs, the reader's half of the publication argument in the module docstring. ``read()``
        inlines the same two steps on its hot path; every other reader path calls this.
        """
        if _WEAK:
            _sys.fence()
        return self.u[d + 1]

    def release(self, k: int) -> None:
        """Mark fragment ``k`` consumed: its slot may be overwritten."""
        u = self.u
        if _WEAK:
            _sys.fence()
        u[self.line] = k
        self.seq = k
        _fence_acquire()
        _fence_release()
        if u[_H_WRITER_PARKED]:
            _sys.futex_wake(self.base + self.line * 8)

    def read(self, timeout: float | None) -> Any:
        """Receive one message: ``bytes`` for raw payloads, the unpickled object otherwise."""
        u = self.u
        k = self.seq + 1
        d = self.desc_words[(k - 1) % self.n_slots]
        if u[d] != k and (not self.stream or u[d + _S_PSEQ] != k):
            self.wait(k, d, self._deadline(timeout), timeout, _STARTED if self.stream else _WHOLE)
        whole = u[d] == k  # loaded before info: if set, info is final; else it is streaming
        if _WEAK:
            _sys.fence()
        info = u[d + 1]
        # FIRST | LAST: the whole message
        if info >> 56 & 3 == 3 and self.partial is None and self.partial_sink is None:
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
            if _WEAK:
                _sys.fence()
            u[self.line] = k
            self.seq = k
            _fence_acquire()
            _fence_release()
            if u[_H_WRITER_PARKED]:
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
        """Read fragment ``k``, a whole message; one that is still streaming in is copied out
        piece by piece, straight into the object(s) it is delivered as.

        ``whole``: ``seq == k`` was loaded before ``info``. Returns ``_ABANDONED`` if the writer
        aborted the fragment.
        """
        flags = info >> _FLAG_SHIFT
        n = info & NBYTES_MASK
        if n > self.slot_bytes:  # checked before anything is allocated for it
            raise self._corrupt(k, f"claims {n} bytes in a {self.slot_bytes}-byte slot")
        try:
            sink = None if whole and not flags & OOB else self._sink(flags, n)
            if sink is not None:
                if not self._copy_streamed(k, d, off, sink.take, info, deadline, timeout):
                    return _ABANDONED
                return sink.result()
        except WireError as exc:
            raise self._corrupt(k, str(exc)) from None
        if not whole:  # an in-band pickle: wait for the whole fragment
            self.wait(k, d, deadline, timeout)
            if _WEAK:
                _sys.fence()
            info = self.u[d + _S_INFO]
            flags = info >> _FLAG_SHIFT
            if flags & ABORTED:
                return _ABANDONED
        n = info & NBYTES_MASK
        if flags & PICKLED:
            with self.raw[off : off + n] as view:
                return pickle.loads(view)
        return self.raw[off : off + n].tobytes()

    def _sink(self, flags: int, total: int) -> _RawSink | OobReceiver | None:
        """Where a ``total``-byte message's bytes can go as they arrive (``None``: it is read
        from whole fragments and decoded at the end)."""
        if flags & OOB:
            return OobReceiver(total, self.raw, self.base)
        if flags & PICKLED:
            return None
        made = _sys.new_bytes(total)
        return None if made is None else _RawSink(made[0], made[1], self.base, total)

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
        b = d + _S_PBYTES
        while True:
            if u[d] == k:
                if _WEAK:
                    _sys.fence()
                if u[d + _S_INFO] != info:  # published as ABORTED instead
                    return False
                if n > have:
                    take(off + have, n - have)
                return True
            avail = min(u[b], n)
            if _WEAK:
                _sys.fence()
            if avail > have:
                take(off + have, avail - have)
                have = avail
            else:
                self.wait(k, d, deadline, timeout, have)

    def data_off(self, k: int, d: int) -> int:
        """Where the bytes of fragment ``k`` (descriptor word ``d``, loaded after its ``seq`` or
        ``pseq``) start in the segment."""
        slot = self.u[d + _S_DSLOT]
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
        sink: _RawSink | OobReceiver,
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
        last = info >> _FLAG_SHIFT & LAST
        if pos + n > sink.total or (last and pos + n != sink.total):
            self.partial_sink = None
            raise self._corrupt(k, f"does not fit its {sink.total}-byte message")
        try:
            # after a timed-out wait, the first ``sink.fed - pos`` bytes are already passed
            done = self._copy_streamed(
                k, d, off, sink.take, info, deadline, timeout, sink.fed - pos
            )
            self.release(k)
            if not done:
                self.partial_sink = None
                return _PENDING
            self.partial_pos = pos + n
            if not last:
                return _PENDING
            self.partial_sink = None
            return sink.result()
        except WireError as exc:
            self.partial_sink = None
            raise self._corrupt(k, str(exc)) from None

    def _read_fragments(self, timeout: float | None) -> Any:
        deadline = self._deadline(timeout)
        u = self.u
        stream = self.stream
        while True:
            k = self.seq + 1
            d = self.desc_words[(k - 1) % self.n_slots]
            if u[d] != k and (not stream or u[d + _S_PSEQ] != k):
                self.wait(k, d, deadline, timeout, _STARTED if stream else _WHOLE)
            whole = u[d] == k  # loaded before info: if set, info is final; else it is streaming
            if _WEAK:
                _sys.fence()
            info = u[d + _S_INFO]
            n = info & NBYTES_MASK
            flags = info >> _FLAG_SHIFT
            off = self.data_off(k, d)
            if flags & ABORTED:  # the writer gave up on this message in the middle
                self.partial = self.partial_sink = None
                self.release(k)
                continue
            if flags & FIRST:
                # a new message: any half-received one was abandoned
                self.partial = self.partial_sink = None
                if flags & LAST:
                    obj = self._stream_out(k, d, off, info, whole, deadline, timeout)
                    self.release(k)
                    if obj is _ABANDONED:
                        continue
                    self.delivered += 1
                    return obj
                self.partial_pos = 0
                total = int(u[d + _S_TOTAL])
                try:
                    self.partial_sink = self._sink(flags, total)
                except WireError as exc:
                    raise self._corrupt(k, str(exc)) from None
                if self.partial_sink is None:
                    if flags & PICKLED:
                        if len(self.scratch) < total:
                            self.scratch = bytearray(total)
                        self.partial = memoryview(self.scratch)[:total]
                    else:
                        self.partial = io.BytesIO()
            elif self.partial is None and self.partial_sink is None:
                # A continuation of a message this reader never saw the start of.
                self.release(k)
                continue
            sink = self.partial_sink
            if sink is not None:
                obj = self._next_fragment(sink, k, d, off, info, deadline, timeout)
                if obj is _PENDING:
                    continue
                self.delivered += 1
                return obj
            if not whole:  # an in-band pickle is copied from whole fragments only
                self.wait(k, d, deadline, timeout)
                if _WEAK:
                    _sys.fence()
                if u[d + _S_INFO] != info:  # aborted
                    self.partial = None
                    self.release(k)
                    continue
            partial = self.partial
            if isinstance(partial, io.BytesIO):
                partial.write(self.raw[off : off + n])
            elif partial is not None:
                pos = self.partial_pos
                partial[pos : pos + n] = self.raw[off : off + n]
                self.partial_pos = pos + n
            self.release(k)
            if flags & LAST:
                self.partial = None
                self.delivered += 1
                if isinstance(partial, io.BytesIO):
                    return partial.getvalue()
                assert partial is not None
                with partial:
                    return pickle.loads(partial)


def sweep_stale(directory: str = SHM_DIR) -> list[str]:
    """Unlink segments whose creating process is gone (e.g. a writer SIGKILLed before readiness).

    Returns the removed paths. Only names with our prefix are considered; a segment whose
    creator still runs, is still being initialised, or lives in another pid namespace (another
    container sharing ``/dev/shm``) is never touched.
    """
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    own_ns = _sys.pid_namespace()
    for name in names:
        if not name.startswith(SHM_PREFIX):
            continue
        try:
            pid = int(name[len(SHM_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                header = f.read(_LINE * 2)
        except OSError:
            continue
        if len(header) < _LINE * 2:
            continue
        words = memoryview(header).cast("Q")
        if words[_H_MAGIC] != _MAGIC or words[_H_CREATOR_PIDNS] != own_ns:
            continue
        if not _sys.pid_alive(pid, int(words[_H_CREATOR_START])):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            removed.append(path)
    return removed
