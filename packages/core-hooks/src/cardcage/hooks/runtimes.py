"""The runtime registry: every inference runtime cardcage serves, one frozen record each.

A runtime package registers itself with one entry point in the ``cardcage.runtimes`` group whose
name is the runtime's profile name and whose value is a :class:`Runtime` record::

    [project.entry-points."cardcage.runtimes"]
    toy = "toy_runtime.runtime:TOY_RUNTIME"

Everything that needs to know the runtimes (the general-plugin loader's platform hand-off and
allowlist scope, and each command of the ``cardcage`` CLI) asks this module, so a runtime
embedded under its own profile is seen everywhere without any core package naming its modules.

Import-safe and cheap: stdlib and ``cardcage.hooks`` only. Entry points come from the
process's entry-point snapshot (one metadata scan, shared with plugin discovery); a runtime's
definition module is imported only when that runtime is asked for, and everything the record
points at (policy, accessor, hook registry, variables) is a ``"module:attr"`` path resolved on
use, so registering a runtime never imports torch or the runtime itself.

``Runtime`` is a plain class with ``__slots__`` that writes out its comparison, hash and ``repr``,
not a dataclass: it is defined inside the start-up window that ``benchmarks/bench_platforms.py``
budgets (docs/reference/records.md says what it keeps).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .log import get_logger
from .profile import SRT_PROFILE, RuntimeProfile

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType

    # Protocols only for the type checker: defining one at import time costs more than the rest.
    from typing import Protocol, Self

    from .errors import RuntimeRegistrationError
    from .registry import BaseHookRegistry
    from .snapshot import EntryPointSnapshot, PluginEntryPoint

    class _BuiltinLike(Protocol):
        @property
        def alias(self) -> str: ...

    class _PolicyLike(Protocol):
        """What the record reads from a selection policy (``cardcage.platforms.selection``)."""

        @property
        def builtins(self) -> tuple[_BuiltinLike, ...]: ...

        @property
        def default_qualname(self) -> str | None: ...


__all__ = [
    "RUNTIMES_GROUP",
    "Runtime",
    "broken_runtimes",
    "get_runtime",
    "registered_runtime_names",
    "registered_runtimes",
    "runtime_for",
]

logger = get_logger(__name__)

#: The entry-point group a runtime package registers its :class:`Runtime` record in.
RUNTIMES_GROUP = "cardcage.runtimes"


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    value: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


class Runtime:
    """One inference runtime: its profile and where its selection, hooks and variables live.

    Every reference is a ``"module"`` or ``"module:attr"`` path resolved when first used:

    * ``policy``: a zero-argument factory returning the runtime's
      ``cardcage.platforms.selection.SelectionPolicy`` (the built-in fallback chain is read from
      its ``builtins``, never written out by hand);
    * ``accessor``: the module with the runtime's ``get_current_platform()`` and
      ``get_selection_record()`` (its lazy ``current_platform``);
    * ``hook_registry``: the ``BaseHookRegistry`` subclass its general plugins register with;
    * ``env_registries``: modules holding an ``EnvRegistry`` named ``ENV_VARS`` (the variables
      the runtime reads; ``cardcage env`` lists them);
    * ``present_if``: optional, a zero-argument predicate: whether the runtime is present in this
      environment. A command run without ``--runtime`` covers only present runtimes;
      ``--runtime NAME`` covers it anyway. Empty (the default): always present. A host runtime
      that cardcage only explains (vLLM) is present where the host is installed.

    ``display_name`` is how messages name the runtime ("SRT"); ``distribution`` is the
    distribution that installs it. The record's name is its profile's name. Immutable, hashable.
    """

    __match_args__ = (
        "profile",
        "display_name",
        "distribution",
        "policy",
        "accessor",
        "hook_registry",
        "env_registries",
        "present_if",
    )
    __slots__ = __match_args__

    profile: RuntimeProfile
    display_name: str
    distribution: str
    policy: str
    accessor: str
    hook_registry: str
    env_registries: tuple[str, ...]
    present_if: str

    def __init__(
        self,
        profile: RuntimeProfile,
        display_name: str,
        distribution: str,
        policy: str,
        accessor: str,
        hook_registry: str = "cardcage.hooks.registry:HookRegistry",
        env_registries: Iterable[str] = (),
        present_if: str = "",
    ) -> None:
        init = object.__setattr__
        init(self, "profile", profile)
        init(self, "display_name", display_name)
        init(self, "distribution", distribution)
        init(self, "policy", policy)
        init(self, "accessor", accessor)
        init(self, "hook_registry", hook_registry)
        init(self, "env_registries", tuple(env_registries))
        init(self, "present_if", present_if)

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.profile,
            self.display_name,
            self.distribution,
            self.policy,
            self.accessor,
            self.hook_registry,
            self.env_registries,
            self.present_if,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())

    @property
    def name(self) -> str:
        """The runtime's name: its profile's (``--runtime NAME`` on the command line)."""
        return self.profile.name

    def load_policy(self) -> Any:
        """A fresh selection policy with the default hardware probes."""
        return _resolve(self.policy)()

    def accessor_module(self) -> ModuleType:
        """The module with ``get_current_platform()`` and ``get_selection_record()``."""
        return importlib.import_module(self.accessor)

    def is_present(self) -> bool:
        """Whether commands run without ``--runtime`` cover this runtime (``present_if``).

        A predicate that cannot be imported or raises counts as present: the commands then
        report what is wrong with the runtime instead of hiding it.
        """
        if not self.present_if:
            return True
        try:
            return bool(_resolve(self.present_if)())
        except Exception:
            logger.debug("present_if of runtime %s failed", self.name, exc_info=True)
            return True

    def load_hook_registry(self) -> type[BaseHookRegistry]:
        registry: type[BaseHookRegistry] = _resolve(self.hook_registry)
        return registry

    def fallback_chain(self, policy: _PolicyLike | None = None) -> str:
        """The automatic fallback chain in words, read from the policy's built-ins in order."""
        chosen: _PolicyLike = self.load_policy() if policy is None else policy
        aliases = [b.alias for b in chosen.builtins]
        first = aliases[0] if len(aliases) == 1 else f"the first detected of {', '.join(aliases)}"
        if chosen.default_qualname:
            base = chosen.default_qualname.replace(":", ".").rsplit(".", 1)[-1]
            return f"{first}, else the default {base}" if aliases else f"the default {base}"
        return first if aliases else "nothing (no built-in platform)"


