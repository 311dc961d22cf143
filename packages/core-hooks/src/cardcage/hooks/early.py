"""Early patches: what a plugin must do before the host imports, opt-in and by name.

Hooks take effect on functions a host calls after its plugins load. What the host evaluates
while its modules import is out of their reach: a module constant (``_is_cpu =
current_platform.is_cpu()``), a decorator argument (``@torch.compile(backend=
get_compiler_backend())``), a ``from x import f`` copy made before plugins load, an ``import
aiter`` of an optional dependency that is not installed. An early patch runs at interpreter
start instead, and arms three kinds of patch, each applied at the one moment it must:

* ``hook(target, fn, hook_type)``: a BEFORE / AFTER / AROUND / REPLACE hook on ``module:attr``,
  installed right after ``module``'s body executes, before any importer copies ``attr``
  (``EarlyPatchRegistry``, cardcage's registry in deferred mode);
* ``set_value(target, value)`` (or ``compute=fn``): a module attribute set right after the
  module executes, the same way, for values a hook cannot wrap;
* ``stand_in(module, fill)``: a module provided only when no finder can import the real one.

What runs is named, never discovered: ``CARDCAGE_EARLY_PATCHES=name,...`` lists entry points of
the ``cardcage.early_patches`` group. cardcage-core-hooks ships a ``.pth`` file whose one line
reads that variable and imports nothing when it is unset or empty; when it is set, ``boot()``
runs each named entry point's callback with the plugin recorded as the source of every patch it
arms (``HookSource``, as ordinary hooks). Child processes inherit the variable, so a spawned
worker runs the same patches.

Failure policy (DESIGN §2): a failing early patch (its import, its callback, a target that
cannot be patched, a stand-in's ``fill``) is logged with its traceback and isolated: its other
patches are discarded or left alone, the others go on, a stand-in that fails reads as the
missing module it stood in for. Nothing can be aborted cleanly at interpreter start, so every
failure is also recorded: when cardcage's ``load_plugins()`` learns the selected platform, a
recorded failure of that platform's distribution raises ``EarlyPatchError`` naming plugin,
distribution and fix (``check_selected_platform``); one that happens later fails the import
that reveals it. ``cardcage doctor`` reports both kinds.

Import cost: nothing for a process that does not opt in (this module is not imported). An
opted-in process pays for one entry-point scan (the process-wide snapshot, reused later by the
loader) and for the registry's modules.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from ._deferred import watcher
from ._targets import parse_target
from .envs import CARDCAGE_EARLY_PATCHES
from .errors import (
    DuplicatePluginError,
    EarlyPatchError,
    InvalidEnvVarError,
    InvalidTargetError,
)
from .log import get_logger
from .records import Record
from .registry import (
    ApplyReport,
    BaseHookRegistry,
    HookSource,
    HookType,
    current_plugin_source,
    format_source,
    plugin_source,
)
from .snapshot import entry_point_snapshot, normalize_dist_name

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from .snapshot import EntryPointSnapshot, PluginEntryPoint

__all__ = [
    "EARLY_PATCHES_GROUP",
    "EarlyFailure",
    "EarlyPatch",
    "EarlyPatchRegistry",
    "EarlyPatchReport",
    "EarlyPlugin",
    "boot",
    "check_selected_platform",
    "failures",
    "hook",
    "report",
    "reset",
    "run",
    "set_value",
    "stand_in",
    "unapply",
]

logger = get_logger(__name__)

#: The entry-point group of early patches: ``name = module:callable``, called with no arguments.
EARLY_PATCHES_GROUP = "cardcage.early_patches"

_MISSING: Any = object()


class EarlyPatchRegistry(BaseHookRegistry):
    """The hooks early patches register: always applied in deferred mode, by cardcage.

    Its own state, apart from every runtime's registry: early hooks are armed before any
    runtime exists, and stay in place whichever host (cardcage or SGLang) runs later. It never
    hands hooks to SGLang's registry (``sglang_registry`` is None): SGLang's would apply them
    after its modules import, which is what early patches exist to avoid.
    """


# -- records ------------------------------------------------------------------------------------


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


# -- state --------------------------------------------------------------------------------------


class _ValuePatch:
    """A module attribute to set right after its module executes, and how to put it back."""

    __slots__ = ("attrs", "compute", "module", "previous", "source", "status", "target", "value")

    def __init__(
        self,
        target: str,
        module: str,
        attrs: tuple[str, ...],
        value: Any,
        compute: Callable[[Any], Any] | None,
        source: HookSource | None,
    ) -> None:
        self.target = target
        self.module = module
        self.attrs = attrs
        self.value = value
        self.compute = compute
        self.source = source
        self.status = "registered"
        self.previous: Any = _MISSING

    def owner(self) -> Any:
        obj: Any = sys.modules[self.module]
        for name in self.attrs[:-1]:
            obj = getattr(obj, name)
        return obj

    def apply(self) -> None:
        owner = self.owner()
        attr = self.attrs[-1]
        previous = getattr(owner, attr, _MISSING)
        if previous is _MISSING:  # a typo, or another version of the module: never a new one
            raise AttributeError(
                f"{self.module} has no attribute {'.'.join(self.attrs)!r} once it has executed; "
                "set_value() only replaces a value the module defines"
            )
        value = self.compute(previous) if self.compute is not None else self.value
        setattr(owner, attr, value)
        self.previous = previous
        self.value = value
        self.status = "applied"

    def undo(self) -> None:
        if self.status != "applied":
            if self.status == "pending":
                self.status = "undone"
            return
        module = sys.modules.get(self.module)
        if module is not None:
            owner = self.owner()
            attr = self.attrs[-1]
            if getattr(owner, attr, _MISSING) is self.value:
                setattr(owner, attr, self.previous)
            else:
                logger.warning(
                    "Not restoring %s: it was changed after the early patch set it [%s]",
                    self.target,
                    format_source(self.source),
                )
        self.status = "undone"


class _StandIn:
    """A module to provide when no finder can import the real one."""

    __slots__ = ("detail", "fill", "module", "name", "source", "status")

    def __init__(
        self, name: str, fill: Callable[[ModuleType], object], source: HookSource | None
    ) -> None:
        self.name = name
        self.fill = fill
        self.source = source
        self.status = "pending"
        self.detail = ""
        self.module: ModuleType | None = None

    def undo(self) -> None:
        module = self.module
        if module is not None and sys.modules.get(self.name) is module:
            del sys.modules[self.name]
            parent_name, _, child = self.name.rpartition(".")
            parent = sys.modules.get(parent_name) if parent_name else None
            if parent is not None and getattr(parent, child, None) is module:
                delattr(parent, child)
        self.module = None
        if self.status in ("pending", "provided"):
            self.status = "undone"


class _StandInFinder:
    """Last on ``sys.meta_path``: answers only for stand-in names no other finder resolves."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        entry = _state.stand_ins.get(fullname)
        if entry is None or entry.status != "pending":
            return None
        # Finders inserted after this one get their turn first: the real module always wins.
        real = _find_real(fullname, path, after=self)
        if real is not None:
            entry.status = "real-module"
            entry.detail = f"the real module is importable ({real.origin or real.name})"
            logger.info(
                "Stand-in for %s not used: %s [%s]",
                fullname,
                entry.detail,
                format_source(entry.source),
            )
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(
            fullname,
            self,  # type: ignore[arg-type]  # a Loader by protocol (create/exec_module)
            origin="cardcage stand-in",
            is_package=True,
        )

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        entry = _state.stand_ins[module.__name__]
        module.__cardcage_stand_in__ = entry.source  # type: ignore[attr-defined]
        try:
            with plugin_source(entry.source):
                entry.fill(module)
        except Exception as exc:
            entry.status = "failed"
            failure = EarlyFailure(
                *_who(entry.source), f"filling the stand-in for {entry.name}", exc, (entry.name,)
            )
            _fail(failure)  # raises when it is the selected platform's
            # Isolated: the importer sees what it would have seen without the stand-in.
            raise ModuleNotFoundError(
                f"No module named {entry.name!r} (its early-patch stand-in failed: "
                f"{type(exc).__name__}: {exc})",
                name=entry.name,
            ) from exc
        entry.module = module
        entry.status = "provided"
        logger.debug("Provided the stand-in for %s [%s]", entry.name, format_source(entry.source))


