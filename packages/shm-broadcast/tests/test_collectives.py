"""barrier() and all_gather_object() across the writer and its readers: real processes, real
shared memory, real sockets.

Readers run in a small pool of spawned processes (spawning is what costs time on a 2-core
machine), each running one scripted reader per test (``shm_workers.run_ops``); the writer is the
test process. Tests that kill a reader spawn their own victim.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import shm_workers

from cardcage.shm import (
    CancelledError,
    CollectiveMismatchError,
    MessageQueue,
    QueueClosedError,
    QueueRoleError,
    QueueTimeoutError,
    ReaderDiedError,
    WriterDiedError,
)
from cardcage.shm.queue import Handle

LOOPBACK = "127.0.0.1"
CHUNK = 1024  # collective pieces are min(slot, 64 KiB): 1 KiB here, so large objects fragment
Ops = list[tuple[Any, ...]]


class Pool:
    """Reader processes that each run one scripted reader at a time."""

    def __init__(self, n: int) -> None:
        ctx = mp.get_context("spawn")
        self.conns = []
        self.procs = []
        for _ in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=shm_workers.serve, args=(child,), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)

    def start(
        self, handle: Handle, scripts: dict[int, Ops], handles: dict[int, Handle] | None = None
    ) -> dict[int, int]:
        """Run ``scripts`` (rank -> ops), one per pooled process, each with ``handle`` unless
        ``handles`` names another for its rank; returns rank -> process."""
        where = {}
        for i, (rank, ops) in enumerate(scripts.items()):
            self.conns[i].send(((handles or {}).get(rank, handle), rank, ops))
            where[rank] = i
        return where

    def signal(self, i: int) -> Any:
        tag, value = shm_workers.recv(self.conns[i])
        assert tag == "signal"
        return value

    def go(self, i: int) -> None:
        self.conns[i].send("go")

    def results(self, where: dict[int, int]) -> dict[int, list[Any]]:
        out = {}
        for rank, i in where.items():
            tag, records = shm_workers.recv(self.conns[i])
            assert tag == "done", records
            out[rank] = records
        return out

    def stop(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for p in self.procs:
            p.join(10)


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    p = Pool(3)
    yield p
    p.stop()


def error(records: list[Any]) -> tuple[str, dict[str, Any], str]:
    """The error a scripted reader recorded last."""
    assert records, "the reader recorded nothing"
    assert records[-1][0] == "error", records
    _, name, fields, text = records[-1]
    return name, fields, text


def run(
    pool: Pool, q: MessageQueue, scripts: dict[int, Ops], writer: Any
) -> tuple[Any, dict[int, list[Any]]]:
    """Start the readers' scripts, make the writer ready, run ``writer(q)``, collect."""
    where = pool.start(q.export_handle(), scripts)
    q.wait_until_ready(timeout=30)
    try:
        mine = writer(q)
    finally:
        q.close()
    return mine, pool.results(where)


@pytest.mark.parametrize(
    "local_ranks",
    [pytest.param([0], id="1-local"), pytest.param([2, 0], id="2-local"), [3, 1, 2]],
)
def test_barrier_and_all_gather_across_local_readers(pool: Pool, local_ranks: list[int]) -> None:
    q = MessageQueue(
        len(local_ranks),
        len(local_ranks),
        local_reader_ranks=local_ranks,
        max_chunk_bytes=CHUNK,
        max_chunks=4,
    )
    scripts: dict[int, Ops] = {
        r: [("barrier", 30), ("gather", {"rank": r}, 30), ("barrier", 30)] for r in local_ranks
    }

    def writer(q: MessageQueue) -> list[Any]:
        q.barrier(timeout=30)
        got = q.all_gather_object({"rank": "writer"}, timeout=30)
        q.barrier(timeout=30)
        return got

    mine, theirs = run(pool, q, scripts, writer)
    # writer first, then readers by rank, whatever order local_reader_ranks lists them in
    expected = [{"rank": "writer"}] + [{"rank": r} for r in sorted(local_ranks)]
    assert mine == expected
    for records in theirs.values():
        assert records == ["ok", expected, "ok"]


