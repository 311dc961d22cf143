"""Logger factory for cardcage.shm: installs the ``cardcage`` NullHandler, never configures logging.

Import-safe: stdlib only.
"""

from __future__ import annotations

import logging

_ROOT = "cardcage"

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger(_ROOT).handlers):
    logging.getLogger(_ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """Return ``logging.getLogger(name)``; importing this module installed the NullHandler."""
    return logging.getLogger(name)
