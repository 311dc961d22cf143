"""Typed errors of ``cardcage deps``: each names what was given and what is accepted."""

from __future__ import annotations

from cardcage.hooks.errors import CardcageError

__all__ = [
    "DepsError",
    "DownloadRequiredError",
    "LockFileError",
    "NotAHostReleaseError",
    "ReleaseNotFoundError",
    "ReleaseUnreadableError",
    "UnknownHostError",
    "UnknownPluginDistributionError",
]


class DepsError(CardcageError):
    """Base of every error ``cardcage deps`` raises on bad input."""


class UnknownHostError(DepsError, ValueError):
    """A host name cardcage has no room for (accepted: ``sglang``, ``vllm``)."""


class NotAHostReleaseError(DepsError, ValueError):
    """A wheel or installed distribution that is not a release of a host cardcage serves."""


class ReleaseUnreadableError(DepsError, ValueError):
    """A wheel that cannot be read: not a zip archive, truncated, or without ``*.dist-info``."""


class ReleaseNotFoundError(DepsError, LookupError):
    """``name==version`` that pip could not find, or a host that is not installed here."""


class DownloadRequiredError(DepsError, RuntimeError):
    """``name==version`` not in the cache, and no ``--download``: no network call was made."""


class UnknownPluginDistributionError(DepsError, LookupError):
    """A plugin distribution name that is not installed in this environment."""


class LockFileError(DepsError, ValueError):
    """A ``--baseline`` file that is not a lock ``cardcage deps --write-lock`` wrote."""