def _find_real(
    name: str, path: Sequence[str] | None, *, after: object | None = None
) -> ModuleSpec | None:
    """The spec another finder gives ``name`` (only those after ``after``, if given)."""
    finders = list(sys.meta_path)
    if after is not None and after in finders:
        finders = finders[finders.index(after) + 1 :]
    for finder in finders:
        if finder is _state.finder or finder is watcher:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:  # a broken finder must not break the stand-in decision
            continue
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.booted = False
        self.requested: tuple[str, ...] = ()
        self.config_error: Exception | None = None
        self.plugins: dict[str, EarlyPlugin] = {}
        self.values: list[_ValuePatch] = []
        self.stand_ins: dict[str, _StandIn] = {}
        self.hook_failures: dict[str, str] = {}
        self.failures: list[EarlyFailure] = []
        self.fatal_dists: set[str] | None = None  # known once a selection is checked
        self.fatal_reason = ""
        self.finder: _StandInFinder | None = None
        #: While an entry point's callback runs: the patches it armed, to discard on failure.
        self.running: list[_ValuePatch | _StandIn | str] | None = None
        self.warned_not_booted = False


_state = _State()


def _reinit_lock_after_fork() -> None:
    _state.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_after_fork)


def _who(source: HookSource | None) -> tuple[str | None, str | None]:
    return (source.plugin_name, source.dist_name) if source is not None else (None, None)


