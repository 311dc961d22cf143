"""The early patches' logger, and ``say()``: a problem found at interpreter start reaches stderr.

One logger for every module of the package (``cardcage.hooks.early``, its public name), so that a
user or a test filters early patches' messages with one name. cardcage never configures logging
and keeps a ``NullHandler`` on its logger, so a warning logged before the host sets logging up
would be lost; ``say()`` writes it to stderr too until someone configures logging.
"""

from __future__ import annotations

import sys

from cardcage.hooks.log import get_logger

__all__ = ["logger", "say"]

logger = get_logger("cardcage.hooks.early")


def _logging_configured() -> bool:
    import logging

    return bool(logging.getLogger().handlers) or any(
        not isinstance(h, logging.NullHandler) for h in logging.getLogger("cardcage").handlers
    )


def say(level: int, message: str, exc: BaseException | None = None) -> None:
    """Log ``message``; with logging not configured yet (interpreter start), print it too."""
    import logging

    logger.log(level, message, exc_info=exc if exc is not None else None)
    if level >= logging.WARNING and not _logging_configured():
        text = f"cardcage early patches: {logging.getLevelName(level)}: {message}\n"
        if exc is not None:
            import traceback

            text += "".join(traceback.format_exception(exc))
        sys.stderr.write(text)
