"""The one place platforms import torch from, with an error that says what to install.

Public: the built-in SRT platforms and the diffusion runtime's platforms call ``require_torch``
so a missing torch is always the same ``TorchNotInstalledError``, naming the extra to install.
"""

from __future__ import annotations

from typing import Any

# The error classes are imported only when torch is missing: the built-in platform modules
# import this one, and so does every process whose host selects a platform built on them.

__all__ = ["require_torch"]


def require_torch(operation: str) -> Any:
    """Import torch for ``operation`` or raise ``TorchNotInstalledError`` naming the extra."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        from .errors import TorchNotInstalledError

        raise TorchNotInstalledError(operation) from exc
    return torch
