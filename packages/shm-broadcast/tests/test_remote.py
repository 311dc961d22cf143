"""Remote readers over ZeroMQ (CURVE, explicit bind address), exercised over loopback."""

from __future__ import annotations

import dataclasses
import os
import pickle
from multiprocessing.context import SpawnContext

import pytest
import shm_workers
import zmq

from cardcage.shm import AttachError, MessageQueue, QueueTimeoutError
from cardcage.shm.queue import Handle

LOOPBACK = "127.0.0.1"
CHUNK = 1024


def test_remote_only_readers_use_no_shared_memory_and_get_everything_in_order(
    spawn: SpawnContext,
) -> None:
    before = set(os.listdir("/dev/shm"))
    messages = [b"", b"x", os.urandom(16 * CHUNK), {"a": 1}, bytearray(b"ba")]
    with MessageQueue(2, 0, connect_ip=LOOPBACK, max_chunk_bytes=CHUNK) as q:
        assert q.buffer is None
        assert set(os.listdir("/dev/shm")) == before
        handle = q.export_handle()
        assert handle.remote_subscribe_addr is not None
        assert handle.remote_subscribe_addr.startswith(f"tcp://{LOOPBACK}:")
        assert len(pickle.dumps(handle)) < 1024
        conns, procs = [], []
        for rank in (1, 2):
            parent, child = spawn.Pipe()
            p = spawn.Process(
                target=shm_workers.read_all, args=(handle, rank, len(messages), child)
            )
            p.start()
            conns.append(parent)
            procs.append(p)
        q.wait_until_ready(timeout=30)
        for m in messages:
            q.enqueue(m, timeout=30)
        expected = [shm_workers.digest(m) for m in messages]
        for conn, p in zip(conns, procs, strict=True):
            assert conn.recv() == expected
            p.join(30)


def test_local_and_remote_readers_see_identical_sequences(spawn: SpawnContext) -> None:
    messages = [os.urandom(n) for n in (0, 1, CHUNK, CHUNK + 1, 16 * CHUNK)] + [(1, b"t")]
    with MessageQueue(
        3, 2, local_reader_ranks=[1, 2], connect_ip=LOOPBACK, max_chunk_bytes=CHUNK, max_chunks=4
    ) as q:
        handle = q.export_handle()
        conns, procs = [], []
        for rank in (1, 2, 3):
            parent, child = spawn.Pipe()
            p = spawn.Process(
                target=shm_workers.read_all, args=(handle, rank, len(messages), child)
            )
            p.start()
            conns.append(parent)
            procs.append(p)
        q.wait_until_ready(timeout=30)
        for m in messages:
            q.enqueue(m, timeout=30)
        results = [conn.recv() for conn in conns]
        assert results[0] == results[1] == results[2] == [shm_workers.digest(m) for m in messages]
        for p in procs:
            p.join(30)


def test_a_slow_remote_reader_makes_the_writer_time_out_and_loses_nothing(
    spawn: SpawnContext,
) -> None:
    q = MessageQueue(1, 0, connect_ip=LOOPBACK)
    parent, child = spawn.Pipe()
    p = spawn.Process(target=shm_workers.read_remote_then_hang, args=(q.export_handle(), 0, child))
    p.start()
    q.wait_until_ready(timeout=30)
    assert parent.recv() == "ready"
    body = b"\xab" * (1 << 20)
    sent = 0

    def flood() -> None:
        nonlocal sent
        for _ in range(10_000):
            q.enqueue(body, timeout=0.5)
            sent += 1

    with pytest.raises(QueueTimeoutError):
        flood()
    parent.send("go")
    q.enqueue(b"after", timeout=30)
    q.close()
    got = parent.recv()
    assert len(got) == sent + 1
    assert got[-1] == shm_workers.digest(b"after")
    p.join(30)


