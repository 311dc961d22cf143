"""The ring's shared-memory file: create, attach, unlink, and sweep the ones left by the dead.

A segment is one POSIX shared-memory file ``/dev/shm/cardcage-shm-<creator pid>-<random>`` made
with mode 0600 (never through ``multiprocessing.shared_memory``, so CPython's
``resource_tracker`` is never involved: no "leaked shared_memory" warnings and no tracker
unlinking a segment another process still uses). Its header (``_layout``) records the creator's
pid, start time and pid namespace, which is how :func:`sweep_stale` tells a dead creator's
segment from a live one.

Also here: :class:`Endpoint`, what the writing and the reading end share (views of the mapping,
wait tuning, cancellation).

Must never: let a forked child unlink its parent's segment (only the process whose pid created
the segment ever unlinks it, plus readers that outlive a dead writer and the sweep of dead
creators), judge a pid of another pid namespace, or import torch or zmq.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import secrets
import time
import weakref
from collections.abc import Iterator
from typing import Any, Final

from cardcage.hooks.log import get_logger

from . import _sys
from ._layout import (
    H_CREATOR_PID,
    H_CREATOR_PIDNS,
    H_CREATOR_START,
    H_EPOCH,
    H_MAGIC,
    H_NREADER,
    H_NSLOTS,
    H_SLOTBYTES,
    H_VERSION,
    LINE,
    MAGIC,
    VERSION,
    Layout,
)
from .envs import CARDCAGE_SHM_BUSY_US, CARDCAGE_SHM_WARNING_INTERVAL
from .errors import AttachError, ShmSpaceError

__all__ = ["SHM_DIR", "SHM_PREFIX", "Endpoint", "ShmRingBuffer", "sweep_stale"]

logger = get_logger(__name__)

SHM_DIR: Final = "/dev/shm"
SHM_PREFIX: Final = "cardcage-shm-"

#: How many of our segments (other than this process's own) a new segment's creation examines
#: for dead creators. Each costs an open, a 128-byte read and one ``/proc/<pid>/stat`` read
#: (~10-20 µs), so the sweep adds well under a millisecond to a queue's creation however many
#: segments ``/dev/shm`` holds; leftovers beyond the cap go at later creations or by
#: :func:`sweep_stale`.
SWEEP_LIMIT: Final = 32
_SPIN_S: Final = 20e-6  # tight polling before yielding (skipped when oversubscribed)


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

    ``name=None`` creates a fresh segment (this process becomes its creator and the writer),
    after removing up to ``SWEEP_LIMIT`` segments whose creators died (:func:`sweep_stale`);
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
        self.layout = Layout(n_reader, max_chunk_bytes, max_chunks)
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
        # Before the free-space check: what dead creators left behind counts as free.
        removed = sweep_stale(limit=SWEEP_LIMIT)
        if removed:
            logger.info("removed %d segment(s) of dead creators: %s", len(removed), removed)
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
        u[H_VERSION] = VERSION
        u[H_EPOCH] = secrets.randbits(63)
        u[H_NREADER] = self.n_reader
        u[H_NSLOTS] = self.max_chunks
        u[H_SLOTBYTES] = self.max_chunk_bytes
        u[H_CREATOR_PID] = pid
        u[H_CREATOR_START] = _sys.process_start_time(pid)
        u[H_CREATOR_PIDNS] = _sys.pid_namespace()
        u[H_MAGIC] = MAGIC
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
        expected = (MAGIC, VERSION, self.n_reader, self.max_chunks, self.max_chunk_bytes)
        found = (u[H_MAGIC], u[H_VERSION], u[H_NREADER], u[H_NSLOTS], u[H_SLOTBYTES])
        if found != expected:
            m.release()
            raise AttachError(name, f"layout mismatch: expected {expected}, found {found}")
        if epoch is not None and u[H_EPOCH] != epoch:
            m.release()
            raise AttachError(name, "epoch mismatch: the segment was recreated under this name")
        return m

    @property
    def epoch(self) -> int:
        return int(self._map.u[H_EPOCH])

    @property
    def creator_pid(self) -> int:
        return int(self._map.u[H_CREATOR_PID])

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


def sweep_stale(directory: str = SHM_DIR, *, limit: int | None = None) -> list[str]:
    """Unlink segments whose creating process is gone (e.g. a writer SIGKILLed before readiness).

    Returns the removed paths. Only names with our prefix are considered; a segment whose
    creator still runs, is still being initialised, lives in another pid namespace (another
    container sharing ``/dev/shm``) or belongs to another user is never touched. ``limit`` caps
    how many segments are examined (this process's own are skipped without being counted);
    creating a ring calls it with ``SWEEP_LIMIT``, so a dead writer's segment is gone by the
    time the next queue on the node is created.
    """
    removed: list[str] = []
    own_pid = str(os.getpid())
    own_ns = _sys.pid_namespace()
    examined = 0
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return removed
    with entries:
        for entry in entries:
            name = entry.name
            if not name.startswith(SHM_PREFIX):
                continue
            pid_text = name[len(SHM_PREFIX) :].split("-", 1)[0]
            if pid_text == own_pid or not pid_text.isdigit():
                continue  # ours (alive by definition), or not a name we make
            if limit is not None and examined >= limit:
                break
            examined += 1
            if _creator_is_dead(entry.path, int(pid_text), own_ns):
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue  # someone else swept it first
                except OSError as exc:  # e.g. another user's segment in a sticky /dev/shm
                    logger.debug("cannot remove stale segment %s: %s", entry.path, exc)
                    continue
                removed.append(entry.path)
    return removed


def _creator_is_dead(path: str, pid: int, own_ns: int) -> bool:
    """Whether the segment at ``path`` (named after ``pid``) has a creator that is provably gone:
    a complete header, written in this pid namespace, naming a process that no longer runs."""
    try:
        with open(path, "rb") as f:
            header = f.read(LINE * 2)
    except OSError:
        return False
    if len(header) < LINE * 2:
        return False
    words = memoryview(header).cast("Q")
    if words[H_MAGIC] != MAGIC or words[H_CREATOR_PIDNS] != own_ns:
        return False
    return not _sys.pid_alive(pid, int(words[H_CREATOR_START]))


def _wait_params(n_participants: int) -> tuple[float, float]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        cpus = os.cpu_count() or 1
    spin = _SPIN_S if n_participants <= cpus else 0.0
    return spin, CARDCAGE_SHM_BUSY_US.get() / 1e6


class Endpoint:
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
