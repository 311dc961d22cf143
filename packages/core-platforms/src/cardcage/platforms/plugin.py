"""A general plugin in one declaration: its hooks per host, and cardcage does the rest.

A vendor distribution's general plugin (``sglang.srt.plugins``, ``sglang.multimodal_gen.plugins``,
``vllm.general_plugins``) is called by whichever host is starting (DESIGN §8). Every such plugin
needs the same plumbing around its hooks: which host runs it, whether that host selected the
platform the distribution supplies (SGLang and vLLM run the general plugins of every installed
distribution, cardcage's loader only the selected one's), which registry takes the hooks, not
registering twice, and cardcage's failure policy under vLLM, whose loader has none. So a vendor
writes only what is its own::

    from cardcage.platforms.plugin import around, hooks_plugin

    register = hooks_plugin(
        "vendor_pkg.platform:VendorSRTPlatform",
        cardcage=[around("cardcage.platforms.current.get_current_platform", count_calls)],
        sglang=[around("sglang.srt.utils.common.get_device_memory_capacity", log_memory)],
        vllm=[around("vllm.utils.import_utils.resolve_obj_by_qualname", log_resolved)],
    )

and names ``vendor_pkg.hooks:register`` in its entry points. ``hooks_plugin()`` checks the
declaration at once (a malformed target, a hook that is not callable, a runtime a host cannot
run: typed errors naming the plugin, its distribution and the fix) and registers nothing; the
returned ``register()`` does the work when a loader calls it.

Import-safe: stdlib and ``cardcage.hooks`` only; no torch, no host, no diffusion runtime (the
diffusion registry is imported inside ``register()``, as ``cardcage doctor`` imports plugin
modules where that runtime is not installed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from cardcage.hooks.host import Host, general_plugin, plugin_host, rehearsal
from cardcage.hooks.registry import HookType, check_target

from .host import selected_by_sglang, selected_by_vllm

if TYPE_CHECKING:
    from cardcage.hooks.registry import BaseHookRegistry

    from .errors import PluginDeclarationError

__all__ = [
    "RUNTIMES",
    "HookSpec",
    "OnRegistered",
    "after",
    "around",
    "before",
    "hooks_plugin",
    "replace",
]

logger = logging.getLogger(__name__)

#: The runtimes a general plugin can belong to, and the hosts that run each one's plugins.
RUNTIMES: dict[str, frozenset[Host]] = {
    "srt": frozenset({Host.CARDCAGE, Host.SGLANG, Host.VLLM}),
    "diffusion": frozenset({Host.CARDCAGE, Host.SGLANG}),
}

_ENTRY_POINT_GROUPS = (
    "sglang.srt.plugins",
    "sglang.multimodal_gen.plugins",
    "vllm.general_plugins",
)


class HookSpec:
    """One hook a general plugin declares: ``hook`` on ``target``, of kind ``type``.

    ``target`` is written as ``HookRegistry.register`` takes it (``pkg.mod.func``,
    ``pkg.mod.Class.method`` or ``pkg.mod:Class.method``); nothing is imported until the host
    applies the hook. Build one with ``around``, ``before``, ``after`` or ``replace``.

    Immutable, compared and hashed by its three fields. Written out rather than a frozen
    dataclass: this module is imported by every process whose host loads a plugin built on it,
    SGLang's among them, and generating a frozen dataclass there cost 0.4 ms of its start-up.
    """

    __slots__ = ("hook", "target", "type")
    __match_args__ = ("target", "hook", "type")

    target: str
    hook: Callable[..., Any]
    type: HookType

    def __init__(self, target: str, hook: Callable[..., Any], type: HookType) -> None:  # noqa: A002
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "hook", hook)
        object.__setattr__(self, "type", type)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"HookSpec is immutable: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"HookSpec is immutable: cannot delete {name!r}")

    def _fields(self) -> tuple[str, Callable[..., Any], HookType]:
        return (self.target, self.hook, self.type)

    def __eq__(self, other: object) -> bool:
        if type(other) is not HookSpec:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"HookSpec(target={self.target!r}, hook={self.hook!r}, type={self.type!r})"


#: Called once per hook of the running host after ``register()`` put it in place (also when an
#: earlier call had): how a vendor records evidence that its plugin ran, per process.
OnRegistered = Callable[[Host, HookSpec], None]


def around(target: str, hook: Callable[..., Any]) -> HookSpec:
    """An AROUND hook: ``hook(original, *args, **kwargs)`` runs instead and calls ``original``."""
    return HookSpec(target, hook, HookType.AROUND)


def before(target: str, hook: Callable[..., Any]) -> HookSpec:
    """A BEFORE hook: ``hook(*args, **kwargs)`` runs first; it returns None or new arguments."""
    return HookSpec(target, hook, HookType.BEFORE)


def after(target: str, hook: Callable[..., Any]) -> HookSpec:
    """An AFTER hook: ``hook(result, *args, **kwargs)`` runs last; non-None replaces the result."""
    return HookSpec(target, hook, HookType.AFTER)


def replace(target: str, hook: Callable[..., Any]) -> HookSpec:
    """A REPLACE hook: ``hook`` (a function or a class) takes the target's place."""
    return HookSpec(target, hook, HookType.REPLACE)


