"""Faults with real processes: SIGKILLed readers and writers, forked children, clean exits."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing.context import SpawnContext

import pytest
import shm_workers

from cardcage.shm import (
    MessageQueue,
    ReaderDiedError,
    WriterDiedError,
    sweep_stale,
)

CHUNK = 512


def test_sigkilled_reader_makes_a_blocked_writer_raise_with_its_rank_and_pid(
    spawn: SpawnContext,
) -> None:
    with MessageQueue(2, 2, local_reader_ranks=[1, 2], max_chunk_bytes=CHUNK, max_chunks=2) as q:
        handle = q.export_handle()
        parent, child = spawn.Pipe()
        victim = spawn.Process(target=shm_workers.attach_then_hang, args=(handle, 2, child))
        reader = MessageQueue.create_from_handle(handle, 1)  # a live reader that keeps up
        victim.start()
        q.wait_until_ready(timeout=30)
        pid = shm_workers.recv(parent)
        q.enqueue(0, timeout=5)
        q.enqueue(1, timeout=5)
        assert reader.dequeue(timeout=5) == 0
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ReaderDiedError) as info:
            q.enqueue(2, timeout=30)
        assert (info.value.rank, info.value.pid) == (2, pid)
        assert f"pid {pid}" in str(info.value)
        victim.join(10)
        reader.close()


def test_sigkilled_writer_lets_readers_drain_every_published_message_then_raises(
    spawn: SpawnContext,
) -> None:
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(3, CHUNK, 4, child))
    writer.start()
    handle = shm_workers.recv(parent)
    q = MessageQueue.create_from_handle(handle, 0)
    parent.send("ready")
    q.wait_until_ready(timeout=30)
    assert shm_workers.recv(parent) == "published"
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    got = [q.dequeue(timeout=30) for _ in range(3)]
    assert got == [i.to_bytes(4, "little") * (CHUNK // 8) for i in range(3)]
    with pytest.raises(WriterDiedError) as info:
        q.dequeue(timeout=30)
    assert info.value.pid == writer.pid
    assert info.value.delivered == 3
    q.close()


@pytest.mark.parametrize(
    ("size", "stall_at"),
    [
        pytest.param(900 << 10, 3, id="one-slot-message-two-pieces-in"),
        pytest.param((2 << 20) + 5, 10, id="second-fragment-one-piece-in"),
    ],
)
def test_writer_killed_while_streaming_a_message_never_delivers_its_pieces(
    spawn: SpawnContext, size: int, stall_at: int
) -> None:
    # Raw messages this large are streamed: the writer publishes each piece as it copies it
    # and the reader copies pieces out before the message is complete. A writer that dies
    # half-way must cost the reader that message (WriterDiedError), never a truncated bytes.
    first = os.urandom(300 << 10)
    parent, child = spawn.Pipe()
    writer = spawn.Process(
        target=shm_workers.writer_stalls_mid_stream,
        args=(1 << 20, first, os.urandom(size), stall_at, child),
    )
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    q.wait_until_ready(timeout=30)
    assert q.dequeue(timeout=30) == first
    assert shm_workers.recv(parent) == "midway"
    reader = q._reader
    assert reader is not None
    k = reader.seq + 1 + (size > 1 << 20)  # the fragment being streamed
    d = reader.desc_words[(k - 1) % reader.n_slots]
    # streaming started and pieces are in, but the fragment is not published
    assert reader.u[d + 3] == k
    assert reader.u[d + 4] > 0
    assert reader.u[d] != k
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    with pytest.raises(WriterDiedError) as info:
        q.dequeue(timeout=30)
    assert info.value.delivered == 1
    q.close()


@pytest.mark.parametrize(
    ("message", "stall_at"),
    [
        pytest.param(os.urandom(900 << 10), 3, id="one-slot-message"),
        pytest.param(os.urandom((2 << 20) + 5), 10, id="second-fragment"),
        # out of band: the first piece takes three copies (header, pickle, buffer)
        pytest.param((7, os.urandom(900 << 10)), 5, id="oob-one-slot-message"),
        pytest.param((7, os.urandom((2 << 20) + 5)), 12, id="oob-second-fragment"),
    ],
)
def test_exception_while_streaming_drops_the_message_readers_already_copied_pieces_of(
    spawn: SpawnContext, message: object, stall_at: int
) -> None:
    # The reader copies the pieces streamed so far (for the multi-slot message also a whole
    # first fragment) and goes to sleep waiting for more; then the writer's copy raises. The
    # reader must drop that message and get the next one, never its pieces completed with
    # other bytes.
    first = os.urandom(300 << 10)
    parent, child = spawn.Pipe()
    writer = spawn.Process(
        target=shm_workers.writer_stalls_mid_stream,
        args=(1 << 20, first, message, stall_at, child),
    )
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    q.wait_until_ready(timeout=30)
    assert q.dequeue(timeout=30) == first
    assert shm_workers.recv(parent) == "midway"
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(q.dequeue(timeout=30)))
    thread.start()
    reader = q._reader
    assert reader is not None
    give_up = time.monotonic() + 30
    while not reader.u[reader.line + 1]:  # parked: it copied what was there and sleeps
        assert time.monotonic() < give_up, "the reader never went to sleep mid-message"
        time.sleep(0.001)
    parent.send("raise")
    thread.join(30)
    assert got == [b"after"]
    assert shm_workers.recv(parent) == "after"
    parent.send("done")
    writer.join(30)
    assert writer.exitcode == 0
    q.close()


def test_writer_killed_before_readiness_leaves_no_segment_behind(spawn: SpawnContext) -> None:
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 2, child))
    writer.start()
    handle = shm_workers.recv(parent)
    q = MessageQueue.create_from_handle(handle, 0)  # attached; writer never calls ready
    parent.send("no")
    assert shm_workers.recv(parent) == "published"
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    with pytest.raises(WriterDiedError):
        q.wait_until_ready(timeout=30)  # the surviving reader unlinks the name
    q.close()


def test_sweep_stale_removes_segments_of_dead_creators(spawn: SpawnContext) -> None:
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 2, child))
    writer.start()
    handle = shm_workers.recv(parent)
    parent.send("no")
    assert shm_workers.recv(parent) == "published"
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    assert handle.buffer_handle is not None
    path = os.path.join("/dev/shm", handle.buffer_handle[3])
    assert os.path.exists(path)
    assert path in sweep_stale()
    assert not os.path.exists(path)


def test_a_forked_child_dropping_the_writer_never_unlinks_or_closes_it() -> None:
    fork = mp.get_context("fork")
    q = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2)
    assert q.buffer is not None
    path = os.path.join("/dev/shm", q.buffer.name)
    parent, child = fork.Pipe()
    p = fork.Process(target=shm_workers.forked_child_drops_writer, args=(q, child))
    p.start()
    assert shm_workers.recv(parent) == "ok"
    p.join(10)
    assert p.exitcode == 0
    assert os.path.exists(path)
    reader = MessageQueue.create_from_handle(q.export_handle(), 0)
    q.wait_until_ready(timeout=5)
    q.enqueue(b"after the child")
    assert reader.dequeue(timeout=5) == b"after the child"
    reader.close()
    q.close()


def test_normal_exit_prints_no_resource_tracker_warnings(tmp_path: os.PathLike[str]) -> None:
    script = textwrap.dedent(
        """
        import multiprocessing as mp
        import shm_workers
        from cardcage.shm import MessageQueue

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = MessageQueue(2, 2, max_chunk_bytes=256, max_chunks=2)
            conns = []
            for r in range(2):
                a, b = ctx.Pipe()
                ctx.Process(target=shm_workers.read_all, args=(q.export_handle(), r, 3, b)).start()
                conns.append(a)
            q.wait_until_ready(timeout=30)
            for m in (b"a", 1, b"c" * 1000):
                q.enqueue(m, timeout=30)
            for c in conns:
                c.recv()
            # no close(): interpreter exit must clean up quietly
        """
    )
    path = os.path.join(str(tmp_path), "run.py")
    with open(path, "w") as f:
        f.write(script)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(shm_workers.__file__)}
    proc = subprocess.run(
        [sys.executable, path], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "resource_tracker" not in proc.stderr
    assert "leaked" not in proc.stderr
    assert "Traceback" not in proc.stderr
