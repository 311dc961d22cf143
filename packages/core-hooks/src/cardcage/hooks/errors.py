"""The one exception hierarchy of cardcage.

Every error cardcage raises derives from :class:`CardcageError` and also from the builtin that
SGLang raises in the same situation (``RuntimeError``, ``TypeError``, ``ValueError``), so code
written against SGLang keeps catching what it caught before. Each error carries the structured
fields a CLI or a log line needs (group, plugin, distribution, target) and its message says what
to do next.

Import-safe: stdlib only, nothing at module scope but constants, classes and functions.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CardcageError",
    "DuplicatePluginError",
    "EarlyPatchError",
    "HookApplyError",
    "HookApplyWarning",
    "HookError",
    "HookRegistrationError",
    "HookResultError",
    "HookTargetError",
    "InvalidEnvVarError",
    "InvalidTargetError",
    "MalformedEntryPointError",
    "PhaseFailedError",
    "PluginError",
    "PluginLoadError",
    "RuntimeRegistrationError",
    "SGLANG_PORTING_GUIDE",
    "SGLangPluginLoadError",
    "TargetsSGLangError",
    "missing_sglang_module",
    "targets_sglang_fix",
    "targets_sglang_problem",
]

#: cardcage's guide to moving a plugin between SGLang's API and cardcage's, in either direction,
#: named by its page title so a user holding only a wheel can find it in the built docs (the
#: source path follows for those reading the repository).
SGLANG_PORTING_GUIDE = (
    'the page "Porting a plugin between SGLang and cardcage" of cardcage\'s documentation '
    "(docs/platforms/porting.md in its repository)"
)


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
            f"Duplicate entry-point name {plugin!r} in group {group!r}: entry-point names must "
            f"be unique within a group, and it is provided by several distributions: {shown}. "
            "Uninstall all but one of them, or rename the entry point in one distribution's "
            "pyproject.toml.",
            group=group,
            plugin=plugin,
            distribution=self.distributions[0] if self.distributions else None,
        )


class MalformedEntryPointError(PluginError, ValueError):
    """An entry point's value in a distribution's metadata is not ``module:attr`` (with dotted
    names and optional ``[extras]``): nothing can be imported from it."""

    def __init__(self, group: str, plugin: str, value: str, distribution: str | None) -> None:
        self.value = value
        where = f"distribution {distribution}" if distribution else "its distribution"
        super().__init__(
            f"Entry point {plugin!r} of group {group!r} in {where} has a malformed value "
            f"{value!r} in its metadata: expected 'module:attr' (dotted Python names, optionally "
            f"followed by [extras]). Fix the entry point in the [project.entry-points] table of "
            f"{distribution or 'the distribution'}'s pyproject.toml and reinstall it.",
            group=group,
            plugin=plugin,
            distribution=distribution,
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


class EarlyPatchError(PluginLoadError):
    """An early patch of the selected platform's distribution failed.

    Early patches run at interpreter start, before any platform is selected, so a failure there
    is recorded (``cardcage.hooks.early.failures()``) and raised as this error once the
    selection names its distribution: by ``load_plugins()`` of either runtime, or by the import
    that reveals it after the selection is known. ``group`` is ``cardcage.early_patches``;
    ``step`` says what failed (importing the entry point, its callback, a patch of a target, a
    stand-in); ``targets`` lists the targets concerned.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str | None,
        distribution: str | None,
        step: str,
        targets: Sequence[str] = (),
    ) -> None:
        self.step = step
        super().__init__(
            message,
            group="cardcage.early_patches",
            plugin=plugin,
            distribution=distribution,
            targets=targets,
        )


class RuntimeRegistrationError(PluginError, TypeError):
    """An entry point of the ``cardcage.runtimes`` group does not give a usable runtime.

    Raised for a registration that fails to import, names something that is not a
    ``cardcage.hooks.runtimes.Runtime``, or whose entry-point name differs from the runtime's
    profile name. The message names the entry point and distribution and what to change.
    """


