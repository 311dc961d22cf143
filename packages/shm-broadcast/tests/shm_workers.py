"""Process bodies for the tests (a module of its own so ``spawn`` children can import it)."""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import time
import zlib
from multiprocessing.connection import Connection
from typing import Any

from cardcage.shm import (
    MessageQueue,
    QueueClosedError,
    QueueTimeoutError,
    ShmBroadcastError,
)
from cardcage.shm.queue import Handle


def recv(conn: Connection, timeout: float = 60.0) -> Any:
    """``conn.recv()`` that fails the test, instead of hanging the CI run, when the child process
    never answers (a regression that deadlocks it, or a crash before it sends)."""
    if not conn.poll(timeout):
        raise AssertionError(f"no answer from the child process within {timeout:.0f} s")
    return conn.recv()


def digest(obj: Any) -> tuple[str, str]:
    """Type name and sha256 of an object's canonical bytes."""
    data = obj if isinstance(obj, bytes | bytearray) else pickle.dumps(obj, 5)
    return type(obj).__name__, hashlib.sha256(data).hexdigest()


def read_all(handle: Handle, rank: int, n: int, conn: Connection) -> None:
    """Receive ``n`` messages and send back their digests."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    out = [digest(q.dequeue(timeout=30)) for _ in range(n)]
    conn.send(out)
    q.close()


def read_after_go(handle: Handle, rank: int, conn: Connection) -> None:
    """Attach, report ready, wait for a go from the test, then read one message."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    conn.send("ready")
    conn.recv()
    conn.send(q.dequeue(timeout=30))
    q.close()


def read_until_closed(handle: Handle, rank: int, conn: Connection) -> None:
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    got = []
    try:
        while True:
            got.append(q.dequeue(timeout=30))
    except QueueClosedError:
        conn.send(("closed", got))
    q.close()


def attach_then_hang(handle: Handle, rank: int, conn: Connection) -> None:
    """Attach and become ready, then never read (the test SIGKILLs this process)."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    conn.send(os.getpid())
    conn.recv()  # blocks until killed
    q.close()


def stress_reader(handle: Handle, rank: int, n: int, conn: Connection) -> None:
    """Check sequence numbers and CRCs of ``n`` stress messages."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    bad = 0
    for i in range(n):
        msg = q.dequeue(timeout=60)
        if isinstance(msg, bytes):
            seq = int.from_bytes(msg[:8], "little")
            crc = int.from_bytes(msg[8:12], "little")
            ok = seq == i and zlib.crc32(msg[12:]) == crc
        else:
            seq, crc, body = msg
            ok = seq == i and zlib.crc32(body) == crc
        bad += not ok
    conn.send((n, bad))
    q.close()


