"""``get_logger``: the module loggers of every cardcage distribution, all under ``cardcage``.

Public for every cardcage distribution (core-platforms, shm-broadcast, diffusion-runtime and a
runtime that embeds cardcage). cardcage is a library: it configures no logging and adds no handler
to any logger, not even a ``NullHandler``. In a process that configured no logging, Python's
last-resort handler then writes every WARNING and ERROR to stderr, so a plugin that fails to load
or an allowlist name that matches nothing is never silent; an application that configures logging
routes them like any other record (the ``cardcage`` logger is the parent of every module logger).
"""

from __future__ import annotations

import logging

__all__ = ["get_logger"]


def get_logger(name: str) -> logging.Logger:
    """Return ``logging.getLogger(name)``: the same logger, with no handler of cardcage's."""
    return logging.getLogger(name)