def hooks_plugin(
    platform: str | None,
    *,
    cardcage: Sequence[HookSpec] = (),
    sglang: Sequence[HookSpec] = (),
    vllm: Sequence[HookSpec] = (),
    runtime: Literal["srt", "diffusion"] = "srt",
    on_registered: OnRegistered | None = None,
) -> Callable[[], None]:
    """The ``register()`` of a general plugin that registers, per host, the hooks declared here.

    ``platform`` names the platform class this distribution supplies (``pkg.mod:Class`` or
    dotted), or None for a plugin that supplies no platform. When a loader calls the result:

    * under cardcage's loader (which runs only the selected platform's plugins; no loader at
      all, as in a test, counts as cardcage) the ``cardcage`` hooks are registered;
    * under SGLang or vLLM, the hooks of that host, but only when that host selected
      ``platform`` (``selected_by_sglang(platform, runtime=runtime)``, ``selected_by_vllm``);
      otherwise nothing is registered and an INFO line says why. With ``platform`` None the
      hooks are registered whatever the host selected;
    * the registry is SRT's ``cardcage.hooks.registry.HookRegistry`` for ``runtime="srt"``, the
      diffusion runtime's for ``runtime="diffusion"``; under SGLang that registry hands each
      hook to SGLang's own, under vLLM cardcage applies it at once (DESIGN §8);
    * a hook already registered by an earlier call is not registered again, on every host;
    * ``on_registered(host, spec)`` then runs for each hook of the running host.

    The result carries ``cardcage.hooks.host.general_plugin``'s failure policy: under vLLM a
    failure of the selected platform's plugin aborts start-up with ``PluginLoadError``, any
    other plugin's is logged. ``cardcage doctor``'s rehearsals (``rehearsing``) take the same
    paths as the host they rehearse.

    Raises ``PluginDeclarationError``, ``InvalidTargetError`` or ``HookRegistrationError`` here,
    at import, for a declaration that cannot work.
    """
    module = _caller_module()
    declared = {Host.CARDCAGE: tuple(cardcage), Host.SGLANG: tuple(sglang), Host.VLLM: tuple(vllm)}
    _check(module, platform, runtime, declared, on_registered)
    plugin = _HooksPlugin(module, platform, runtime, declared, on_registered)

    def register() -> None:
        plugin.register()

    register.__module__ = module
    register.__qualname__ = "register"
    register.__doc__ = (
        f"Register {module}'s hooks for the host that runs it (cardcage.platforms.plugin)."
    )
    return general_plugin(register)


