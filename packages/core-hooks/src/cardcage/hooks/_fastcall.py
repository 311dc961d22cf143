"""Sync wrappers specialised to the target's positional arity, generated once per (type, arity).

A generic wrapper, ``def wrapper(*args, **kwargs)``, pays on every call for packing the
arguments into a tuple and a dict, and again for each call it makes with them
(``hook(*args, **kwargs)`` copies both). A target with N positional parameters is nearly always
called with exactly N positional arguments and no keyword, so the wrappers made here take N
positional-only parameters that default to a private sentinel, then ``*rest, **kw``::

    def before(a0=_NOT_PASSED, a1=_NOT_PASSED, /, *rest, **kw): ...

A call with exactly N positional arguments and no keyword binds ``a0 .. aN-1`` and nothing else;
the wrapper then calls the hook and the next layer with ``(a0, .., aN-1)`` directly, with no
packing. Any other call (a keyword, fewer or more arguments) takes the generic path in the same
frame: ``args`` is rebuilt from the parameters that were bound (positional-only parameters bind
left to right, so the unbound ones are a suffix) plus ``rest``, and the calls use
``*args, **kw``. On both paths the hook receives exactly the arguments the caller passed, split
into positional and keyword as the caller split them, as with a generic wrapper.

Each source is compiled once per process and registered with ``linecache`` under a
``<cardcage.hooks ...>`` name, so a traceback through a wrapper shows its lines.

Import-safe: stdlib only, nothing is compiled until a hook is applied.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_ARITY", "fixed_arity_wrapper"]

#: Targets with more positional parameters get the generic wrapper (one factory per arity is
#: compiled and kept; this bounds how many there can be).
MAX_ARITY: Final = 16


class _NotPassed:
    """The default of every positional parameter of a generated wrapper: "not passed"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not passed>"


_NOT_PASSED: Final = _NotPassed()

# What each hook type does with ``args``/``kw`` (generic path) and with ``{call}`` (fast path).
# ``normalize`` validates a BEFORE hook's return value that is not a plain (args, kwargs) pair.
_BEFORE_TAIL = """\
try:
    args, kw = r
except (TypeError, ValueError):
    args, kw = normalize(r)
if type(kw) is not dict:
    args, kw = normalize(r)
if kw:
    return inner(*args, **kw)
return inner(*args)"""

_BODIES = {
    "before": (
        "r = hook(*args, **kw)\nif r is None:\n    return inner(*args, **kw)\n" + _BEFORE_TAIL,
        "r = hook({call})\nif r is None:\n    return inner({call})\n" + _BEFORE_TAIL,
    ),
    "after": (
        "result = inner(*args, **kw)\nnew = hook(result, *args, **kw)\n"
        "return result if new is None else new",
        "result = inner({call})\nnew = hook(result{sep}{call})\n"
        "return result if new is None else new",
    ),
    "around": (
        "return hook(inner, *args, **kw)",
        "return hook(inner{sep}{call})",
    ),
    "replace": (
        "return hook(*args, **kw)",
        "return hook({call})",
    ),
}


def _indent(text: str, depth: int) -> str:
    pad = " " * depth
    return "\n".join(pad + line for line in text.split("\n"))


def _collect(names: list[str]) -> str:
    """Lines that set ``args`` to the positional arguments actually passed."""
    if not names:
        return "args = rest"
    lines = [f"if {names[-1]} is not _NOT_PASSED:", f"    args = ({', '.join(names)}, *rest)"]
    for count in range(len(names) - 1, 0, -1):
        lines.append(f"elif {names[count - 1]} is not _NOT_PASSED:")
        lines.append(f"    args = ({', '.join(names[:count])},)")
    lines += ["else:", "    args = ()"]
    return "\n".join(lines)


def _source(kind: str, arity: int) -> str:
    names = [f"a{index}" for index in range(arity)]
    if names:
        params = ", ".join(f"{name}=_NOT_PASSED" for name in names) + ", /, *rest, **kw"
        unusual = f"kw or rest or {names[-1]} is _NOT_PASSED"
    else:
        params, unusual = "*rest, **kw", "kw or rest"
    generic, fast = _BODIES[kind]
    call = ", ".join(names)
    body = "\n".join(
        [
            f"    def {kind}({params}):",
            f"        if {unusual}:",
            _indent(_collect(names), 12),
            _indent(generic, 12),
            _indent(fast.format(call=call, sep=", " if call else ""), 8),
            f"    return {kind}",
        ]
    )
    return f"def make(hook, inner, normalize):\n{body}\n"


@functools.cache
def _factory(kind: str, arity: int) -> Callable[..., Callable[..., Any]]:
    source = _source(kind, arity)
    filename = f"<cardcage.hooks {kind} wrapper, {arity} positional>"
    namespace: dict[str, Any] = {"_NOT_PASSED": _NOT_PASSED}
    exec(compile(source, filename, "exec"), namespace)  # our own template, formatted above
    import linecache  # apply-time only, like the compile above

    # An mtime of None: linecache.checkcache() keeps the entry (there is no file to compare).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    factory: Callable[..., Callable[..., Any]] = namespace["make"]
    return factory


def fixed_arity_wrapper(
    kind: str,
    arity: int,
    inner: Callable[..., Any],
    hook: Callable[..., Any],
    normalize: Callable[[object], tuple[Any, dict[str, Any]]],
) -> Callable[..., Any]:
    """A plain function that runs ``hook`` of type ``kind`` around ``inner``.

    ``arity`` (at most ``MAX_ARITY``) is the number of positional arguments the usual call
    passes; every other call is still handled, on the generic path.
    """
    wrapper = _factory(kind, arity)(hook, inner, normalize)
    # A code object of its own (an equal copy, so tracebacks still find the source): CPython
    # specialises each call site for the callable it meets there, and wrappers of one shape
    # sharing a code object would keep undoing each other's specialisation.
    wrapper.__code__ = wrapper.__code__.replace()
    return wrapper
