"""Typed errors of cardcage.shm, rooted in ``cardcage.hooks.errors.CardcageError``.

Each error also subclasses the builtin that callers of SGLang's / vLLM's queue already catch
(``TimeoutError``, ``RuntimeError``, ``EOFError``), carries the fields a log line needs (rank, pid,
bytes) and says what to do next.

Import-safe: only class definitions.
"""

from __future__ import annotations

from cardcage.hooks.errors import CardcageError

__all__ = [
    "AttachError",
    "CancelledError",
    "CollectiveMismatchError",
    "QueueClosedError",
    "QueueRoleError",
    "QueueTimeoutError",
    "ReaderDiedError",
    "RemoteAddressRequiredError",
    "ShmBroadcastError",
    "ShmSpaceError",
    "WriterDiedError",
]


class ShmBroadcastError(CardcageError):
    """Root of every error raised by cardcage.shm."""


class QueueTimeoutError(ShmBroadcastError, TimeoutError):
    """A blocking call ran past its ``timeout=``; nothing was published or consumed half-way.

    The queue stays usable: call again to keep waiting. ``missing`` lists the ranks the call was
    still waiting for, where it knows them (a collective's writer knows every reader's; the
    writer itself is ``-1``).
    """

    def __init__(
        self, what: str, timeout: float, detail: str = "", missing: tuple[int, ...] = ()
    ) -> None:
        self.what = what
        self.timeout = timeout
        self.missing = missing
        extra = f" {detail}" if detail else ""
        super().__init__(f"{what} timed out after {timeout:g} s.{extra}")


class CancelledError(ShmBroadcastError, RuntimeError):
    """``shutdown()`` was called on this queue object; its blocking calls no longer wait."""

    def __init__(self) -> None:
        super().__init__("cancelled")


class QueueClosedError(ShmBroadcastError, EOFError):
    """The writer closed the queue and this reader has consumed every message published before."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "the writer closed the queue; every message published before close() was delivered"
        )


class QueueRoleError(ShmBroadcastError, RuntimeError):
    """A writer-only call was made on a reader, or the other way round."""


class ReaderDiedError(ShmBroadcastError, RuntimeError):
    """A reader process died while the writer (or a collective) was waiting for it.

    ``during`` names the collective (``"barrier #3"``) when it died before completing one; every
    other participant of that collective gets this error too. ``remote``: a remote reader, seen
    to disconnect (the writer cannot check a pid on another node).
    """

    def __init__(
        self, rank: int, pid: int, lag: int, *, during: str = "", remote: bool = False
    ) -> None:
        self.rank = rank
        self.pid = pid
        self.lag = lag
        self.during = during
        self.remote = remote
        if during:
            how = "disconnected (died or closed its queue)" if remote else "died"
            where = "remote" if remote else "local"
            what = f"{where} reader {rank} (pid {pid}) {how} before completing {during}"
        else:
            what = f"local reader {rank} (pid {pid}) died with {lag} message(s) unread"
        super().__init__(
            f"{what}; the writer cannot make progress. Restart the process group (the queue "
            "cannot be resumed)."
        )


class WriterDiedError(ShmBroadcastError, RuntimeError):
    """The writer process died; every message it had fully published was delivered first."""

    def __init__(self, pid: int, delivered: int, *, during: str = "") -> None:
        self.pid = pid
        self.delivered = delivered
        self.during = during
        when = f" during {during}" if during else ""
        super().__init__(
            f"the writer (pid {pid}) died{when} after this reader received {delivered} "
            "message(s); no further messages will arrive. Restart the process group."
        )


class CollectiveMismatchError(ShmBroadcastError, RuntimeError):
    """Participants called different collectives at the same point (every participant must call
    ``barrier()`` / ``all_gather_object()`` the same number of times, in the same order).

    ``rank`` is the reader whose call differed from the writer's (``-1``: this process called a
    different collective than the one it left pending after a timeout). The collective is
    abandoned on every participant and later collectives on this queue raise again: the
    participants no longer agree on where they are.
    """

    def __init__(self, rank: int, expected: str, got: str, detail: str = "") -> None:
        self.rank = rank
        self.expected = expected
        self.got = got
        extra = f" {detail}" if detail else ""
        who = "this process" if rank < 0 else f"reader {rank}"
        super().__init__(
            f"collective mismatch: {who} called {got} where {expected} was expected.{extra} "
            "Every participant must call barrier() / all_gather_object() the same number of "
            "times, in the same order."
        )


class ShmSpaceError(ShmBroadcastError, RuntimeError):
    """``/dev/shm`` cannot hold the ring; raised at construction, never as a SIGBUS later."""

    def __init__(self, path: str, required: int, free: int) -> None:
        self.path = path
        self.required = required
        self.free = free
        super().__init__(
            f"Insufficient space in {path}: the ring needs {required} bytes but only {free} "
            "bytes are free. Increase the tmpfs size (docker: --shm-size or --ipc=host), free "
            "stale segments (cardcage.shm.sweep_stale()), or lower max_chunk_bytes / max_chunks."
        )


class AttachError(ShmBroadcastError, RuntimeError):
    """A reader could not attach to the writer's ring (missing, recreated or already claimed)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"cannot attach to shared-memory ring {name!r}: {reason}")


class RemoteAddressRequiredError(ShmBroadcastError, ValueError):
    """Remote readers were requested without the address they should connect to."""

    def __init__(self, n_remote: int) -> None:
        self.n_remote = n_remote
        super().__init__(
            f"{n_remote} remote (cross-node) reader(s) requested but connect_ip is not set. Pass "
            "connect_ip= with this node's address on the network the readers use (the writer "
            "binds exactly that address on a free port; it never binds every interface)."
        )