def missing_sglang_module(exc: BaseException) -> str | None:
    """The ``sglang`` module a failed import needed, when SGLang is not installed; else None.

    True of a plugin written for SGLang's own runtime (it imports ``sglang.*``) running where
    cardcage is the host and SGLang is absent. ``exc`` and the exceptions it was raised from or
    during are searched for a ``ModuleNotFoundError`` naming ``sglang`` or a submodule of it; a
    missing submodule of an installed SGLang is a different problem (another SGLang version) and
    gives None. Called on error paths only: it may look for the ``sglang`` package (never imports
    it).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ModuleNotFoundError):
            name = current.name or ""
            if name.partition(".")[0] == "sglang":
                return None if _sglang_installed() else name
        current = current.__cause__ or current.__context__
    return None


def _sglang_installed() -> bool:
    import importlib.util
    import sys

    if "sglang" in sys.modules:
        return sys.modules["sglang"] is not None
    try:
        return importlib.util.find_spec("sglang") is not None
    except (ImportError, ValueError):
        return False


def targets_sglang_problem(subject: str, step: str, sglang_module: str, exc: BaseException) -> str:
    """What happened, when ``step`` of the plugin named by ``subject`` needed missing SGLang.

    ``subject`` names the plugin and its distribution (``"Platform plugin 'x' (dist)"``),
    ``step`` what needed SGLang (``"importing it (pkg.mod:register)"``).
    """
    return (
        f"{subject} targets SGLang's runtime: {step} needs {sglang_module} "
        f"({type(exc).__name__}: {exc}), and SGLang is not installed in this environment, so "
        "cardcage is the host and cannot run it."
    )


def targets_sglang_fix(what: str = "this plugin", *, sglang_installed: bool = False) -> str:
    """The two ways out for a plugin written for SGLang's runtime, as every message words them.

    No final full stop, so a caller can go on (``"; or select another platform."``).
    """
    install = "" if sglang_installed else "install SGLang (pip install sglang) and "
    return (
        f"To run {what} as written, {install}start SGLang's own runtime, which hosts the "
        "plugins written for it; to run it in cardcage, port it to cardcage's API (the porting "
        f"guide: {SGLANG_PORTING_GUIDE})"
    )


class TargetsSGLangError(PluginError):
    """A plugin written for SGLang's own runtime, which cardcage cannot host.

    Either its import needs ``sglang`` and SGLang is not installed (``sglang_module`` names the
    missing module), or it hands cardcage one of SGLang's own classes (``sglang_module`` names
    that class's module). ``problem`` says what happened and ``fix`` the ways out; the message
    is the two together. Not raised by itself: each concrete error also subclasses the error of
    the step that failed (a plugin load, a platform activation, a platform class), so code that
    catches those keeps catching it.
    """

    sglang_module: str | None = None
    problem: str = ""
    fix: str = ""


class SGLangPluginLoadError(PluginLoadError, TargetsSGLangError):
    """A plugin of the selected platform's distribution imports ``sglang``, which is missing.

    It is written for SGLang's own runtime; the message gives both fixes (run SGLang's runtime,
    or port the plugin to cardcage).
    """

    def __init__(
        self,
        problem: str,
        fix: str,
        *,
        group: str | None,
        plugin: str | None,
        distribution: str | None,
        sglang_module: str | None,
    ) -> None:
        self.problem = problem
        self.fix = fix
        self.sglang_module = sglang_module
        super().__init__(f"{problem} {fix}", group=group, plugin=plugin, distribution=distribution)


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


class HookApplyWarning(RuntimeWarning):
    """``apply()`` left hook targets unpatched (not in strict mode): their hooks do not run.

    The failure is also logged at ERROR, which a script that configured logging may route away
    from the console; a ``RuntimeWarning`` is shown by default, once per call site, from the line
    that called ``apply()``, and ``-W error::cardcage.hooks.errors.HookApplyWarning`` (or
    ``apply(strict=True)``) turns it into an error. ``failures`` maps each target to its exception.
    """

    def __init__(self, message: str, *, failures: Mapping[str, BaseException]) -> None:
        self.failures = dict(failures)
        super().__init__(message)