def test_remote_only_readers_take_part_over_their_zeromq_connection(pool: Pool) -> None:
    q = MessageQueue(2, 0, connect_ip=LOOPBACK)
    assert q.buffer is None
    scripts: dict[int, Ops] = {r: [("barrier", 30), ("gather", r * 10, 30)] for r in (2, 1)}

    def writer(q: MessageQueue) -> list[Any]:
        q.barrier(timeout=30)
        return q.all_gather_object("w", timeout=30)

    mine, theirs = run(pool, q, scripts, writer)
    assert mine == ["w", 10, 20]
    assert theirs == {1: ["ok", ["w", 10, 20]], 2: ["ok", ["w", 10, 20]]}


def test_local_and_remote_readers_are_ordered_by_rank_together(pool: Pool) -> None:
    # Rank 2 is remote; local rank 3 cannot attach the segment (another /dev/shm, as on another
    # node) and reads over ZeroMQ instead: it takes part as a remote reader.
    q = MessageQueue(
        3, 2, local_reader_ranks=[3, 1], connect_ip=LOOPBACK, max_chunk_bytes=CHUNK, max_chunks=4
    )
    handle = q.export_handle()
    assert handle.buffer_handle is not None
    n, chunk, chunks, _ = handle.buffer_handle
    elsewhere = dataclasses.replace(handle, buffer_handle=(n, chunk, chunks, "cardcage-shm-1-x"))
    scripts: dict[int, Ops] = {r: [("gather", f"r{r}", 30), ("barrier", 30)] for r in (1, 2, 3)}
    where = pool.start(handle, scripts, handles={3: elsewhere})
    try:
        q.wait_until_ready(timeout=30)
        assert q._writer is not None
        assert q._writer.excluded == {0}  # rank 3 (local reader 0) fell back to ZeroMQ
        mine = q.all_gather_object("w", timeout=30)
        q.barrier(timeout=30)
    finally:
        q.close()
    assert mine == ["w", "r1", "r2", "r3"]
    assert all(records == [mine, "ok"] for records in pool.results(where).values())


def test_collectives_interleave_with_messages_without_consuming_or_reordering_them(
    pool: Pool,
) -> None:
    # One local reader dequeues each message before the collective, the other (and the remote
    # one) only after: collectives never consume messages or change their order. Objects larger
    # than the 1 KiB collective piece go through shared memory in several acknowledged pieces.
    q = MessageQueue(
        3, 2, local_reader_ranks=[0, 1], connect_ip=LOOPBACK, max_chunk_bytes=CHUNK, max_chunks=4
    )
    rounds = 6
    big = [bytes([i]) * (i * 1500) for i in range(rounds)]
    eager: Ops = []
    lazy: Ops = []
    for i in range(rounds):
        eager += [("dequeue", 30), ("barrier", 30), ("gather", big[i], 30)]
        lazy += [("barrier", 30), ("gather", big[i], 30), ("dequeue", 30)]

    def writer(q: MessageQueue) -> list[Any]:
        out = []
        for i in range(rounds):
            q.enqueue(("msg", i), timeout=30)
            q.barrier(timeout=30)
            out.append(q.all_gather_object(b"w" * i, timeout=30))
        return out

    mine, theirs = run(pool, q, {0: eager, 1: lazy, 2: lazy}, writer)
    gathered = [[b"w" * i, big[i], big[i], big[i]] for i in range(rounds)]
    assert mine == gathered
    for rank, records in theirs.items():
        msgs = [r for r in records if isinstance(r, tuple)]
        assert msgs == [("msg", i) for i in range(rounds)], rank
        assert [r for r in records if isinstance(r, list)] == gathered
        assert records.count("ok") == rounds


