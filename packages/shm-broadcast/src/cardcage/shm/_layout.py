"""The ring's shared vocabulary: where every word lives, what the flags mean, and the fences.

The ring is four modules, one concept each (docs/shm-broadcast.md, "Parts of the ring"):
this one (offsets, flags, the memory-ordering protocol and its fences), ``_segment`` (creating,
attaching, unlinking and sweeping the shared-memory file), ``_writer`` and ``_reader`` (the two
ends of the protocol below). Every sequence word a reader acts on is loaded through
:func:`load_acquire`, the one place that fences a reader's loads.

Import-safe: stdlib only; no torch, no zmq, no I/O. Must never hold state: everything here is a
constant or a pure function of a ring's geometry.

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
non-streamed 1 MiB message about twice as slow (``_writer.RingWriter.place`` has the safety
argument).

Streaming. A fragment of at least ``STREAM_MIN`` bytes of a raw (unpickled) message or of an
out-of-band pickle is also published piece by piece so that readers copy it out while it is still
being copied in (two copies overlap instead of running back to back). Before copying, the writer
stores the data slot and ``info``, then ``pbytes = 0``, then ``pseq = k``; after each ``PIECE``
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
CPUs (aarch64, ppc64le, riscv) both orderings need barriers: we call :func:`fence` (an
uncontended ``threading.Lock`` acquire+release, i.e. acquire/release exclusive accesses, which
glibc implements with full-barrier atomics) between the descriptor stores and the ``seq`` store,
after the reader's ``seq`` load (:func:`load_acquire`), and before its ``read_seq`` store;
streaming adds the same pairs: a fence before ``pseq = k`` and before every ``pbytes`` and
``seq`` store on the writer's side, and after the reader's loads of ``pseq`` and of
``pbytes``/``seq`` before it copies. That
is the same class of fence vLLM settled on (vllm#30407); it is not a formal C11 ``seq_cst``
fence, so the aarch64 stress test is the proof we require before claiming support there.

Parking needs a third, store-then-load, ordering that even x86 does not give: a waiter stores
its ``parked`` flag and then (inside ``futex_wait``, which the kernel orders with a full barrier)
loads the word it waits on; the waker stores that word and then loads ``parked``. Without a
barrier between the waker's store and load, both could miss each other (a lost wake-up). The
waker therefore calls :func:`fence` (a locked RMW on x86: a full barrier) between the
two. As defence in depth every park is bounded (``PARK_S``), so even a lost wake costs at most
one park interval, never liveness. A streamed fragment wakes parked readers twice: at
``pseq = k`` (best effort: the futex word ``seq`` has not changed yet, so a reader that was
about to sleep can miss it) and at ``seq = k`` (the ordinary, never-lost wake-up); a missed
first wake only costs the overlap, since the reader then copies the whole fragment at once.
A small fragment is woken for the same way when the queue's processes fit the CPUs: once
before its copy (best effort, so the reader's wake-up overlaps the copy) and once at
``seq = k``. A reader that a wake (not a timeout) returned from the futex spins and yields for
its busy window again before it parks, so the early wake is not wasted on a second park.
"""

from __future__ import annotations

import mmap
import operator
from collections.abc import Callable
from typing import Final

from . import _sys

MAGIC: Final = 0x6361726463616765  # b"cardcage" as a big-endian u64
VERSION: Final = 4  # 2: streamed fragments; 3: data slot named in the descriptor; 4: collectives
PAGE: Final = mmap.PAGESIZE
LINE: Final = 64
W: Final = 8  # words per line

