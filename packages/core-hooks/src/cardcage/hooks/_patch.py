"""Patching one target, in four steps with one job each, and undoing it exactly.

``BaseHookRegistry._apply_target`` finds what a target names (``_targets``), then:

1. ``validate``: refuse a combination of hooks and target that cannot work (a typed error naming
   the hook, the target and the plugin that registered it);
2. ``warn``: log the combinations that work but are likely mistakes, with SGLang's wording;
3. ``chain``: build the patched callable, the hooks layered over the original (``_wrappers``);
4. ``install``: put it on the owner and return the ``Applied`` record that can undo it.

None of these look at the registry's state: what they need of it is passed in, so the registry
keeps all the bookkeeping and these stay plain functions.

Import cost: stdlib ``logging`` only; ``inspect`` is imported when a hook is applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._model import HookType, describe, format_source, origin, sources
from ._targets import MISSING, redescribe
from ._wrappers import build_wrapper, positional_arity
from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._model import HookRecord
    from ._propagate import Rebind, Replacement
    from ._targets import Found

__all__ = ["Applied", "chain", "chain_base", "install", "is_async", "validate", "warn"]

# The registry's logger: these steps are part of ``apply()``, and its log lines keep the logger
# name users already filter and configure.
logger = get_logger("cardcage.hooks.registry")


class Applied:
    """Bookkeeping for one patched target, enough to undo it exactly."""

    __slots__ = (
        "attr",
        "home",
        "installed",
        "original",
        "owner",
        "plain",
        "previous",
        "rebinds",
        "records",
    )

    def __init__(
        self,
        owner: Any,
        attr: str,
        previous: Any,
        original: Any,
        plain: Any,
        installed: Any,
        records: tuple[HookRecord, ...],
        home: bool = True,
    ) -> None:
        self.owner = owner
        self.attr = attr
        self.previous = previous  # raw value in owner.__dict__, or MISSING if inherited
        self.original = original  # the callable or class that was wrapped
        self.plain = plain  # the patched callable, before re-wrapping in a descriptor
        self.installed = installed  # what setattr put on the owner
        self.records = records
        self.home = home  # the owner holds the original itself (not inherited, not re-exported)
        self.rebinds: list[Rebind] = []

    def undo(self, target: str) -> None:
        for rebind in reversed(self.rebinds):
            rebind.undo()
        current = self.owner.__dict__.get(self.attr, MISSING)
        if current is not self.installed:
            logger.warning(
                "Not restoring %s: it changed after cardcage patched it; keeping the newer value",
                target,
            )
            return
        if self.previous is MISSING:
            delattr(self.owner, self.attr)
        else:
            setattr(self.owner, self.attr, self.previous)

    def redo(self, target: str) -> bool:
        """Install this patch again after ``undo()``; False if the attribute changed since."""
        current = self.owner.__dict__.get(self.attr, MISSING)
        if current is not self.previous:
            logger.warning(
                "Not re-installing the patch of %s: it changed after cardcage restored it",
                target,
            )
            return False
        setattr(self.owner, self.attr, self.installed)
        for rebind in self.rebinds:
            rebind.redo()
        return True


def is_async(found: Found) -> bool:
    """The target is a coroutine function: its wrappers must be coroutine functions too."""
    if found.kind == "class":
        return False
    import inspect  # apply-time only; keeps `import cardcage.hooks.registry` light

    return inspect.iscoroutinefunction(found.original)


# -- 1. validate ---------------------------------------------------------------------------------


def validate(
    target: str, found: Found, records: Sequence[HookRecord], *, target_is_async: bool
) -> None:
    """Raise ``HookTargetError`` for the first hook that cannot work on this target."""
    if found.kind == "class":
        _validate_class_target(target, found.original, records)
        return
    classes = [r for r in records if isinstance(r.hook, type)]
    if classes:
        from .errors import HookTargetError  # the error paths import it

        first = classes[0]
        raise HookTargetError(
            f"Class {first.hook.__name__} ({format_source(first.source)}) replaces "
            f"'{target}', which is a {found.kind}, not a class. Use a function to replace a "
            "function.",
            target=target,
            hook=first.hook,
            **origin(first.source),
        )
    if not target_is_async:
        _validate_sync_hooks(target, records)


def _validate_class_target(target: str, original: type, records: Sequence[HookRecord]) -> None:
    from .errors import HookTargetError  # class targets are rare, and checked once

    bad = [r for r in records if r.hook_type is not HookType.REPLACE]
    if bad:
        raise HookTargetError(
            f"Target '{target}' is a class. Only HookType.REPLACE is allowed for class "
            f"targets (got {bad[0].hook_type.value} from {format_source(bad[0].source)}). "
            f"To hook a method, use '{target}.<method_name>' instead.",
            target=target,
            hook=bad[0].hook,
            **origin(bad[0].source),
        )
    functions = [r for r in records if not isinstance(r.hook, type)]
    if functions:
        first = functions[0]
        raise HookTargetError(
            f"Target '{target}' is a class, but the REPLACE hook {describe(first.hook)} "
            f"({format_source(first.source)}) is a function. Replace a class with a subclass of "
            f"{original.__qualname__}, so isinstance() keeps working, or hook one of its methods.",
            target=target,
            hook=first.hook,
            **origin(first.source),
        )


def _validate_sync_hooks(target: str, records: Sequence[HookRecord]) -> None:
    import inspect  # apply-time only

    for r in records:
        if inspect.iscoroutinefunction(r.hook):
            from .errors import HookTargetError

            raise HookTargetError(
                f"{r.hook_type.name} hook {describe(r.hook)} ({format_source(r.source)}) is "
                f"async, but '{target}' is a plain function: its callers would receive a "
                "coroutine. Use a sync hook.",
                target=target,
                hook=r.hook,
                **origin(r.source),
            )


# -- 2. warn -------------------------------------------------------------------------------------


def warn(
    target: str,
    attr: str,
    found: Found,
    records: Sequence[HookRecord],
    *,
    overrides_class_replace: bool,
) -> None:
    """Log what works but is likely a mistake; ``overrides_class_replace`` is the registry's
    verdict that a method REPLACE lands on a class-REPLACEd class's own method."""
    types_present = {r.hook_type for r in records}
    has_replace = HookType.REPLACE in types_present
    if overrides_class_replace and has_replace:
        logger.warning(
            "Method REPLACE on '%s' will override the class REPLACE's own implementation of "
            "'%s'. If this is unintended, remove the method REPLACE and modify the replacement "
            "class directly, or use AROUND to wrap it. (from: %s)",
            target,
            attr,
            sources(records),
        )
    arounds = [r for r in records if r.hook_type is HookType.AROUND]
    if len(arounds) > 1:
        logger.warning(
            "Multiple AROUND hooks on '%s' (%d hooks, from: %s). If any AROUND hook skips "
            "calling original_fn, inner hooks will be bypassed.",
            target,
            len(arounds),
            sources(arounds),
        )
    if has_replace and len(types_present) > 1:
        others = sorted(t.value for t in types_present if t is not HookType.REPLACE)
        logger.debug(
            "Target '%s' has both REPLACE and %s hooks. REPLACE will be applied first, then "
            "wrapped by other hooks.",
            target,
            ", ".join(others),
        )
    if found.kind == "class":
        replacement = records[-1].hook  # validate() let only class REPLACE hooks through
        if not issubclass(replacement, found.original):  # type: ignore[arg-type]
            logger.warning(
                "Class REPLACE on '%s' installs %s, which is not a subclass of %s: "
                "isinstance() checks against the original class will fail for its instances.",
                target,
                replacement.__qualname__,
                found.original.__qualname__,
            )