def test_a_subscriber_without_the_handles_keys_receives_nothing() -> None:
    with MessageQueue(1, 0, connect_ip=LOOPBACK) as q:
        handle = q.export_handle()
        assert handle.remote_subscribe_addr is not None
        ctx = zmq.Context()
        intruder = ctx.socket(zmq.SUB)
        public, secret = zmq.curve_keypair()  # a valid keypair the writer never issued
        intruder.curve_serverkey = handle.remote_server_key
        intruder.curve_publickey = public
        intruder.curve_secretkey = secret
        intruder.setsockopt(zmq.SUBSCRIBE, b"")
        intruder.connect(handle.remote_subscribe_addr)
        with pytest.raises(QueueTimeoutError, match="never connected"):
            q.wait_until_ready(timeout=0.5)  # the intruder's subscription never gets through
        intruder.close(linger=0)
        ctx.term()


def test_a_local_timeout_in_a_mixed_queue_is_completed_before_the_next_message() -> None:
    writer = MessageQueue(
        2, 1, local_reader_ranks=[1], connect_ip=LOOPBACK, max_chunk_bytes=CHUNK, max_chunks=2
    )
    local = MessageQueue.create_from_handle(writer.export_handle(), 1)
    remote = MessageQueue.create_from_handle(writer.export_handle(), 2)
    try:
        writer.wait_until_ready(timeout=30)
        local.wait_until_ready(timeout=30)
        remote.wait_until_ready(timeout=30)
        writer.enqueue(0, timeout=1)
        writer.enqueue(1, timeout=1)
        with pytest.raises(QueueTimeoutError):
            writer.enqueue(2, timeout=0.05)  # remote got it; the local ring is full
        assert [local.dequeue(timeout=1) for _ in range(2)] == [0, 1]
        writer.enqueue(3, timeout=1)  # completes 2 locally first
        assert [remote.dequeue(timeout=5) for _ in range(4)] == [0, 1, 2, 3]
        assert [local.dequeue(timeout=1) for _ in range(2)] == [2, 3]
    finally:
        remote.close()
        local.close()
        writer.close()


def _unreachable_ring(handle: Handle) -> Handle:
    """The handle as a rank on a node without the writer's /dev/shm sees it: the name is absent."""
    assert handle.buffer_handle is not None
    n, chunk, chunks, _ = handle.buffer_handle
    return dataclasses.replace(handle, buffer_handle=(n, chunk, chunks, "cardcage-shm-1-absent"))


def test_a_local_rank_that_cannot_attach_reads_over_zeromq_and_nobody_waits_for_it(
    spawn: SpawnContext,
) -> None:
    # Many more messages than slots: if the writer still waited on the rank that fell back, the
    # ring would fill and enqueue would time out.
    messages = [os.urandom(n) for n in (0, 1, CHUNK, 3 * CHUNK)] * 4 + [{"last": True}]
    with MessageQueue(
        3, 2, local_reader_ranks=[1, 2], connect_ip=LOOPBACK, max_chunk_bytes=CHUNK, max_chunks=2
    ) as q:
        handle = q.export_handle()
        handles = {1: _unreachable_ring(handle), 2: handle, 3: handle}
        conns, procs = [], []
        for rank, h in handles.items():
            parent, child = spawn.Pipe()
            p = spawn.Process(target=shm_workers.read_all, args=(h, rank, len(messages), child))
            p.start()
            conns.append(parent)
            procs.append(p)
        q.wait_until_ready(timeout=30)
        for m in messages:
            q.enqueue(m, timeout=30)
        expected = [shm_workers.digest(m) for m in messages]
        for conn, p in zip(conns, procs, strict=True):
            assert conn.recv() == expected
            p.join(30)
            assert p.exitcode == 0


def test_a_local_rank_that_cannot_attach_without_a_remote_address_gets_a_clear_error() -> None:
    with MessageQueue(2, 2, max_chunk_bytes=CHUNK, max_chunks=2) as q:
        handle = _unreachable_ring(q.export_handle())
        with pytest.raises(AttachError, match="no remote address to fall back to") as info:
            MessageQueue.create_from_handle(handle, 1)
        assert "does not exist" in str(info.value)
        assert "connect_ip=" in str(info.value)