def _where(ep: PluginEntryPoint) -> str:
    where = f"entry point {ep.name!r} = {ep.value!r} in group {RUNTIMES_GROUP!r}"
    return where + (f" (distribution {ep.dist_name})" if ep.dist_name else "")


def _broken(ep: PluginEntryPoint, message: str) -> RuntimeRegistrationError:
    from .errors import RuntimeRegistrationError  # the error path only: a cheap import

    return RuntimeRegistrationError(
        message, group=RUNTIMES_GROUP, plugin=ep.name, distribution=ep.dist_name
    )


def _load(ep: PluginEntryPoint) -> Runtime | RuntimeRegistrationError:
    """Import one registration and check it; every failure is a ``RuntimeRegistrationError``,
    returned, not raised, so the cache keeps it.

    The distribution's name (a METADATA read) is looked up on the error paths only.
    """
    try:
        value = ep.load()
    except Exception as exc:
        error = _broken(
            ep,
            f"The runtime registered by {_where(ep)} cannot be imported: "
            f"{type(exc).__name__}: {exc}. "
            "Reinstall the distribution, or uninstall it if the runtime is not needed.",
        )
        error.__cause__ = exc  # as `raise ... from exc` would
        error.__suppress_context__ = True
        return error
    if not isinstance(value, Runtime):
        return _broken(
            ep,
            f"The {_where(ep)} names a {type(value).__name__}, not a "
            "cardcage.hooks.runtimes.Runtime record. Point the entry point at a module-level "
            "Runtime(...).",
        )
    if value.name != ep.name:
        return _broken(
            ep,
            f"The {_where(ep)} gives a runtime whose profile is named {value.name!r}. Name the "
            f"entry point after the profile: {value.name} = {ep.value!r}.",
        )
    return value