def _norm(dist: str | None) -> str | None:
    return normalize_dist_name(dist) if dist else None


def _named(plugin: str | None, dist: str | None) -> str:
    """``'name' (distribution d)``: how messages name an early patch."""
    if plugin is None:
        return "registered outside an entry point"
    return f"{plugin!r} (distribution {dist})" if dist else repr(plugin)


# -- problems -----------------------------------------------------------------------------------


def _logging_configured() -> bool:
    import logging

    return bool(logging.getLogger().handlers) or any(
        not isinstance(h, logging.NullHandler) for h in logging.getLogger("cardcage").handlers
    )


def _say(level: int, message: str, exc: BaseException | None = None) -> None:
    """Log ``message``; with logging not configured yet (interpreter start), print it too.

    cardcage never configures logging and keeps a ``NullHandler`` on its logger, so a problem
    found before the host sets logging up would be lost: it goes to stderr instead.
    """
    import logging

    logger.log(level, message, exc_info=exc if exc is not None else None)
    if level >= logging.WARNING and not _logging_configured():
        text = f"cardcage early patches: {logging.getLevelName(level)}: {message}\n"
        if exc is not None:
            import traceback

            text += "".join(traceback.format_exception(exc))
        sys.stderr.write(text)


def _fatal_error(failure: EarlyFailure) -> EarlyPatchError:
    return EarlyPatchError(
        f"Early patch {_named(failure.plugin, failure.dist_name)} failed {failure.line()}. "
        "It ships with the "
        f"selected platform ({_state.fatal_reason}), so the runtime cannot start without it: "
        f"fix or reinstall {failure.dist_name}, remove {failure.plugin!r} from "
        f"{CARDCAGE_EARLY_PATCHES.name}, or select another platform.",
        plugin=failure.plugin,
        distribution=failure.dist_name,
        step=failure.step,
        targets=failure.targets,
    )


def _fail(failure: EarlyFailure) -> None:
    """Record and log a failure; raise when it belongs to the known selected platform."""
    with _state.lock:
        _state.failures.append(failure)
        fatal = _state.fatal_dists is not None and _norm(failure.dist_name) in _state.fatal_dists
    if fatal:
        raise _fatal_error(failure) from failure.error
    import logging

    _say(
        logging.ERROR,
        f"Early patch {_named(failure.plugin, failure.dist_name)} failed {failure.line()}; "
        "it is skipped, the other early patches go on. Fix or "
        f"reinstall {failure.dist_name or 'its distribution'}, or remove {failure.plugin!r} "
        f"from {CARDCAGE_EARLY_PATCHES.name}.",
        failure.error,
    )


# -- the API an early-patch callback uses --------------------------------------------------------


def _module_target(target: object, what: str) -> tuple[str, tuple[str, ...], str]:
    path = parse_target(target)
    if path.module is None:
        raise InvalidTargetError(
            f"{what} target {path.text!r} must name its module with a colon "
            f"('package.module:attr'): an early patch is applied right after that exact module "
            "executes, and a dotted path does not say where the module ends.",
            target=path.text,
        )
    return path.text, path.attrs, path.module