def test_a_reader_that_never_arrives_times_the_writer_out_naming_it_and_the_queue_stays_usable(
    pool: Pool,
) -> None:
    q = MessageQueue(2, 2, local_reader_ranks=[4, 7], max_chunk_bytes=CHUNK, max_chunks=4)
    scripts: dict[int, Ops] = {
        4: [("barrier", 30), ("gather", 4, 30)],
        7: [("signal", "attached"), ("wait",), ("barrier", 30), ("gather", 7, 30)],
    }
    where = pool.start(q.export_handle(), scripts)
    try:
        q.wait_until_ready(timeout=30)
        assert pool.signal(where[7]) == "attached"
        with pytest.raises(QueueTimeoutError) as info:
            q.barrier(timeout=0.3)
        assert isinstance(info.value, TimeoutError)
        assert info.value.missing == (7,)
        assert "local reader 7" in str(info.value)
        with pytest.raises(CollectiveMismatchError):  # the barrier is still pending
            q.all_gather_object("w", timeout=1)
        pool.go(where[7])
        q.barrier(timeout=30)  # carries on with the same barrier
        assert q.all_gather_object("w", timeout=30) == ["w", 4, 7]
    finally:
        q.close()
    assert pool.results(where) == {4: ["ok", ["w", 4, 7]], 7: ["ok", ["w", 4, 7]]}


def test_readers_that_arrive_first_time_out_naming_the_writer_then_carry_on(pool: Pool) -> None:
    q = MessageQueue(2, 1, local_reader_ranks=[0], connect_ip=LOOPBACK)
    early: Ops = [("barrier", 0.2), ("signal", "timed out"), ("barrier", 30)]
    where = pool.start(q.export_handle(), {0: early, 1: early})
    try:
        q.wait_until_ready(timeout=30)
        assert pool.signal(where[0]) == pool.signal(where[1]) == "timed out"
        q.barrier(timeout=30)
    finally:
        q.close()
    results = pool.results(where)
    for rank in (0, 1):
        assert results[rank][0][1] == "QueueTimeoutError"
        assert results[rank][1:] == ["ok"]
    assert results[0][0][2]["missing"] == (-1,)  # a local reader sees who has not arrived
    assert "the writer" in results[0][0][3]


def test_a_sigkilled_local_reader_makes_every_participant_raise_naming_it(pool: Pool) -> None:
    ctx = mp.get_context("spawn")
    q = MessageQueue(2, 2, local_reader_ranks=[1, 2], max_chunk_bytes=CHUNK, max_chunks=4)
    handle = q.export_handle()
    parent, child = ctx.Pipe()
    victim = ctx.Process(target=shm_workers.attach_then_hang, args=(handle, 2, child))
    victim.start()
    where = pool.start(handle, {1: [("barrier", 30)]})
    try:
        q.wait_until_ready(timeout=30)
        pid = shm_workers.recv(parent)
        os.kill(pid, signal.SIGKILL)
        victim.join(10)
        with pytest.raises(ReaderDiedError) as info:
            q.barrier(timeout=30)  # not a timeout: the writer sees the death
        assert (info.value.rank, info.value.pid) == (2, pid)
        assert "barrier #1" in str(info.value)
        with pytest.raises(ReaderDiedError):  # the queue's collectives stay broken
            q.barrier(timeout=30)
    finally:
        q.close()
    name, fields, _ = error(pool.results(where)[1])
    assert name == "ReaderDiedError"
    assert (fields["rank"], fields["pid"]) == (2, pid)


def test_a_sigkilled_remote_reader_is_reported_by_its_disconnection(pool: Pool) -> None:
    ctx = mp.get_context("spawn")
    q = MessageQueue(2, 0, connect_ip=LOOPBACK)
    handle = q.export_handle()
    parent, child = ctx.Pipe()
    victim = ctx.Process(target=shm_workers.read_remote_then_hang, args=(handle, 5, child))
    victim.start()
    where = pool.start(handle, {3: [("gather", 3, 30)]})
    try:
        q.wait_until_ready(timeout=30)
        assert shm_workers.recv(parent) == "ready"
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        with pytest.raises(ReaderDiedError) as info:
            q.all_gather_object("w", timeout=30)
        assert (info.value.rank, info.value.pid, info.value.remote) == (5, victim.pid, True)
    finally:
        q.close()
    name, fields, _ = error(pool.results(where)[3])
    assert name == "ReaderDiedError"
    assert (fields["rank"], fields["remote"]) == (5, True)


