"""Flow control, timeouts, context-manager semantics and lifecycle, with writer and reader ends in
one process over real shared memory (the protocol does not care which process holds an end)."""

from __future__ import annotations

import gc
import logging
import os
import stat
import threading
from collections.abc import Iterator

import pytest

from cardcage.hooks.errors import CardcageError, InvalidEnvVarError
from cardcage.shm import (
    AttachError,
    CancelledError,
    MessageQueue,
    QueueClosedError,
    QueueRoleError,
    QueueTimeoutError,
    RemoteAddressRequiredError,
    ShmRingBuffer,
    ShmSpaceError,
)

CHUNK = 256


@pytest.fixture
def pair() -> Iterator[tuple[MessageQueue, MessageQueue]]:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=3)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.wait_until_ready(timeout=5)
    reader.wait_until_ready(timeout=5)
    yield writer, reader
    reader.close()
    writer.close()


def test_full_ring_blocks_the_writer_and_timeout_leaves_the_queue_usable(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair
    for i in range(3):
        writer.enqueue(i, timeout=0)
    with pytest.raises(QueueTimeoutError) as info:
        writer.enqueue(3, timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, CardcageError)
    assert "rank 0" in str(info.value)
    assert reader.dequeue(timeout=1) == 0
    writer.enqueue(3, timeout=1)
    assert [reader.dequeue(timeout=1) for _ in range(3)] == [1, 2, 3]


def test_dequeue_on_an_empty_queue_times_out_and_zero_timeout_polls(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair
    with pytest.raises(QueueTimeoutError):
        reader.dequeue(timeout=0.05)
    with pytest.raises(TimeoutError):
        reader.dequeue(timeout=0)
    writer.enqueue(b"late")
    assert reader.dequeue(timeout=0) == b"late"


def test_exception_inside_acquire_write_publishes_nothing(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair

    def half_write() -> None:
        with writer.acquire_write(timeout=1) as buf:
            buf[:4] = b"half"
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        half_write()
    with pytest.raises(QueueTimeoutError):
        reader.dequeue(timeout=0)
    writer.enqueue(b"whole")
    assert reader.dequeue(timeout=1) == b"whole"


def test_exception_inside_acquire_read_still_releases_the_slot() -> None:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    seen = []

    def failing_read() -> None:
        with reader.acquire_read(timeout=1) as buf:
            seen.append(bytes(buf))
            raise KeyError

    try:
        writer.enqueue(b"x")
        with pytest.raises(KeyError):
            failing_read()
        assert seen == [b"x"]
        with writer.acquire_write(timeout=0.5) as buf:
            buf[:2] = b"ok"
        with reader.acquire_read(timeout=1) as buf:
            assert bytes(buf[:2]) == b"ok"
            assert len(buf) == CHUNK
    finally:
        reader.close()
        writer.close()


def test_acquire_read_view_is_released_after_the_block(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair
    writer.enqueue(b"abc")
    with reader.acquire_read(timeout=1) as buf:
        kept = buf
        assert bytes(kept) == b"abc"
    with pytest.raises(ValueError, match="released"):
        bytes(kept)


def test_a_large_message_abandoned_mid_stream_is_never_delivered_half() -> None:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    try:
        with pytest.raises(QueueTimeoutError):
            writer.enqueue(b"z" * (10 * CHUNK), timeout=0.05)  # 2 of 10 fragments fit
        with pytest.raises(QueueTimeoutError):
            reader.dequeue(timeout=0.05)  # consumes the 2 fragments, waits for the 3rd
        writer.enqueue(b"next", timeout=1)
        assert reader.dequeue(timeout=1) == b"next"
    finally:
        reader.close()
        writer.close()


def test_close_lets_readers_drain_then_raises_closed(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair
    writer.enqueue(1)
    writer.enqueue(2)
    writer.close()
    assert reader.dequeue(timeout=1) == 1
    assert reader.dequeue(timeout=1) == 2
    with pytest.raises(QueueClosedError) as info:
        reader.dequeue(timeout=1)
    assert isinstance(info.value, EOFError)
    with pytest.raises(QueueClosedError):
        writer.enqueue(3)


def test_shutdown_from_another_thread_cancels_a_blocked_dequeue(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    _, reader = pair
    errors: list[BaseException] = []

    def body() -> None:
        try:
            reader.dequeue(timeout=30)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    reader.shutdown()
    t.join(10)
    assert not t.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], CancelledError)
    assert str(errors[0]) == "cancelled"
    assert reader.shutting_down


def test_roles_are_enforced_with_typed_errors(pair: tuple[MessageQueue, MessageQueue]) -> None:
    writer, reader = pair
    with pytest.raises(QueueRoleError, match="Only readers can dequeue"):
        writer.dequeue()
    with pytest.raises(QueueRoleError, match="Only writers can enqueue"):
        reader.enqueue(1)
    assert isinstance(QueueRoleError("x"), RuntimeError)


def test_broadcast_object_returns_the_object_on_every_side(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = pair
    assert writer.broadcast_object({"a": 1}) == {"a": 1}
    assert reader.broadcast_object() == {"a": 1}


def test_insufficient_dev_shm_fails_at_construction_with_required_and_free_bytes() -> None:
    with pytest.raises(ShmSpaceError) as info:
        ShmRingBuffer(1, 1 << 40, 64)
    err = info.value
    assert err.required > err.free
    assert str(err.required) in str(err)
    assert str(err.free) in str(err)
    assert isinstance(err, RuntimeError)


def test_segment_is_private_and_unlinked_once_ready() -> None:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2)
    assert writer.buffer is not None
    path = os.path.join("/dev/shm", writer.buffer.name)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.wait_until_ready(timeout=5)
    assert not os.path.exists(path)
    writer.enqueue(b"still works")
    assert reader.dequeue(timeout=1) == b"still works"
    reader.close()
    writer.close()


def test_writer_close_before_ready_unlinks_the_segment() -> None:
    writer = MessageQueue(2, 2, max_chunk_bytes=CHUNK, max_chunks=2)
    assert writer.buffer is not None
    path = os.path.join("/dev/shm", writer.buffer.name)
    with pytest.raises(QueueTimeoutError, match=r"Missing reader ranks: \[0, 1\]"):
        writer.wait_until_ready(timeout=0.01)
    writer.close()
    assert not os.path.exists(path)


def test_attaching_to_a_missing_segment_is_a_clear_error() -> None:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2)
    handle = writer.export_handle()
    writer.close()
    with pytest.raises(AttachError, match="does not exist"):
        MessageQueue.create_from_handle(handle, 0)


def test_a_rank_that_is_not_a_local_reader_gets_a_clear_error() -> None:
    with (
        MessageQueue(1, 1, local_reader_ranks=[3]) as writer,
        pytest.raises(AttachError, match="rank 1 is not a local reader"),
    ):
        MessageQueue.create_from_handle(writer.export_handle(), 1)


def test_a_reader_slot_cannot_be_claimed_twice() -> None:
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        with pytest.raises(AttachError, match="already taken"):
            MessageQueue.create_from_handle(writer.export_handle(), 0)
        reader.close()


def test_a_recreated_segment_is_detected_by_its_epoch() -> None:
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2) as writer:
        handle = writer.export_handle()
        forged = type(handle)(**{**handle.__dict__, "epoch": handle.epoch ^ 1})
        with pytest.raises(AttachError, match="epoch"):
            MessageQueue.create_from_handle(forged, 0)


def test_remote_readers_without_an_explicit_address_are_a_clear_error() -> None:
    with pytest.raises(RemoteAddressRequiredError) as info:
        MessageQueue(3, 1)
    assert isinstance(info.value, ValueError)
    assert info.value.n_remote == 2


def test_a_detached_reader_no_longer_holds_the_writer_back() -> None:
    writer = MessageQueue(2, 2, max_chunk_bytes=CHUNK, max_chunks=1)
    r0 = MessageQueue.create_from_handle(writer.export_handle(), 0)
    r1 = MessageQueue.create_from_handle(writer.export_handle(), 1)
    writer.wait_until_ready(timeout=5)
    writer.enqueue(1)
    r1.close()
    assert r0.dequeue(timeout=1) == 1
    writer.enqueue(2, timeout=1)
    assert r0.dequeue(timeout=1) == 2
    r0.close()
    writer.close()


def test_a_lagging_reader_is_named_in_a_periodic_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CARDCAGE_SHM_WARNING_INTERVAL", "0.001")
    monkeypatch.setenv("CARDCAGE_SHM_BUSY_US", "0")
    writer = MessageQueue(1, 1, local_reader_ranks=[5], max_chunk_bytes=CHUNK, max_chunks=1)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 5)
    try:
        writer.enqueue(0)
        with (
            caplog.at_level(logging.WARNING, logger="cardcage.shm"),
            pytest.raises(QueueTimeoutError),
        ):
            writer.enqueue(1, timeout=0.5)
        assert f"rank 5 (pid {os.getpid()}, attached, 1 unread)" in caplog.text
    finally:
        reader.close()
        writer.close()


def test_an_invalid_tuning_variable_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDCAGE_SHM_BUSY_US", "fast")
    with pytest.raises(InvalidEnvVarError, match="CARDCAGE_SHM_BUSY_US"):
        MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1)


def test_a_writer_dropped_without_close_still_closes_the_queue() -> None:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.enqueue(1)
    del writer
    gc.collect()
    assert reader.dequeue(timeout=1) == 1
    with pytest.raises(QueueClosedError):
        reader.dequeue(timeout=1)
    reader.close()


def test_shutdown_cancels_a_writer_blocked_on_a_full_ring(
    pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, _ = pair
    for i in range(3):
        writer.enqueue(i, timeout=0)
    errors: list[BaseException] = []

    def body() -> None:
        try:
            writer.enqueue(3, timeout=30)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    writer.shutdown()
    t.join(10)
    assert not t.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], CancelledError)
