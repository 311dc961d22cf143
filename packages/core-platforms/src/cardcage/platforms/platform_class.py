"""The class ``activate()`` names: loaded and validated as selection does, with plugin code run
as selection runs it.

``load_platform_class`` resolves a platform plugin's ``module:Class`` (or dotted) name and checks
it is a usable platform class for a runtime's policy, raising ``InvalidPlatformClassError`` (or
``SGLangPlatformClassError`` for a class written for SGLang's own runtime) with the real cause.
``activating_context`` marks the plugin whose code runs (its import, ``activate()``, its class's
import and constructor), so ``activating_plugin()`` (and ``cardcage.platforms.host``) know that
cardcage's selection is the host.

Import-safe and on the first ``current_platform`` path: the error classes are imported where a
problem is found.
"""

from __future__ import annotations

import importlib
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .device_mixin import DeviceMixin, PlatformEnum

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cardcage.hooks.snapshot import PluginEntryPoint

    from .selection import SelectionPolicy

__all__ = ["activating_context", "activating_plugin", "load_platform_class", "sglang_fix", "who"]

# -- who is running: plugin code knows cardcage is its host ------------------------------------

_activating = threading.local()


def activating_plugin() -> PluginEntryPoint | None:
    """The platform entry point whose ``activate()`` this thread is running, if any."""
    return getattr(_activating, "entry_point", None)


@contextmanager
def activating_context(ep: PluginEntryPoint) -> Iterator[None]:
    """Run plugin code of ``ep`` as selection runs it: ``activating_plugin()`` names ``ep``."""
    previous = activating_plugin()
    _activating.entry_point = ep
    try:
        yield
    finally:
        _activating.entry_point = previous


def who(ep: PluginEntryPoint) -> str:
    """``'name' (dist)``: how the runtime's exceptions name a plugin."""
    return f"{ep.name!r} ({ep.dist_name})" if ep.dist_name else repr(ep.name)


# -- the class activate() names ------------------------------------------------------------------


def _defined_by_base_mixin(cls: type, attr: str) -> bool:
    """True when ``attr`` comes from ``DeviceMixin`` itself: the class never chose a value."""
    for klass in cls.__mro__:
        if attr in klass.__dict__:
            return klass is DeviceMixin
    return True


def _resolve_name(qualname: str) -> object:
    """Resolve ``module:attr`` or dotted ``pkg.mod.Class`` as ``pkgutil.resolve_name`` does,
    but never hide why a module failed to import.

    The colon form imports the module part, then walks the attributes. The dotted form imports
    the longest prefix of the name that is a module, then walks the rest as attributes, like
    ``resolve_name``; unlike it, a module that exists but fails to import (a missing
    dependency such as ``sglang``, or an error in its code) raises that failure instead of the
    misleading "module has no attribute" that ``resolve_name`` turns it into. A name that is
    not made of identifiers goes to ``resolve_name`` itself, with its validation and errors.
    """
    module_name, colon, attrs = qualname.partition(":")
    parts = attrs.split(".") if colon else module_name.split(".")
    names = (*module_name.split("."), *parts) if colon else parts
    if not all(p.isascii() and p.isidentifier() for p in names):
        import pkgutil

        return pkgutil.resolve_name(qualname)
    if colon:
        obj: object = importlib.import_module(module_name)
    else:
        module_name = parts.pop(0)
        obj = importlib.import_module(module_name)  # the first part must be a module
        while parts:
            candidate = f"{module_name}.{parts[0]}"
            try:
                obj = importlib.import_module(candidate)
            except ModuleNotFoundError as exc:
                if exc.name != candidate:
                    raise  # the module exists; something it imports does not
                break  # no such module: the rest are attributes
            module_name = candidate
            parts.pop(0)
    for part in parts:
        obj = getattr(obj, part)
    return obj