def _arm(item: _ValuePatch | _StandIn | str) -> None:
    """Arm now, or when the running entry point's callback returns without raising."""
    with _state.lock:
        if _state.running is not None:
            _state.running.append(item)
            return
    _arm_all([item])


def hook(
    target: str,
    fn: Callable[..., Any],
    hook_type: HookType = HookType.AFTER,
) -> None:
    """Hook ``module:attr`` right after ``module`` executes, before importers copy ``attr``.

    The same hook types and rules as ``HookRegistry.register`` (``fn`` is called exactly as an
    ordinary hook is). A module already imported is patched at once, and stale copies of the
    original are rebound.
    """
    text, _, _ = _module_target(target, "Early hook")
    EarlyPatchRegistry.register(text, fn, hook_type)
    _arm(text)


def set_value(
    target: str, value: Any = _MISSING, *, compute: Callable[[Any], Any] | None = None
) -> None:
    """Set ``module:attr`` right after ``module`` executes: a constant the host computes there.

    Give ``value``, or ``compute``, which receives the value the module computed and returns the
    one to use. The attribute must exist once the module has executed (a missing one is a
    failure, never a new attribute). Importers that copy it afterwards (``from module import
    attr``) get the new value; ``unapply()`` restores the module's attribute, not their copies.
    """
    if (value is _MISSING) == (compute is None):
        raise TypeError(f"set_value({target!r}): give exactly one of value or compute=")
    text, attrs, module = _module_target(target, "Early value")
    _arm(_ValuePatch(text, module, attrs, value, compute, current_plugin_source()))


def stand_in(module: str, fill: Callable[[ModuleType], object]) -> None:
    """Provide ``module`` only when no finder can import the real one.

    On the first ``import module`` that nothing else resolves, a fresh (package) module of that
    name is created and ``fill(module)`` sets its attributes. The real module always wins: a
    stand-in for a module that is installed is never used (``cardcage hooks`` says so). A
    ``fill`` that raises is a failure of this early patch, and the importer gets the
    ``ModuleNotFoundError`` it would have got without a stand-in.
    """
    if not isinstance(module, str) or not all(p.isidentifier() for p in module.split(".")):
        raise InvalidTargetError(
            f"stand_in() needs a module name like 'package.module', got {module!r}.",
            target=module if isinstance(module, str) else None,
        )
    if not callable(fill):
        raise TypeError(f"stand_in({module!r}): fill must be callable, got {fill!r:.60}")
    _arm(_StandIn(module, fill, current_plugin_source()))


# -- arming -------------------------------------------------------------------------------------


def _arm_all(items: Iterable[_ValuePatch | _StandIn | str]) -> None:
    targets: list[str] = []
    for item in items:
        if isinstance(item, str):
            targets.append(item)
        elif isinstance(item, _ValuePatch):
            _arm_value(item)
        else:
            _arm_stand_in(item)
    if targets:
        EarlyPatchRegistry.set_deferred_failure_handler(_on_hook_failures)
        report = EarlyPatchRegistry.apply(deferred=True, targets=targets)
        if report.failed:
            _on_hook_failures(report)


def _on_hook_failures(report: ApplyReport) -> None:
    registrations = EarlyPatchRegistry.registrations()
    fatal: BaseException | None = None
    for target, exc in sorted(report.failed.items()):
        _state.hook_failures[target] = f"{type(exc).__name__}: {exc}"
        sources = {r.source for r in registrations.get(target, ())}
        for source in sorted(sources, key=format_source):
            try:
                _fail(EarlyFailure(*_who(source), f"patching {target}", exc, (target,)))
            except EarlyPatchError as error:
                fatal = fatal or error
    if fatal is not None:
        raise fatal  # the import that revealed it fails with it


def _arm_value(patch: _ValuePatch) -> None:
    with _state.lock:
        _state.values.append(patch)
        patch.status = "pending"
    if patch.module in sys.modules:
        _apply_value(patch)
    else:
        watcher.watch(patch.module, _on_value_module)
        if patch.module in sys.modules:  # imported by another thread meanwhile
            _on_value_module(patch.module)


def _apply_value(patch: _ValuePatch) -> None:
    try:
        patch.apply()
    except Exception as exc:
        patch.status = "failed"
        _fail(EarlyFailure(*_who(patch.source), f"setting {patch.target}", exc, (patch.target,)))
        return
    logger.debug("Early value %s set [%s]", patch.target, format_source(patch.source))