def writer_then_hang(
    n: int, chunk: int, chunks: int, conn: Connection, latency_first: bool = False
) -> None:
    """Be the writer of a 1-reader queue: send the handle, publish ``n`` messages, then hang."""
    q = MessageQueue(1, 1, max_chunk_bytes=chunk, max_chunks=chunks, latency_first=latency_first)
    conn.send(q.export_handle())
    if conn.recv() == "ready":
        q.wait_until_ready(timeout=30)
        for i in range(n):
            q.enqueue(i.to_bytes(4, "little") * (chunk // 8), timeout=30)
    conn.send("published")
    conn.recv()  # blocks until killed
    os.kill(os.getpid(), signal.SIGKILL)


def segments_then_die(n: int, conn: Connection) -> None:
    """Create ``n`` rings that no reader ever attaches, send their names, then die by SIGKILL."""
    from cardcage.shm import ShmRingBuffer

    rings = [ShmRingBuffer(1, 512, 2) for _ in range(n)]
    conn.send([r.name for r in rings])
    os.kill(os.getpid(), signal.SIGKILL)


class CopyInterruptedError(Exception):
    """Raised inside the writer's copy into the ring, like a KeyboardInterrupt would be."""


class _StallingView:
    """Stands in for the writer's view of the ring: the ``stall_at``-th copy into it reports
    ``"midway"`` and waits for a command; it never returns when killed, raises
    ``CopyInterruptedError`` on ``"raise"`` and goes on on ``"go"``. Earlier pieces of the
    message are published by then."""

    def __init__(self, raw: memoryview, stall_at: int, conn: Connection) -> None:
        self.raw = raw
        self.calls = 0
        self.stall_at = stall_at
        self.conn = conn

    def __setitem__(self, key: slice, value: Any) -> None:
        self.calls += 1
        if self.calls == self.stall_at:
            self.conn.send("midway")
            if self.conn.recv() == "raise":
                raise CopyInterruptedError
        self.raw[key] = value


def writer_stalls_mid_stream(
    chunk: int, first: bytes, message: Any, stall_at: int, conn: Connection
) -> None:
    """Publish ``first`` whole, then start ``message`` and stall on the ``stall_at``-th copy
    into the ring. On ``"raise"`` the copy fails, and the writer goes on with ``b"after"``; on
    ``"go"`` it finishes ``message`` and reports ``"sent"``; otherwise it waits to be killed."""
    q = MessageQueue(1, 1, max_chunk_bytes=chunk, max_chunks=4)
    conn.send(q.export_handle())
    q.wait_until_ready(timeout=30)
    q.enqueue(first, timeout=30)
    writer = q._writer
    assert writer is not None
    raw = writer.raw
    writer.raw = _StallingView(raw, stall_at, conn)  # type: ignore[assignment]
    try:
        q.enqueue(message, timeout=30)
        conn.send("sent")
    except CopyInterruptedError:
        writer.raw = raw
        q.enqueue(b"after", timeout=30)
        conn.send("after")
    conn.recv()  # until told to finish
    q.close()


def forked_child_drops_writer(q: MessageQueue, conn: Connection) -> None:
    """In a forked child: close and drop an inherited writer object, then exit normally."""
    try:
        q.close()
        del q
        conn.send("ok")
    except ShmBroadcastError as exc:  # pragma: no cover - reported to the test
        conn.send(repr(exc))


def busy(seconds: float) -> None:  # pragma: no cover - helper for manual runs
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def process_group_member(
    rank: int,
    world: int,
    init_file: str,
    writer_rank: int,
    conn: Connection,
    latency_first_on_writer: bool = False,
) -> None:
    """One rank of a gloo group: build the queue collectively, broadcast, report digests and
    the queue's waiting mode. ``latency_first_on_writer``: the writer rank asks for
    latency-first mode and every other rank explicitly for the default."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        from cardcage.shm import in_the_same_node_as

        same = in_the_same_node_as(dist.group.WORLD, source_rank=writer_rank)
        q = MessageQueue.create_from_process_group(
            dist.group.WORLD,
            max_chunk_bytes=512,
            max_chunks=4,
            writer_rank=writer_rank,
            latency_first=latency_first_on_writer and rank == writer_rank,
        )
        got = []
        for i in range(20):
            payload = {"i": i, "body": bytes([i]) * (i * 100)} if i % 2 else bytes([i]) * i * 90
            got.append(digest(q.broadcast_object(payload if rank == writer_rank else None)))
        dist.barrier()
        q.close()
        conn.send((same, got, q.latency_first))
    finally:
        dist.destroy_process_group()


def read_remote_then_hang(handle: Handle, rank: int, conn: Connection) -> None:
    """Attach as a remote reader, get ready, then read only when told (count messages)."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    conn.send("ready")
    conn.recv()
    got = []
    try:
        while True:
            got.append(digest(q.dequeue(timeout=30)))
    except QueueClosedError:
        conn.send(got)
    q.close()


class Blob:
    """A numpy-like buffer type: at protocol 5 it hands its memory over as a PickleBuffer and
    rebuilds around whatever buffer the unpickler gives it, without copying (as numpy does)."""

    def __init__(self, data: bytearray | memoryview) -> None:
        self.data = memoryview(data)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        if protocol >= 5:
            return (Blob, (pickle.PickleBuffer(self.data),))
        return (Blob, (bytearray(self.data),))


def describe(obj: Any) -> tuple[str, str, str, bool]:
    """(type, type of the memory behind it, sha256 of its bytes, writable) of a received buffer."""
    if isinstance(obj, Blob):
        view = obj.data
        return "Blob", type(view.obj).__name__, hashlib.sha256(view).hexdigest(), not view.readonly
    if isinstance(obj, tuple | list):
        return describe(obj[-1])
    if isinstance(obj, dict):
        return describe(obj["payload"])
    view = memoryview(obj)
    return (
        type(obj).__name__,
        type(obj).__name__,
        hashlib.sha256(view).hexdigest(),
        not view.readonly,
    )


def read_and_describe(handle: Handle, rank: int, n: int, conn: Connection) -> None:
    """Receive ``n`` messages, keep them all, and describe them only after the ring has been
    reused by later messages: anything still aliasing a ring slot would show up as changed."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    kept = [q.dequeue(timeout=30) for _ in range(n)]
    conn.send([describe(m) for m in kept])
    q.close()


def read_all_objects(handle: Handle, rank: int, n: int, conn: Connection) -> None:
    """Receive ``n`` messages and send them back whole (for types the test can compare)."""
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    got = [q.dequeue(timeout=30) for _ in range(n)]
    for obj in got:
        _check_writable(obj)
    conn.send(got)
    q.close()


def _check_writable(obj: Any) -> None:
    """Received numpy arrays must be writable (they own their memory); received bytearrays must
    be resizable (nothing of the queue still holds a view of them)."""
    if type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray":
        assert obj.flags.writeable, "received array is read-only"
        obj.flat[0] = obj.flat[0]
    elif isinstance(obj, bytearray):
        obj.append(0)  # BufferError while a memoryview of it is alive
        del obj[-1]
    elif isinstance(obj, dict):
        for v in obj.values():
            _check_writable(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _check_writable(v)


def run_ops(handle: Handle, rank: int, ops: list[tuple[Any, ...]], conn: Connection) -> list[Any]:
    """Attach as ``rank`` and run a script of queue calls; returns one record per call.

    ``("barrier", timeout)`` -> ``"ok"``; ``("gather", obj, timeout)`` -> the list;
    ``("dequeue", timeout)`` -> the message; ``("signal", value)`` sends ``("signal", value)``
    to the test; ``("wait",)`` blocks until the test sends anything. A ``QueueTimeoutError`` is
    recorded and the script goes on; any other queue error is recorded and ends it.
    """
    q = MessageQueue.create_from_handle(handle, rank)
    out: list[Any] = []
    try:
        q.wait_until_ready(timeout=30)
        for op in ops:
            try:
                if op[0] == "barrier":
                    q.barrier(timeout=op[1])
                    out.append("ok")
                elif op[0] == "gather":
                    out.append(q.all_gather_object(op[1], timeout=op[2]))
                elif op[0] == "dequeue":
                    out.append(q.dequeue(timeout=op[1]))
                elif op[0] == "signal":
                    conn.send(("signal", op[1]))
                elif op[0] == "wait":
                    conn.recv()
            except QueueTimeoutError as exc:
                out.append(error_record(exc))
    except ShmBroadcastError as exc:
        out.append(error_record(exc))
    finally:
        q.close()
    return out


def error_record(exc: BaseException) -> tuple[Any, ...]:
    """What a test asserts on about an error raised in another process."""
    return (
        "error",
        type(exc).__name__,
        {k: getattr(exc, k) for k in ("rank", "pid", "missing", "remote") if hasattr(exc, k)},
        str(exc),
    )


def serve(conn: Connection) -> None:
    """A pooled reader process: run the scripts the test sends (``(handle, rank, ops)``) one
    after the other, answering ``("done", records)`` for each; ``None`` ends it."""
    while (job := conn.recv()) is not None:
        handle, rank, ops = job
        conn.send(("done", run_ops(handle, rank, ops, conn)))


def wait_in_empty_queue(handle: Handle, rank: int, timeout: float, conn: Connection) -> None:
    """Attach with this process's own environment saying nothing about latency-first mode and
    the default busy window, wait ``timeout`` s for a message that never comes, and report how
    the wait ended and how often the reader parked on its futex."""
    os.environ["CARDCAGE_SHM_LATENCY_FIRST"] = "0"  # the handle decides, not the reader
    os.environ.pop("CARDCAGE_SHM_BUSY_US", None)
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    conn.send("ready")
    try:
        q.dequeue(timeout=timeout)
        ended = "message"
    except QueueTimeoutError:
        ended = "QueueTimeoutError"
    reader = q._reader
    assert reader is not None
    conn.send((q.latency_first, ended, reader.parks))
    conn.recv()
    q.close()


def wait_for_one_message(handle: Handle, rank: int, conn: Connection) -> None:
    """Attach (default busy window), report ready, receive one message, report it and the
    number of futex parks the wait took."""
    os.environ.pop("CARDCAGE_SHM_BUSY_US", None)
    q = MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready(timeout=30)
    conn.send("ready")
    msg = q.dequeue(timeout=30)
    reader = q._reader
    assert reader is not None
    conn.send((msg, reader.parks))
    q.close()
