"""Readers on other nodes: ZeroMQ XPUB/SUB over TCP, CURVE-encrypted and authenticated.

Only imported when a queue has remote readers, so local-only queues never load zmq or open a
socket. The writer binds exactly ``connect_ip`` on a kernel-assigned port (never ``*``), accepts
only the CURVE client key carried in the handle (checked by a ZAP handler), sends every message
as ``[sequence number, kind, payload]`` with ``XPUB_NODROP`` so a slow reader back-pressures the
writer (then ``QueueTimeoutError``) instead of losing messages, and readers raise on any gap.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import zmq
import zmq.auth.thread

from .errors import CancelledError, QueueClosedError, QueueTimeoutError, ShmBroadcastError

__all__ = ["RemoteGapError", "RemotePublisher", "RemoteSubscriber"]

KIND_RAW = b"\x00"
KIND_PICKLED = b"\x01"
KIND_CLOSED = b"\x02"
_READY = b"READY"
_POLL_MS = 100  # slice of every blocking poll: bounds shutdown() latency
_COPY_THRESHOLD = 64 << 10
_HWM = 64  # messages queued per reader on each side before the writer is back-pressured
#: A local reader that could not attach the ring subscribes to this topic plus its group rank (as
#: well as to everything), so the writer knows which local rank now reads over ZeroMQ.
FALLBACK_TOPIC = b"\x00cardcage-local-fallback:"


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

    def poll_subscriptions(self, wait_ms: int) -> None:
        """Take in subscription messages (waiting up to ``wait_ms`` for the first one)."""
        timeout = wait_ms
        while self.sock.poll(timeout, zmq.POLLIN):
            timeout = 0
            msg = self.sock.recv()
            if msg[:1] != b"\x01":
                continue  # an unsubscription
            topic = msg[1:]
            if not topic:
                self.subscribers += 1
            elif topic.startswith(FALLBACK_TOPIC):
                with contextlib.suppress(ValueError):
                    self.fallback_ranks.add(int(topic[len(FALLBACK_TOPIC) :]))

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


class RemoteSubscriber:
    """A remote reader's SUB socket."""

    def __init__(
        self,
        address: str,
        server_public: bytes,
        client_public: bytes,
        client_secret: bytes,
        fallback_rank: int | None = None,
    ) -> None:
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.SUB)
        sock.curve_serverkey = server_public
        sock.curve_publickey = client_public
        sock.curve_secretkey = client_secret
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, _HWM)  # bounds what a stalled reader buffers
        if address.startswith("tcp://["):
            sock.setsockopt(zmq.IPV6, 1)
        if fallback_rank is not None:
            sock.setsockopt(zmq.SUBSCRIBE, FALLBACK_TOPIC + str(fallback_rank).encode())
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(address)
        self.sock = sock
        self.seq = 0
        self.ready = False
        self.cancelled = False
        self.closed = False

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

    def recv(self, deadline: float | None, timeout: float | None) -> tuple[bytes, bytes]:
        """(kind, payload) of the next message; raises on a gap or after the closed marker."""
        if self.closed:
            raise QueueClosedError
        seq_b, kind, data = self._recv(deadline, timeout, "dequeue (remote reader)")
        seq = int.from_bytes(seq_b, "little")
        if seq != self.seq + 1:
            raise RemoteGapError(self.seq + 1, seq)
        self.seq = seq
        if kind == KIND_CLOSED:
            self.closed = True
            raise QueueClosedError
        return kind, data

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()