def _on_value_module(module: str) -> None:
    with _state.lock:
        ready = [p for p in _state.values if p.module == module and p.status == "pending"]
    for patch in ready:
        _apply_value(patch)


def _arm_stand_in(entry: _StandIn) -> None:
    with _state.lock:
        previous = _state.stand_ins.get(entry.name)
        if previous is not None and previous.status in ("pending", "provided"):
            logger.warning(
                "Two stand-ins for %s: %s [%s] replaces %s [%s]",
                entry.name,
                getattr(entry.fill, "__qualname__", entry.fill),
                format_source(entry.source),
                getattr(previous.fill, "__qualname__", previous.fill),
                format_source(previous.source),
            )
        _state.stand_ins[entry.name] = entry
        if entry.name in sys.modules:
            real = sys.modules[entry.name]
            entry.status = "real-module"
            entry.detail = f"the real module is already imported ({getattr(real, '__file__', '')})"
        else:
            parent, _, _ = entry.name.rpartition(".")
            known = not parent or parent in sys.modules
            search = getattr(sys.modules.get(parent), "__path__", None) if parent else None
            spec = _find_real(entry.name, search) if known else None
            if spec is not None:
                entry.status = "real-module"
                entry.detail = f"the real module is importable ({spec.origin or spec.name})"
        if entry.status == "real-module":
            logger.info(
                "Stand-in for %s not used: %s; the real module wins [%s]",
                entry.name,
                entry.detail,
                format_source(entry.source),
            )
            return
        if _state.finder is None:
            _state.finder = _StandInFinder()
        if _state.finder not in sys.meta_path:
            sys.meta_path.append(_state.finder)  # last: every real finder goes first


# -- running the named entry points ------------------------------------------------------------


def boot() -> None:
    """Run the early patches ``CARDCAGE_EARLY_PATCHES`` names, once; never raises.

    Called by cardcage-core-hooks' ``.pth`` line at interpreter start when the variable is set.
    A variable that does not parse is recorded (``load_plugins()`` raises it) and logged.
    """
    with _state.lock:
        if _state.booted:
            return
        _state.booted = True
    try:
        names = CARDCAGE_EARLY_PATCHES.get()
    except InvalidEnvVarError as exc:
        import logging

        _state.config_error = exc
        _say(logging.ERROR, f"{exc} No early patch runs.")
        return
    try:
        run(names)
    except Exception as exc:  # a bug of ours must not break every Python process
        import logging

        _say(logging.ERROR, f"Running early patches failed: {type(exc).__name__}: {exc}", exc)


def _suggest(name: str, known: Iterable[str]) -> str:
    from .spelling import closest

    close = closest(name, known)
    return f"Did you mean {close!r}? " if close else ""


def run(names: Sequence[str], *, snapshot: EntryPointSnapshot | None = None) -> None:
    """Run the named early-patch entry points now (``boot()`` calls this); skip those that ran.

    Names are looked up in ``cardcage.early_patches``; a name no entry point has is warned about
    with a close match; a name two distributions provide runs neither (recorded as
    ``DuplicatePluginError``). Each callback runs with its entry point as the source of what it
    arms, in (distribution, name) order, like general plugins; what it arms takes effect when
    it returns without raising.
    """
    import logging

    eps = (snapshot or entry_point_snapshot()).group(EARLY_PATCHES_GROUP)
    with _state.lock:
        _state.requested = tuple(dict.fromkeys((*_state.requested, *names)))
    by_name: dict[str, list[PluginEntryPoint]] = {}
    for ep in eps:
        by_name.setdefault(ep.name, []).append(ep)
    chosen: list[PluginEntryPoint] = []
    for name in names:
        found = by_name.get(name, [])
        if not found:
            detail = (
                f"{_suggest(name, by_name)}Installed: "
                f"{', '.join(sorted(repr(n) for n in by_name)) or 'none'}."
            )
            _state.plugins[name] = EarlyPlugin(name, "", None, "not-found", detail)
            _say(
                logging.WARNING,
                f"{CARDCAGE_EARLY_PATCHES.name} names {name!r}, which no entry point of group "
                f"{EARLY_PATCHES_GROUP!r} has. {detail} Fix the spelling, or install the "
                "distribution that provides it.",
            )
            continue
        if len(found) > 1:
            error = DuplicatePluginError(EARLY_PATCHES_GROUP, name, [ep.dist_name for ep in found])
            _state.config_error = _state.config_error or error
            _state.plugins[name] = EarlyPlugin(name, found[0].value, None, "duplicate", str(error))
            _say(logging.ERROR, f"{error} Neither runs.")
            continue
        chosen.append(found[0])
    chosen.sort(key=lambda ep: (ep.dist.normalized_name if ep.dist else "", ep.name))
    for ep in chosen:
        previous = _state.plugins.get(ep.name)
        if previous is not None and previous.status in _RAN:
            continue
        _run_one(ep)


