"""The toy runtime's own hook registry: a hook registered here never runs in another runtime."""

from __future__ import annotations

from cardcage.hooks.registry import BaseHookRegistry, HookType

__all__ = ["HookRegistry", "HookType"]


class HookRegistry(BaseHookRegistry):
    """Where the toy runtime's general plugins register their hooks."""
