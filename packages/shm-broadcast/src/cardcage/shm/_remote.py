"""Readers on other nodes: ZeroMQ XPUB/XSUB over TCP, CURVE-encrypted and authenticated.

Only imported when a queue has remote readers, so local-only queues never load zmq or open a
socket. The writer binds exactly ``connect_ip`` on a kernel-assigned port (never ``*``), accepts
only the CURVE client key carried in the handle (checked by a ZAP handler), sends every message
as ``[sequence number, kind, payload]`` with ``XPUB_NODROP`` so a slow reader back-pressures the
writer (then ``QueueTimeoutError``) instead of losing messages, and readers raise on any gap.

Readers use XSUB sockets (a SUB that may also send): besides their subscriptions they announce
``rank:pid`` in a member topic (its unsubscription, which ZeroMQ sends when the connection
drops, tells the writer that reader is gone) and send their collective contributions upstream
on the same authenticated connection (see ``_collective``). Results come back in the sequenced
stream; messages a reader receives while it waits for one are kept for its next ``dequeue()``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
from collections import deque
from typing import Any

import zmq
import zmq.auth.thread

from .errors import CancelledError, QueueClosedError, QueueTimeoutError, ShmBroadcastError

__all__ = ["RemoteGapError", "RemotePublisher", "RemoteSubscriber"]

KIND_RAW = b"\x00"
KIND_PICKLED = b"\x01"
KIND_CLOSED = b"\x02"
KIND_COLLECTIVE = b"\x03"  # a collective's result (or abort): tag and flags, then the payload
_RESULT = struct.Struct("<QQ")  # tag, flags (1: aborted)
#: First byte of a reader's upstream message (0 and 1 are ZeroMQ's (un)subscriptions), then
#: ``_UP`` (rank, tag) and the contribution.
_UP_MARK = b"\x02"
_UP = struct.Struct("<qQ")
_READY = b"READY"
_POLL_MS = 100  # slice of every blocking poll: bounds shutdown() latency
_COPY_THRESHOLD = 64 << 10
_HWM = 64  # messages queued per reader on each side before the writer is back-pressured
#: A local reader that could not attach the ring subscribes to this topic plus its group rank (as
#: well as to everything), so the writer knows which local rank now reads over ZeroMQ.
FALLBACK_TOPIC = b"\x00cardcage-local-fallback:"
#: Every remote reader subscribes to this topic plus ``rank:pid``: the writer learns the ranks
#: of its remote readers, and the unsubscription ZeroMQ sends when one disconnects.
MEMBER_TOPIC = b"\x00cardcage-member:"


class RemoteGapError(ShmBroadcastError, RuntimeError):
    """A remote reader detected a missing message (sequence gap)."""

    def __init__(self, expected: int, got: int) -> None:
        self.expected = expected
        self.got = got
        super().__init__(
            f"remote reader expected message {expected} but received {got}: messages were lost "
            "in transit. Recreate the queue."
        )


class _AllowOnly:
    """ZAP credentials provider: accept exactly one CURVE client public key."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def callback(self, domain: str, key: bytes) -> bool:
        del domain
        return key == self.key


def _tcp(ip: str) -> str:
    return f"tcp://[{ip}]:0" if ":" in ip else f"tcp://{ip}:0"