_RAN = ("executed", "failed-import", "failed-register")


def _run_one(ep: PluginEntryPoint) -> None:
    source = HookSource(ep.name, ep.dist_name)
    step = f"importing {ep.value}"
    armed: list[_ValuePatch | _StandIn | str] = []
    with _state.lock:
        _state.running = armed
    try:
        with plugin_source(source):
            callback = ep.load()
            if not callable(callback):
                raise TypeError(f"{ep.value} is a {type(callback).__name__}, not callable")
            step = f"in its callback ({ep.value})"
            callback()
    except Exception as exc:
        with _state.lock:
            _state.running = None
        EarlyPatchRegistry.discard_source(source)
        status = "failed-import" if step.startswith("importing") else "failed-register"
        _state.plugins[ep.name] = EarlyPlugin(
            ep.name, ep.value, ep.dist_name, status, f"{type(exc).__name__}: {exc}"
        )
        _fail(EarlyFailure(ep.name, ep.dist_name, step, exc))
        return
    with _state.lock:
        _state.running = None
    _state.plugins[ep.name] = EarlyPlugin(ep.name, ep.value, ep.dist_name, "executed")
    _arm_all(armed)
    logger.debug("Ran early patch %s (%d patch(es) armed)", ep.name, len(armed))


# -- the failure policy, once a platform is selected ----------------------------------------


def failures() -> tuple[EarlyFailure, ...]:
    """Every early-patch failure recorded in this process, in order."""
    with _state.lock:
        return tuple(_state.failures)


def check_selected_platform(dist_name: str | None, reason: str) -> None:
    """Apply the failure policy now that a runtime selected a platform (``load_plugins()``).

    Raises the recorded configuration error (a ``CARDCAGE_EARLY_PATCHES`` that does not parse,
    a name two distributions provide), then ``EarlyPatchError`` for the first recorded failure
    of ``dist_name``, the distribution that supplied the selected platform. From now on a
    failure of that distribution (a target imported later) raises from the import that reveals
    it. ``reason`` says how the platform was selected, for the message.
    """
    import logging

    with _state.lock:
        if _state.config_error is None and not _state.booted and CARDCAGE_EARLY_PATCHES.raw():
            try:
                names = CARDCAGE_EARLY_PATCHES.get()
            except InvalidEnvVarError as exc:
                _state.config_error = exc
            else:
                if names and not _state.warned_not_booted:
                    _state.warned_not_booted = True
                    _say(
                        logging.WARNING,
                        f"{CARDCAGE_EARLY_PATCHES.name} names {', '.join(map(repr, names))}, but "
                        "no early patch ran at interpreter start: the .pth file of "
                        "cardcage-core-hooks was not processed (python -S, or cardcage-core-hooks "
                        "is not installed in a site-packages directory: pip --target and "
                        "PYTHONPATH skip .pth files). Install cardcage-core-hooks into the "
                        "environment's site-packages.",
                    )
        error = _state.config_error
        if dist_name:
            if _state.fatal_dists is None:
                _state.fatal_dists = set()
            _state.fatal_dists.add(normalize_dist_name(dist_name))
            _state.fatal_reason = reason
        key = _norm(dist_name)
        owned = [f for f in _state.failures if key is not None and _norm(f.dist_name) == key]
    if error is not None:
        raise error
    if owned:
        raise _fatal_error(owned[0]) from owned[0].error


# -- undo, report -------------------------------------------------------------------------------


