"""The one place platforms import torch from, with an error that says what to install.

Public: the built-in SRT platforms and the diffusion runtime's platforms call ``require_torch``
so a missing torch is always the same ``TorchNotInstalledError``, naming the extra to install.
"""

from __future__ import annotations

from typing import Any

from .errors import TorchNotInstalledError

__all__ = ["require_torch"]


def require_torch(operation: str) -> Any:
    """Import torch for ``operation`` or raise ``TorchNotInstalledError`` naming the extra."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise TorchNotInstalledError(operation) from exc
    return torch
