"""The platform selection engine: one engine, configured per runtime by a ``SelectionPolicy``.

The SRT chain (and, later, the diffusion chain) is data: the entry-point group and selector
variable come from the runtime profile, the built-in platforms and their probes from the policy.
The engine:

1. validates entry-point names before loading anything: a name provided by two distributions,
   or one that collides with a built-in alias, is an error;
2. explicit mode (selector set): a built-in alias selects that built-in (SRT checks its hardware);
   any other name loads and activates that one entry point only — not found, None, or an
   exception are errors naming the plugin and its distribution;
3. automatic mode: every platform entry point that passes the allowlist is activated, in
   (distribution, name) order; an exception aborts (never a silent fallback to a built-in that
   would run the work on the wrong hardware); two or more → error; none → the built-in chain;
4. validates the class before anything is published: a subclass of the runtime's base, and for
   external platforms ``_enum = OOT`` with a real ``device_name`` and ``device_type``.

Everything it saw goes into a ``SelectionRecord`` for ``cardcage platform``.
"""

from __future__ import annotations

import importlib
import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cardcage.hooks.errors import DuplicatePluginError
from cardcage.hooks.loader import read_allowlist
from cardcage.hooks.log import get_logger
from cardcage.hooks.profile import RuntimeProfile
from cardcage.hooks.records import FrozenRecord, Record
from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint, entry_point_snapshot

from .device_mixin import DeviceMixin, PlatformEnum

# The error classes (``.errors``) are imported where they are raised: a successful selection,
# the path every process takes, never needs them.

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from traceback import StackSummary

__all__ = [
    "BuiltinPlatform",
    "Candidate",
    "SelectionPolicy",
    "SelectionRecord",
    "activating_plugin",
    "load_platform_class",
    "select_platform",
]

logger = get_logger(__name__)


class BuiltinPlatform(FrozenRecord):
    """A platform that ships with the runtime, with the probes that decide if it can run."""

    _fields = (
        "alias",
        "qualname",
        "auto_probe",
        "explicit_probe",
        "explicit_allowed",
        "requirement",
    )
    __slots__ = _fields

    alias: str
    qualname: str
    auto_probe: Callable[[], bool]
    explicit_probe: Callable[[], bool] | None  # None: explicit selection skips probing
    explicit_allowed: bool
    requirement: str  # what the probe looks for, shown when it does not match

    def __init__(
        self,
        alias: str,
        qualname: str,
        auto_probe: Callable[[], bool],
        explicit_probe: Callable[[], bool] | None = None,
        explicit_allowed: bool = True,
        requirement: str = "",
    ) -> None:
        init = object.__setattr__
        init(self, "alias", alias)
        init(self, "qualname", qualname)
        init(self, "auto_probe", auto_probe)
        init(self, "explicit_probe", explicit_probe)
        init(self, "explicit_allowed", explicit_allowed)
        init(self, "requirement", requirement)


class SelectionPolicy(FrozenRecord):
    """How one runtime selects its platform."""

    _fields = (
        "profile",
        "base_class",
        "builtins",
        "default_qualname",
        "allowlist_filters_automatic",
    )
    __slots__ = _fields

    profile: RuntimeProfile
    base_class: type
    builtins: tuple[BuiltinPlatform, ...]  # in fallback order
    default_qualname: str | None  # used when no built-in probe matches
    allowlist_filters_automatic: bool

    def __init__(
        self,
        profile: RuntimeProfile,
        base_class: type,
        builtins: tuple[BuiltinPlatform, ...],
        default_qualname: str | None,
        allowlist_filters_automatic: bool = True,
    ) -> None:
        init = object.__setattr__
        init(self, "profile", profile)
        init(self, "base_class", base_class)
        init(self, "builtins", builtins)
        init(self, "default_qualname", default_qualname)
        init(self, "allowlist_filters_automatic", allowlist_filters_automatic)

    def aliases(self) -> dict[str, BuiltinPlatform]:
        return {b.alias: b for b in self.builtins}

    # The two naming rules, written once: selection enforces them and `cardcage doctor` reports
    # them through these same methods, so the two can never disagree on a spelling.
    def builtin_named(self, selector: str) -> BuiltinPlatform | None:
        """The built-in a selector value names, if any: aliases ignore case, plugin names don't."""
        return self.aliases().get(selector.casefold())

    def reserves(self, name: str) -> bool:
        """Whether an entry-point name is taken by a built-in alias, in any case (``CPU`` too)."""
        return self.builtin_named(name) is not None