class _HooksPlugin:
    """What one ``hooks_plugin()`` declaration does each time its ``register()`` is called."""

    def __init__(
        self,
        module: str,
        platform: str | None,
        runtime: str,
        declared: dict[Host, tuple[HookSpec, ...]],
        on_registered: OnRegistered | None,
    ) -> None:
        self.module = module
        self.label = module.partition(".")[0]
        self.platform = platform
        self.runtime = runtime
        self.declared = declared
        self.on_registered = on_registered
        # Hooks handed to SGLang's registry, which cardcage cannot read back: (registry, spec).
        self._handed: set[tuple[str, HookSpec]] = set()

    def register(self) -> None:
        host = plugin_host() or Host.CARDCAGE
        specs = self.declared[host]
        if host is not Host.CARDCAGE and not self._selected(host):
            logger.info(
                "%s: %s did not select %s; no %s hooks registered",
                self.label,
                host.value,
                self.platform,
                self.runtime,
            )
            return
        registry = self._registry()
        handed_over = host is Host.SGLANG and rehearsal() is None
        # Under SGLang the hooks live in SGLang's registry, which cardcage cannot read back.
        registered = {} if handed_over else registry.registrations()
        added = 0
        handed_to = f"{registry.__module__}.{registry.__qualname__}"
        for spec in specs:
            if handed_over:
                if (handed_to, spec) in self._handed:
                    continue
            elif any(
                record.hook is spec.hook and record.hook_type is spec.type
                for record in registered.get(spec.target.strip(), ())
            ):
                continue
            registry.register(spec.target, spec.hook, spec.type)
            if handed_over:
                self._handed.add((handed_to, spec))
            added += 1
        logger.debug(
            "%s: registered %d of %d %s hooks under %s",
            self.label,
            added,
            len(specs),
            self.runtime,
            host.value,
        )
        if self.on_registered is not None:
            for spec in specs:
                self.on_registered(host, spec)

    def _selected(self, host: Host) -> bool:
        if self.platform is None:
            return True
        if host is Host.VLLM:
            return selected_by_vllm(self.platform)
        return selected_by_sglang(self.platform, runtime=self.runtime)

    def _registry(self) -> type[BaseHookRegistry]:
        """The hook registry of this plugin's runtime.

        SRT's is core-hooks' own ``HookRegistry``; any other runtime's is the one its record in
        the ``cardcage.runtimes`` group names, so this module names no runtime's modules.
        """
        if self.runtime == "srt":
            from cardcage.hooks.registry import HookRegistry

            return HookRegistry
        from cardcage.hooks.runtimes import get_runtime

        runtime = get_runtime(self.runtime)
        if runtime is None:
            raise _declaration_error(
                self.module,
                f"it declares hooks for the {self.runtime!r} runtime, which no installed "
                "distribution registers (entry-point group cardcage.runtimes)",
                f"install the distribution that provides the {self.runtime!r} runtime "
                "(cardcage-diffusion-runtime for cardcage's diffusion runtime), or declare "
                "the hooks for a runtime that is installed",
            )
        return runtime.load_hook_registry()


# -- checking a declaration ---------------------------------------------------------------------


def _caller_module() -> str:
    import sys

    frame = sys._getframe(2)  # hooks_plugin's caller
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else "<unknown module>"


def _check(
    module: str,
    platform: object,
    runtime: object,
    declared: dict[Host, tuple[HookSpec, ...]],
    on_registered: object,
) -> None:
    if runtime not in RUNTIMES:
        raise _declaration_error(
            module,
            f"runtime={runtime!r} is not a runtime whose general plugins cardcage loads",
            "pass runtime='srt' (the default) or runtime='diffusion'",
        )
    hosts = RUNTIMES[str(runtime)]
    for host, specs in declared.items():
        if specs and host not in hosts:
            raise _declaration_error(
                module,
                f"it declares {host.value}= hooks for runtime={runtime!r}, but {host.value} "
                f"does not run {runtime} plugins",
                f"remove {host.value}=, or declare those hooks in a plugin of a runtime "
                f"{host.value} runs",
            )
    if platform is not None and not _valid_platform(platform):
        raise _declaration_error(
            module,
            f"platform={platform!r} does not name a class",
            "pass the platform class this distribution supplies, as 'pkg.module:Class' or "
            "'pkg.module.Class' (what activate() returns), or None for a hooks-only plugin",
        )
    if on_registered is not None and not callable(on_registered):
        raise _declaration_error(
            module,
            f"on_registered={on_registered!r} is not callable",
            "pass a function taking (host, spec), or leave it out",
        )
    for host, specs in declared.items():
        for spec in specs:
            _check_spec(module, host, spec)