def unapply() -> None:
    """Undo every early patch: hooks, values and stand-ins, and stop waiting for modules.

    Hooks restore their originals and rebound aliases (``EarlyPatchRegistry.unapply()``);
    values are put back on their modules; stand-ins leave ``sys.modules`` (modules that already
    imported one keep their reference). What stays recorded is reported as ``undone``.
    """
    with _state.lock:
        EarlyPatchRegistry.unapply()
        watcher.unwatch_all(_on_value_module)
        for patch in reversed(_state.values):
            patch.undo()
        for entry in _state.stand_ins.values():
            entry.undo()
        if _state.finder is not None and _state.finder in sys.meta_path:
            sys.meta_path.remove(_state.finder)
        _state.hook_failures.clear()


def reset() -> None:
    """``unapply()`` and forget everything, as if no early patch had run (tests only)."""
    with _state.lock:
        unapply()
        EarlyPatchRegistry.reset()
        fresh = _State()
        for name, value in fresh.__dict__.items():
            if name != "lock":
                setattr(_state, name, value)


def report(snapshot: EntryPointSnapshot | None = None) -> EarlyPatchReport:
    """What early patches did in this process, and which are installed but not requested.

    Reads the ``cardcage.early_patches`` group from the snapshot (no plugin is imported).
    """
    error: str | None = None
    try:
        requested = CARDCAGE_EARLY_PATCHES.get()
    except InvalidEnvVarError as exc:
        requested, error = (), str(exc)
    eps = (snapshot or entry_point_snapshot()).group(EARLY_PATCHES_GROUP)
    with _state.lock:
        if _state.config_error is not None:
            error = str(_state.config_error)
        plugins = dict(_state.plugins)
        values = list(_state.values)
        stand_ins = list(_state.stand_ins.values())
        hook_failures = dict(_state.hook_failures)
        booted = _state.booted
    rows: list[EarlyPlugin] = []
    for ep in eps:
        row = plugins.pop(ep.name, None)
        rows.append(row or EarlyPlugin(ep.name, ep.value, ep.dist_name, "not-requested"))
    rows.extend(plugins.values())  # not-found names
    return EarlyPatchReport(
        CARDCAGE_EARLY_PATCHES.name,
        requested,
        booted,
        error,
        rows,
        [
            *_hook_rows(hook_failures),
            *(_value_row(v) for v in values),
            *(_stand_in_row(s) for s in stand_ins),
        ],
    )


def _hook_rows(hook_failures: dict[str, str]) -> list[EarlyPatch]:
    applied = set(EarlyPatchRegistry.applied_targets())
    pending = EarlyPatchRegistry.pending_targets()
    rows = []
    for target, records in sorted(EarlyPatchRegistry.registrations().items()):
        if target in hook_failures:
            status, error = "failed", hook_failures[target]
        elif target in applied:
            status, error = "applied", None
        elif target in pending:
            status, error = "pending", None
        else:
            status, error = "undone", None
        for record in records:
            rows.append(
                EarlyPatch(
                    "hook",
                    target,
                    record.hook_type.name,
                    *_who(record.source),
                    status,
                    pending.get(target),
                    error,
                    getattr(record.hook, "__qualname__", "") or repr(record.hook),
                )
            )
    return rows


def _value_row(patch: _ValuePatch) -> EarlyPatch:
    failure = next(
        (
            f
            for f in reversed(_state.failures)
            if patch.target in f.targets and f.step.startswith("setting")
        ),
        None,
    )
    return EarlyPatch(
        "value",
        patch.target,
        "VALUE",
        *_who(patch.source),
        patch.status,
        patch.module if patch.status == "pending" else None,
        f"{type(failure.error).__name__}: {failure.error}" if failure else None,
        "computed from the original" if patch.compute is not None else "",
    )


def _stand_in_row(entry: _StandIn) -> EarlyPatch:
    imported = sys.modules.get(entry.name)
    if entry.status == "pending" and imported is not None and imported is not entry.module:
        # A finder before ours imported the real module: ours was never asked.
        entry.status = "real-module"
        entry.detail = f"the real module was imported ({getattr(imported, '__file__', None)})"
    failure = next((f for f in reversed(_state.failures) if entry.name in f.targets), None)
    return EarlyPatch(
        "stand-in",
        entry.name,
        "STAND-IN",
        *_who(entry.source),
        entry.status,
        entry.name if entry.status == "pending" else None,
        f"{type(failure.error).__name__}: {failure.error}"
        if failure and entry.status == "failed"
        else None,
        entry.detail,
    )
