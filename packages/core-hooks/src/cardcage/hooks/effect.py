"""Which hooks are in effect *now*, in this process: the question only the host's process answers.

``cardcage hooks`` says what a rehearsal registers and applies where the CLI runs. Inside
SGLang's scheduler or vLLM's worker, a plugin, a test or a hook of its own wants to know more:
whether the host ran the plugin's ``register()`` there, applied its hooks, and whether anything
replaced the patched attribute since. ``in_effect()`` answers from what the process holds:

* hooks applied by a cardcage registry (every runtime's registry, vLLM's included): in effect
  when the attribute still holds exactly what cardcage installed;
* hooks handed to a host's own registry (SGLang applies them with its own wrappers): in effect
  when the object now at the target reaches the hook (the hook itself, or a wrapper whose
  ``__wrapped__`` chain or closure holds it), read without importing anything.

A target whose module the process has not imported is ``not-imported``: the hook cannot have
run yet, and asking must not import it. Import-safe: stdlib only.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._model import describe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ._model import HookSource
    from .registry import BaseHookRegistry

__all__ = ["HookEffect", "in_effect", "record_handoff"]


@dataclass(frozen=True)
class HookEffect:
    """One registered hook, and whether it runs when its target is called now."""

    target: str
    type: str
    hook: str
    plugin: str | None
    distribution: str | None
    #: Who applies it: ``cardcage`` (a cardcage registry, named in ``registry``) or the host
    #: whose registry it was handed to (``sglang``).
    applied_by: str
    registry: str
    #: in-effect | not-applied | pending | not-imported | replaced-since
    state: str

    @property
    def in_effect(self) -> bool:
        return self.state == "in-effect"


@dataclass(frozen=True)
class _Handoff:
    """A hook cardcage handed to a host's own registry."""

    host: str
    registry: str
    target: str
    hook: Callable[..., Any]
    hook_type: str
    source: HookSource | None


_handoffs: list[_Handoff] = []
_handoffs_lock = threading.Lock()


def record_handoff(
    host: str,
    registry: str,
    target: str,
    hook: Callable[..., Any],
    hook_type: str,
    source: HookSource | None,
) -> None:
    """Remember a hook handed to a host's registry, so ``in_effect()`` can look for it later."""
    with _handoffs_lock:
        _handoffs.append(_Handoff(host, registry, target, hook, hook_type, source))


def _registries() -> Iterator[type[BaseHookRegistry]]:
    registry_module = sys.modules.get("cardcage.hooks.registry")
    if registry_module is None:  # nothing registered a hook in this process
        return
    root: type[BaseHookRegistry] = registry_module.BaseHookRegistry
    seen: set[type] = set()
    stack = list(root.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        yield cls


def _resolve_imported(target: str) -> tuple[bool, Any]:
    """(True, object) when ``target``'s module is imported and the path resolves; (False, None)
    when the module is not imported yet. Never imports."""
    module_name, colon, rest = target.partition(":")
    if colon:
        module = sys.modules.get(module_name)
        attrs = rest.split(".") if rest else []
    else:
        parts = target.split(".")
        module = None
        attrs = []
        for cut in range(len(parts) - 1, 0, -1):
            module = sys.modules.get(".".join(parts[:cut]))
            if module is not None:
                attrs = parts[cut:]
                break
    if module is None:
        return False, None
    obj: Any = module
    for attr in attrs:
        raw = _raw_attr(obj, attr)
        if raw is _MISSING:
            return True, _MISSING
        obj = raw
    return True, obj


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _raw_attr(owner: Any, attr: str) -> Any:
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in klass.__dict__:
                return klass.__dict__[attr]
        return _MISSING
    return getattr(owner, attr, _MISSING)


def reaches(obj: Any, hook: object, *, depth: int = 8) -> bool:
    """Whether ``obj`` is ``hook`` or a wrapper that holds it: through descriptors
    (``__func__``), ``functools`` wrappers (``__wrapped__``, ``func``), closures and the
    containers and records they keep (a tuple of hook records, a ``.hook`` attribute)."""
    seen: set[int] = set()
    frontier = [obj]
    for _ in range(depth):
        following: list[Any] = []
        for item in frontier:
            if item is hook:
                return True
            if id(item) in seen or item is None:
                continue
            seen.add(id(item))
            following.extend(_children(item))
        if not following:
            return False
        frontier = following
    return False


def _children(item: Any) -> list[Any]:
    if isinstance(item, (str, bytes, int, float, bool, type(sys))):
        return []
    if isinstance(item, (tuple, list, set, frozenset)):
        return list(item)[:64]
    if isinstance(item, dict):
        return list(item.values())[:64]
    out: list[Any] = []
    for name in ("__func__", "__wrapped__", "func", "fget", "hook"):
        try:
            value = item.__dict__.get(name) if name == "hook" else getattr(item, name, None)
        except Exception:  # an exotic descriptor: nothing to follow
            value = None
        if value is not None:
            out.append(value)
    closure = getattr(item, "__closure__", None)
    if isinstance(closure, tuple):
        for cell in closure:
            try:
                out.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
    return out


def _cardcage_rows(registry: type[BaseHookRegistry]) -> Iterator[HookEffect]:
    with registry._lock:
        hooks = {t: tuple(r) for t, r in registry._hooks.items()}
        patched = dict(registry._patched)
        pending = dict(registry._pending)
    name = f"{registry.__module__}:{registry.__qualname__}"
    for target, records in sorted(hooks.items()):
        applied = patched.get(target)
        for record in records:
            if target in pending:
                state = "pending"
            elif applied is None or record not in applied.records:  # late registrations too
                state = "not-applied"
            elif applied.owner.__dict__.get(applied.attr, _MISSING) is not applied.installed:
                state = "replaced-since"
            else:
                state = "in-effect"
            source = record.source
            yield HookEffect(
                target=target,
                type=record.hook_type.name,
                hook=describe(record.hook),
                plugin=source.plugin_name if source else None,
                distribution=source.dist_name if source else None,
                applied_by="cardcage",
                registry=name,
                state=state,
            )


def _handoff_row(handoff: _Handoff) -> HookEffect:
    imported, obj = _resolve_imported(handoff.target)
    if not imported:
        state = "not-imported"
    elif obj is _MISSING:
        state = "not-applied"
    else:
        state = "in-effect" if reaches(obj, handoff.hook) else "not-applied"
    source = handoff.source
    return HookEffect(
        target=handoff.target,
        type=handoff.hook_type,
        hook=describe(handoff.hook),
        plugin=getattr(source, "plugin_name", None),
        distribution=getattr(source, "dist_name", None),
        applied_by=handoff.host,
        registry=handoff.registry,
        state=state,
    )


def in_effect(distribution: str | None = None) -> list[HookEffect]:
    """Every hook registered in this process (only ``distribution``'s, when given), with its
    state now. Call it inside the host's process: that is where the answer lives."""
    rows = [row for registry in _registries() for row in _cardcage_rows(registry)]
    with _handoffs_lock:
        handoffs = list(_handoffs)
    rows += [_handoff_row(h) for h in handoffs]
    if distribution is not None:
        wanted = _normalise(distribution)
        rows = [r for r in rows if r.distribution and _normalise(r.distribution) == wanted]
    return rows


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
