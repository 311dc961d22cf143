"""What every side of a collective agrees on: operations and tags, abort codes and the error
each one becomes, the all-gather result's format, and how the abort words are read.

One module for this vocabulary because three parties speak it: the writer's hub, a local
reader's spoke and the ZeroMQ transport (``_remote``, which detects remote readers' faults and
sends the result and abort notices over its connection). Keeping it apart from the waiting code
is what lets ``_remote`` name an abort without depending on the shared-memory sides.

Must never: wait, store a shared-memory word, or import zmq.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Final

from cardcage.shm._layout import (
    C_ABORT,
    C_ABORT_CODE,
    C_ABORT_PID,
    C_ABORT_RANK,
    C_ABORT_TAG,
    load_acquire,
)
from cardcage.shm.errors import (
    CollectiveMismatchError,
    QueueClosedError,
    ReaderDiedError,
    ShmBroadcastError,
)

__all__ = [
    "ABORT_CLOSED",
    "ABORT_DIED",
    "ABORT_DUPLICATE",
    "ABORT_INFO",
    "ABORT_MISMATCH",
    "OP_BARRIER",
    "OP_GATHER",
    "OP_NAMES",
    "WRITER_RANK",
    "_REMOTE",
    "_AbortError",
    "abort_error",
    "describe",
    "pack_result",
    "read_abort",
    "tag_of",
    "unpack_result",
]

OP_BARRIER: Final = 1
OP_GATHER: Final = 2
OP_NAMES: Final = {OP_BARRIER: "barrier", OP_GATHER: "all_gather_object"}

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
    return f"{OP_NAMES.get(tag & 0xFF, f'operation {tag & 0xFF}')} #{tag >> 8}"


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
