"""Errors of platform selection and of the platform contract; all derive from
``cardcage.hooks.errors.CardcageError``.

Each also subclasses the builtin SGLang raises in the same place (``RuntimeError`` for selection
failures, ``TypeError`` for a bad platform class, ``NotImplementedError`` for a subsystem an
out-of-tree platform does not provide), carries the fields ``cardcage platform`` shows, and says
what to do. ``PlatformDeprecationWarning`` is the warning category of the contract's old names.
"""

from __future__ import annotations

from collections.abc import Sequence

from cardcage.hooks.errors import CardcageError, PluginError, TargetsSGLangError

__all__ = [
    "InvalidActivateResultError",
    "InvalidPlatformClassError",
    "MultiplePlatformsError",
    "OutOfTreeImplementationError",
    "PlatformActivationError",
    "PlatformContractError",
    "PluginDeclarationError",
    "PlatformDeprecationWarning",
    "PlatformError",
    "PlatformIdentityError",
    "PlatformNotFoundError",
    "PlatformReentrancyError",
    "PlatformUnavailableError",
    "ReservedPlatformNameError",
    "SGLangPlatformActivationError",
    "SGLangPlatformClassError",
    "TorchNotInstalledError",
    "UnknownKVPoolKindError",
    "UnsupportedSelectorError",
]


class PlatformError(PluginError):
    """Base of every platform-selection and platform-contract error.

    ``selection_record`` holds the ``SelectionRecord`` as far as selection got (candidates seen,
    outcomes) when the error came from the selection engine, else None.
    """

    selection_record: object = None


class PlatformNotFoundError(PlatformError, RuntimeError, ValueError):
    """The selector names no installed platform entry point and no built-in alias.

    Both builtins: SGLang's SRT runtime raises RuntimeError here and its diffusion runtime
    ValueError, so code written against either keeps catching it.
    """

    def __init__(
        self,
        selector_env: str,
        selected: str,
        available: Sequence[tuple[str, str | None]],
        *,
        group: str,
        suggestion: str | None = None,
    ) -> None:
        self.selected = selected
        self.available = tuple(available)
        listed = ", ".join(
            f"{name!r} ({dist})" if dist else repr(name) for name, dist in sorted(self.available)
        )
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        super().__init__(
            f"{selector_env}={selected!r} not found in discovered platform plugins "
            f"(available: {listed or 'none'}).{hint} Install the distribution that provides it "
            f"(pip install <distribution>), or set {selector_env} to one of the available names.",
            group=group,
            plugin=selected,
        )


class UnsupportedSelectorError(PlatformNotFoundError):
    """The selector names a built-in that this runtime only detects automatically (diffusion's
    ``xpu``): selecting it by name is refused, whatever entry points are installed."""

    def __init__(self, selector_env: str, selected: str, requirement: str, *, group: str) -> None:
        self.selected = selected
        self.available = ()
        PlatformError.__init__(
            self,
            f"{selector_env}={selected!r} is not supported: the {selected.casefold()!r} built-in "
            f"is detected automatically only (it needs {requirement}). Unset {selector_env} and "
            "automatic selection picks it when the hardware is present.",
            group=group,
            plugin=selected,
        )


class PlatformUnavailableError(PlatformError, RuntimeError):
    """The explicitly selected platform is installed but its hardware is not present."""


class PlatformActivationError(PlatformError, RuntimeError):
    """A platform plugin's entry point could not be imported, its ``activate()`` raised, or it
    returned something other than str/None.

    Startup aborts: falling back to a built-in would run work on the wrong hardware.
    """


class InvalidActivateResultError(PlatformActivationError, TypeError):
    """``activate()`` returned something other than a non-empty str or None (a TypeError, as
    the seed's diffusion runtime raises)."""


class MultiplePlatformsError(PlatformError, RuntimeError):
    """More than one platform plugin activated and no selector chose between them."""

    def __init__(
        self, selector_env: str, activated: Sequence[tuple[str, str | None]], *, group: str
    ) -> None:
        self.candidates = tuple(activated)
        names = ", ".join(
            f"{name!r} ({dist})" if dist else repr(name) for name, dist in self.candidates
        )
        choices = ", ".join(repr(name) for name, _ in self.candidates)
        super().__init__(
            f"Multiple platform plugins activated: {names}. Set {selector_env} to select one "
            f"(one of: {choices}), or uninstall the distributions you do not need.",
            group=group,
        )


class ReservedPlatformNameError(PlatformError, RuntimeError):
    """A platform entry point uses a built-in alias (cpu, cuda, rocm, xpu) as its name."""


class InvalidPlatformClassError(PlatformError, TypeError):
    """``activate()`` named something that is not a usable platform class."""


class SGLangPlatformActivationError(PlatformActivationError, TargetsSGLangError):
    """A platform entry point written for SGLang's own runtime: importing it, or its
    ``activate()``, needs ``sglang`` (``sglang_module``), which is not installed.

    The message gives both fixes: run SGLang's own runtime, or port the plugin to cardcage.
    """

    def __init__(
        self,
        problem: str,
        fix: str,
        *,
        group: str,
        plugin: str | None,
        distribution: str | None,
        sglang_module: str | None,
    ) -> None:
        self.problem = problem
        self.fix = fix
        self.sglang_module = sglang_module
        super().__init__(f"{problem} {fix}", group=group, plugin=plugin, distribution=distribution)