def test_a_dead_writer_makes_local_readers_raise_instead_of_waiting() -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    writer = ctx.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 4, child))
    writer.start()
    q = MessageQueue.create_from_handle(shm_workers.recv(parent), 0)
    try:
        parent.send("ready")
        q.wait_until_ready(timeout=30)
        assert shm_workers.recv(parent) == "published"
        os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
        writer.join(10)
        with pytest.raises(WriterDiedError) as info:
            q.barrier(timeout=30)
        assert info.value.pid == writer.pid
        assert "barrier #1" in str(info.value)
    finally:
        q.close()


def test_mismatched_collectives_fail_on_every_participant(pool: Pool) -> None:
    q = MessageQueue(1, 1, local_reader_ranks=[6], max_chunk_bytes=CHUNK, max_chunks=4)
    where = pool.start(q.export_handle(), {6: [("gather", "r", 30)]})
    try:
        q.wait_until_ready(timeout=30)
        with pytest.raises(CollectiveMismatchError) as info:
            q.barrier(timeout=30)
        assert info.value.rank == 6
        assert "all_gather_object #1" in str(info.value)
    finally:
        q.close()
    name, fields, _ = error(pool.results(where)[6])
    assert name == "CollectiveMismatchError"
    assert fields["rank"] == 6


def test_a_reader_that_closed_makes_the_writer_raise_the_closed_error_naming_it(
    pool: Pool,
) -> None:
    q = MessageQueue(2, 2, max_chunk_bytes=CHUNK, max_chunks=4)
    where = pool.start(q.export_handle(), {0: [("barrier", 30)], 1: []})
    try:
        q.wait_until_ready(timeout=30)
        closed = pool.results({1: where[1]})  # rank 1 attached, got ready, closed its end
        assert closed == {1: []}
        with pytest.raises(QueueClosedError, match=r"reader 1 \(pid \d+\) closed") as info:
            q.barrier(timeout=30)
        assert isinstance(info.value, EOFError)
    finally:
        q.close()
    name, _, text = error(pool.results({0: where[0]})[0])
    assert name == "QueueClosedError"
    assert "reader 1" in text


def test_closed_queues_raise_the_closed_error(pool: Pool) -> None:
    q = MessageQueue(2, 1, local_reader_ranks=[0], connect_ip=LOOPBACK)
    # The writer closes while (or before) both readers wait in the barrier.
    where = pool.start(q.export_handle(), {0: [("barrier", 30)], 1: [("barrier", 30)]})
    q.wait_until_ready(timeout=30)
    q.close()
    with pytest.raises(QueueClosedError):
        q.barrier()
    with pytest.raises(QueueClosedError):
        q.all_gather_object(1)
    for records in pool.results(where).values():
        assert error(records)[0] == "QueueClosedError"
    with MessageQueue(1, 1) as w:
        r = MessageQueue.create_from_handle(w.export_handle(), 0)
        w.wait_until_ready(timeout=30)
        r.wait_until_ready(timeout=30)
        r.close()
        with pytest.raises(QueueClosedError, match="closed"):
            r.barrier(timeout=1)


def test_zero_readers_return_at_once() -> None:
    with MessageQueue(0, 0) as q:
        marker = object()
        assert q.barrier() is None
        assert q.all_gather_object(marker)[0] is marker
        assert q.all_gather_object(marker) == [marker]


def test_collectives_need_a_ready_queue_and_shutdown_cancels_a_waiting_one() -> None:
    with MessageQueue(1, 1) as w:
        r = MessageQueue.create_from_handle(w.export_handle(), 0)
        with pytest.raises(QueueRoleError, match="wait_until_ready"):
            w.barrier(timeout=1)
        w.wait_until_ready(timeout=30)
        r.wait_until_ready(timeout=30)
        raised: list[BaseException] = []

        def wait() -> None:
            try:
                w.barrier(timeout=30)
            except BaseException as exc:  # reported to the test
                raised.append(exc)

        t = threading.Thread(target=wait)
        t.start()
        w.shutdown()
        t.join(10)
        assert len(raised) == 1
        assert isinstance(raised[0], CancelledError)
        r.close()
