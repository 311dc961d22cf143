"""Out-of-band pickles stream like raw bytes: the reader rebuilds every buffer while the writer is
still copying the message in, straight into the objects it delivers, whatever the geometry."""

from __future__ import annotations

import os
from multiprocessing.context import SpawnContext
from typing import Any

import pytest
import shm_workers
from shm_workers import Blob

from cardcage.shm import MessageQueue, QueueTimeoutError, ShmBroadcastError, _sys
from cardcage.shm._payload import Serialized, serialize
from cardcage.shm.ring import RingReader


def _canonical(obj: Any) -> Any:
    """``obj`` with every type that matters spelled out, so == also compares types."""
    if isinstance(obj, Blob):
        return ("Blob", bytes(obj.data))
    if isinstance(obj, tuple):
        return ("tuple", *map(_canonical, obj))
    if isinstance(obj, list):
        return ["list", *map(_canonical, obj)]
    if isinstance(obj, dict):
        return {k: _canonical(v) for k, v in obj.items()}
    if isinstance(obj, bytes | bytearray):
        return (type(obj).__name__, bytes(obj))
    return obj


def _messages() -> list[Any]:
    return [
        # one buffer, one fragment of the 1 MiB geometry
        (7, os.urandom(900 << 10)),
        # an in-band part (six 60 KiB bytes stay in the pickle) longer than a streamed piece
        # and than a 256 KiB fragment, then a buffer
        {"head": [os.urandom(60 << 10) for _ in range(6)], "tail": os.urandom(1500 << 10)},
        # several buffers of both kinds, one of them empty, between in-band members
        [bytearray(os.urandom(300 << 10)), Blob(bytearray()), b"", os.urandom(70 << 10)],
        # twenty buffers whose edges fall anywhere inside pieces and fragments
        tuple(os.urandom((100 << 10) + 37 * i) for i in range(20)),
    ]


@pytest.mark.parametrize(
    "chunk",
    [
        pytest.param(1 << 20, id="streamed-pieces-of-one-fragment"),
        pytest.param(256 << 10, id="streamed-fragments"),
        pytest.param(100 << 10, id="whole-fragments"),
    ],
)
def test_out_of_band_messages_arrive_intact_whatever_the_fragment_and_piece_edges(
    spawn: SpawnContext, chunk: int
) -> None:
    messages = _messages()
    assert all(isinstance(serialize(m), Serialized) for m in messages)
    with MessageQueue(1, 1, max_chunk_bytes=chunk, max_chunks=4) as q:
        parent, child = spawn.Pipe()
        p = spawn.Process(
            target=shm_workers.read_all_objects,
            args=(q.export_handle(), 0, len(messages), child),
        )
        p.start()
        q.wait_until_ready(timeout=30)
        for m in messages:
            q.enqueue(m, timeout=30)
        got = parent.recv()
        p.join(30)
        assert p.exitcode == 0
    assert [_canonical(m) for m in got] == [_canonical(m) for m in messages]


@pytest.mark.parametrize(
    ("message", "stall_at"),
    [
        # raw: piece 3 of one fragment; piece 2 of the second fragment (8 pieces in the first)
        pytest.param(os.urandom(900 << 10), 3, id="raw-one-fragment"),
        pytest.param(os.urandom((2 << 20) + 5), 10, id="raw-second-fragment"),
        # out of band: the first piece takes three copies (header, pickle, buffer)
        pytest.param((7, os.urandom(900 << 10)), 5, id="oob-one-fragment"),
        pytest.param((7, os.urandom((2 << 20) + 5)), 12, id="oob-second-fragment"),
    ],
)
def test_a_dequeue_that_times_out_mid_message_leaves_the_message_to_the_next_one(
    spawn: SpawnContext, message: Any, stall_at: int
) -> None:
    # The writer stalls with part of a fragment published; the reader copies that part out,
    # waits for the rest and times out. The next dequeue must deliver the whole message, with
    # the pieces already copied neither lost nor taken twice.
    first = os.urandom(300 << 10)
    parent, child = spawn.Pipe()
    writer = spawn.Process(
        target=shm_workers.writer_stalls_mid_stream, args=(1 << 20, first, message, stall_at, child)
    )
    writer.start()
    q = MessageQueue.create_from_handle(parent.recv(), 0)
    try:
        q.wait_until_ready(timeout=30)
        assert q.dequeue(timeout=30) == first
        assert parent.recv() == "midway"
        reader = q._reader
        assert isinstance(reader, RingReader)
        with pytest.raises(QueueTimeoutError):
            q.dequeue(timeout=0.2)
        k = reader.seq + 1  # the fragment being streamed (an earlier one is released)
        d = reader.desc_words[(k - 1) % reader.n_slots]
        assert reader.u[d + 3] == k  # it was streaming, with pieces in
        assert reader.u[d + 4] > 0
        parent.send("go")
        assert _canonical(q.dequeue(timeout=30)) == _canonical(message)
        assert parent.recv() == "sent"
        parent.send("done")
        writer.join(30)
        assert writer.exitcode == 0
    finally:
        q.close()


def test_without_uninitialised_bytes_members_still_arrive_as_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where the C API behind _sys.new_bytes is missing (not CPython), readers take whole
    # fragments and rebuild bytes members from bytearrays: same objects, one more copy.
    monkeypatch.setattr(_sys, "NEW_BYTES", False)
    monkeypatch.setattr(_sys, "new_bytes", lambda n: None)
    message = {"a": os.urandom(700 << 10), "b": bytearray(os.urandom(90 << 10))}
    with MessageQueue(1, 1, max_chunk_bytes=256 << 10, max_chunks=6) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue(message, timeout=5)
            writer.enqueue((1, os.urandom(100 << 10)), timeout=5)
            assert _canonical(reader.dequeue(timeout=5)) == _canonical(message)
            assert type(reader.dequeue(timeout=5)[1]) is bytes
        finally:
            reader.close()


@pytest.mark.parametrize(
    ("word", "complaint"),
    [
        pytest.param(0, r"declares 1099511627776 buffers", id="buffer-count"),
        pytest.param(2, r"declares \d+ bytes of header, pickle and buffers", id="buffer-length"),
    ],
)
@pytest.mark.parametrize("size", [100 << 10, 600 << 10], ids=["one-fragment", "three-fragments"])
def test_an_out_of_band_header_that_contradicts_its_message_is_a_typed_error(
    word: int, complaint: str, size: int
) -> None:
    with MessageQueue(1, 1, max_chunk_bytes=256 << 10, max_chunks=4) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue((1, os.urandom(size)), timeout=5)
            end = reader._reader
            assert isinstance(end, RingReader)
            header = end.data_off(1, end.desc_words[0]) // 8  # [n_buffers, pickle, length, kind]
            # what a stray write could leave: a huge buffer count, or a buffer one byte longer
            end.u[header + word] = 1 << 40 if word == 0 else size + 1
            with pytest.raises(ShmBroadcastError, match=complaint + r".*recreate the queue"):
                reader.dequeue(timeout=5)
        finally:
            reader.close()