class Candidate(Record):
    """One platform candidate and what happened to it."""

    _fields = ("name", "kind", "outcome", "dist_name", "dist_version", "value", "detail")
    __slots__ = _fields

    name: str
    kind: str  # "entry-point" or "built-in"
    outcome: str  # selected | activated | declined | not-allowed | not-loaded | unavailable
    dist_name: str | None
    dist_version: str | None
    value: str | None
    detail: str

    def __init__(
        self,
        name: str,
        kind: str,
        outcome: str,
        dist_name: str | None = None,
        dist_version: str | None = None,
        value: str | None = None,
        detail: str = "",
    ) -> None:
        self.name = name
        self.kind = kind
        self.outcome = outcome
        self.dist_name = dist_name
        self.dist_version = dist_version
        self.value = value
        self.detail = detail


class SelectionRecord(Record):
    """Why this process runs on the platform it runs on.

    ``first_access_stack`` is the stack of the first ``current_platform`` access, formatted like
    ``traceback.format_stack()``. Only the frames are captured at that access; their source lines
    are read, and the text formatted, the first time the attribute is read (``cardcage platform``).
    """

    _fields = (
        "runtime",
        "mode",
        "selector_env",
        "selector",
        "qualname",
        "plugin_name",
        "dist_name",
        "dist_version",
        "builtin",
        "reason",
        "candidates",
        "first_access_stack",
    )
    __slots__ = (*_fields[:-1], "_first_access_stack", "_first_access_frames")

    runtime: str
    mode: str  # "explicit" or "automatic"
    selector_env: str
    selector: str
    qualname: str
    plugin_name: str | None
    dist_name: str | None
    dist_version: str | None
    builtin: str | None
    reason: str
    candidates: list[Candidate]

    def __init__(
        self,
        runtime: str,
        mode: str,
        selector_env: str,
        selector: str,
        qualname: str = "",
        plugin_name: str | None = None,
        dist_name: str | None = None,
        dist_version: str | None = None,
        builtin: str | None = None,
        reason: str = "",
        candidates: list[Candidate] | None = None,
        first_access_stack: str = "",
    ) -> None:
        self.runtime = runtime
        self.mode = mode
        self.selector_env = selector_env
        self.selector = selector
        self.qualname = qualname
        self.plugin_name = plugin_name
        self.dist_name = dist_name
        self.dist_version = dist_version
        self.builtin = builtin
        self.reason = reason
        self.candidates = [] if candidates is None else candidates
        self._first_access_stack = first_access_stack
        self._first_access_frames: StackSummary | None = None

    @property
    def first_access_stack(self) -> str:
        """Where ``current_platform`` was first accessed, formatted like ``format_stack()``."""
        frames = self._first_access_frames
        if frames is not None:
            self._first_access_stack = "".join(frames.format())
            self._first_access_frames = None
        return self._first_access_stack

    @first_access_stack.setter
    def first_access_stack(self, value: str) -> None:
        self._first_access_stack = value
        self._first_access_frames = None

    def _set_first_access_frames(self, frames: StackSummary) -> None:
        """Keep the (unformatted) frames of the first access; formatted when first read."""
        self._first_access_frames = frames

    def as_dict(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "mode": self.mode,
            "selector_env": self.selector_env,
            "selector": self.selector,
            "platform": self.qualname,
            "plugin": self.plugin_name,
            "distribution": self.dist_name,
            "version": self.dist_version,
            "builtin": self.builtin,
            "reason": self.reason,
            "candidates": [{name: getattr(c, name) for name in c._fields} for c in self.candidates],
            "first_access_stack": self.first_access_stack,
        }


_activating = threading.local()


def activating_plugin() -> PluginEntryPoint | None:
    """The platform entry point whose ``activate()`` this thread is running, if any."""
    return getattr(_activating, "entry_point", None)


@contextmanager
def _activating_context(ep: PluginEntryPoint) -> Iterator[None]:
    previous = activating_plugin()
    _activating.entry_point = ep
    try:
        yield
    finally:
        _activating.entry_point = previous


def _who(ep: PluginEntryPoint) -> str:
    return f"{ep.name!r} ({ep.dist_name})" if ep.dist_name else repr(ep.name)


def _validate_names(policy: SelectionPolicy, eps: tuple[PluginEntryPoint, ...]) -> None:
    group = policy.profile.platform_group
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    aliases = policy.aliases()
    for name in sorted(by_name):
        found = by_name[name]
        if len(found) > 1:
            raise DuplicatePluginError(group, name, [ep.dist_name for ep in found])
        if policy.reserves(name):  # `CPU` would read as the built-in to every user
            ep = found[0]
            from .errors import ReservedPlatformNameError

            raise ReservedPlatformNameError(
                f"Platform entry point {_who(ep)} in group {group!r} uses the built-in name "
                f"{name!r}, which is reserved for the in-tree platform. Rename the entry point "
                f"in {ep.dist_name or 'its distribution'}'s pyproject.toml (reserved: "
                f"{', '.join(sorted(aliases))}).",
                group=group,
                plugin=name,
                distribution=ep.dist_name,
            )