class RemotePublisher:
    """The writer's XPUB socket."""

    def __init__(self, connect_ip: str, n_remote: int, sndhwm: int = _HWM) -> None:
        # XPUB_NODROP + SNDHWM: when a reader's pipe is full, sends block (up to the timeout).
        self.n_remote = n_remote
        self.ctx = zmq.Context()
        self.server_public, server_secret = zmq.curve_keypair()
        self.client_public, self.client_secret = zmq.curve_keypair()
        self.auth = zmq.auth.thread.ThreadAuthenticator(self.ctx)
        self.auth.start()
        self.auth.configure_curve_callback("*", _AllowOnly(self.client_public))
        sock = self.ctx.socket(zmq.XPUB)
        sock.setsockopt(zmq.XPUB_VERBOSE, 1)
        sock.setsockopt(zmq.XPUB_NODROP, 1)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.curve_server = True
        sock.curve_secretkey = server_secret
        sock.curve_publickey = self.server_public
        if ":" in connect_ip:
            sock.setsockopt(zmq.IPV6, 1)
        sock.bind(_tcp(connect_ip))
        self.address: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.sock = sock
        self.seq = 0
        self.closed = False
        self.cancelled = False
        self.subscribers = 0  # readers subscribed so far (remote ones and local fallbacks)
        self.fallback_ranks: set[int] = set()  # local ranks that read over ZeroMQ instead
        self.members: dict[int, list[int]] = {}  # rank -> pids of the readers announcing it
        self.gone: set[tuple[int, int]] = set()  # (rank, pid) of readers that disconnected
        self.up: dict[int, deque[tuple[int, bytes]]] = {}  # rank -> (tag, contribution)

    def poll_subscriptions(self, wait_ms: int) -> None:
        """Take in subscriptions, disconnections and collective contributions (waiting up to
        ``wait_ms`` for the first one)."""
        timeout = wait_ms
        while self.sock.poll(timeout, zmq.POLLIN):
            timeout = 0
            msg = self.sock.recv()
            head = msg[:1]
            if head == _UP_MARK:
                self._take_up(msg)
                continue
            topic = msg[1:]
            member = _member(topic)
            if head == b"\x00":  # an unsubscription: the reader's connection went away
                if member is not None:
                    self.gone.add(member)
                continue
            if head != b"\x01":
                continue
            if not topic:
                self.subscribers += 1
            elif member is not None:
                self.members.setdefault(member[0], []).append(member[1])
                self.gone.discard(member)
            elif topic.startswith(FALLBACK_TOPIC):
                with contextlib.suppress(ValueError):
                    self.fallback_ranks.add(int(topic[len(FALLBACK_TOPIC) :]))

    def _take_up(self, msg: bytes) -> None:
        if len(msg) < 1 + _UP.size:
            return  # not ours: every holder of the handle's keys is a reader, so nothing forged
        rank, tag = _UP.unpack_from(msg, 1)
        self.up.setdefault(rank, deque()).append((tag, msg[1 + _UP.size :]))

    # -- collectives -----------------------------------------------------------------------------

    def gather(
        self,
        tag: int,
        got: dict[int, bytes],
        local_ranks: set[int],
        deadline: float | None,
        timeout: float | None,
    ) -> None:
        """Wait for collective ``tag``'s contribution from every remote reader, into ``got``.

        Raises ``_AbortError`` (the caller aborts the collective) for a reader that disconnected,
        called another collective, or shares its rank with another reader.
        """
        from ._collective import (
            _REMOTE,
            ABORT_DIED,
            ABORT_DUPLICATE,
            ABORT_MISMATCH,
            _AbortError,
            describe,
        )

        expected = self.n_remote + len(self.fallback_ranks)
        wait_ms = 0
        while True:
            self.poll_subscriptions(wait_ms)
            for rank, pids in self.members.items():
                if len(pids) > 1 or rank in local_ranks:
                    raise _AbortError(ABORT_DUPLICATE, rank, pids[-1])
            pending = []
            announced = 0
            for rank, pids in self.members.items():
                announced += 1
                if rank in got:
                    continue
                queued = self.up.get(rank)
                if queued:
                    got_tag, data = queued.popleft()
                    if got_tag != tag:
                        raise _AbortError(ABORT_MISMATCH | _REMOTE, rank, pids[0], got_tag)
                    got[rank] = data
                    continue
                if (rank, pids[0]) in self.gone:
                    raise _AbortError(ABORT_DIED | _REMOTE, rank, pids[0])
                pending.append(rank)
            if not pending and announced >= expected:
                return
            if self.cancelled:
                raise CancelledError
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                named = ", ".join(f"remote reader {r} (pid {self.members[r][0]})" for r in pending)
                if announced < expected:
                    named += f"{', ' if named else ''}{expected - announced} unannounced reader(s)"
                raise QueueTimeoutError(
                    f"{describe(tag)} (writer)",
                    timeout or 0.0,
                    f"Not arrived yet: {named}.",
                    tuple(pending),
                )
            wait_ms = _POLL_MS if deadline is None else max(0, int((deadline - now) * 1e3))
            wait_ms = min(wait_ms, _POLL_MS)

    def send_result(
        self, tag: int, flags: int, payload: bytes, deadline: float | None, timeout: float | None
    ) -> None:
        """Send collective ``tag``'s result (flags 1: an abort notice) in the sequenced stream."""
        self.send(_RESULT.pack(tag, flags) + payload, KIND_COLLECTIVE, deadline, timeout)

    def missing(self) -> int:
        """How many expected subscribers have not subscribed yet."""
        return self.n_remote + len(self.fallback_ranks) - self.subscribers

    def wait_ready(self, deadline: float | None, timeout: float | None) -> None:
        """Count one subscription per remote reader, then tell them all we are ready."""
        while self.missing() > 0:
            wait = (
                _POLL_MS if deadline is None else max(0, int((deadline - time.monotonic()) * 1e3))
            )
            if self.cancelled:
                raise CancelledError
            self.poll_subscriptions(min(wait, _POLL_MS))
            if self.missing() > 0 and deadline is not None and time.monotonic() >= deadline:
                raise QueueTimeoutError(
                    "wait_until_ready (writer)",
                    timeout or 0.0,
                    f"{self.missing()} remote reader(s) never connected.",
                )
        self.send_ready()

    def send_ready(self) -> None:
        self._send([(0).to_bytes(8, "little"), _READY], None, None)

    def _send(self, frames: list[Any], deadline: float | None, timeout: float | None) -> None:
        copy = len(frames[-1]) < _COPY_THRESHOLD
        while True:
            wait = (
                _POLL_MS if deadline is None else max(0, int((deadline - time.monotonic()) * 1e3))
            )
            self.sock.setsockopt(zmq.SNDTIMEO, min(wait, _POLL_MS))
            try:
                self.sock.send_multipart(frames, copy=copy)
                return
            except zmq.Again:
                if self.cancelled:
                    raise CancelledError from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise QueueTimeoutError(
                        "enqueue (remote readers did not keep up)", timeout or 0.0
                    ) from None

    def send(self, data: bytes, kind: bytes, deadline: float | None, timeout: float | None) -> None:
        seq = self.seq + 1
        self._send([seq.to_bytes(8, "little"), kind, data], deadline, timeout)
        self.seq = seq

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(QueueTimeoutError):
            self.send(b"", KIND_CLOSED, time.monotonic() + 1.0, 1.0)
        self.sock.close()
        self.auth.stop()
        self.ctx.term()


