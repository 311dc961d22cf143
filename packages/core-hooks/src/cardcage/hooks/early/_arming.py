"""The three calls an early-patch callback makes, and arming what they ask for.

``hook``, ``set_value`` and ``stand_in`` validate their arguments at once (a mistake fails the
callback, naming the target), then arm. While a named entry point's callback runs, what it asks
for is held back and armed only when the callback returns without raising, so a callback that
fails half-way arms nothing (``_running`` discards it). Called outside a callback (a test, a
host's own bootstrap), they arm at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cardcage.hooks._targets import parse_target
from cardcage.hooks.errors import InvalidTargetError
from cardcage.hooks.registry import HookType, current_plugin_source

from ._registry import EarlyPatchRegistry, arm_hooks
from ._stand_ins import StandIn, arm_stand_in
from ._state import state
from ._values import MISSING, ValuePatch, arm_value

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType

__all__ = ["arm_all", "hook", "set_value", "stand_in"]


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


def _arm(item: ValuePatch | StandIn | str) -> None:
    """Arm now, or when the running entry point's callback returns without raising."""
    with state.lock:
        if state.running is not None:
            state.running.append(item)
            return
    arm_all([item])


def arm_all(items: Iterable[ValuePatch | StandIn | str]) -> None:
    """Arm values, stand-ins and hooked targets (``str``), the hooks in one deferred apply."""
    targets: list[str] = []
    for item in items:
        if isinstance(item, str):
            targets.append(item)
        elif isinstance(item, ValuePatch):
            arm_value(item)
        else:
            arm_stand_in(item)
    if targets:
        arm_hooks(targets)


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
    target: str, value: Any = MISSING, *, compute: Callable[[Any], Any] | None = None
) -> None:
    """Set ``module:attr`` right after ``module`` executes: a constant the host computes there.

    Give ``value``, or ``compute``, which receives the value the module computed and returns the
    one to use. The attribute must exist once the module has executed (a missing one is a
    failure, never a new attribute). Importers that copy it afterwards (``from module import
    attr``) get the new value; ``unapply()`` restores the module's attribute, not their copies.
    """
    if (value is MISSING) == (compute is None):
        raise TypeError(f"set_value({target!r}): give exactly one of value or compute=")
    text, attrs, module = _module_target(target, "Early value")
    _arm(ValuePatch(text, module, attrs, value, compute, current_plugin_source()))


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
    _arm(StandIn(module, fill, current_plugin_source()))
