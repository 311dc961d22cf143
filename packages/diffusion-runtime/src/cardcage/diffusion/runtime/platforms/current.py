"""The process-wide diffusion ``current_platform`` and its once-per-process backend init.

The selection rules (lock, waiting threads, re-entrancy guard, sticky failure, fork) are
``cardcage.platforms.lazy.LazyPlatform``'s, bound here to the diffusion policy.
``initialize_current_platform()`` runs the platform's ``init_backend()`` at most once per
process, and a failure is sticky too: retrying arbitrary backend side effects could duplicate
registrations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.hooks.once import Once
from cardcage.platforms.lazy import LazyPlatform

from .policy import diffusion_policy
from .probes import DEFAULT_PROBES

if TYPE_CHECKING:
    from cardcage.platforms.selection import SelectionRecord

    from .interface import Platform

__all__ = [
    "get_current_platform",
    "get_selected_platform_dist",
    "get_selection_record",
    "initialize_current_platform",
]


class _State(LazyPlatform):
    """The diffusion selection state, plus the once-per-process backend initialization."""

    def __init__(self) -> None:
        super().__init__("Diffusion", diffusion_policy, DEFAULT_PROBES)
        self.backend = Once("Diffusion platform backend initialization")


_state = _State()


def get_current_platform() -> Platform:
    """The diffusion platform of this process (resolved on first call)."""
    platform: Platform = _state.get()
    return platform


def get_selection_record() -> SelectionRecord | None:
    """Why the current platform was chosen; None until it is first resolved."""
    return _state.record


def get_selected_platform_dist() -> str | None:
    """The distribution that supplied the selected platform; None for a built-in.

    Resolves ``current_platform`` if it is not resolved yet.
    """
    get_current_platform()
    record = _state.record
    return record.dist_name if record is not None else None


def initialize_current_platform() -> None:
    """Run the current platform's ``init_backend()`` at most once per process.

    Only worker entry points call it. A failure (selection included) is sticky: later calls raise
    ``PhaseFailedError`` chained to the original error. A re-entrant call from inside
    ``init_backend()`` returns at once.
    """
    _state.backend.run(_init_backend_and_kernels)


def _init_backend_and_kernels() -> None:
    platform = get_current_platform()
    platform.init_backend()
    install = getattr(platform, "install_kernels", None)  # a platform not on our base lacks it
    if callable(install):
        install()
