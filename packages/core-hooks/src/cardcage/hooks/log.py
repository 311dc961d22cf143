"""Logger factory that installs the package's ``NullHandler`` exactly once.

Public for every cardcage distribution (core-platforms, shm-broadcast, diffusion-runtime and a
runtime that embeds cardcage): one ``NullHandler`` on the shared ``cardcage`` logger, written once.

cardcage is a library: it never configures logging, it only makes sure that a process which did
not configure logging does not print "No handlers could be found" noise. The handler sits on the
``cardcage`` logger, the parent of every module logger in every cardcage distribution.
"""

from __future__ import annotations

import logging

__all__ = ["get_logger"]

_ROOT = "cardcage"

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger(_ROOT).handlers):
    logging.getLogger(_ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """Return ``logging.getLogger(name)``; importing this module installed the NullHandler."""
    return logging.getLogger(name)
