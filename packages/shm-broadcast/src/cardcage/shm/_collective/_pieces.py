"""How a payload moves through one slot of the collective region, piece by piece, in either
direction: a reader's contribution up to the writer, the writer's result down to the readers.

Both directions follow one protocol with different words: the producer copies a piece into the
slot, stores its tag and info (and, with the first piece, the total), then its sequence counter;
the consumer loads the counter, reads the words and bytes, then stores its acknowledgement. So
it is written once, here, over a :class:`Slot` that names the words; the sides decide when a
piece may go (the hub waits for every reader's acknowledgement, a spoke for the writer's) and
what a bad piece means (an abort on the writer, an error on a reader).

Must never: wait (the callers do, with their pacer), or store a word of the other side: a
producer stores only its slot's words, a consumer only its acknowledgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cardcage.shm import _sys
from cardcage.shm._layout import (
    C_DINFO,
    C_DSEQ,
    C_DTAG,
    C_DTOTAL,
    CR_UINFO,
    CR_USEQ,
    CR_UTAG,
    CR_UTOTAL,
    FIRST,
    FLAG_SHIFT,
    LAST,
    NBYTES_MASK,
    WEAK,
    Layout,
    W,
)
from cardcage.shm._segment import Endpoint
from cardcage.shm.errors import ShmBroadcastError

from ._protocol import describe

__all__ = [
    "Slot",
    "acknowledge",
    "add_piece",
    "down_slot",
    "oversized",
    "publish",
    "read_header",
    "up_slot",
    "wake",
]


class Slot(NamedTuple):
    """One direction's slot: the producer's words (indices into ``u``) and the slot's bytes."""

    seq: int  # pieces published so far (only grows)
    info: int  # the piece's length | its FIRST/LAST flags << FLAG_SHIFT
    tag: int  # the collective the piece belongs to
    total: int  # the whole payload's length, stored with the first piece
    off: int  # where the slot's bytes start in the segment
    size: int  # the largest piece


def down_slot(lay: Layout) -> Slot:
    """The writer's slot, read by every local reader."""
    c = lay.coll
    return Slot(c + C_DSEQ, c + C_DINFO, c + C_DTAG, c + C_DTOTAL, lay.coll_data, lay.coll_bytes)


def up_slot(lay: Layout, r: int) -> Slot:
    """Reader ``r``'s slot, read by the writer."""
    line = lay.coll_readers + r * W
    off = lay.coll_data + (r + 1) * lay.coll_bytes
    return Slot(
        line + CR_USEQ, line + CR_UINFO, line + CR_UTAG, line + CR_UTOTAL, off, lay.coll_bytes
    )


def publish(ep: Endpoint, slot: Slot, data: bytes, pos: int, tag: int, j: int) -> int:
    """Publish ``data[pos:]``'s next piece as piece ``j`` of collective ``tag``; the position
    after it (``len(data)`` once the last piece went). The consumer must have acknowledged
    piece ``j - 1``."""
    u = ep.u
    total = len(data)
    n = min(slot.size, total - pos)
    off = slot.off
    ep.raw[off : off + n] = data[pos : pos + n]
    flags = (FIRST if pos == 0 else 0) | (LAST if pos + n >= total else 0)
    u[slot.tag] = tag
    u[slot.info] = n | flags << FLAG_SHIFT
    if flags & FIRST:
        u[slot.total] = total
    if WEAK:
        _sys.fence()  # bytes and words before the publish
    u[slot.seq] = j
    return pos + n


def read_header(u: memoryview, slot: Slot) -> tuple[int, int, int]:
    """``(tag, length, flags)`` of the piece in ``slot``, once its counter was loaded with
    ``load_acquire``."""
    info = int(u[slot.info])
    return int(u[slot.tag]), info & NBYTES_MASK, info >> FLAG_SHIFT


def oversized(tag: int, n: int, size: int, who: str) -> ShmBroadcastError:
    """The error for a piece longer than its slot: the segment is not ours any more."""
    return ShmBroadcastError(
        f"{describe(tag)}: {who} {n} bytes in a {size}-byte slot; the segment was overwritten "
        "by something else"
    )


def add_piece(
    held: bytearray | None, piece: memoryview, flags: int
) -> tuple[bytes | None, bytearray | None]:
    """Add a piece to the payload received so far: ``(the payload, None)`` once its last piece
    is in, else ``(None, what to hold until the next piece)``. A one-piece payload is copied
    once, straight out of the slot."""
    if flags & FIRST and flags & LAST:
        return piece.tobytes(), None
    if flags & FIRST or held is None:
        held = bytearray()
    held += piece
    if flags & LAST:
        return bytes(held), None
    return None, held


def acknowledge(ep: Endpoint, word: int, j: int, parked: Sequence[int]) -> None:
    """Hand the slot back: store ``u[word] = j`` (the consumer's acknowledgement of piece ``j``)
    and wake the producer if it is parked."""
    if WEAK:
        _sys.fence()  # the loads of the piece complete before the slot is handed back
    ep.u[word] = j
    wake(ep, word, parked)


def wake(ep: Endpoint, word: int, parked: Sequence[int]) -> None:
    """Wake whoever waits on ``u[word]``, just stored, if one of the ``parked`` flags is up."""
    _sys.fence()  # the parked loads must not pass the store just made
    u = ep.u
    for flag in parked:
        if u[flag]:
            _sys.futex_wake(ep.base + word * 8)
            return
