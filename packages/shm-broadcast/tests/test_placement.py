"""Where fragments land in the data region: back in slot 0 whenever the ring is drained, never
over a fragment some reader has not released (writer and readers in one process)."""

from __future__ import annotations

import random

import pytest

from cardcage.shm import MessageQueue, ShmBroadcastError
from cardcage.shm._layout import S_DSLOT
from cardcage.shm._reader import RingReader

CHUNK = 300 << 10  # fragments from 256 KiB are streamed, from 64 KiB the writer rescans
SLOTS = 4


def _data_slot(reader: MessageQueue) -> int:
    """The data slot the next unread fragment of ``reader`` was written to."""
    end = reader._reader
    assert isinstance(end, RingReader)
    k = end.seq + 1
    return int(end.u[end.desc_words[(k - 1) % end.n_slots] + S_DSLOT])


def test_a_drained_ring_puts_the_next_message_back_in_slot_zero() -> None:
    # A queue used one message at a time must keep reusing the same memory, which stays in
    # the CPUs' caches, instead of walking through every slot of the segment.
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=SLOTS) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            big = b"a" * (200 << 10)
            for _ in range(3):
                writer.enqueue(big, timeout=5)
                assert _data_slot(reader) == 0
                assert reader.dequeue(timeout=5) == big
            writer.enqueue(big, timeout=5)
            writer.enqueue(big[:-1], timeout=5)  # the first is unread: the next slot it is
            assert _data_slot(reader) == 0
            assert reader.dequeue(timeout=5) == big
            assert _data_slot(reader) == 1
            assert reader.dequeue(timeout=5) == big[:-1]
        finally:
            reader.close()


@pytest.mark.parametrize("seed", range(4))
def test_bursts_and_partial_drains_never_overwrite_an_unread_message(seed: int) -> None:
    # Two readers drain at different paces, so the ring is sometimes empty for both (the
    # writer restarts at slot 0), sometimes for one only (it must not), and sometimes full.
    rng = random.Random(seed)
    sizes = (0, 1, 4 << 10, 80 << 10, 270 << 10, CHUNK, CHUNK + 1, 3 * CHUNK)
    with MessageQueue(2, 2, max_chunk_bytes=CHUNK, max_chunks=SLOTS) as writer:
        readers = [MessageQueue.create_from_handle(writer.export_handle(), r) for r in range(2)]
        try:
            unread: list[list[bytes]] = [[], []]  # per reader, in order
            sent = 0
            for _ in range(300):
                size = rng.choice(sizes)
                frags = max(1, -(-size // CHUNK))
                if all(
                    sum(max(1, -(-len(m) // CHUNK)) for m in u) + frags <= SLOTS for u in unread
                ):
                    body = rng.randbytes(size)
                    writer.enqueue(body, timeout=5)
                    sent += 1
                    for u in unread:
                        u.append(body)
                r = rng.randrange(2)
                for _ in range(rng.randrange(len(unread[r]) + 1)):
                    assert readers[r].dequeue(timeout=5) == unread[r].pop(0)
            for r, reader in enumerate(readers):
                while unread[r]:
                    assert reader.dequeue(timeout=5) == unread[r].pop(0)
            assert sent > 100
        finally:
            for reader in readers:
                reader.close()


def test_an_abandoned_acquire_write_does_not_skip_a_data_slot() -> None:
    # Fragments 1-3 fill the three slots; the reader releases only fragment 1. The slot the
    # next fragment may take is fragment 1's: an acquire_write that raises must not move the
    # writer on to fragment 2's slot, which is still unread.
    with MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=3) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            for body in (b"A", b"B", b"C"):
                writer.enqueue(body, timeout=5)
            assert reader.dequeue(timeout=5) == b"A"

            def fail_half_way() -> None:
                with writer.acquire_write(timeout=5) as buf:
                    buf[:1] = b"X"
                    raise RuntimeError("the caller failed half-way")

            with pytest.raises(RuntimeError):
                fail_half_way()
            writer.enqueue(b"D", timeout=5)
            assert [reader.dequeue(timeout=5) for _ in range(3)] == [b"B", b"C", b"D"]
        finally:
            reader.close()


def test_a_descriptor_naming_a_data_slot_outside_the_ring_is_a_typed_error() -> None:
    with MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=2) as writer:
        reader = MessageQueue.create_from_handle(writer.export_handle(), 0)
        try:
            writer.enqueue(b"payload", timeout=5)
            end = reader._reader
            assert isinstance(end, RingReader)
            end.u[end.desc_words[0] + S_DSLOT] = 99  # what a stray write could leave
            with pytest.raises(ShmBroadcastError, match=r"data slot 99 of 2.*recreate the queue"):
                reader.dequeue(timeout=5)
        finally:
            reader.close()