# header words
H_MAGIC, H_VERSION, H_EPOCH, H_NREADER, H_NSLOTS, H_SLOTBYTES = 0, 1, 2, 3, 4, 5
H_CREATOR_PID, H_CREATOR_START = 6, 7
H_CLOSED, H_READY, H_CREATOR_PIDNS = 8, 9, 10
H_WRITER_PARKED = 16
# reader line words
R_SEQ, R_PARKED, R_PID, R_START, R_STATE, R_PIDNS = 0, 1, 2, 3, 4, 5
UNATTACHED, ATTACHED, DETACHED = 0, 1, 2
# slot descriptor words
S_SEQ, S_INFO, S_TOTAL = 0, 1, 2  # total: whole message length, FIRST fragments only
S_PSEQ, S_PBYTES = 3, 4  # a streamed fragment: its number, and how many bytes are in so far
S_DSLOT = 5  # the data slot holding the fragment's bytes
# collective region (see _collective): the writer's two lines, then acks, then reader lines
C_DSEQ, C_DINFO, C_DTAG, C_DTOTAL, C_WPARKED, C_WTAG = 0, 1, 2, 3, 4, 5
C_ABORT, C_ABORT_CODE, C_ABORT_RANK, C_ABORT_PID, C_ABORT_TAG = 8, 9, 10, 11, 12
C_UACK = 16  # + reader rank
CR_USEQ, CR_UINFO, CR_UTAG, CR_UTOTAL, CR_DACK, CR_PARKED = 0, 1, 2, 3, 4, 5
#: Largest piece of a collective's payload that moves through shared memory at once; larger
#: contributions and results go in several pieces, each acknowledged.
COLL_MAX: Final = 64 << 10
FLAG_SHIFT: Final = 56
NBYTES_MASK: Final = (1 << FLAG_SHIFT) - 1

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
STREAM_MIN: Final = 256 << 10
PIECE: Final = 128 << 10
PARK_S: Final = 0.1  # longest single futex sleep: bounds any lost wake-up
LIVENESS_S: Final = 0.1  # how often a parked waiter checks its peer's pid

# -- fences ----------------------------------------------------------------------------------------

#: Whether loads and stores need the fences described above (not x86's TSO).
WEAK: Final = _sys.WEAKLY_ORDERED
#: A full fence on every ISA (a locked RMW on x86): the store-then-load ordering of parking.
fence = _sys.fence
#: The same full fence, for hot paths that inline it as ``fence_acquire(); fence_release()``
#: to save a Python call.
fence_acquire = _sys.fence_lock.acquire
fence_release = _sys.fence_lock.release


def _load_then_fence(u: memoryview, word: int) -> int:
    value: int = u[word]
    _sys.fence()
    return value


#: ``load_acquire(u, word)``: load ``u[word]``, a sequence word (``seq``, ``pseq``, ``pbytes``,
#: the closed flag, a collective's ``up_seq``/``down_seq``), so that every load the caller
#: makes afterwards (the descriptor, the payload bytes) is ordered after it: the reader's half
#: of the publication argument above. It is the one fenced read of the package: every read path
#: that acts on what a sequence word published goes through it (``RingReader``'s receive paths,
#: ``MessageQueue.acquire_read`` via ``RingReader.published``, the collectives). On x86 it is a
#: plain C-level load (``operator.getitem``: no Python frame on the hot path), on weakly
#: ordered CPUs the load then a fence.
load_acquire: Callable[[memoryview, int], int] = _load_then_fence if WEAK else operator.getitem


def align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class Layout:
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
        self.stride = align(max(slot_bytes, 1), LINE)
        readers = PAGE
        desc = align(readers + LINE * n_reader, PAGE)
        data = align(desc + LINE * n_slots, PAGE)
        self.readers = readers // 8  # word index of reader 0's line
        self.desc = desc // 8  # word index of slot 0's descriptor
        self.data = data  # byte offset of slot 0's data
        coll = align(data + self.stride * n_slots, PAGE)
        coll_readers = coll + C_UACK * 8 + align(8 * n_reader, LINE)
        coll_data = coll_readers + LINE * n_reader
        self.coll = coll // 8  # word index of the collectives' first line
        self.coll_readers = coll_readers // 8  # word index of reader 0's collective line
        self.coll_bytes = min(self.stride, COLL_MAX)
        self.coll_data = coll_data  # byte offset of the down slot; up slot r follows at r + 1
        self.total = coll_data + self.coll_bytes * (n_reader + 1)

    def reader(self, rank: int) -> int:
        return self.readers + rank * W

    def slot_desc(self, slot: int) -> int:
        return self.desc + slot * W

    def slot_data(self, slot: int) -> int:
        return self.data + slot * self.stride