# -- 3. chain ------------------------------------------------------------------------------------


def chain_base(owner: Any, found: Found, earlier: Replacement | None) -> Any:
    """What the first hook wraps: the original, or another target's patch of it in this batch.

    A module-level target that is also the original of another target in this batch (a
    re-export) chains on top of that target's patch, as if propagation had already run.
    Propagation never rebinds class attributes, so a class owner (a subclass inheriting the
    method another target hooks) does not chain: it would run a sibling's hooks.
    """
    if (
        earlier is not None
        and earlier.original is found.original
        and not isinstance(owner, type)
        and getattr(owner, "__name__", None) not in earlier.skip_modules
    ):
        return earlier.replacement
    return found.original


def chain(
    target: str,
    found: Found,
    records: Sequence[HookRecord],
    base: Any,
    *,
    as_method: bool,
    target_is_async: bool,
) -> Any:
    """The patched callable: REPLACE hooks first, then the others in registration order.

    The first registered is innermost. A class target gets the last REPLACE class itself.
    ``as_method``: the result is installed as a plain method and must bind like one.
    """
    if found.kind == "class":
        return records[-1].hook
    ordered = sorted(records, key=lambda r: r.hook_type is not HookType.REPLACE)
    arity = positional_arity(found.original)
    plain = base
    for r in ordered:
        plain = build_wrapper(
            plain,
            r.hook,
            r.hook_type.value,
            target,
            is_async=target_is_async,
            as_method=as_method,
            arity=arity,
            source=r.source,
        )
    return plain


# -- 4. install ----------------------------------------------------------------------------------


def install(
    owner: Any,
    attr: str,
    target: str,
    found: Found,
    plain: Any,
    records: tuple[HookRecord, ...],
    *,
    home: bool,
) -> Applied:
    """Set the patched object on its owner, in the target's descriptor type; record the undo."""
    installed = plain if found.kind == "class" else redescribe(found.kind, plain, found.raw)
    if found.kind not in {"class", "function"}:
        logger.debug("Preserved %s for %s", found.kind, target)
    previous = owner.__dict__.get(attr, MISSING)
    setattr(owner, attr, installed)
    return Applied(owner, attr, previous, found.original, plain, installed, records, home)