def _defined_by_base_mixin(cls: type, attr: str) -> bool:
    """True when ``attr`` comes from ``DeviceMixin`` itself: the class never chose a value."""
    for klass in cls.__mro__:
        if attr in klass.__dict__:
            return klass is DeviceMixin
    return True


def _activate(policy: SelectionPolicy, ep: PluginEntryPoint) -> str | None:
    """Load one platform entry point and call its ``activate()``; errors name the plugin.

    Importing the entry point's module and calling ``activate()`` fail with different messages,
    so the reader knows which of the two to fix.
    """
    failure: tuple[str, Exception] | None = None
    with _activating_context(ep):
        try:
            callback = ep.load()
        except Exception as exc:
            failure = ("import", exc)
        else:
            try:
                result = callback()  # type: ignore[operator]
            except Exception as exc:
                failure = ("activate", exc)
    if failure is not None:
        raise _activation_error(policy, ep, *failure) from failure[1]
    if result is None:
        return None
    if not isinstance(result, str) or not result.strip():
        from .errors import InvalidActivateResultError

        raise InvalidActivateResultError(
            f"Platform plugin {_who(ep)}: activate() must return the platform class's qualified "
            f"name as a non-empty str (e.g. 'my_plugin.platform:MyPlatform') or None, got "
            f"{type(result).__name__} {result!r:.80}.",
            group=policy.profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
        )
    return result.strip()


