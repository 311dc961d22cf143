"""The one exception hierarchy of cardcage.

Every error cardcage raises derives from :class:`CardcageError` and also from the builtin that
SGLang raises in the same situation (``RuntimeError``, ``TypeError``, ``ValueError``), so code
written against SGLang keeps catching what it caught before. Each error carries the structured
fields a CLI or a log line needs (group, plugin, distribution, target) and its message says what
to do next.

Import-safe: stdlib only, nothing at module scope but class definitions.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CardcageError",
    "DuplicatePluginError",
    "HookApplyError",
    "HookError",
    "HookRegistrationError",
    "HookResultError",
    "HookTargetError",
    "InvalidEnvVarError",
    "InvalidTargetError",
    "PhaseFailedError",
    "PluginError",
    "PluginLoadError",
]


class CardcageError(Exception):
    """Root of every error raised by cardcage packages."""


class InvalidEnvVarError(CardcageError, ValueError):
    """An environment variable holds a value its type does not accept."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        self.variable = variable
        self.value = value
        self.expected = expected
        super().__init__(
            f"{variable}={value!r} is not valid: expected {expected}. "
            f"Fix the value or unset {variable}."
        )


class PhaseFailedError(CardcageError, RuntimeError):
    """A once-per-process phase failed earlier in this process; the failure is sticky."""

    def __init__(self, phase: str, cause: BaseException) -> None:
        self.phase = phase
        self.cause = cause
        super().__init__(
            f"{phase} previously failed: {type(cause).__name__}: {str(cause).rstrip('.')}. "
            "Fix the cause shown above and restart the process."
        )


def format_plugin(plugin: str | None, distribution: str | None) -> str:
    """Render a plugin and its distribution the way every message in cardcage names them."""
    if plugin is None:
        return "an unknown plugin"
    if distribution is None:
        return f"plugin {plugin!r}"
    return f"plugin {plugin!r} (distribution {distribution})"


class PluginError(CardcageError):
    """Something is wrong with one entry-point plugin."""

    def __init__(
        self,
        message: str,
        *,
        group: str | None = None,
        plugin: str | None = None,
        distribution: str | None = None,
    ) -> None:
        self.group = group
        self.plugin = plugin
        self.distribution = distribution
        super().__init__(message)


class DuplicatePluginError(PluginError, RuntimeError):
    """Two distributions register the same entry-point name in one group."""

    def __init__(self, group: str, plugin: str, distributions: Sequence[str | None]) -> None:
        self.distributions = tuple(distributions)
        shown = ", ".join(str(d) for d in self.distributions)
        super().__init__(
            f"Entry-point name {plugin!r} in group {group!r} is provided by several "
            f"distributions: {shown}. Uninstall all but one of them, or rename the entry point "
            "in one distribution's pyproject.toml.",
            group=group,
            plugin=plugin,
            distribution=self.distributions[0] if self.distributions else None,
        )


class PluginLoadError(PluginError, RuntimeError):
    """A plugin that is part of the selected platform's contract could not be loaded or run.

    Plugins from other distributions never raise this: they are logged and skipped.
    """

    def __init__(
        self,
        message: str,
        *,
        group: str | None,
        plugin: str | None,
        distribution: str | None,
        targets: Sequence[str] = (),
    ) -> None:
        self.targets = tuple(targets)
        super().__init__(message, group=group, plugin=plugin, distribution=distribution)


class HookError(CardcageError):
    """Base of every error about one hook or one hook target."""

    def __init__(
        self,
        message: str,
        *,
        target: str | None = None,
        hook: object = None,
        plugin: str | None = None,
        distribution: str | None = None,
    ) -> None:
        self.target = target
        self.hook = hook
        self.plugin = plugin
        self.distribution = distribution
        super().__init__(message)


class HookRegistrationError(HookError, TypeError):
    """A hook was registered with a type or object that can never work."""


class InvalidTargetError(HookError, ValueError):
    """A hook target path is malformed (it needs at least ``module.attr``)."""


class HookTargetError(HookError, TypeError):
    """The object at a target cannot take the hooks registered for it."""


class HookResultError(HookError, TypeError):
    """A hook returned a value of the wrong shape (for example a BEFORE hook)."""


class HookApplyError(HookError, RuntimeError):
    """Applying hooks failed in strict mode, or a selected-platform hook stayed unapplied."""

    def __init__(self, message: str, *, failures: Mapping[str, BaseException]) -> None:
        self.failures = dict(failures)
        targets = sorted(self.failures)
        super().__init__(message, target=targets[0] if len(targets) == 1 else None)
