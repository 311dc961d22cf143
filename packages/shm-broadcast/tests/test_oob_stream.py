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
from cardcage.shm._reader import RingReader


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
        got = shm_workers.recv(parent)
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
@pytest.mark.parametrize(
    "finished_first", [True, False], ids=["fragment-complete", "fragment-maybe-streaming"]
)
def test_a_dequeue_that_times_out_mid_message_leaves_the_message_to_the_next_one(
    spawn: SpawnContext, message: Any, stall_at: int, finished_first: bool
) -> None:
    # The writer stalls with part of a fragment published; the reader copies that part out,
    # waits for the rest and times out. The next dequeue must deliver the whole message, with
    # the pieces already copied neither lost nor taken twice, whether the writer has finished
    # the fragment by then or is still copying it.
    first = os.urandom(300 << 10)
    parent, child = spawn.Pipe()
    writer = spawn.Process(
        target=shm_workers.writer_stalls_mid_stream, args=(1 << 20, first, message, stall_at, child)
    )
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    try:
        q.wait_until_ready(timeout=30)
        assert q.dequeue(timeout=30) == first
        assert shm_workers.recv(parent) == "midway"
        reader = q._reader
        assert isinstance(reader, RingReader)
        with pytest.raises(QueueTimeoutError):
            q.dequeue(timeout=0.2)
        k = reader.seq + 1  # the fragment being streamed (an earlier one is released)
        d = reader.desc_words[(k - 1) % reader.n_slots]
        assert reader.u[d + 3] == k  # it was streaming, with pieces in
        assert reader.u[d + 4] > 0
        parent.send("go")
        if finished_first:
            assert shm_workers.recv(parent) == "sent"
        assert _canonical(q.dequeue(timeout=30)) == _canonical(message)
        if not finished_first:
            assert shm_workers.recv(parent) == "sent"
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
    ("word", "value", "complaint"),
    [
        pytest.param(0, 1 << 40, r"declares 1099511627776 buffers", id="buffer-count"),
        pytest.param(2, None, r"declares \d+ bytes of header, pickle and buffers", id="length"),
        pytest.param(2, 1 << 62, r"declares \d+ bytes of header", id="huge-length"),
        pytest.param(3, 7, r"buffer 0 of unknown kind 7", id="kind"),
    ],
)
@pytest.mark.parametrize("size", [100 << 10, 600 << 10], ids=["one-fragment", "three-fragments"])
def test_an_out_of_band_header_that_contradicts_its_message_is_a_typed_error(
    word: int, value: int | None, complaint: str, size: int
) -> None:
    # Checked before anything is allocated or copied: a stray write must never become a
    # MemoryError, or a copy past the end of a buffer.
    with MessageQueue(1, 1, max_chunk_bytes=256 << 10, max_chunks=4) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue((1, os.urandom(size)), timeout=5)
            end = reader._reader
            assert isinstance(end, RingReader)
            header = end.data_off(1, end.desc_words[0]) // 8  # [n_buffers, pickle, length, kind]
            end.u[header + word] = size + 1 if value is None else value  # a stray write
            with pytest.raises(ShmBroadcastError, match=complaint + r".*recreate the queue"):
                reader.dequeue(timeout=5)
        finally:
            reader.close()


class _Interrupted(BaseException):
    """Stands for a KeyboardInterrupt landing in the middle of a copy out of the ring."""


@pytest.mark.parametrize("nth", [1, 3, 4, 9])
def test_a_dequeue_interrupted_inside_a_copy_delivers_the_message_intact_on_the_next_call(
    monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    # Twenty buffers in whole 200 KiB fragments; the nth raw copy out of the ring raises. The
    # reader keeps the message it was rebuilding, and the next dequeue must neither skip nor
    # repeat bytes (nor copy past a buffer).
    message = tuple(os.urandom((100 << 10) + 37 * i) for i in range(20))
    with MessageQueue(1, 1, max_chunk_bytes=200 << 10, max_chunks=16) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue(message, timeout=5)
            copy = _sys.memmove
            calls = 0

            def interrupted_once(dst: int, src: int, n: int) -> None:
                nonlocal calls
                calls += 1
                if calls == nth:
                    raise _Interrupted
                copy(dst, src, n)

            monkeypatch.setattr(_sys, "memmove", interrupted_once)
            with pytest.raises(_Interrupted):
                reader.dequeue(timeout=5)
            assert reader.dequeue(timeout=5) == message
        finally:
            reader.close()


@pytest.mark.parametrize("kind", ["raw", "oob"])
@pytest.mark.parametrize("stray", ["message-length", "fragment-length"])
def test_fragments_whose_lengths_contradict_their_message_are_a_typed_error(
    kind: str, stray: str
) -> None:
    # 600 KiB in 256 KiB fragments. A stray write shortens the message length the first
    # fragment announces, or makes the second fragment claim more than a slot: either must be
    # the typed corruption error, never a copy past the object being filled.
    body = os.urandom(600 << 10)
    message: Any = body if kind == "raw" else (1, body)
    chunk = 256 << 10
    with MessageQueue(1, 1, max_chunk_bytes=chunk, max_chunks=4) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue(message, timeout=5)
            end = reader._reader
            assert isinstance(end, RingReader)
            first, second = end.desc_words[0], end.desc_words[1]
            if stray == "message-length":
                end.u[first + 2] -= 1  # _S_TOTAL
            else:
                info = end.u[second + 1]  # length | flags << 56
                end.u[second + 1] = info - (info & ((1 << 56) - 1)) + chunk + 1
            with pytest.raises(ShmBroadcastError, match=r"recreate the queue"):
                reader.dequeue(timeout=5)
        finally:
            reader.close()
