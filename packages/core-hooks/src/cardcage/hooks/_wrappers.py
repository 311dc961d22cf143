"""The call wrappers: the cheapest layer that keeps every guarantee, chosen per target and hook.

Each hook adds one layer, built once at apply time, so a call does no dispatch on the hook type,
no logging and no lookups. Which layer depends on where it is installed and what it wraps:

- **AROUND and REPLACE, not installed as a method** (a module-level function, or the function
  inside a classmethod, staticmethod or property, whose descriptor does the binding): a
  ``functools.partial`` of the hook over the next layer (AROUND) or of the hook alone (REPLACE).
  The call stays in C: no Python frame, no argument packing of our own.
- **BEFORE and AFTER, and every type on a method** (a plain function stored on a class, which
  must bind ``self`` like the method it replaces, so it has to be a function): a function
  specialised to the target's positional arity (``_fastcall``). Its common call passes the
  arguments on without packing them.
- **async targets**, and targets whose arity is unknown (not a Python function) or large: a
  generic ``*args, **kwargs`` closure. Async wrappers must be coroutine functions, and a partial
  or a generated function cannot be marked as one on every Python we support.

Every layer looks like what it wraps: ``functools.update_wrapper`` copies the name, qualname,
module, docstring and annotations and merges ``__dict__``, ``__wrapped__`` points one layer
down, and a layer pickles by reference (by ``__module__`` and ``__qualname__``), like the
function it replaces. The only extra work compared with a bare wrapper is the shape check of a
BEFORE hook's return value, which runs only when the hook asked to change the arguments.

Imports nothing from ``registry`` (which imports this module): only ``_model`` and ``errors``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from ._fastcall import MAX_ARITY, fixed_arity_wrapper
from ._model import describe

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._model import HookSource

__all__ = ["build_wrapper", "positional_arity"]


def _before_shape(
    hook: object, target: str, result: object, source: HookSource | None
) -> tuple[Any, dict[str, Any]]:
    """Validate what a BEFORE hook returned: ``(args, kwargs)`` or None (handled by the caller)."""
    if isinstance(result, tuple) and len(result) == 2:
        args, kwargs = result
        if isinstance(args, (tuple, list)) and isinstance(kwargs, Mapping):
            return tuple(args), dict(kwargs)
    from .errors import HookResultError  # a misbehaving hook only

    origin = f" (plugin {source.plugin_name!r}, distribution {source.dist_name})" if source else ""
    raise HookResultError(
        f"BEFORE hook {describe(hook)}{origin} on {target!r} returned {type(result).__name__} "
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


#: ``inspect.CO_VARARGS``, without importing inspect on the patching path.
_CO_VARARGS = 0x04


def positional_arity(original: object) -> int | None:
    """How many positional parameters ``original`` takes, if it is a Python function.

    That is the number of positional arguments its usual call passes (``self`` or ``cls``
    included for methods), which the specialised wrappers take as parameters. None when it is
    not a Python function (a builtin, a callable object, a bound method), takes more than
    ``MAX_ARITY``, or takes ``*args``: those get the generic wrapper. A ``*args`` function's usual
    call passes more positional arguments than it names (``CustomOp.forward(self, *args,
    **kwargs)`` is called as ``forward(self, x)``), so a specialised wrapper would send nearly
    every call down its slower rebuilding path: 490 against 370 ns per call in the measurement
    that found it (issue 22).
    """
    if not isinstance(original, types.FunctionType):
        return None
    if original.__code__.co_flags & _CO_VARARGS:
        return None
    arity = original.__code__.co_argcount
    return arity if arity <= MAX_ARITY else None


def _by_reference(layer: functools.partial[Any], protocol: int) -> str | tuple[Any, ...]:
    """``__reduce_ex__`` of a partial layer: pickle it by name, as a function is pickled.

    A layer over a callable without a ``__qualname__`` has no name to be found by; it falls
    back to the partial's own reduction (by value).
    """
    name: str | None = getattr(layer, "__qualname__", None)
    if name is None:
        return functools.partial.__reduce__(layer)
    return name


def _look_like(layer: Callable[..., Any], inner: Callable[..., Any]) -> None:
    """Give ``layer`` the metadata of ``inner`` and a ``__wrapped__`` pointing to it."""
    functools.update_wrapper(layer, inner)
    layer.__wrapped__ = inner  # type: ignore[attr-defined]
    if isinstance(layer, functools.partial):
        # pickle and copy look ``__reduce_ex__`` up on the instance first: without this a
        # partial would pickle by value and fail on ``inner`` (its name now finds the layer).
        layer.__reduce_ex__ = functools.partial(_by_reference, layer)  # type: ignore[method-assign]
    else:
        # merged from a partial layer below by update_wrapper; functions pickle by name anyway
        layer.__dict__.pop("__reduce_ex__", None)


def build_wrapper(
    inner: Callable[..., Any],
    hook: Callable[..., Any],
    kind: str,
    target: str,
    *,
    is_async: bool,
    as_method: bool,
    arity: int | None,
    source: HookSource | None = None,
) -> Callable[..., Any]:
    """Wrap ``inner`` with one hook of type ``kind`` (a ``HookType`` value, e.g. ``"around"``).

    ``as_method``: the layer is installed as a plain method (it must bind ``self`` itself).
    ``arity``: ``positional_arity()`` of the original at the bottom of the chain. The result
    looks like ``inner`` and has ``__wrapped__``.
    """
    layer: Callable[..., Any]
    if is_async:
        layer = _async_wrapper(inner, hook, kind, target, source)
    elif kind == "around" and not as_method:
        layer = functools.partial(hook, inner)
    elif kind == "replace" and not as_method:
        layer = functools.partial(hook)
    elif arity is not None:
        normalize = functools.partial(_before_shape, hook, target, source=source)
        layer = fixed_arity_wrapper(kind, arity, inner, hook, normalize)
    else:
        layer = _sync_wrapper(inner, hook, kind, target, source)
    _look_like(layer, inner)
    return layer