def _entry_points(snapshot: EntryPointSnapshot | None) -> tuple[PluginEntryPoint, ...]:
    if snapshot is None:
        from .snapshot import entry_point_snapshot

        snapshot = entry_point_snapshot()
    eps = snapshot.group(RUNTIMES_GROUP)
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    for name in sorted(by_name):
        if len(by_name[name]) > 1:
            from .errors import DuplicatePluginError

            raise DuplicatePluginError(RUNTIMES_GROUP, name, [e.dist_name for e in by_name[name]])
    return eps


def _order(name: str) -> tuple[bool, str]:
    """SRT first (the runtime ``load_plugins()`` serves by default), then by name."""
    return (name != SRT_PROFILE.name, name)


#: Loaded records (or the error) by entry point: name, value and the distribution's normalised
#: name, which the scan knows without reading METADATA.
_loaded: dict[tuple[str, str, str | None], Runtime | RuntimeRegistrationError] = {}


def _cached(ep: PluginEntryPoint) -> Runtime | RuntimeRegistrationError:
    key = (ep.name, ep.value, ep.dist.normalized_name if ep.dist is not None else None)
    found = _loaded.get(key)
    if found is None:
        found = _loaded[key] = _load(ep)
    return found


def registered_runtime_names(snapshot: EntryPointSnapshot | None = None) -> tuple[str, ...]:
    """The names of every registered runtime, SRT first, from metadata only (imports nothing)."""
    return tuple(sorted((ep.name for ep in _entry_points(snapshot)), key=_order))


def get_runtime(name: str, snapshot: EntryPointSnapshot | None = None) -> Runtime | None:
    """The runtime registered as ``name`` (imports only its registration); None if none is.

    A broken registration raises ``RuntimeRegistrationError``; two distributions registering
    the same name raise ``DuplicatePluginError``.
    """
    for ep in _entry_points(snapshot):
        if ep.name == name:
            found = _cached(ep)
            if not isinstance(found, Runtime):
                raise found
            return found
    return None


def runtime_for(
    profile: RuntimeProfile, snapshot: EntryPointSnapshot | None = None
) -> Runtime | None:
    """The registered runtime whose profile is ``profile``; None when none is registered.

    A broken registration under the profile's name raises (``RuntimeRegistrationError``,
    ``DuplicatePluginError``): the loader must not fall back to guessing the selection for a
    runtime that is installed but cannot be loaded.
    """
    runtime = get_runtime(profile.name, snapshot)
    return runtime if runtime is not None and runtime.profile == profile else None


def registered_runtimes(snapshot: EntryPointSnapshot | None = None) -> tuple[Runtime, ...]:
    """Every registered runtime that loads, SRT first; broken ones are logged and skipped.

    ``broken_runtimes()`` returns the skipped ones with their errors (``cardcage doctor``).
    """
    found: list[Runtime] = []
    for ep in sorted(_entry_points(snapshot), key=lambda e: _order(e.name)):
        loaded = _cached(ep)
        if isinstance(loaded, Runtime):
            found.append(loaded)
        else:
            logger.warning("%s", loaded)
    return tuple(found)


def broken_runtimes(
    snapshot: EntryPointSnapshot | None = None,
) -> tuple[RuntimeRegistrationError, ...]:
    """The registrations that do not give a usable runtime, each as its typed error."""
    broken = (_cached(ep) for ep in sorted(_entry_points(snapshot), key=lambda e: _order(e.name)))
    return tuple(b for b in broken if not isinstance(b, Runtime))
