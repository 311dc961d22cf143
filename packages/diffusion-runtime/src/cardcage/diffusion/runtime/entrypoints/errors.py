"""Errors of the diffusion entry points (the ``cardcage-diffusion`` command and HTTP server).

Import-safe: stdlib and ``cardcage.diffusion.errors`` only.
"""

from __future__ import annotations

from cardcage.diffusion.errors import DiffusionError

__all__ = ["BridgeError", "HttpServerError"]


class HttpServerError(DiffusionError, RuntimeError):
    """The HTTP server could not start or stopped unexpectedly (the message says why and what
    to do: a port in use, a child that died, a server started outside ``serve``)."""


class BridgeError(DiffusionError, ConnectionError):
    """The HTTP child could not reach the launcher's request channel, or the channel broke."""