def _activation_error(
    policy: SelectionPolicy, ep: PluginEntryPoint, step: str, exc: Exception
) -> Exception:
    """The error for a platform entry point whose import (``step="import"``) or ``activate()``
    (``step="activate"``) raised ``exc``."""
    from cardcage.hooks.errors import missing_sglang_module, targets_sglang_problem

    from .errors import PlatformActivationError, SGLangPlatformActivationError

    profile = policy.profile
    cause = f"{type(exc).__name__}: {exc}"
    sglang_module = missing_sglang_module(exc)
    if sglang_module is not None:
        what = f"importing it ({ep.value})" if step == "import" else "its activate()"
        return SGLangPlatformActivationError(
            targets_sglang_problem(f"Platform plugin {_who(ep)}", what, sglang_module, exc),
            _sglang_fix(policy, ep),
            group=profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
            sglang_module=sglang_module,
        )
    happened = (
        f"could not be imported ({ep.value}): {cause}"
        if step == "import"
        else f"failed to activate: {cause}"
    )
    return PlatformActivationError(
        f"Platform plugin {_who(ep)} {happened}. Startup stops here rather than fall back to a "
        "built-in platform, which would run the work on the wrong hardware. Fix or uninstall "
        f"{ep.dist_name or ep.value}, or select another platform with {profile.selector_env}.",
        group=profile.platform_group,
        plugin=ep.name,
        distribution=ep.dist_name,
    )


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

    The same checks selection makes before publishing (``cardcage doctor`` reuses them): a
    subclass of the runtime's base, and for an external plugin ``_enum = PlatformEnum.OOT`` with
    a real ``device_name`` and ``device_type``. Raises ``InvalidPlatformClassError``.
    """
    group = policy.profile.platform_group
    who = _who(ep) if ep is not None else "built-in"
    try:
        if ep is not None:
            with _activating_context(ep):
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
            f"{qualname} (from platform plugin {who}). activate() must name a class that "
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
                f"External platform class {qualname} (from {who}) must set "
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
    cause = f"{type(exc).__name__}: {exc}"
    sglang_module = missing_sglang_module(exc) if ep is not None else None
    if ep is not None and sglang_module is not None:
        step = f"importing the class its activate() named ({qualname})"
        return SGLangPlatformClassError(
            targets_sglang_problem(f"Platform plugin {_who(ep)}", step, sglang_module, exc),
            _sglang_fix(policy, ep),
            group=profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
            sglang_module=sglang_module,
        )
    who = _who(ep) if ep is not None else "built-in"
    return InvalidPlatformClassError(
        f"Platform plugin {who} named {qualname!r}, which cannot be imported: {cause}.",
        group=profile.platform_group,
        plugin=ep.name if ep else None,
        distribution=ep.dist_name if ep else None,
    )


def _sglang_fix(
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
        f"Platform plugin {_who(ep)} targets SGLang's runtime: the class its activate() named, "
        f"{qualname}, is a subclass of {found}, a platform class written for SGLang itself. "
        f"cardcage hosts platform classes written against {base.__module__}."
        f"{base.__qualname__} and does not adapt SGLang's own.",
        _sglang_fix(policy, ep, sglang_installed=True),
        group=profile.platform_group,
        plugin=ep.name,
        distribution=ep.dist_name,
        sglang_module=native.__module__,
    )


def _instantiate(policy: SelectionPolicy, cls: type, ep: PluginEntryPoint | None) -> Any:
    try:
        if ep is not None:
            with _activating_context(ep):
                return cls()
        return cls()
    except Exception as exc:
        who = _who(ep) if ep is not None else "built-in"
        from .errors import PlatformActivationError

        raise PlatformActivationError(
            f"Platform class {cls.__module__}.{cls.__qualname__} (from {who}) could not be "
            f"constructed with no arguments: {type(exc).__name__}: {exc}.",
            group=policy.profile.platform_group,
            plugin=ep.name if ep else None,
            distribution=ep.dist_name if ep else None,
        ) from exc


def _candidate(ep: PluginEntryPoint, outcome: str, detail: str = "") -> Candidate:
    return Candidate(
        name=ep.name,
        kind="entry-point",
        outcome=outcome,
        dist_name=ep.dist_name,
        dist_version=ep.dist.version if ep.dist else None,
        value=ep.value,
        detail=detail,
    )


def _suggest(selected: str, names: list[str]) -> str | None:
    import difflib  # the error path only

    close = difflib.get_close_matches(selected, names, n=1, cutoff=0.6)
    return close[0] if close else None


def select_platform(
    policy: SelectionPolicy, snapshot: EntryPointSnapshot | None = None
) -> tuple[Any, SelectionRecord]:
    """Run the selection chain once; return the platform instance and the record of why."""
    profile = policy.profile
    snap = snapshot or entry_point_snapshot()
    eps = snap.group(profile.platform_group)
    _validate_names(policy, eps)
    selector = os.environ.get(profile.selector_env, "").strip()
    aliases = policy.aliases()
    record = SelectionRecord(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=profile.selector_env,
        selector=selector,
    )
    try:
        if selector:
            return _select_explicit(policy, record, selector, eps, aliases)
        return _select_automatic(policy, record, eps)
    except Exception as exc:
        from .errors import PlatformError

        if isinstance(exc, PlatformError):
            # What was seen before the failure: `cardcage platform` shows it next to the error.
            exc.selection_record = record
        raise


def _select_explicit(
    policy: SelectionPolicy,
    record: SelectionRecord,
    selector: str,
    eps: tuple[PluginEntryPoint, ...],
    aliases: dict[str, BuiltinPlatform],
) -> tuple[Any, SelectionRecord]:
    profile = policy.profile
    builtin = policy.builtin_named(selector)
    if builtin is not None and not builtin.explicit_allowed:
        from .errors import UnsupportedSelectorError

        raise UnsupportedSelectorError(
            profile.selector_env,
            selector,
            builtin.requirement or "its hardware",
            group=profile.platform_group,
        )
    if builtin is not None:
        for ep in eps:
            record.candidates.append(_candidate(ep, "not-loaded", f"{profile.selector_env} set"))
        if builtin.explicit_probe is not None and not builtin.explicit_probe():
            from .errors import PlatformUnavailableError

            raise PlatformUnavailableError(
                f"{profile.selector_env}={selector!r} selects an in-tree platform, but that "
                "hardware is not available on this machine. Unset the variable to let cardcage "
                "pick what is present, or run on a machine with that hardware.",
                group=profile.platform_group,
                plugin=selector,
            )
        cls = load_platform_class(policy, builtin.qualname, None)
        record.builtin = builtin.alias
        record.candidates.append(Candidate(builtin.alias, "built-in", "selected"))
        record.reason = f"{profile.selector_env}={selector!r} selects the built-in platform"
        return _publish(policy, record, cls, None)
    matches = [ep for ep in eps if ep.name == selector]
    for ep in eps:
        if ep.name != selector:
            record.candidates.append(_candidate(ep, "not-loaded", f"{profile.selector_env} set"))
    if not matches:
        names = sorted(
            {ep.name for ep in eps} | {a for a, b in aliases.items() if b.explicit_allowed}
        )
        from .errors import PlatformNotFoundError

        raise PlatformNotFoundError(
            profile.selector_env,
            selector,
            [(ep.name, ep.dist_name) for ep in eps]
            + [(a, None) for a, b in aliases.items() if b.explicit_allowed],
            group=profile.platform_group,
            suggestion=_suggest(selector, names),
        )
    ep = matches[0]
    qualname = _activate(policy, ep)
    if qualname is None:
        record.candidates.append(_candidate(ep, "declined", "activate() returned None"))
        from .errors import PlatformUnavailableError

        raise PlatformUnavailableError(
            f"Platform plugin {_who(ep)} is installed but activate() returned None (hardware "
            f"not available on this machine?). Unset {profile.selector_env} to fall back to what "
            "is present, or check the vendor's driver and runtime installation.",
            group=profile.platform_group,
            plugin=ep.name,
            distribution=ep.dist_name,
        )
    cls = load_platform_class(policy, qualname, ep)
    record.candidates.append(_candidate(ep, "selected", f"activate() -> {qualname}"))
    record.reason = f"{profile.selector_env}={selector!r} selects platform plugin {_who(ep)}"
    return _publish(policy, record, cls, ep)


def _select_automatic(
    policy: SelectionPolicy, record: SelectionRecord, eps: tuple[PluginEntryPoint, ...]
) -> tuple[Any, SelectionRecord]:
    profile = policy.profile
    allowed = read_allowlist(profile) if policy.allowlist_filters_automatic else None
    activated: list[tuple[PluginEntryPoint, str]] = []
    for ep in sorted(eps, key=lambda e: (e.dist.normalized_name if e.dist else "", e.name)):
        if allowed is not None and ep.name not in allowed:
            record.candidates.append(
                _candidate(ep, "not-allowed", f"not in {profile.allowlist_env}")
            )
            continue
        qualname = _activate(policy, ep)
        if qualname is None:
            record.candidates.append(_candidate(ep, "declined", "activate() returned None"))
            continue
        activated.append((ep, qualname))
        record.candidates.append(_candidate(ep, "activated", f"activate() -> {qualname}"))
    if len(activated) > 1:
        from .errors import MultiplePlatformsError

        raise MultiplePlatformsError(
            profile.selector_env,
            [(ep.name, ep.dist_name) for ep, _ in activated],
            group=profile.platform_group,
        )
    if activated:
        ep, qualname = activated[0]
        cls = load_platform_class(policy, qualname, ep)
        for candidate in record.candidates:
            if candidate.name == ep.name and candidate.kind == "entry-point":
                candidate.outcome = "selected"
        record.reason = f"platform plugin {_who(ep)} is the only one that activated"
        return _publish(policy, record, cls, ep)
    for builtin in policy.builtins:
        if builtin.auto_probe():
            record.candidates.append(
                Candidate(builtin.alias, "built-in", "selected", detail="detected")
            )
            cls = load_platform_class(policy, builtin.qualname, None)
            record.builtin = builtin.alias
            record.reason = (
                "no platform plugin activated; the built-in "
                f"{builtin.alias!r} platform's probe matched"
            )
            return _publish(policy, record, cls, None)
        record.candidates.append(
            Candidate(
                builtin.alias,
                "built-in",
                "unavailable",
                detail=f"not detected (needs {builtin.requirement or 'its hardware'})",
            )
        )
    if policy.default_qualname is None:
        from .errors import PlatformUnavailableError

        raise PlatformUnavailableError(
            "No platform plugin activated and no built-in platform is available.",
            group=profile.platform_group,
        )
    cls = load_platform_class(policy, policy.default_qualname, None)
    record.reason = (
        "no platform plugin activated and no accelerator was detected; using the base "
        f"{cls.__qualname__} (set SGLANG_USE_CPU_ENGINE=1 for the CPU platform)"
    )
    return _publish(policy, record, cls, None)


def _publish(
    policy: SelectionPolicy, record: SelectionRecord, cls: type, ep: PluginEntryPoint | None
) -> tuple[Any, SelectionRecord]:
    instance = _instantiate(policy, cls, ep)
    record.qualname = f"{cls.__module__}.{cls.__qualname__}"
    if ep is not None:
        record.plugin_name = ep.name
        record.dist_name = ep.dist_name
        record.dist_version = ep.dist.version if ep.dist else None
        logger.info(
            "%s platform: %s from plugin %s (%s %s) — %s",
            policy.profile.name.upper(),
            record.qualname,
            ep.name,
            record.dist_name,
            record.dist_version,
            record.reason,
        )
    else:
        logger.info(
            "%s platform: %s — %s", policy.profile.name.upper(), record.qualname, record.reason
        )
    return instance, record
