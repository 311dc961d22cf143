"""The records early patches leave: what ran, what each patch became, what failed.

``cardcage hooks``, ``cardcage doctor`` and ``early.report()`` read these; the failure policy
(``_policy``) keeps each ``EarlyFailure`` until a platform is selected. Mutable dataclasses:
they compare field by field and are unhashable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cardcage.hooks.registry import HookSource

__all__ = ["EarlyFailure", "EarlyPatch", "EarlyPatchReport", "EarlyPlugin", "who"]


def who(source: HookSource | None) -> tuple[str | None, str | None]:
    """The (plugin, distribution) a record names for ``source``; (None, None) without one."""
    return (source.plugin_name, source.dist_name) if source is not None else (None, None)


@dataclass(slots=True)
class EarlyFailure:
    """One early patch that failed: whose (plugin, distribution), at which step, and why."""

    plugin: str | None
    dist_name: str | None
    step: str
    error: BaseException
    targets: tuple[str, ...] = ()

    def line(self) -> str:
        """``<step>: <Type>: <message>``, as reports show it."""
        return f"{self.step}: {type(self.error).__name__}: {self.error}"


@dataclass(slots=True)
class EarlyPlugin:
    """What happened to one early-patch entry point in this process.

    ``status``: ``executed``, ``failed-import``, ``failed-register``, ``not-requested`` (installed,
    not named by the variable: never imported), ``not-found`` (named, not installed; ``detail``
    suggests a close name) or ``duplicate`` (named, provided by several distributions: none run).
    """

    name: str
    value: str
    dist_name: str | None
    status: str
    detail: str = ""


@dataclass(slots=True)
class EarlyPatch:
    """One armed early patch, as ``cardcage hooks`` lists it.

    ``kind`` is ``hook`` (``type`` the ``HookType`` name), ``value`` or ``stand-in``. ``status``:
    ``applied`` (a hook or value in place; a stand-in that was imported is ``provided``),
    ``pending`` (waiting for ``pending_module`` to be imported), ``failed`` (``error`` says why),
    ``real-module`` (a stand-in not used: the real module is importable, and wins) or
    ``undone`` (``unapply()`` restored it).
    """

    kind: str
    target: str
    type: str
    plugin: str | None
    dist_name: str | None
    status: str
    pending_module: str | None = None
    error: str | None = None
    detail: str = ""


@dataclass(slots=True)
class EarlyPatchReport:
    """Early patches in this process: what the variable asks for and what became of it.

    ``booted`` says whether the ``.pth`` line ran ``boot()`` at interpreter start; ``error`` is
    a variable that does not parse or a name two distributions provide (``load_plugins()``
    raises it).
    """

    variable: str
    requested: tuple[str, ...]
    booted: bool
    error: str | None
    plugins: list[EarlyPlugin]
    patches: list[EarlyPatch]