def load_platform_class(
    policy: SelectionPolicy, qualname: str, ep: PluginEntryPoint | None
) -> type:
    """Resolve ``qualname`` and check it is a usable platform class for ``policy``.

    The checks selection makes before publishing (``check_class`` turns what this raises into
    a finding): a subclass of the runtime's base, and for an external plugin
    ``_enum = PlatformEnum.OOT`` with a real ``device_name`` and ``device_type``. Raises
    ``InvalidPlatformClassError`` (``SGLangPlatformClassError`` for a class written for SGLang).
    """
    group = policy.profile.platform_group
    source = who(ep) if ep is not None else "built-in"
    try:
        if ep is not None:
            with activating_context(ep):
                obj = _resolve_name(qualname)
        else:
            obj = _resolve_name(qualname)
    except Exception as exc:
        raise _unimportable_class_error(policy, qualname, ep, exc) from exc
    base = policy.base_class
    if not isinstance(obj, type) or not issubclass(obj, base):
        from .errors import InvalidPlatformClassError

        if isinstance(obj, type) and ep is not None:
            native = _sglang_base(obj)
            if native is not None:
                raise _sglang_native_class_error(policy, qualname, ep, native)
        raise InvalidPlatformClassError(
            f"Expected a {base.__name__} subclass, got {type(obj).__name__} {obj!r:.80}: "
            f"{qualname} (from platform plugin {source}). activate() must name a class that "
            f"subclasses {base.__module__}.{base.__qualname__}.",
            group=group,
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        )
    if ep is not None:
        problems = []
        if getattr(obj, "_enum", None) is not PlatformEnum.OOT:
            problems.append(f"_enum = PlatformEnum.OOT (it has {getattr(obj, '_enum', None)})")
        for attr in ("device_name", "device_type"):
            value = getattr(obj, attr, "")
            inherited_default = _defined_by_base_mixin(obj, attr)
            if inherited_default:
                problems.append(f"its own non-empty {attr} (it inherits DeviceMixin's {value!r})")
            elif not isinstance(value, str) or not value or value == "unknown":
                problems.append(f"a non-empty {attr} other than 'unknown' (it has {value!r})")
        if problems:
            from .errors import InvalidPlatformClassError

            raise InvalidPlatformClassError(
                f"External platform class {qualname} (from {source}) must set "
                + " and ".join(problems)
                + ".",
                group=group,
                plugin=ep.name,
                distribution=ep.dist_name,
            )
    return obj


def _unimportable_class_error(
    policy: SelectionPolicy, qualname: str, ep: PluginEntryPoint | None, exc: Exception
) -> Exception:
    """The error for a platform class that cannot be imported; the real cause is named."""
    from cardcage.hooks.errors import missing_sglang_module, targets_sglang_problem

    from .errors import InvalidPlatformClassError, SGLangPlatformClassError

    profile = policy.profile
    sglang_module = missing_sglang_module(exc) if ep is not None else None
    if ep is not None and sglang_module is not None:
        step = f"importing the class its activate() named ({qualname})"
        return SGLangPlatformClassError(
            targets_sglang_problem(f"Platform plugin {who(ep)}", step, sglang_module, exc),
            sglang_fix(policy, ep),
            group=profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
            sglang_module=sglang_module,
        )
    source = who(ep) if ep is not None else "built-in"
    return InvalidPlatformClassError(
        f"Platform plugin {source} named {qualname!r}, which cannot be imported: "
        f"{type(exc).__name__}: {exc}.",
        group=profile.platform_group,
        plugin=ep.name if ep else None,
        distribution=ep.dist_name if ep else None,
    )


def sglang_fix(
    policy: SelectionPolicy, ep: PluginEntryPoint, *, sglang_installed: bool = False
) -> str:
    """The ways out for a platform plugin written for SGLang's runtime."""
    from cardcage.hooks.errors import targets_sglang_fix

    return (
        f"{targets_sglang_fix(sglang_installed=sglang_installed)}. Until then, select another "
        f"platform with {policy.profile.selector_env}, or uninstall {ep.dist_name or ep.value}."
    )


def _sglang_base(cls: type) -> type | None:
    """The nearest class of SGLang's own (a module under ``sglang``) in ``cls``'s MRO, if any.

    A class of SGLang's own means the platform class was written for SGLang's runtime (against
    ``sglang.srt.platforms.interface.SRTPlatform``, or SGLang's diffusion ``Platform``).
    """
    for klass in cls.__mro__:
        module = getattr(klass, "__module__", None) or ""
        if module.partition(".")[0] == "sglang":
            return klass
    return None


def _sglang_native_class_error(
    policy: SelectionPolicy, qualname: str, ep: PluginEntryPoint, native: type
) -> Exception:
    """The error for an SGLang-native platform class handed to cardcage's selection."""
    from .errors import SGLangPlatformClassError

    profile = policy.profile
    base = policy.base_class
    found = f"{native.__module__}.{native.__qualname__}"
    return SGLangPlatformClassError(
        f"Platform plugin {who(ep)} targets SGLang's runtime: the class its activate() named, "
        f"{qualname}, is a subclass of {found}, a platform class written for SGLang itself. "
        f"cardcage hosts platform classes written against {base.__module__}."
        f"{base.__qualname__} and does not adapt SGLang's own.",
        sglang_fix(policy, ep, sglang_installed=True),
        group=profile.platform_group,
        plugin=ep.name,
        distribution=ep.dist_name,
        sglang_module=native.__module__,
    )
