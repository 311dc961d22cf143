"""What a check found: one problem, who it concerns and the exact fix, as one value type.

The selection engine (``cardcage.platforms.selection``) and ``cardcage doctor`` speak in these:
the engine's checks return findings; selection raises the ``error`` of the first finding whose
severity is ``error``; doctor reports every finding. One type, so the two cannot describe the same
problem differently.

Import-safe: the selection engine imports it where a check finds a problem (and ``cardcage
doctor`` always); a selection without a problem never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cardcage.hooks.snapshot import PluginEntryPoint

__all__ = [
    "ACTIVATE_RULE",
    "DistRef",
    "Finding",
    "Severity",
    "describe_ep",
    "ep_dist",
    "misconfiguration",
]

#: The one rule for ``activate()``, said the same way by doctor, startup errors and the docs: it
#: tells a vendor's bug (an exception for absent hardware) from a user's mistake (a bad value).
ACTIVATE_RULE = (
    "activate() returns None when its hardware is absent; it raises only for a user's "
    "misconfiguration (a bad environment value), with an error that names the variable and the fix"
)

#: What a problem does to startup: an error breaks or silently changes it, a warning matters once
#: the plugin is selected or allowed, info never affects it.
Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class DistRef:
    """A distribution as every plugin-related row names it: project name and version."""

    name: str | None
    version: str | None


def ep_dist(ep: PluginEntryPoint) -> DistRef:
    """The distribution that provides ``ep``, as findings name it."""
    return DistRef(ep.dist_name, ep.dist.version if ep.dist is not None else None)


def misconfiguration(exc: BaseException) -> tuple[str, str] | None:
    """``(problem, fix)`` when ``activate()`` refused a value the user set, else None.

    A plugin that reads its variables through an ``EnvRegistry`` raises ``InvalidEnvVarError``
    for a bad value: the user's mistake, which no command may blame on the plugin.
    """
    from cardcage.hooks.errors import InvalidEnvVarError

    if not isinstance(exc, InvalidEnvVarError):
        return None
    problem = f"{exc.variable}={exc.value!r} is not valid: expected {exc.expected}"
    return problem, f"Set {exc.variable} to {exc.expected}, or unset it"


def describe_ep(ep: PluginEntryPoint) -> str:
    """``'name' (dist 1.0)``: how findings name a plugin."""
    if ep.dist_name is None:
        return repr(ep.name)
    return f"{ep.name!r} ({ep.dist_name} {ep_dist(ep).version or '?'})"


@dataclass(frozen=True, init=False)
class Finding:
    """One problem: what is wrong, who it concerns, and the exact fix.

    ``error`` is the typed exception startup raises for this problem (None for a problem that
    does not stop startup, or that startup never meets). It is not a field: it stays out of
    equality, the hash, the ``repr`` and the JSON documents (which list a dataclass's fields),
    so ``__init__`` is written here to take it.
    """

    code: str
    severity: Severity
    message: str
    fix: str
    group: str | None
    plugin: str | None
    distributions: tuple[DistRef, ...]
    traceback: str | None
    if TYPE_CHECKING:  # an attribute, not a field: the dataclass never sees this annotation
        error: BaseException | None

    def __init__(
        self,
        code: str,
        severity: Severity,
        message: str,
        fix: str,
        group: str | None = None,
        plugin: str | None = None,
        distributions: tuple[DistRef, ...] = (),
        traceback: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "code", code)
        init(self, "severity", severity)
        init(self, "message", message)
        init(self, "fix", fix)
        init(self, "group", group)
        init(self, "plugin", plugin)
        init(self, "distributions", distributions)
        init(self, "traceback", traceback)
        init(self, "error", error)

    def as_dict(self) -> dict[str, object]:
        """The finding as the ``findings`` items of ``cardcage doctor --json``."""
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "group": self.group,
            "plugin": self.plugin,
            "distributions": [{"name": d.name, "version": d.version} for d in self.distributions],
            "traceback": self.traceback,
        }
