"""Pickle protocol 5: large buffers travel out of band, are copied once each way, and arrive as
the types a user expects (bytes stay bytes, other buffers arrive writable and owned)."""

from __future__ import annotations

import hashlib
import pickle
from multiprocessing.context import SpawnContext

import pytest
import shm_workers
from shm_workers import Blob

from cardcage.shm import MessageQueue
from cardcage.shm._payload import OOB_MIN_BYTES, Serialized, serialize

SLOT = 256 << 10  # a 1 MiB buffer streams over 4+ slots, a 100 KiB one fits in one
BIG = 1 << 20
MID = 100 << 10


def _body(size: int, seed: int) -> bytes:
    return hashlib.shake_256(seed.to_bytes(4, "little")).digest(size)


def _sha(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def test_large_buffers_are_separate_parts_taken_from_the_callers_memory() -> None:
    big = _body(BIG, 1)
    ba = bytearray(_body(MID, 2))
    msg = serialize((7, big, {"k": 1}))
    assert isinstance(msg, Serialized)
    pickled = msg.parts[1]
    assert len(pickled) < 200  # the skeleton only: the megabyte is not in the pickle stream
    assert msg.parts[2].obj is big  # copied into the ring straight from the caller's object
    assert msg.nbytes == sum(len(memoryview(p).cast("B")) for p in msg.parts)
    by_value = serialize({"payload": ba})
    assert isinstance(by_value, Serialized)
    assert by_value.parts[2].obj is ba
    assert isinstance(serialize(Blob(ba)), Serialized)  # any protocol-5 buffer, not only bytes
    small = serialize((1, b"x" * (OOB_MIN_BYTES - 1)))
    assert type(small) is bytes  # small buffers stay in band: a plain pickle


@pytest.mark.parametrize("size", [MID, BIG], ids=["one-slot", "streamed"])
def test_out_of_band_payloads_arrive_identical_typed_writable_and_owned(
    spawn: SpawnContext, size: int
) -> None:
    bodies = [_body(size, seed) for seed in range(6)]
    messages: list[object] = [
        (1, bodies[0]),  # bytes member: stays bytes
        [2, bytearray(bodies[1])],  # bytearray member: arrives a writable bytearray
        {"step": 3, "payload": bodies[2]},
        bytearray(bodies[3]),  # top-level buffers arrive as writable bytearrays
        memoryview(bodies[4]),
        Blob(bytearray(bodies[5])),  # numpy-like: rebuilt over memory the reader owns
    ]
    # Enough traffic after them that every ring slot is overwritten before the reader looks.
    filler = [bytes(SLOT)] * 8
    with MessageQueue(1, 1, max_chunk_bytes=SLOT, max_chunks=6) as q:
        parent, child = spawn.Pipe()
        n = len(messages) + len(filler)
        p = spawn.Process(
            target=shm_workers.read_and_describe, args=(q.export_handle(), 0, n, child)
        )
        p.start()
        q.wait_until_ready(timeout=30)
        for m in messages + filler:
            q.enqueue(m, timeout=30)
        got = parent.recv()[: len(messages)]
        p.join(30)
        assert p.exitcode == 0
    sha = [_sha(b) for b in bodies]
    assert got == [
        ("bytes", "bytes", sha[0], False),
        ("bytearray", "bytearray", sha[1], True),
        ("bytes", "bytes", sha[2], False),
        ("bytearray", "bytearray", sha[3], True),
        ("bytearray", "bytearray", sha[4], True),
        ("Blob", "bytearray", sha[5], True),
    ]


def test_mutating_a_large_source_buffer_after_enqueue_does_not_change_what_readers_get(
    spawn: SpawnContext,
) -> None:
    source = bytearray(b"A" * BIG)
    with MessageQueue(1, 1, max_chunk_bytes=SLOT, max_chunks=8) as q:
        parent, child = spawn.Pipe()
        p = spawn.Process(target=shm_workers.read_after_go, args=(q.export_handle(), 0, child))
        p.start()
        q.wait_until_ready(timeout=30)
        assert parent.recv() == "ready"
        q.enqueue({"payload": source}, timeout=30)
        source[:] = b"B" * BIG  # after enqueue returned, before the reader looks
        parent.send("go")
        assert parent.recv() == {"payload": bytearray(b"A" * BIG)}
        p.join(30)


@pytest.mark.numpy
def test_numpy_arrays_at_any_depth_arrive_equal_and_writable(spawn: SpawnContext) -> None:
    np = pytest.importorskip("numpy")
    arr = np.arange(BIG // 4, dtype=np.float32).reshape(256, -1)
    msg = {"outer": [{"x": arr, "y": np.zeros(3)}]}
    assert isinstance(serialize(msg), Serialized)
    with MessageQueue(1, 1, max_chunk_bytes=SLOT, max_chunks=6) as q:
        parent, child = spawn.Pipe()
        p = spawn.Process(
            target=shm_workers.read_all_objects, args=(q.export_handle(), 0, 1, child)
        )
        p.start()
        q.wait_until_ready(timeout=30)
        q.enqueue(msg, timeout=30)
        (got,) = parent.recv()
        p.join(30)
    inner = got["outer"][0]
    assert inner["x"].dtype == arr.dtype
    assert inner["x"].shape == arr.shape
    assert (inner["x"] == arr).all()
    assert (inner["y"] == 0).all()


def test_in_band_pickles_are_unchanged_for_small_and_unbufferable_objects() -> None:
    for obj in [(1, b"x"), {"a": [1, 2.0, "s"]}, None, bytearray(b"ab")]:
        msg = serialize(obj)
        assert type(msg) is bytes
        assert pickle.loads(msg) == obj
