"""The hook registry: BEFORE / AFTER / AROUND / REPLACE hooks on any function, method or class.

This is the seed's ``sglang.srt.plugins.hook_registry`` API (``HookRegistry.register``,
``plugin_hook``, ``HookType``, ``HookSource``) with the same ordering and chaining rules, plus what
its users kept asking for: async targets, inherited classmethods and properties, a report from
``apply()`` with a strict mode, late registrations that are applied instead of dropped,
``unapply()``, one propagation pass per batch, and a deferred mode that never imports a target.

Each runtime gets its own registry by subclassing ``BaseHookRegistry``: every subclass has separate
state, so a hook registered through one runtime's API never runs in the other. The SRT registry is
``HookRegistry``.

Import cost: stdlib only (logging, enum, typing, contextvars); nothing is resolved or imported
until ``apply()``, and the patching machinery itself (``_patch``, ``_wrappers``, ``_propagate``,
``_deferred``) is imported by the first ``apply()`` that has a target to patch.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from ._model import HookRecord, HookSource, HookType, _current_plugin_source, format_source
from ._model import describe as _describe
from ._model import sources as _sources
from ._targets import NotYetImported, find_attribute, is_home, parse_target
from ._targets import locate as _locate
from .hosts import hosting_source
from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import TypeVar

    from ._patch import Applied as _Applied
    from ._propagate import Replacement
    from .errors import HookApplyError, HookRegistrationError

    # Only the checker needs it: a TypeVar with a bound costs a compile() at import.
    _F = TypeVar("_F", bound=Callable[..., Any])


__all__ = [
    "ApplyReport",
    "BaseHookRegistry",
    "HookRecord",
    "HookRegistry",
    "HookSource",
    "HookType",
    "check_target",
    "current_plugin_source",
    "format_source",
    "plugin_hook",
    "plugin_source",
]

logger = get_logger(__name__)


def check_target(target: object) -> str:
    """``target`` as ``HookRegistry.register`` keys it, after checking its syntax (no import).

    For code that declares hooks before it registers them (``cardcage.platforms.plugin``) and
    wants a malformed target reported at declaration: raises ``InvalidTargetError`` as
    ``register`` would.
    """
    return parse_target(target).text


def current_plugin_source() -> HookSource | None:
    """The plugin whose import or ``register()`` is running now, if any."""
    return _current_plugin_source.get()


@contextlib.contextmanager
def plugin_source(source: HookSource | None) -> Iterator[None]:
    """Attribute every hook registered inside the block to ``source``."""
    token = _current_plugin_source.set(source)
    try:
        yield
    finally:
        _current_plugin_source.reset(token)


def _plugin_packages(records: Sequence[HookRecord], target: str) -> frozenset[str]:
    """Top-level packages of the plugins hooking ``target``, where they are not the target's own.

    Propagation leaves every module of those packages alone: a plugin that subclasses or wraps
    what it replaces must keep seeing the original everywhere in its own code.
    """
    target_top = target.partition(":")[0].partition(".")[0]
    packages = set()
    for record in records:
        if record.source is None:
            continue
        top = (getattr(record.hook, "__module__", None) or "").partition(".")[0]
        if top and top not in {target_top, "__main__"}:
            packages.add(top)
    return frozenset(packages)


class ApplyReport:
    """What one ``apply()`` did: targets applied, failed (with the exception) and pending.

    ``pending`` lists targets that deferred mode is waiting for (their module is not imported yet).
    ``rebound`` counts the stale module-level aliases that were rebound to patched objects.
    """

    __slots__ = ("applied", "failed", "pending", "rebound")

    def __init__(
        self,
        applied: tuple[str, ...] = (),
        failed: Mapping[str, BaseException] | None = None,
        pending: tuple[str, ...] = (),
        rebound: int = 0,
    ) -> None:
        self.applied = applied
        self.failed: dict[str, BaseException] = dict(failed or {})
        self.pending = pending
        self.rebound = rebound

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        """Raise ``HookApplyError`` naming every failed target, if any failed."""
        if self.failed:
            raise _apply_error(self.failed, {})

    def __repr__(self) -> str:
        return (
            f"ApplyReport(applied={list(self.applied)}, failed={sorted(self.failed)}, "
            f"pending={list(self.pending)}, rebound={self.rebound})"
        )


def _failure_lines(
    failures: Mapping[str, BaseException], records: Mapping[str, Sequence[HookRecord]]
) -> str:
    lines = []
    for target in sorted(failures):
        exc = failures[target]
        origin = _sources(records.get(target, ()))
        lines.append(f"  - {target} (from: {origin}): {type(exc).__name__}: {exc}")
    return "\n".join(lines)


_FIX_TARGETS = (
    "Fix the target path (it must name an existing function, method or class of an installed "
    "module) or the hook type"
)


def _apply_error(
    failures: Mapping[str, BaseException], records: Mapping[str, Sequence[HookRecord]]
) -> HookApplyError:
    from .errors import HookApplyError

    return HookApplyError(
        f"{len(failures)} hook target(s) failed to apply:\n"
        + _failure_lines(failures, records)
        + f"\n{_FIX_TARGETS}; without strict mode these targets are logged and skipped.",
        failures=failures,
    )


def _registration_error(message: str, target: object, hook: object) -> HookRegistrationError:
    """The error for a malformed ``register()`` call; the error classes load only then."""
    from .errors import HookRegistrationError

    return HookRegistrationError(
        message, target=target if isinstance(target, str) else None, hook=hook
    )


def _warn_unapplied(
    failures: Mapping[str, BaseException], records: Mapping[str, Sequence[HookRecord]]
) -> None:
    """Make a non-strict ``apply()``'s failures visible without any logging configuration."""
    import warnings

    from .errors import HookApplyWarning

    warnings.warn(
        HookApplyWarning(
            f"{len(failures)} hook target(s) could not be patched, so their hooks do not run:\n"
            + _failure_lines(failures, records)
            + f"\n{_FIX_TARGETS}, or pass strict=True to apply() to raise instead.",
            failures=failures,
        ),
        stacklevel=3,
    )


