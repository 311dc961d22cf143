"""The early patches' logger, and ``say()``: a problem found at interpreter start reaches stderr.

One logger for every module of the package (``cardcage.hooks.early``, its public name), so that a
user or a test filters early patches' messages with one name. Logging is rarely configured at
interpreter start; cardcage adds no handler, so Python's last-resort handler writes a warning or
an error found then to stderr, and a host that configures logging later routes the rest.
"""

from __future__ import annotations

from cardcage.hooks.log import get_logger

__all__ = ["logger", "say"]

logger = get_logger("cardcage.hooks.early")


def say(level: int, message: str, exc: BaseException | None = None) -> None:
    """Log ``message`` at ``level``, with ``exc``'s traceback when given."""
    logger.log(level, message, exc_info=exc)
