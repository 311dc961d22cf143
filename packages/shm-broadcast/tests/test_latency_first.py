"""Latency-first mode: the writer's choice reaches readers in other processes through the handle,
and a reader that never parks still ends every wait the way a parking one does (message,
timeout, close, dead writer, ``shutdown()``). The default mode is checked to keep parking."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing.context import SpawnContext

import pytest
import shm_workers

from cardcage.hooks.errors import CardcageError, InvalidEnvVarError
from cardcage.shm import (
    CancelledError,
    MessageQueue,
    QueueClosedError,
    QueueTimeoutError,
    WriterDiedError,
)
from cardcage.shm._layout import R_PARKED

CHUNK = 512


@pytest.fixture
def spinning_pair() -> Iterator[tuple[MessageQueue, MessageQueue]]:
    writer = MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=3, latency_first=True)
    reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.wait_until_ready(timeout=5)
    reader.wait_until_ready(timeout=5)
    yield writer, reader
    reader.close()
    writer.close()


def _wait_in_another_process(
    spawn: SpawnContext, q: MessageQueue, timeout: float
) -> tuple[bool, str, int]:
    parent, child = spawn.Pipe()
    p = spawn.Process(
        target=shm_workers.wait_in_empty_queue, args=(q.export_handle(), 0, timeout, child)
    )
    p.start()
    q.wait_until_ready(timeout=30)
    assert shm_workers.recv(parent) == "ready"
    report: tuple[bool, str, int] = shm_workers.recv(parent)
    parent.send("done")
    p.join(30)
    assert p.exitcode == 0
    return report


def test_latency_first_reaches_readers_built_from_the_handle_in_another_process(
    spawn: SpawnContext,
) -> None:
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2, latency_first=True) as q:
        assert q.export_handle().latency_first
        mode, ended, parks = _wait_in_another_process(spawn, q, 0.3)
    # The reader's own environment said no; the handle won. It waited 0.3 s, 300 times the
    # default busy window, without a single futex park, and still ended with the typed timeout.
    assert (mode, ended, parks) == (True, "QueueTimeoutError", 0)


def test_default_mode_readers_park_while_they_wait(spawn: SpawnContext) -> None:
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2) as q:
        assert not q.export_handle().latency_first
        mode, ended, parks = _wait_in_another_process(spawn, q, 0.3)
    assert (mode, ended) == (False, "QueueTimeoutError")
    assert parks >= 1


def test_default_mode_reader_shows_the_writer_it_is_parked_and_is_woken(
    spawn: SpawnContext,
) -> None:
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2) as q:
        parent, child = spawn.Pipe()
        p = spawn.Process(
            target=shm_workers.wait_for_one_message, args=(q.export_handle(), 0, child)
        )
        p.start()
        q.wait_until_ready(timeout=30)
        assert shm_workers.recv(parent) == "ready"
        writer = q._writer
        assert writer is not None
        give_up = time.monotonic() + 30
        while not writer.u[writer.reader_lines[0] + R_PARKED]:  # what decides the wake syscall
            assert time.monotonic() < give_up, "the idle reader never parked"
            time.sleep(0.001)
        q.enqueue(b"wake up", timeout=5)
        msg, parks = shm_workers.recv(parent)
        p.join(30)
        assert p.exitcode == 0
    assert msg == b"wake up"
    assert parks >= 1


def test_latency_first_readers_receive_small_and_streamed_messages_in_order(
    spawn: SpawnContext,
) -> None:
    messages: list[object] = [b"x" * 64, os.urandom(3 * CHUNK + 7), {"k": os.urandom(CHUNK)}]
    messages.append(os.urandom(1 << 20))  # large enough to stream through a 1 MiB slot
    with MessageQueue(2, 2, max_chunk_bytes=1 << 20, max_chunks=2, latency_first=True) as q:
        handle = q.export_handle()
        pipes = [spawn.Pipe() for _ in range(2)]
        procs = [
            spawn.Process(target=shm_workers.read_all, args=(handle, r, len(messages), child))
            for r, (_, child) in enumerate(pipes)
        ]
        for p in procs:
            p.start()
        q.wait_until_ready(timeout=30)
        for m in messages:
            q.enqueue(m, timeout=30)
        expected = [shm_workers.digest(m) for m in messages]
        for (parent, _), p in zip(pipes, procs, strict=True):
            assert shm_workers.recv(parent) == expected
            p.join(30)
            assert p.exitcode == 0


def test_a_latency_first_reader_detects_a_dead_writer_without_parking(
    spawn: SpawnContext,
) -> None:
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(2, CHUNK, 4, child, True))
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    assert q.latency_first
    parent.send("ready")
    q.wait_until_ready(timeout=30)
    assert shm_workers.recv(parent) == "published"
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    assert [q.dequeue(timeout=30) for _ in range(2)] == [
        i.to_bytes(4, "little") * (CHUNK // 8) for i in range(2)
    ]
    with pytest.raises(WriterDiedError) as info:
        q.dequeue(timeout=30)
    assert (info.value.pid, info.value.delivered) == (writer.pid, 2)
    assert q._reader is not None
    assert q._reader.parks == 0
    q.close()


def test_a_latency_first_reader_sees_the_close_while_it_waits(
    spinning_pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = spinning_pair
    writer.enqueue(1)
    errors: list[BaseException] = []
    got: list[object] = []

    def body() -> None:
        try:
            while True:
                got.append(reader.dequeue(timeout=30))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    writer.close()
    t.join(30)
    assert not t.is_alive()
    assert got == [1]
    assert len(errors) == 1
    assert isinstance(errors[0], QueueClosedError)


def test_shutdown_cancels_a_latency_first_reader(
    spinning_pair: tuple[MessageQueue, MessageQueue],
) -> None:
    _, reader = spinning_pair
    errors: list[BaseException] = []

    def body() -> None:
        try:
            reader.dequeue(timeout=30)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    reader.shutdown()
    t.join(30)
    assert not t.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], CancelledError)


def test_a_latency_first_timeout_is_the_typed_timeout_and_zero_still_polls(
    spinning_pair: tuple[MessageQueue, MessageQueue],
) -> None:
    writer, reader = spinning_pair
    with pytest.raises(QueueTimeoutError) as info:
        reader.dequeue(timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, CardcageError)
    with pytest.raises(QueueTimeoutError):
        reader.dequeue(timeout=0)
    writer.enqueue(b"late")
    assert reader.dequeue(timeout=0) == b"late"


def test_the_environment_variable_sets_the_writers_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARDCAGE_SHM_LATENCY_FIRST", "1")
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1) as q:
        assert q.latency_first
        assert q.export_handle().latency_first
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1, latency_first=False) as q:
        assert not q.export_handle().latency_first  # an explicit argument wins


def test_an_invalid_latency_first_value_is_a_typed_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARDCAGE_SHM_LATENCY_FIRST", "yes")
    with pytest.raises(InvalidEnvVarError, match="CARDCAGE_SHM_LATENCY_FIRST") as info:
        MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1)
    assert "unset CARDCAGE_SHM_LATENCY_FIRST" in str(info.value)
    with pytest.raises(TypeError, match="latency_first must be True, False or None"):
        MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=1, latency_first="yes")  # type: ignore[arg-type]


def test_a_latency_first_reader_in_a_collective_still_detects_a_dead_writer(
    spawn: SpawnContext,
) -> None:
    # Collectives wait as in the default mode (they park and check the writer's pid between
    # parks); a collective that inherited the endless busy window would never check it, and
    # would end in a timeout instead.
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 4, child, True))
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    try:
        assert q.latency_first
        parent.send("ready")
        q.wait_until_ready(timeout=30)
        assert shm_workers.recv(parent) == "published"
        os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
        writer.join(10)
        with pytest.raises(WriterDiedError) as info:
            q.barrier(timeout=30)
        assert info.value.pid == writer.pid
    finally:
        q.close()
