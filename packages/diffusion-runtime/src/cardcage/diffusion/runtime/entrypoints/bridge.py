"""The request channel between ``cardcage-diffusion serve`` and its HTTP child.

The workers belong to the launcher (the main process: it started them and holds their pipes), so
the HTTP child cannot talk to them directly. The launcher runs a ``BridgeServer``: a
``multiprocessing.connection.Listener`` on a Unix socket in a fresh private directory (mode 0700),
authenticated with this process's ``multiprocessing`` authkey, which spawned children inherit and
nobody else knows. The child opens one ``BridgeClient`` connection per HTTP request; each message
is a plain dict (``op`` plus fields) answered by one plain dict (``ok`` plus fields, or the
HTTP-shaped error ``status``/``type``/``code``/``param``/``message``).

Operations: ``generate`` (a request id, the prompt and ``SamplingParams`` fields in, each
image's raw RGB bytes and size out; the child encodes them), ``cancel`` (stop the request with
that id: the client disconnected), ``health`` (are the workers up), ``listening`` and ``failed``
(the child reports whether its socket is bound, so the launcher can print the URL, or the
reason, exactly once). A ``generate`` call blocks its connection until the answer; ``cancel``
comes on a connection of its own.

Import-safe: stdlib only.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import socket
import tempfile
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Protocol

from .errors import BridgeError

__all__ = ["BridgeClient", "BridgeHandler", "BridgeServer", "error_reply"]

logger = logging.getLogger(__name__)

_FAMILY = "AF_UNIX"
_SOCKET_NAME = "bridge.sock"
_MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, NUL included


def _socket_directory() -> str:
    """A fresh private directory whose socket path fits ``sun_path`` (TMPDIR, else /tmp)."""
    for parent in (None, "/tmp"):
        base = tempfile.gettempdir() if parent is None else parent
        room = _MAX_SOCKET_PATH - len(os.fsencode(os.path.join(base, "x" * 28, _SOCKET_NAME)))
        if room >= 0 and os.path.isdir(base):
            return tempfile.mkdtemp(prefix="cardcage-diffusion-", dir=base)
    raise BridgeError(
        f"TMPDIR ({tempfile.gettempdir()}) is too long for a Unix socket path and /tmp is not "
        "usable; set TMPDIR to a short directory."
    )


def error_reply(
    status: int,
    message: str,
    *,
    error_type: str,
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """An error answer, shaped like the HTTP error it becomes."""
    return {
        "ok": False,
        "status": status,
        "type": error_type,
        "code": code,
        "param": param,
        "message": message,
    }


class BridgeHandler(Protocol):
    """What the launcher does with each operation (``serve`` implements it)."""

    def handle(self, message: dict[str, Any]) -> dict[str, Any]: ...


class BridgeServer:
    """The launcher's end: accepts authenticated connections, answers each message on a thread.

    ``close()`` stops accepting, closes the listener and removes the socket and its directory.
    """

    def __init__(self, handler: BridgeHandler) -> None:
        self._handler = handler
        self._directory = _socket_directory()
        self.address = os.path.join(self._directory, _SOCKET_NAME)
        self._authkey = multiprocessing.current_process().authkey
        try:
            self._listener = Listener(self.address, family=_FAMILY, authkey=self._authkey)
        except BaseException:
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._accept_loop, name="cardcage-diffusion-bridge", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()  # runs the authentication handshake
            except (OSError, EOFError, multiprocessing.AuthenticationError) as exc:
                if not self._closed.is_set():
                    logger.warning("Rejected a connection on the HTTP bridge: %s", exc)
                continue
            threading.Thread(
                target=self._serve, args=(conn,), name="cardcage-diffusion-bridge-conn", daemon=True
            ).start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    return
                if not isinstance(message, dict) or not isinstance(message.get("op"), str):
                    reply = error_reply(
                        500, f"malformed bridge message {message!r}", error_type="server_error"
                    )
                else:
                    try:
                        reply = self._handler.handle(message)
                    except Exception as exc:  # a bug in the handler must not kill the channel
                        logger.exception("The HTTP bridge failed to handle %r", message.get("op"))
                        reply = error_reply(
                            500, f"{type(exc).__name__}: {exc}", error_type="server_error"
                        )
                try:
                    conn.send(reply)
                except (OSError, ValueError):
                    return  # the HTTP client went away; nothing to tell it

    def close(self) -> None:
        """Stop accepting and remove the socket (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._thread.is_alive():
            # accept() does not return when the listening socket is closed under it: wake it
            # with a connection that fails the handshake at once.
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
                wake.connect(self.address)
            self._thread.join(5.0)
        self._listener.close()
        shutil.rmtree(self._directory, ignore_errors=True)


class BridgeClient:
    """The HTTP child's end: one short connection per call (a request thread owns it)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._authkey = multiprocessing.current_process().authkey

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send ``{"op": op, **fields}`` and return the answer; ``BridgeError`` if unreachable."""
        try:
            conn = Client(self.address, family=_FAMILY, authkey=self._authkey)
        except (OSError, EOFError, multiprocessing.AuthenticationError) as exc:
            raise BridgeError(
                f"Cannot reach the diffusion launcher at {self.address}: {exc}. The launcher "
                "(cardcage-diffusion serve) has stopped or is stopping."
            ) from None
        with conn:
            try:
                conn.send({"op": op, **fields})
                reply = conn.recv()
            except (OSError, EOFError) as exc:
                raise BridgeError(
                    f"The diffusion launcher closed the request channel during {op!r}: {exc}"
                ) from None
        if not isinstance(reply, dict):
            raise BridgeError(f"The diffusion launcher answered {op!r} with {reply!r}")
        return reply