def _member(topic: bytes) -> tuple[int, int] | None:
    """``(rank, pid)`` of a member topic, else None."""
    if not topic.startswith(MEMBER_TOPIC):
        return None
    rank, _, pid = topic[len(MEMBER_TOPIC) :].partition(b":")
    try:
        return int(rank), int(pid)
    except ValueError:
        return None


class RemoteSubscriber:
    """A remote reader's XSUB socket."""

    def __init__(
        self,
        address: str,
        server_public: bytes,
        client_public: bytes,
        client_secret: bytes,
        fallback_rank: int | None = None,
        rank: int = 0,
    ) -> None:
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.XSUB)
        sock.curve_serverkey = server_public
        sock.curve_publickey = client_public
        sock.curve_secretkey = client_secret
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, _HWM)  # bounds what a stalled reader buffers
        if address.startswith("tcp://["):
            sock.setsockopt(zmq.IPV6, 1)
        # An XSUB keeps its subscriptions and sends them on every (re)connection, like a SUB.
        if fallback_rank is not None:
            sock.send(b"\x01" + FALLBACK_TOPIC + str(fallback_rank).encode())
        sock.send(b"\x01" + MEMBER_TOPIC + f"{rank}:{os.getpid()}".encode())
        sock.send(b"\x01")
        sock.connect(address)
        self.sock = sock
        self.seq = 0
        self.ready = False
        self.cancelled = False
        self.closed = False
        self.close_seen = False  # the closed marker arrived (maybe still behind kept messages)
        self.kept: deque[tuple[bytes, bytes]] = deque()  # received during a collective
        self.results: deque[bytes] = deque()  # collective results received during dequeue()

    def _recv(self, deadline: float | None, timeout: float | None, what: str) -> list[bytes]:
        while True:
            if self.cancelled:
                raise CancelledError
            wait = (
                _POLL_MS if deadline is None else max(0, int((deadline - time.monotonic()) * 1e3))
            )
            if self.sock.poll(min(wait, _POLL_MS), zmq.POLLIN):
                frames: list[bytes] = self.sock.recv_multipart()
                return frames
            if deadline is not None and time.monotonic() >= deadline:
                raise QueueTimeoutError(what, timeout or 0.0)

    def wait_ready(self, deadline: float | None, timeout: float | None) -> None:
        while not self.ready:
            frames = self._recv(deadline, timeout, "wait_until_ready (remote reader)")
            self.ready = frames[-1] == _READY

    def _next(
        self, deadline: float | None, timeout: float | None, what: str
    ) -> tuple[bytes, bytes]:
        """(kind, payload) of the next message off the socket; raises on a gap."""
        seq_b, kind, data = self._recv(deadline, timeout, what)
        seq = int.from_bytes(seq_b, "little")
        if seq != self.seq + 1:
            raise RemoteGapError(self.seq + 1, seq)
        self.seq = seq
        return kind, data

    def recv(self, deadline: float | None, timeout: float | None) -> tuple[bytes, bytes]:
        """(kind, payload) of the next message; raises on a gap or after the closed marker."""
        while True:
            if self.kept:
                kind, data = self.kept.popleft()
            elif self.closed:
                raise QueueClosedError
            else:
                kind, data = self._next(deadline, timeout, "dequeue (remote reader)")
            if kind == KIND_COLLECTIVE:  # a collective this reader timed out of: keep it
                self.results.append(data)
                continue
            if kind == KIND_CLOSED:
                self.closed = self.close_seen = True
                raise QueueClosedError
            return kind, data

    def send_up(self, rank: int, tag: int, payload: bytes) -> None:
        """Send this reader's contribution to collective ``tag`` to the writer."""
        self.sock.send(_UP_MARK + _UP.pack(rank, tag) + payload)

    def recv_result(
        self, deadline: float | None, timeout: float | None, what: str
    ) -> tuple[int, int, memoryview]:
        """(tag, flags, payload) of the next collective result; messages that come before it
        are kept, in order, for ``recv()``."""
        while not self.results:
            if self.close_seen:
                raise QueueClosedError("the writer closed the queue before completing " + what)
            kind, data = self._next(deadline, timeout, what)
            if kind == KIND_COLLECTIVE:
                self.results.append(data)
                break
            self.kept.append((kind, data))
            if kind == KIND_CLOSED:
                self.close_seen = True
        data = self.results.popleft()
        tag, flags = _RESULT.unpack_from(data)
        return tag, flags, memoryview(data)[_RESULT.size :]

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()
