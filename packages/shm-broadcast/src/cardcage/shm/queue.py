"""MessageQueue: the seed's broadcast queue API over the ring (``_layout``, ``_segment``,
``_writer``, ``_reader``).

One writer, ``n_reader`` readers; every reader receives every message exactly once, in order.
``bytes`` travel raw (bytes in, bytes out); anything else is pickled at the highest protocol (5),
with large buffers out of band (:mod:`cardcage.shm._payload`): copied once into the ring and once
out, never through the pickle stream.
Messages larger than a slot are streamed through the ring in fragments (never through a socket),
so shared-memory use stays bounded by the ring size.

Must never: import torch at module scope (only the process-group constructors need it), open a
network socket for a local-only queue, or block without honouring ``timeout=`` and
``shutdown()``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cardcage.hooks.log import get_logger

from ._layout import FIRST, LAST, NBYTES_MASK, OOB, PICKLED, USER
from ._payload import Serialized, serialize
from ._reader import RingReader
from ._segment import ShmRingBuffer
from ._writer import RingWriter
from .envs import CARDCAGE_SHM_LATENCY_FIRST
from .errors import (
    AttachError,
    CancelledError,
    QueueClosedError,
    QueueRoleError,
    QueueTimeoutError,
    RemoteAddressRequiredError,
    ShmBroadcastError,
)

if TYPE_CHECKING:
    from ._collective import Collectives
    from ._remote import RemotePublisher, RemoteSubscriber

__all__ = ["DEFAULT_MAX_CHUNKS", "DEFAULT_MAX_CHUNK_BYTES", "Handle", "MessageQueue"]

logger = get_logger(__name__)

#: 4 MiB x 6 slots (24 MiB of /dev/shm), the geometry SGLang's GroupCoordinator uses. Larger
#: messages stream through the ring, so bigger slots buy little.
DEFAULT_MAX_CHUNK_BYTES = 4 << 20
DEFAULT_MAX_CHUNKS = 6


def _release(
    writer: RingWriter | None,
    reader: RingReader | None,
    buffer: ShmRingBuffer | None,
    pid: int,
    remote: RemotePublisher | RemoteSubscriber | None = None,
) -> None:
    """Close one end (also run when a queue object is garbage-collected or at exit).

    Only the process that made this end closes the queue or detaches: a forked child holding a
    copy just unmaps (and ShmRingBuffer never lets it unlink).
    """
    if os.getpid() == pid:
        if writer is not None:
            writer.close()
        if reader is not None:
            reader.detach()
        if remote is not None:
            remote.close()
    if buffer is not None:
        buffer.close()


@dataclass(frozen=True)
class Handle:
    """Everything a reader needs to attach: small plain data, picklable, stable across spawn."""

    local_reader_ranks: tuple[int, ...]
    buffer_handle: tuple[int, int, int, str] | None  # (n_reader, max_chunk_bytes, max_chunks, name)
    epoch: int
    writer_pid: int
    n_reader: int
    connect_ip: str | None = None
    remote_subscribe_addr: str | None = None
    #: CURVE keys (Z85) of the remote path: the server's public key and the one client keypair
    #: the writer accepts. Whoever holds the handle can read the queue: keep it secret.
    remote_server_key: bytes | None = None
    remote_client_keys: tuple[bytes, bytes] | None = None
    #: Local readers never park while they wait (``MessageQueue(latency_first=...)``): the
    #: writer decides for every reader, since a broadcast step waits for its slowest reader.
    latency_first: bool = False


def _latency_first(requested: bool | None) -> bool:
    """The queue's waiting mode: ``requested``, or ``CARDCAGE_SHM_LATENCY_FIRST`` when None."""
    if requested is None:
        return CARDCAGE_SHM_LATENCY_FIRST.get()
    if not isinstance(requested, bool):
        raise TypeError(
            f"latency_first must be True, False or None (None: read CARDCAGE_SHM_LATENCY_FIRST), "
            f"got {requested!r}"
        )
    return requested