def _check_spec(module: str, host: Host, spec: object) -> None:
    if not isinstance(spec, HookSpec):
        from cardcage.hooks.errors import HookRegistrationError, format_plugin

        plugin, dist = _who(module)
        raise HookRegistrationError(
            f"{format_plugin(plugin, dist)}: hooks_plugin({host.value}=...) got {spec!r:.80}, "
            "which is not a HookSpec. Build each hook with around(), before(), after() or "
            "replace() from cardcage.platforms.plugin.",
            hook=spec,
            plugin=plugin,
            distribution=dist,
        )
    try:
        check_target(spec.target)
    except Exception as exc:
        from cardcage.hooks.errors import InvalidTargetError, format_plugin

        if not isinstance(exc, InvalidTargetError):
            raise
        plugin, dist = _who(module)
        raise InvalidTargetError(
            f"{format_plugin(plugin, dist)}: in hooks_plugin({host.value}=...), {exc}",
            target=spec.target if isinstance(spec.target, str) else None,
            hook=spec.hook,
            plugin=plugin,
            distribution=dist,
        ) from None
    # Typed as object: a declaration is checked for what it may hold, not what it should.
    kind: object = spec.type
    hook: object = spec.hook
    problem = None
    if not isinstance(kind, HookType):
        problem = f"type {kind!r} is not a HookType (BEFORE, AFTER, AROUND, REPLACE)"
    elif not callable(hook):
        problem = f"the hook {hook!r:.60} is not callable"
    elif isinstance(hook, type) and kind is not HookType.REPLACE:
        problem = f"the class {hook.__name__} can only be a REPLACE hook"
    if problem is not None:
        from cardcage.hooks.errors import HookRegistrationError, format_plugin

        plugin, dist = _who(module)
        raise HookRegistrationError(
            f"{format_plugin(plugin, dist)}: in hooks_plugin({host.value}=...), the hook on "
            f"{spec.target!r} cannot work: {problem}. Pass a function (a class only with "
            "replace()), built with around(), before(), after() or replace().",
            target=spec.target,
            hook=spec.hook,
            plugin=plugin,
            distribution=dist,
        )


def _valid_platform(platform: object) -> bool:
    if not isinstance(platform, str):
        return False
    module, colon, attr = platform.strip().rpartition(":")
    if not colon:
        module, _, attr = platform.strip().rpartition(".")
    parts = [*module.split("."), *attr.split(".")]
    return bool(module) and all(part.isidentifier() for part in parts)


def _declaration_error(module: str, problem: str, fix: str) -> PluginDeclarationError:
    # Imported here: every vendor's plugin module imports this one at start-up, and a valid
    # declaration never needs the error classes.
    from cardcage.hooks.errors import format_plugin

    from .errors import PluginDeclarationError

    plugin, dist = _who(module)
    return PluginDeclarationError(
        f"{format_plugin(plugin, dist)}: hooks_plugin() in {module}: {problem}. Fix: {fix}.",
        plugin=plugin,
        distribution=dist,
    )


def _who(module: str) -> tuple[str, str | None]:
    """The entry point (else the module) and the distribution that declared, for an error.

    Only called on the way to an error: it reads installed metadata, which a valid declaration
    never pays for.
    """
    from importlib import metadata

    for group in _ENTRY_POINT_GROUPS:
        for entry_point in metadata.entry_points(group=group):
            if entry_point.module == module:
                dist = entry_point.dist
                return entry_point.name, dist.name if dist is not None else None
    dists = metadata.packages_distributions().get(module.partition(".")[0])
    return module, dists[0] if dists else None