class _GiveWay:
    """A target must be applied before ``targets``, which reached the same original first.

    The owner that holds an object (the defining module, the class whose ``__dict__`` has the
    method) is patched before its aliases (re-exports, inheriting subclasses), so the aliases
    build on its patch instead of the other way round.
    """

    __slots__ = ("key", "targets")

    def __init__(self, key: int, targets: tuple[str, ...]) -> None:
        self.key = key
        self.targets = targets


class BaseHookRegistry:
    """Registry state and operations; subclass it to get a registry with its own state.

    All methods are classmethods so that the seed's spelling ``HookRegistry.register(...)`` works
    unchanged. Thread-safe: one re-entrant lock per registry guards registration and application.
    """

    _hooks: ClassVar[dict[str, list[HookRecord]]]
    _patched: ClassVar[dict[str, _Applied]]
    _stale: ClassVar[set[str]]
    _pending: ClassVar[dict[str, str]]
    _lock: ClassVar[threading.RLock]
    _deferred_scope: ClassVar[tuple[str, ...] | None]
    _deferred_failure_handler: ClassVar[Callable[[ApplyReport], None] | None]
    #: Per host (``cardcage.hooks.host.Host`` value), that host's registry of the same runtime
    #: (``module:Class``). When the host's loader runs a plugin, ``register`` hands its hooks to
    #: that registry instead (DESIGN §8): the host applies them at its apply time, with its own
    #: rules and attribution. Empty: hooks always stay here (an embedder's runtime).
    host_registries: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._init_state()

    @classmethod
    def _init_state(cls) -> None:
        cls._hooks = {}
        cls._patched = {}
        cls._stale = set()
        cls._pending = {}
        cls._lock = threading.RLock()
        cls._deferred_scope = None
        cls._deferred_failure_handler = None

    # -- registration ---------------------------------------------------------------------------

    @classmethod
    def register(
        cls,
        target: str,
        hook: Callable[..., Any],
        hook_type: HookType = HookType.AFTER,
        *,
        source: HookSource | None = None,
    ) -> None:
        """Register ``hook`` on ``target``; it takes effect at the next ``apply()``.

        The source defaults to the plugin whose import or ``register()`` is running. Inside a
        host's loader the hook goes to that host's registry (``host_registries``); under a host
        with none (vLLM) it stays here and is applied at once, in deferred mode
        (``cardcage.hooks.hosts``).
        """
        if not isinstance(hook_type, HookType):
            raise _registration_error(
                f"hook_type must be a HookType member (BEFORE, AFTER, AROUND, REPLACE), got "
                f"{hook_type!r} for {_describe(hook)} on {target!r}.",
                target,
                hook,
            )
        if isinstance(hook, type) and hook_type is not HookType.REPLACE:
            raise _registration_error(
                f"Class {hook.__name__} can only be used with HookType.REPLACE, got "
                f"HookType.{hook_type.name}. Use a function for BEFORE/AFTER/AROUND hooks.",
                target,
                hook,
            )
        if not callable(hook):
            raise _registration_error(
                f"Hook for {target!r} must be callable, got {type(hook).__name__} {hook!r:.60}.",
                target,
                hook,
            )
        path = parse_target(target)
        resolved = source if source is not None else _current_plugin_source.get()
        keeper = None  # the room of a host without a registry, which applies this hook itself
        if resolved is None:
            hosting = hosting_source()
            if hosting is not None:
                from .hosts import room

                host_room = room(hosting[0])
                host_registry = cls.host_registries.get(hosting[0])
                if host_registry is not None:
                    host_room.register(host_registry, path.dotted, hook, hook_type.name, hosting[1])
                    return
                if getattr(host_room, "KEEPS_HOOKS", False):
                    resolved, keeper = hosting[1], host_room
        record = HookRecord(hook_type, hook, resolved)
        with cls._lock:
            records = cls._hooks.setdefault(path.text, [])
            if hook_type is HookType.REPLACE:
                previous = [r for r in records if r.hook_type is HookType.REPLACE]
                if previous:
                    logger.warning(
                        "Multiple REPLACE hooks on '%s': previous (%s [%s]) will be overridden by "
                        "(%s [%s]). The last registered REPLACE takes effect.",
                        path.text,
                        _describe(previous[-1].hook),
                        format_source(previous[-1].source),
                        _describe(hook),
                        format_source(resolved),
                    )
            records.append(record)
            if path.text in cls._patched:
                cls._stale.add(path.text)
                logger.debug(
                    "Hook registered on already-patched %s [%s]; the next apply() rebuilds its "
                    "chain from the original",
                    path.text,
                    format_source(resolved),
                )
        logger.debug(
            "Registered %s hook on %s [%s]", hook_type.name, path.text, format_source(resolved)
        )
        if keeper is not None:
            keeper.adopt(cls, resolved)

    @classmethod
    def discard_source(cls, source: HookSource) -> int:
        """Drop every registration made by ``source``; return how many were dropped.

        Used when a plugin fails half-way through ``register()``: none of its hooks survive.
        """
        dropped = 0
        with cls._lock:
            for target in list(cls._hooks):
                records = cls._hooks[target]
                kept = [r for r in records if r.source != source]
                if len(kept) == len(records):
                    continue
                dropped += len(records) - len(kept)
                if kept:
                    cls._hooks[target] = kept
                else:
                    del cls._hooks[target]
                    cls._pending.pop(target, None)
                if target in cls._patched:
                    cls._stale.add(target)
        return dropped

    # -- queries --------------------------------------------------------------------------------

    @classmethod
    def registrations(cls) -> dict[str, tuple[HookRecord, ...]]:
        """Every target with its hooks, in registration order."""
        with cls._lock:
            return {t: tuple(r) for t, r in cls._hooks.items()}

    @classmethod
    def applied_targets(cls) -> tuple[str, ...]:
        with cls._lock:
            return tuple(t for t in cls._patched if t not in cls._stale)

    @classmethod
    def pending_targets(cls) -> dict[str, str]:
        """Targets deferred mode waits for, with the module each one waits to be imported."""
        with cls._lock:
            return dict(cls._pending)

    @classmethod
    def is_hook_applied(
        cls, target: str, callback: Callable[..., Any], hook_type: HookType = HookType.AFTER
    ) -> bool:
        """True once an ``apply()`` installed this exact callback object with this type."""
        with cls._lock:
            entry = cls._patched.get(target)
            if entry is None:
                return False
            # A target with late registrations (stale) still runs the hooks it was applied
            # with; entry.records lists exactly those.
            return any(r.hook is callback and r.hook_type is hook_type for r in entry.records)

    # -- application ----------------------------------------------------------------------------

    @classmethod
    def _sort_key(cls, target: str) -> tuple[int, str]:
        records = cls._hooks.get(target, ())
        replaces_class = any(
            r.hook_type is HookType.REPLACE and isinstance(r.hook, type) for r in records
        )
        return (0 if replaces_class else 1, target)

    @classmethod
    def apply(
        cls,
        *,
        strict: bool = False,
        propagate: bool | Sequence[str] = True,
        deferred: bool = False,
        targets: Sequence[str] | None = None,
        warn: bool = True,
    ) -> ApplyReport:
        """Patch every target that has unapplied hooks and report what happened.

        ``propagate`` rebinds stale module-level aliases of patched objects: True for every
        module, False for none, or a sequence of module prefixes to limit the pass. ``deferred``
        never imports: targets whose module is not imported yet are patched on its first import.
        ``strict`` raises ``HookApplyError`` if any target failed (after applying the others);
        otherwise a failure is logged and issued as a ``HookApplyWarning`` from the caller's
        line, unless ``warn`` is False: a caller that applies its own failure policy to the
        report (cardcage's loader, early patches) reports failures itself.
        """
        scope: tuple[str, ...] | None
        if propagate is True:
            scope = None
        elif propagate is False:
            scope = ()
        else:
            scope = tuple(propagate)
        with cls._lock:
            report = cls._apply_locked(scope, deferred, targets)
            records = {t: tuple(cls._hooks.get(t, ())) for t in report.failed}
        if report.failed:
            if strict:
                raise _apply_error(report.failed, records)
            if warn:
                _warn_unapplied(report.failed, records)
        return report

    @classmethod
    def apply_hooks(cls) -> ApplyReport:
        """The seed's name for ``apply()`` with default options."""
        return cls.apply()

    @classmethod
    def _apply_locked(
        cls, scope: tuple[str, ...] | None, deferred: bool, only: Sequence[str] | None
    ) -> ApplyReport:
        cls._rebuild_stale()
        todo = [
            t
            for t in cls._hooks
            if t not in cls._patched and t not in cls._pending and (only is None or t in only)
        ]
        if not todo:
            return ApplyReport()
        # The patching machinery (about a third of core-hooks) is imported on the first apply
        # that has work, not with the registry: a process that resolves its platform and loads
        # plugins without hooks never pays for it (DESIGN §7, the first-platform budget).
        from ._propagate import Replacement, propagate

        todo.sort(key=cls._sort_key)
        applied: list[str] = []
        failed: dict[str, BaseException] = {}
        pending: list[str] = []
        batch: dict[int, Replacement] = {}
        entries: dict[int, _Applied] = {}
        claims: dict[int, list[str]] = {}
        queue = collections.deque(todo)
        while queue:
            target = queue.popleft()
            records = tuple(cls._hooks[target])
            try:
                outcome = cls._apply_target(target, records, deferred, batch, claims)
            except Exception as exc:
                failed[target] = exc
                logger.exception(
                    "Failed to apply hooks to %s (from: %s)", target, _sources(records)
                )
                continue
            if isinstance(outcome, NotYetImported):
                pending.append(target)
                cls._watch(target, outcome.module, scope)
                continue
            if isinstance(outcome, _GiveWay):
                # Undo the aliases patched so far; apply this target, then them again.
                for other in reversed(outcome.targets):
                    cls._patched.pop(other).undo(other)
                    applied.remove(other)
                batch.pop(outcome.key, None)
                entries.pop(outcome.key, None)
                claims.pop(outcome.key, None)
                queue.extendleft(reversed((target, *outcome.targets)))
                continue
            cls._patched[target] = outcome
            applied.append(target)
            claims.setdefault(id(outcome.original), []).append(target)
            if outcome.plain is not outcome.original and scope != ():
                hook_modules = {getattr(r.hook, "__module__", None) or "" for r in records}
                owner_module = getattr(outcome.owner, "__name__", "")
                if not isinstance(outcome.owner, type):
                    hook_modules.add(owner_module)
                batch[id(outcome.original)] = Replacement(
                    outcome.original,
                    outcome.plain,
                    frozenset(hook_modules),
                    _plugin_packages(records, target),
                )
                entries[id(outcome.original)] = outcome
        for target in applied:
            records = cls._patched[target].records
            logger.debug(
                "Applied %d hook(s) to %s (from: %s)", len(records), target, _sources(records)
            )
        rebound = 0
        if batch:
            for rebind in propagate(batch, scope=scope):
                entries[id(rebind.original)].rebinds.append(rebind)
                rebound += 1
            if rebound:
                logger.debug("Propagated patches to %d stale module-level alias(es)", rebound)
        return ApplyReport(tuple(applied), failed, tuple(pending), rebound)

    @classmethod
    def _rebuild_stale(cls) -> None:
        """Undo targets that got new (or lost) hooks so they are rebuilt from the original."""
        if not cls._stale:
            return
        stale = cls._linked(cls._stale)
        for target in reversed(list(cls._patched)):
            if target in stale:
                cls._patched.pop(target).undo(target)
        cls._stale.clear()

    @classmethod
    def _linked(cls, targets: set[str]) -> set[str]:
        """``targets`` plus every patched target whose chain depends on one of them.

        That is: method targets resolved through a re-replaced class, targets that reach the
        same original (a re-export, an inherited method), and targets built on top of another
        target's patch. They are undone and rebuilt together so the chains stay complete.
        """
        linked = set(targets)
        grew = True
        while grew:
            grew = False
            for target, entry in cls._patched.items():
                if target in linked:
                    continue
                for name in list(linked):
                    other = cls._patched.get(name)
                    if (
                        target.startswith((name + ".", name + ":"))
                        or (other is not None and entry.original is other.original)
                        or (other is not None and entry.original is other.plain)
                    ):
                        linked.add(target)
                        grew = True
                        break
        return linked

    @classmethod
    def _apply_target(
        cls,
        target: str,
        records: tuple[HookRecord, ...],
        deferred: bool,
        batch: Mapping[int, Replacement],
        claims: Mapping[int, Sequence[str]],
    ) -> _Applied | NotYetImported | _GiveWay:
        """Patch one target: find it, then validate, warn, chain and install (``_patch``).

        Returns ``NotYetImported`` when deferred mode must wait for a module, and ``_GiveWay``
        when the target holds an original that aliases patched first in this batch.
        """
        from . import _patch

        path = parse_target(target)
        located = _locate(path, import_missing=not deferred)
        if isinstance(located, NotYetImported):
            return located
        owner, attr = located.owner, path.attr
        found = find_attribute(owner, attr, target)
        home = is_home(owner, attr, found.original)
        claimed = claims.get(id(found.original), ())
        if (
            found.kind != "class"
            and home
            and claimed
            and not any(cls._patched[t].home for t in claimed)
        ):
            return _GiveWay(id(found.original), tuple(claimed))
        target_is_async = _patch.is_async(found)
        _patch.validate(target, found, records, target_is_async=target_is_async)
        overrides = (
            isinstance(owner, type) and path.owner_text in cls._patched and attr in owner.__dict__
        )
        _patch.warn(target, attr, found, records, overrides_class_replace=overrides)
        plain = _patch.chain(
            target,
            found,
            records,
            _patch.chain_base(owner, found, batch.get(id(found.original))),
            as_method=isinstance(owner, type) and found.kind == "function",
            target_is_async=target_is_async,
        )
        return _patch.install(owner, attr, target, found, plain, records, home=home)

    @classmethod
    def _watch(cls, target: str, module: str, scope: tuple[str, ...] | None) -> None:
        cls._pending[target] = module
        cls._deferred_scope = scope
        from ._deferred import watcher

        watcher.watch(module, cls._on_module_imported)
        if module in sys.modules:  # imported by another thread meanwhile
            cls._on_module_imported(module)

    @classmethod
    def _on_module_imported(cls, module: str) -> None:
        with cls._lock:
            ready = [t for t, m in cls._pending.items() if m == module]
            if not ready:
                return
            for target in ready:
                del cls._pending[target]
            report = cls._apply_locked(cls._deferred_scope, True, ready)
            handler = cls._deferred_failure_handler
        if report.applied:
            logger.debug("Deferred hooks applied after importing %s: %s", module, report.applied)
        if report.failed and handler is not None:
            handler(report)  # may raise: the import of ``module`` then fails with it

    @classmethod
    def set_deferred_failure_handler(cls, handler: Callable[[ApplyReport], None] | None) -> None:
        """Called with the report when a deferred target fails on import; it may raise.

        The loader uses it to keep the failure policy in deferred mode: a selected platform's
        hook that cannot be applied fails the import that revealed it.
        """
        with cls._lock:
            cls._deferred_failure_handler = handler

    # -- undo -----------------------------------------------------------------------------------

    @classmethod
    def unapply(cls, target: str | None = None) -> tuple[str, ...]:
        """Restore originals (and rebound aliases); hooks stay registered for the next apply.

        With a target, undo that target and the method targets resolved through it.
        """
        with cls._lock:
            if target is None:
                chosen = list(cls._patched)
                for name in list(cls._pending):
                    del cls._pending[name]
                _unwatch_all(cls._on_module_imported)
            else:
                chosen = [
                    t
                    for t in cls._patched
                    if t == target or t.startswith(target + ".") or t.startswith(target + ":")
                ]
                cls._pending.pop(target, None)  # stop waiting for its module, too
            for name in reversed(chosen):
                cls._patched.pop(name).undo(name)
                cls._stale.discard(name)
            return tuple(chosen)

    @classmethod
    def reset(cls) -> None:
        """Restore every patched target and forget every registration.

        Unlike SGLang's ``reset()``, which leaves patches installed, this leaves the process as it
        was before any hook was applied.
        """
        with cls._lock:
            cls.unapply()
            cls._hooks.clear()
            cls._stale.clear()
            cls._deferred_failure_handler = None

    @classmethod
    @contextlib.contextmanager
    def sandbox(cls) -> Iterator[type[BaseHookRegistry]]:
        """Registrations and patches made inside the block are undone when it ends."""
        with cls._lock:
            saved_hooks = {t: list(r) for t, r in cls._hooks.items()}
            saved_patched = dict(cls._patched)
            saved_stale = set(cls._stale)
        try:
            yield cls
        finally:
            with cls._lock:
                for name in reversed(list(cls._patched)):
                    if saved_patched.get(name) is not cls._patched[name]:
                        cls._patched.pop(name).undo(name)
                for name in list(cls._pending):
                    if name not in saved_hooks:
                        del cls._pending[name]
                # Patches undone inside the block (rebuilt, unapplied or reset) go back in.
                restored: dict[str, _Applied] = {}
                for name, entry in saved_patched.items():
                    if cls._patched.get(name) is entry or entry.redo(name):
                        restored[name] = entry
                cls._patched = restored
                cls._hooks = saved_hooks
                cls._stale = {t for t in saved_stale if t in cls._patched}