class SGLangPlatformClassError(InvalidPlatformClassError, TargetsSGLangError):
    """``activate()`` named a platform class written for SGLang's own runtime.

    Either the class subclasses one of SGLang's platform bases
    (``sglang.srt.platforms.interface.SRTPlatform``, SGLang's diffusion ``Platform``), which
    cardcage rejects rather than adapts; or importing it needs ``sglang``, which is not
    installed. ``sglang_module`` names the SGLang module concerned. The message gives both
    fixes: run SGLang's own runtime, or port the plugin to cardcage.
    """

    def __init__(
        self,
        problem: str,
        fix: str,
        *,
        group: str,
        plugin: str | None,
        distribution: str | None,
        sglang_module: str | None,
    ) -> None:
        self.problem = problem
        self.fix = fix
        self.sglang_module = sglang_module
        super().__init__(f"{problem} {fix}", group=group, plugin=plugin, distribution=distribution)


class PlatformReentrancyError(PlatformError, RuntimeError):
    """``current_platform`` was touched while the platform was being resolved."""


class TorchNotInstalledError(CardcageError, ImportError):
    """A built-in platform operation needs torch, which is not installed."""

    def __init__(self, operation: str) -> None:
        super().__init__(
            f"{operation} needs PyTorch, which is not installed. Install it with "
            "pip install 'cardcage-core-platforms[torch]' (or a torch build for your hardware)."
        )


class PlatformContractError(PlatformError, TypeError):
    """A platform class breaks the SRT contract where it is defined (``SRTPlatform``'s
    class-definition check): a contract method whose signature cannot take the calls the hosts
    make, or a ``capabilities`` that is not a ``PlatformCapabilities``.

    Raised while the class statement runs, so importing the vendor's module fails at once, not
    in a worker when the runtime first calls the method. ``platform_class`` names the class
    being defined, ``owner`` the class that defines the offending member (the same class, or one
    of its bases), ``member`` the member; the message ends with the fix.
    """

    def __init__(
        self,
        *,
        platform_class: str,
        owner: str,
        member: str,
        problem: str,
        fix: str,
        distribution: str | None = None,
    ) -> None:
        self.platform_class = platform_class
        self.owner = owner
        self.member = member
        self.problem = problem
        self.fix = fix
        where = f"{owner}.{member}" + (
            f" (inherited by {platform_class})" if owner != platform_class else ""
        )
        if distribution:
            where += f" in distribution {distribution}"
        super().__init__(f"{where}: {problem} {fix}", distribution=distribution)


class PlatformIdentityError(PlatformContractError, ValueError):
    """A platform class declares an identity (``behaves_as``) it cannot have.

    Raised while the class statement runs (``DeviceMixin.__init_subclass__``, through
    ``cardcage.platforms.identity.check_identity``): a value that is not one of the built-ins a
    platform can behave as (``identity.BEHAVES_AS``), or one that contradicts the class's own
    built-in ``_enum``. ``distribution`` names the installed distribution that ships the class,
    when one does.
    """

    def __init__(
        self,
        *,
        platform_class: str,
        owner: str,
        problem: str,
        fix: str,
        distribution: str | None = None,
    ) -> None:
        super().__init__(
            platform_class=platform_class,
            owner=owner,
            member="behaves_as",
            problem=problem,
            fix=fix,
            distribution=distribution,
        )


class OutOfTreeImplementationError(PlatformError, NotImplementedError):
    """An out-of-tree platform reached a runtime subsystem it does not provide.

    Raised by ``require_out_of_tree_impl`` (the platform answered None, "no opinion", from the
    factory ``hook``) and ``reject_out_of_tree_path`` (the subsystem has no platform seam at all,
    ``hook`` is None). A ``NotImplementedError``, as SGLang 0.5.23 raises there.
    """

    def __init__(
        self,
        message: str,
        *,
        platform_class: str,
        device_name: str,
        subsystem: str,
        hook: str | None,
    ) -> None:
        self.platform_class = platform_class
        self.device_name = device_name
        self.subsystem = subsystem
        self.hook = hook
        super().__init__(message)


class PluginDeclarationError(PluginError, ValueError):
    """A general plugin's ``hooks_plugin()`` declaration (``cardcage.platforms.plugin``) is wrong.

    Raised when the plugin's module is imported, before any host runs it: an unknown runtime, a
    host's hooks declared for a runtime that host does not run, a platform that names no class.
    """


class UnknownKVPoolKindError(PlatformError, KeyError):
    """``get_kv_pool_cls(kind=...)`` got a kind other than ``"mha"``, ``"mla"`` or ``"dsa"``.

    A ``KeyError``, as SGLang 0.5.23 raises for it, with a message that lists the kinds.
    """

    def __init__(self, kind: object, kinds: Sequence[str]) -> None:
        self.kind = kind
        self.kinds = tuple(kinds)
        super().__init__(
            f"get_kv_pool_cls(kind={kind!r}): unknown KV pool kind; the kinds are "
            + ", ".join(repr(k) for k in self.kinds)
            + "."
        )

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


class PlatformDeprecationWarning(FutureWarning):
    """A platform class defines, or code calls, a name of the seed's contract that SGLang 0.5.23
    replaced (``support_cuda_graph()``, ``get_mha_kv_pool_cls()``, ...).

    Each warning names the successor, or says that 0.5.23 has none, and is issued once per class
    and name. A ``FutureWarning``, shown by default: the people who must act on it are the
    plugin's authors and the operators who run it (SGLang 0.5.23 logs its own warning for the
    KV-pool hooks at WARNING level for the same reason). ``-W error::FutureWarning`` turns it
    into an error in a plugin's CI.
    """
