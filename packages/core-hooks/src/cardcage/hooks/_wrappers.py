"""The call wrappers: one small closure per hook, nothing else on the call path.

Each wrapper is built once, at apply time, for one (hook type, sync/async) pair, so the per-call
work is exactly what the hook type needs: no dispatch on the type, no logging, no lookups. The
only extra work compared with a bare wrapper is the shape check of a BEFORE hook's return value,
which runs only when the hook asked to change the arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Mapping

from .errors import HookResultError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .registry import HookSource, HookType

__all__ = ["build_wrapper"]


def _describe(hook: object) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)


def _before_shape(
    hook: object, target: str, result: object, source: HookSource | None
) -> tuple[Any, dict[str, Any]]:
    """Validate what a BEFORE hook returned: ``(args, kwargs)`` or None (handled by the caller)."""
    if isinstance(result, tuple) and len(result) == 2:
        args, kwargs = result
        if isinstance(args, (tuple, list)) and isinstance(kwargs, Mapping):
            return tuple(args), dict(kwargs)
    origin = f" (plugin {source.plugin_name!r}, distribution {source.dist_name})" if source else ""
    raise HookResultError(
        f"BEFORE hook {_describe(hook)}{origin} on {target!r} returned {type(result).__name__} "
        f"{result!r:.80}; a BEFORE hook must return None (keep the arguments) or a pair "
        "(args_tuple, kwargs_dict).",
        target=target,
        hook=hook,
        plugin=source.plugin_name if source else None,
        distribution=source.dist_name if source else None,
    )


def _sync_wrapper(
    inner: Callable[..., Any],
    hook: Callable[..., Any],
    kind: str,
    target: str,
    source: HookSource | None,
) -> Callable[..., Any]:
    if kind == "before":

        def before(*args: Any, **kwargs: Any) -> Any:
            r = hook(*args, **kwargs)
            if r is not None:
                try:
                    args, kwargs = r
                except (TypeError, ValueError):
                    args, kwargs = _before_shape(hook, target, r, source)
                if type(kwargs) is not dict:  # one cheap check catches every bare-args mistake
                    args, kwargs = _before_shape(hook, target, r, source)
            return inner(*args, **kwargs)

        return before
    if kind == "after":

        def after(*args: Any, **kwargs: Any) -> Any:
            result = inner(*args, **kwargs)
            new = hook(result, *args, **kwargs)
            return result if new is None else new

        return after
    if kind == "around":

        def around(*args: Any, **kwargs: Any) -> Any:
            return hook(inner, *args, **kwargs)

        return around

    def replace(*args: Any, **kwargs: Any) -> Any:
        return hook(*args, **kwargs)

    return replace


async def _maybe_await(value: Any) -> Any:
    if isinstance(value, Awaitable):
        return await value
    return value


def _async_wrapper(
    inner: Callable[..., Any],
    hook: Callable[..., Any],
    kind: str,
    target: str,
    source: HookSource | None,
) -> Callable[..., Any]:
    if kind == "before":

        async def before(*args: Any, **kwargs: Any) -> Any:
            r = await _maybe_await(hook(*args, **kwargs))
            if r is None:
                return await inner(*args, **kwargs)
            new_args, new_kwargs = _before_shape(hook, target, r, source)
            return await inner(*new_args, **new_kwargs)

        return before
    if kind == "after":

        async def after(*args: Any, **kwargs: Any) -> Any:
            result = await inner(*args, **kwargs)
            new = await _maybe_await(hook(result, *args, **kwargs))
            return result if new is None else new

        return after
    if kind == "around":

        async def around(*args: Any, **kwargs: Any) -> Any:
            return await _maybe_await(hook(inner, *args, **kwargs))

        return around

    async def replace(*args: Any, **kwargs: Any) -> Any:
        return await _maybe_await(hook(*args, **kwargs))

    return replace


def build_wrapper(
    inner: Callable[..., Any],
    hook: Callable[..., Any],
    hook_type: HookType,
    target: str,
    *,
    is_async: bool,
    source: HookSource | None = None,
) -> Callable[..., Any]:
    """Wrap ``inner`` with one hook; the result looks like ``inner`` and has ``__wrapped__``."""
    factory = _async_wrapper if is_async else _sync_wrapper
    wrapper = factory(inner, hook, hook_type.value, target, source)
    functools.update_wrapper(wrapper, inner)
    wrapper.__wrapped__ = inner  # type: ignore[attr-defined]
    return wrapper