BaseHookRegistry._init_state()


def _unwatch_all(callback: Callable[[str], None]) -> None:
    # Nothing can be watched before ``_watch`` imported the watcher; no import just to undo.
    deferred = sys.modules.get(f"{__package__}._deferred")
    if deferred is not None:
        deferred.watcher.unwatch_all(callback)


def _all_registries(root: type[BaseHookRegistry]) -> Iterator[type[BaseHookRegistry]]:
    yield root
    for sub in root.__subclasses__():
        yield from _all_registries(sub)


def _reinit_locks_after_fork() -> None:
    # Only the forking thread survives; a lock another thread held would never be released.
    for registry in _all_registries(BaseHookRegistry):
        registry._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_after_fork)


class HookRegistry(BaseHookRegistry):
    """The SRT runtime's registry (the seed's ``sglang.srt.plugins.hook_registry.HookRegistry``)."""

    host_registries = MappingProxyType({"sglang": "sglang.srt.plugins.hook_registry:HookRegistry"})


def plugin_hook(
    target: str,
    type: HookType = HookType.AFTER,  # noqa: A002 - the seed's public keyword
    *,
    registry: type[BaseHookRegistry] | None = None,
) -> Callable[[_F], _F]:
    """Decorator form of ``register``: registers at decoration time, returns the object as is."""
    chosen = HookRegistry if registry is None else registry

    def decorator(obj: _F) -> _F:
        chosen.register(target, obj, type)
        return obj

    return decorator
