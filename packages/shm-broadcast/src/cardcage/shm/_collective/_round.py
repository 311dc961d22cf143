"""One collective as one participant sees it: what it contributes and how far it got.

A module of its own because every side fills in part of it (the hub the contributions and the
result, a spoke its posting and receiving positions, the remote transport ``got``), and because
it outlives a call: a call that timed out leaves its round pending, and the next call of the
same collective carries on from these fields.

Must never: hold a reference to the queue, or anything a finished round would keep alive.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Round"]


class Round:
    """One collective as this participant sees it; kept across a timed-out call."""

    def __init__(self, tag: int, payload: bytes, obj: Any) -> None:
        self.tag = tag
        self.payload = payload  # what this participant contributes
        self.obj = obj
        # writer: contributions by rank, pieces of local ones, the result and how far it went
        self.got: dict[int, bytes] = {}
        self.pieces: dict[int, bytearray] = {}
        self.result: bytes | None = None
        self.remote_sent = False
        self.down_pos = 0
        # reader: how much of the contribution is posted, and the result as it comes in
        self.up_pos = 0
        self.posted = False
        self.received: bytearray | None = None
