"""The toy runtime's ``current_platform``: selected on first use, once (``LazyPlatform``)."""

from __future__ import annotations

from typing import Any

from cardcage.platforms.lazy import LazyPlatform

from .platform import toy_policy
from .runtime import TOY_RUNTIME

__all__ = ["get_current_platform", "get_selection_record"]

_state = LazyPlatform(TOY_RUNTIME.display_name, toy_policy, None)


def get_current_platform() -> Any:
    """The toy platform of this process (resolved on first call)."""
    return _state.get()


def get_selection_record() -> Any:
    """Why the current platform was chosen; None until it is first resolved."""
    return _state.record