class MessageQueue:
    """A single-writer broadcast queue (the seed's ``MessageQueue``).

    The constructing process is the writer; readers attach with
    ``MessageQueue.create_from_handle(writer.export_handle(), rank)`` in their own processes,
    then every party calls ``wait_until_ready()``.

    ``latency_first`` (default: ``CARDCAGE_SHM_LATENCY_FIRST``, else False) makes every local
    reader of the queue wait without ever parking: it polls and yields the CPU until a message,
    its timeout, a close, a dead writer or ``shutdown()``, as SGLang's and vLLM's readers do.
    The first message after an idle spell then costs microseconds instead of a futex wake-up,
    and each waiting reader keeps a core busy. The writer's choice travels in the handle, so
    every reader of a queue waits the same way whatever its own environment says.
    """

    def __init__(
        self,
        n_reader: int,
        n_local_reader: int,
        local_reader_ranks: Sequence[int] | None = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        connect_ip: str | None = None,
        latency_first: bool | None = None,
    ) -> None:
        if not 0 <= n_local_reader <= n_reader:
            raise ValueError(
                f"need 0 <= n_local_reader <= n_reader, got n_local_reader={n_local_reader}, "
                f"n_reader={n_reader}"
            )
        if n_reader > n_local_reader and not connect_ip:
            raise RemoteAddressRequiredError(n_reader - n_local_reader)
        ranks = (
            tuple(range(n_local_reader))
            if local_reader_ranks is None
            else tuple(local_reader_ranks)
        )
        if len(ranks) != n_local_reader or len(set(ranks)) != len(ranks):
            raise ValueError(
                f"local_reader_ranks must list {n_local_reader} distinct ranks, got {list(ranks)}"
            )
        self.n_reader = n_reader
        self.n_local_reader = n_local_reader
        self.n_remote_reader = n_reader - n_local_reader
        self.local_reader_ranks = list(ranks)
        self.connect_ip = connect_ip
        self.latency_first = _latency_first(latency_first)
        self.shutting_down = False
        self._closed = False
        self._is_writer = True
        self._is_local_reader = False
        self._is_remote_reader = False
        self.local_reader_rank = -1
        self._reader: RingReader | None = None
        self.buffer: ShmRingBuffer | None = None
        self._writer: RingWriter | None = None
        self._remote_pub: RemotePublisher | None = None
        self._remote_sub: RemoteSubscriber | None = None
        self._remote_ready = False
        self._pending: tuple[bytes, int] | None = None  # reached remote readers, not local ones
        self._ready = False  # wait_until_ready() returned
        self._rank = -1  # a reader's rank in the queue's group (the writer is -1)
        self._coll: Collectives | None = None  # created by the first collective
        if self.n_remote_reader > 0:
            from ._remote import RemotePublisher

            assert connect_ip is not None
            self._remote_pub = RemotePublisher(connect_ip, self.n_remote_reader)
        if n_local_reader > 0:
            self.buffer = ShmRingBuffer(n_local_reader, max_chunk_bytes, max_chunks)
            try:
                self._writer = RingWriter(self.buffer, list(ranks))
            except BaseException:
                self.buffer.close()
                if self._remote_pub is not None:
                    self._remote_pub.close()
                raise
        self._writer_pid = os.getpid()
        self._finalizer = weakref.finalize(
            self, _release, self._writer, None, self.buffer, self._writer_pid, self._remote_pub
        )

    # -- handles ---------------------------------------------------------------------------------

    def export_handle(self) -> Handle:
        """The plain-data handle readers attach with (writer only)."""
        if not self._is_writer:
            raise QueueRoleError("Only the writer can export a handle")
        buf = self.buffer
        pub = self._remote_pub
        return Handle(
            local_reader_ranks=tuple(self.local_reader_ranks),
            buffer_handle=None
            if buf is None
            else (buf.n_reader, buf.max_chunk_bytes, buf.max_chunks, buf.name),
            epoch=0 if buf is None else buf.epoch,
            writer_pid=self._writer_pid,
            n_reader=self.n_reader,
            connect_ip=self.connect_ip,
            remote_subscribe_addr=None if pub is None else pub.address,
            remote_server_key=None if pub is None else pub.server_public,
            remote_client_keys=None if pub is None else (pub.client_public, pub.client_secret),
            latency_first=self.latency_first,
        )

    @classmethod
    def create_from_handle(cls, handle: Handle, rank: int) -> MessageQueue:
        """Attach as the reader with group rank ``rank``: through shared memory when ``rank`` is
        in ``local_reader_ranks``, otherwise over ZeroMQ when the queue has remote readers."""
        self = cls.__new__(cls)
        self.n_reader = handle.n_reader
        self.n_local_reader = len(handle.local_reader_ranks)
        self.n_remote_reader = self.n_reader - self.n_local_reader
        self.local_reader_ranks = list(handle.local_reader_ranks)
        self.connect_ip = handle.connect_ip
        self.latency_first = handle.latency_first
        self.shutting_down = False
        self._closed = False
        self._is_writer = False
        self._is_remote_reader = False
        self._writer = None
        self._reader = None
        self._remote_pub = None
        self._remote_sub = None
        self._remote_ready = False
        self._pending = None
        self._ready = False
        self._rank = rank
        self._coll = None
        self._is_local_reader = False
        self.local_reader_rank = -1
        self.buffer = None
        self._writer_pid = handle.writer_pid
        name = "<none>" if handle.buffer_handle is None else handle.buffer_handle[3]
        if rank not in handle.local_reader_ranks and handle.remote_subscribe_addr is not None:
            return self._become_remote(handle, None)
        if rank not in handle.local_reader_ranks or handle.buffer_handle is None:
            raise AttachError(
                name,
                f"rank {rank} is not a local reader (local_reader_ranks="
                f"{list(handle.local_reader_ranks)}) and this queue has no remote readers",
            )
        n, chunk_bytes, chunks, name = handle.buffer_handle
        try:
            self.buffer = ShmRingBuffer(n, chunk_bytes, chunks, name, _epoch=handle.epoch)
        except AttachError as exc:
            if handle.remote_subscribe_addr is None:
                raise AttachError(
                    name,
                    f"local reader rank {rank} cannot attach ({exc.reason}), and the queue has "
                    "no remote address to fall back to. Run this rank on the writer's node with "
                    "/dev/shm shared, or create the queue with connect_ip= so ranks that cannot "
                    "attach read over ZeroMQ.",
                ) from exc
            logger.warning(
                "local reader rank %d cannot attach %s (%s); reading over ZeroMQ instead",
                rank,
                name,
                exc.reason,
            )
            return self._become_remote(handle, rank)
        self.local_reader_rank = handle.local_reader_ranks.index(rank)
        try:
            self._reader = RingReader(self.buffer, self.local_reader_rank, self.latency_first)
        except BaseException:
            self.buffer.close()
            raise
        self._is_local_reader = True
        self._finalizer = weakref.finalize(
            self, _release, None, self._reader, self.buffer, os.getpid()
        )
        return self

    def _become_remote(self, handle: Handle, fallback_rank: int | None) -> MessageQueue:
        from ._remote import RemoteSubscriber

        assert handle.remote_subscribe_addr is not None
        assert handle.remote_server_key is not None
        assert handle.remote_client_keys is not None
        self._remote_sub = RemoteSubscriber(
            handle.remote_subscribe_addr,
            handle.remote_server_key,
            *handle.remote_client_keys,
            fallback_rank=fallback_rank,
            rank=self._rank,
        )
        self._is_remote_reader = True
        self._finalizer = weakref.finalize(
            self, _release, None, None, None, os.getpid(), self._remote_sub
        )
        return self

    # -- readiness -------------------------------------------------------------------------------

    def wait_until_ready(self, timeout: float | None = None) -> None:
        """Block until every local reader attached (writer) / the writer saw them all (readers).

        On the writer this also unlinks the segment's name: from now on no combination of
        killed processes can leave a ``/dev/shm`` entry behind.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._writer is not None and self._remote_pub is not None:
            self._wait_local_and_remote(deadline, timeout)
        elif self._writer is not None:
            delay = 50e-6
            while missing := self._writer.unattached_ranks():
                if self.shutting_down:
                    raise CancelledError
                if deadline is not None and time.monotonic() >= deadline:
                    ranks = [self.local_reader_ranks[r] for r in missing]
                    raise QueueTimeoutError(
                        "wait_until_ready (writer)",
                        timeout or 0.0,
                        f"Missing reader ranks: {ranks}.",
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.005)
            self._writer.mark_ready()
            assert self.buffer is not None
            self.buffer.unlink()
        if self._remote_pub is not None and not self._remote_ready:
            self._remote_pub.wait_ready(deadline, timeout)
            self._remote_ready = True
        if self._reader is not None:
            self._reader.wait_ready(deadline, timeout)
        if self._remote_sub is not None:
            self._remote_sub.wait_ready(deadline, timeout)
        self._ready = True

    def _wait_local_and_remote(self, deadline: float | None, timeout: float | None) -> None:
        """Writer of a mixed queue: every local rank attached or fell back to ZeroMQ, and every
        remote reader (fallbacks included) subscribed; then READY to both sides."""
        writer, pub = self._writer, self._remote_pub
        assert writer is not None
        assert pub is not None
        while True:
            fallback = {
                self.local_reader_ranks.index(r)
                for r in pub.fallback_ranks
                if r in self.local_reader_ranks
            }
            missing = [r for r in writer.unattached_ranks() if r not in fallback]
            if not missing and pub.missing() <= 0:
                break
            if self.shutting_down:
                raise CancelledError
            if deadline is not None and time.monotonic() >= deadline:
                ranks = [self.local_reader_ranks[r] for r in missing]
                raise QueueTimeoutError(
                    "wait_until_ready (writer)",
                    timeout or 0.0,
                    f"Missing local reader ranks: {ranks}; {max(pub.missing(), 0)} remote "
                    "reader(s) never connected.",
                )
            pub.poll_subscriptions(5)
        for r in sorted(fallback):
            logger.info(
                "local reader rank %d could not attach the ring; it reads over ZeroMQ",
                self.local_reader_ranks[r],
            )
            writer.exclude(r)
        writer.mark_ready()
        assert self.buffer is not None
        self.buffer.unlink()
        pub.send_ready()
        self._remote_ready = True

    # -- writing ---------------------------------------------------------------------------------

    def _require_writer(self, what: str) -> RingWriter | None:
        if not self._is_writer:
            raise QueueRoleError(f"Only writers can {what}")
        if self._closed:
            raise QueueClosedError("this queue was closed by its writer; cannot " + what)
        return self._writer

    def enqueue(self, obj: Any, timeout: float | None = None) -> None:
        """Broadcast ``obj``; returns once its bytes are in shared memory (safe to mutate after)."""
        if self._is_writer and not self._closed:  # the hot path: no helper call
            writer = self._writer
        else:
            writer = self._require_writer("enqueue")
        if self._remote_pub is None:
            if writer is None:
                return
            if type(obj) is bytes:
                writer.send(obj, 0, timeout)
                return
            msg = serialize(obj)
            if isinstance(msg, Serialized):
                writer.send_parts(msg.parts, msg.nbytes, PICKLED | OOB, timeout)
            else:
                writer.send(msg, PICKLED, timeout)
            return
        self._enqueue_mixed(writer, obj, timeout)

    def _enqueue_mixed(self, writer: RingWriter | None, obj: Any, timeout: float | None) -> None:
        from ._remote import KIND_PICKLED, KIND_RAW

        pub = self._remote_pub
        assert pub is not None
        if not self._remote_ready:
            raise QueueRoleError(
                "call wait_until_ready() before enqueue(): remote readers that have not "
                "subscribed yet would miss messages"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._pending is not None and writer is not None:
            # The previous message reached remote readers but timed out locally: finish it
            # first so local and remote readers keep identical sequences.
            data, flags = self._pending
            writer.send(data, flags, timeout)
            self._pending = None
        if type(obj) is bytes:
            data, flags = obj, 0
        else:
            if isinstance(obj, (memoryview, pickle.PickleBuffer)):
                obj = bytearray(obj)  # what a local-only queue delivers for a buffer
            data, flags = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL), PICKLED
        pub.send(data, KIND_PICKLED if flags else KIND_RAW, deadline, timeout)
        if writer is not None:
            try:
                writer.send(data, flags, None if deadline is None else deadline - time.monotonic())
            except QueueTimeoutError:
                self._pending = (data, flags)
                raise

    @contextlib.contextmanager
    def acquire_write(self, timeout: float | None = None) -> Iterator[memoryview]:
        """Yield a writable view of the next slot; it is published when the block exits normally.

        An exception inside the block publishes nothing and leaves the slot reusable.
        """
        writer = self._require_writer("acquire write")
        if writer is None or self._remote_pub is not None:
            raise QueueRoleError(
                "acquire_write writes one shared-memory slot: it needs local readers and no "
                "remote ones (use enqueue() with remote readers)"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        k = writer.seq + 1
        writer.reserve(k, deadline, timeout)
        size = writer.slot_bytes
        slot = writer.place(k, size)
        off = writer.lay.slot_data(slot)
        with writer.raw[off : off + size] as buf:
            yield buf
        writer.publish(slot, size, FIRST | LAST | USER)

    # -- reading ---------------------------------------------------------------------------------

    def _require_reader(self) -> RingReader:
        if self._reader is None:
            raise QueueRoleError("Only readers can dequeue")
        return self._reader

    def dequeue(self, timeout: float | None = None) -> Any:
        """Receive the next message; ``timeout=0`` polls without blocking."""
        reader = self._reader
        if reader is not None:
            return reader.read(timeout)
        if self._remote_sub is not None:
            from ._remote import KIND_RAW

            deadline = None if timeout is None else time.monotonic() + timeout
            kind, data = self._remote_sub.recv(deadline, timeout)
            return data if kind == KIND_RAW else pickle.loads(data)
        return self._require_reader().read(timeout)

    @contextlib.contextmanager
    def acquire_read(self, timeout: float | None = None) -> Iterator[memoryview]:
        """Yield a read-only view of the next slot's bytes; the slot is released on exit.

        The view is released when the block ends (keep a copy if you need the bytes later). An
        exception inside the block still releases the slot, so the writer never stalls on it.
        """
        reader = self._require_reader()
        deadline = None if timeout is None else time.monotonic() + timeout
        k = reader.seq + 1
        d = reader.desc_words[(k - 1) % reader.n_slots]
        n = reader.published(k, d, deadline, timeout) & NBYTES_MASK
        off = reader.data_off(k, d)
        try:
            with reader.raw[off : off + n].toreadonly() as buf:
                yield buf
        finally:
            reader.release(k)

    def broadcast_object(self, obj: Any = None) -> Any:
        """Writer: enqueue ``obj`` and return it. Readers: return the next message."""
        if self._is_writer:
            self.enqueue(obj)
            return obj
        return self.dequeue()

    # -- collectives -----------------------------------------------------------------------------

    def barrier(self, timeout: float | None = None) -> None:
        """Return once the writer and every reader (local and remote) have called ``barrier()``.

        Every participant must call the queue's collectives (``barrier`` and
        ``all_gather_object``) the same number of times, in the same order; a mismatch that
        reaches the writer raises ``CollectiveMismatchError`` on everybody. Messages are not
        consumed or reordered: what the writer enqueued before still comes out of ``dequeue()``
        in order. ``QueueTimeoutError`` (``missing`` names who had not arrived, when known)
        leaves the barrier pending: call ``barrier()`` again to keep waiting. A reader that dies
        or closes first makes every participant raise ``ReaderDiedError`` /
        ``QueueClosedError`` naming its rank and pid. Without readers it returns at once.
        """
        self._collective(1, None, timeout, "barrier")  # 1: _collective.OP_BARRIER

    def all_gather_object(self, obj: Any, timeout: float | None = None) -> list[Any]:
        """Gather one picklable object from every participant; every participant gets the list.

        The writer's object comes first, then the readers' in ascending rank order (the
        ``rank`` each passed to ``create_from_handle``), local and remote alike. Each caller
        finds its own ``obj`` itself in its place and unpickled copies of the others' (pickled
        at the highest protocol). Same rules as :meth:`barrier`; after a timeout, the call that
        carries on ignores its ``obj`` (the first call's was already sent). Without readers it
        returns ``[obj]`` at once.
        """
        out = self._collective(2, obj, timeout, "all_gather_object")  # 2: OP_GATHER
        assert out is not None
        return out

    def _collective(self, op: int, obj: Any, timeout: float | None, name: str) -> list[Any] | None:
        if self._closed:
            raise QueueClosedError(f"this queue was closed; cannot call {name}()")
        if self.n_reader == 0:
            return [obj]
        if not self._ready:
            raise QueueRoleError(f"call wait_until_ready() before {name}()")
        coll = self._coll
        if coll is None:
            from ._collective import Collectives

            coll = self._coll = Collectives(self)
        return coll.run(op, obj, timeout)

    # -- teardown --------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Cancel this object's blocking calls (from any thread); they raise ``CancelledError``."""
        self.shutting_down = True
        endpoint = self._writer if self._writer is not None else self._reader
        if endpoint is not None:
            endpoint.cancel()
        remote = self._remote_sub if self._remote_sub is not None else self._remote_pub
        if remote is not None:
            remote.cancelled = True

    def close(self) -> None:
        """Writer: readers drain what was published, then get ``QueueClosedError``. Readers:
        detach so the writer stops waiting for this one. Releases shared memory. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> MessageQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def create_from_process_group(
        pg: Any,
        max_chunk_bytes: int,
        max_chunks: int,
        writer_rank: int = 0,
        connect_ip: str | None = None,
        latency_first: bool | None = None,
    ) -> MessageQueue:
        """Build the queue collectively over a ``torch.distributed`` group (gloo/CPU).

        Every rank of ``pg`` calls this; ``writer_rank`` gets the writer, the others readers.
        Ranks on other nodes become remote readers, which needs ``connect_ip`` on the writer.
        ``latency_first`` counts on the writer rank only (it travels in the handle).
        """
        import torch.distributed as dist

        from .process_group import broadcast_object, in_the_same_node_as

        group_rank = dist.get_rank(group=pg)
        world = dist.get_world_size(group=pg)
        src = dist.get_process_group_ranks(pg)[writer_rank]
        same_node = in_the_same_node_as(pg, source_rank=writer_rank)
        local_ranks = [r for r, same in enumerate(same_node) if same and r != writer_rank]
        if group_rank == writer_rank:
            try:
                queue = MessageQueue(
                    n_reader=world - 1,
                    n_local_reader=len(local_ranks),
                    local_reader_ranks=local_ranks,
                    max_chunk_bytes=max_chunk_bytes,
                    max_chunks=max_chunks,
                    connect_ip=connect_ip,
                    latency_first=latency_first,
                )
            except ShmBroadcastError as exc:
                broadcast_object(repr(exc), src, pg)
                raise
            broadcast_object(queue.export_handle(), src, pg)
        else:
            handle = broadcast_object(None, src, pg)
            if isinstance(handle, str):
                raise ShmBroadcastError(f"the writer (group rank {writer_rank}) failed: {handle}")
            queue = MessageQueue.create_from_handle(handle, group_rank)
        queue.wait_until_ready()
        return queue
