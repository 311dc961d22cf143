"""The records early patches leave: what ran, what each patch became, what failed.

``cardcage hooks``, ``cardcage doctor`` and ``early.report()`` read these; the failure policy
(``_policy``) keeps each ``EarlyFailure`` until a platform is selected. Plain ``Record``s, as
cardcage's other records: defining a dataclass costs more than a plain class, and these are
defined at interpreter start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.hooks.records import Record

if TYPE_CHECKING:
    from cardcage.hooks.registry import HookSource

__all__ = ["EarlyFailure", "EarlyPatch", "EarlyPatchReport", "EarlyPlugin", "who"]


def who(source: HookSource | None) -> tuple[str | None, str | None]:
    """The (plugin, distribution) a record names for ``source``; (None, None) without one."""
    return (source.plugin_name, source.dist_name) if source is not None else (None, None)


class EarlyFailure(Record):
    """One early patch that failed: whose (plugin, distribution), at which step, and why."""

    _fields = ("plugin", "dist_name", "step", "error", "targets")
    __slots__ = _fields

    plugin: str | None
    dist_name: str | None
    step: str
    error: BaseException
    targets: tuple[str, ...]

    def __init__(
        self,
        plugin: str | None,
        dist_name: str | None,
        step: str,
        error: BaseException,
        targets: tuple[str, ...] = (),
    ) -> None:
        self.plugin = plugin
        self.dist_name = dist_name
        self.step = step
        self.error = error
        self.targets = targets

    def line(self) -> str:
        """``<step>: <Type>: <message>``, as reports show it."""
        return f"{self.step}: {type(self.error).__name__}: {self.error}"


class EarlyPlugin(Record):
    """What happened to one early-patch entry point in this process.

    ``status``: ``executed``, ``failed-import``, ``failed-register``, ``not-requested`` (installed,
    not named by the variable: never imported), ``not-found`` (named, not installed; ``detail``
    suggests a close name) or ``duplicate`` (named, provided by several distributions: none run).
    """

    _fields = ("name", "value", "dist_name", "status", "detail")
    __slots__ = _fields

    name: str
    value: str
    dist_name: str | None
    status: str
    detail: str

    def __init__(
        self, name: str, value: str, dist_name: str | None, status: str, detail: str = ""
    ) -> None:
        self.name = name
        self.value = value
        self.dist_name = dist_name
        self.status = status
        self.detail = detail


class EarlyPatch(Record):
    """One armed early patch, as ``cardcage hooks`` lists it.

    ``kind`` is ``hook`` (``type`` the ``HookType`` name), ``value`` or ``stand-in``. ``status``:
    ``applied`` (a hook or value in place; a stand-in that was imported is ``provided``),
    ``pending`` (waiting for ``pending_module`` to be imported), ``failed`` (``error`` says why),
    ``real-module`` (a stand-in not used: the real module is importable, and wins) or
    ``undone`` (``unapply()`` restored it).
    """

    _fields = (
        "kind",
        "target",
        "type",
        "plugin",
        "dist_name",
        "status",
        "pending_module",
        "error",
        "detail",
    )
    __slots__ = _fields

    kind: str
    target: str
    type: str
    plugin: str | None
    dist_name: str | None
    status: str
    pending_module: str | None
    error: str | None
    detail: str

    def __init__(
        self,
        kind: str,
        target: str,
        type: str,  # noqa: A002 - the field's name in cardcage hooks --json
        plugin: str | None,
        dist_name: str | None,
        status: str,
        pending_module: str | None = None,
        error: str | None = None,
        detail: str = "",
    ) -> None:
        self.kind = kind
        self.target = target
        self.type = type
        self.plugin = plugin
        self.dist_name = dist_name
        self.status = status
        self.pending_module = pending_module
        self.error = error
        self.detail = detail


class EarlyPatchReport(Record):
    """Early patches in this process: what the variable asks for and what became of it.

    ``booted`` says whether the ``.pth`` line ran ``boot()`` at interpreter start; ``error`` is
    a variable that does not parse or a name two distributions provide (``load_plugins()``
    raises it).
    """

    _fields = ("variable", "requested", "booted", "error", "plugins", "patches")
    __slots__ = _fields

    variable: str
    requested: tuple[str, ...]
    booted: bool
    error: str | None
    plugins: list[EarlyPlugin]
    patches: list[EarlyPatch]

    def __init__(
        self,
        variable: str,
        requested: tuple[str, ...],
        booted: bool,
        error: str | None,
        plugins: list[EarlyPlugin],
        patches: list[EarlyPatch],
    ) -> None:
        self.variable = variable
        self.requested = requested
        self.booted = booted
        self.error = error
        self.plugins = plugins
        self.patches = patches
