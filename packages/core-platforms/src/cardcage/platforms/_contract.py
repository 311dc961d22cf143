"""The SRT contract checks that run when a platform class is defined, and the seed's old names.

``SRTPlatform.__init_subclass__`` calls ``check_platform_class`` for every subclass, so a
vendor's mistake surfaces when its module is imported, not in a worker when the runtime first
calls the method:

* a contract method (one that ``SRTPlatform`` defines) whose signature cannot take the calls
  the hosts make, or that is not a method at all, raises ``PlatformContractError``, naming the
  class, the method and the contract's signature;
* a ``capabilities`` that is not a ``PlatformCapabilities`` (nor a descriptor such as a
  property) raises ``PlatformContractError``;
* a name of the seed's contract that SGLang 0.5.23 replaced (``DEPRECATED``) warns with
  ``PlatformDeprecationWarning``, once per defining class, naming the successor or saying there
  is none. A warning, not an error: a plugin that supports several SGLang releases keeps the old
  names beside the new ones on purpose, and cardcage still honours them;
* a class that overrides ``support_cuda_graph()`` or ``support_piecewise_cuda_graph()`` without
  declaring ``capabilities`` gets a per-instance ``capabilities`` that reads them
  (``LegacyCapabilities``), so both hosts see the override's answer.

cardcage's own classes (modules under ``cardcage.platforms``) are exempt from the warnings, and
each host's adapters (``cardcage.platforms.hosts.<host>.adapter``) from the whole check: they are
built from a class that passed it. Import-safe: stdlib modules that are already loaded.
"""

from __future__ import annotations

import os
import sys
import threading
import types
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import PlatformContractError
    from .interface import PlatformCapabilities

__all__ = [
    "CAPABILITY_METHODS",
    "DEPRECATED",
    "LEGACY_KV_POOL_HOOKS",
    "Deprecation",
    "LegacyCapabilities",
    "check_platform_class",
    "declared_capabilities",
    "legacy_override",
    "is_serving_legacy",
    "serving_legacy",
    "warn_deprecated_call",
    "warn_legacy_use",
]

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OWN_MODULES = "cardcage.platforms."
# Each host's adapters (``cardcage.platforms.hosts.<host>.adapter``) are built from a checked class.
_ADAPTERS_PREFIX = "cardcage.platforms.hosts."


class Deprecation:
    """One name of the seed's contract that SGLang 0.5.23 no longer reads.

    (A plain class rather than a NamedTuple: building a NamedTuple costs more import time than
    this whole module otherwise does, and it is imported on the way to ``current_platform``.)
    """

    __slots__ = ("honoured_by", "successor")

    def __init__(self, successor: str | None, honoured_by: str) -> None:
        #: What replaces it in SGLang 0.5.23, as code; None where 0.5.23 has no successor.
        self.successor = successor
        #: What cardcage does with a class's override of it: "capabilities" (read into that
        #: field), "get_kv_pool_cls" (served from it), "cardcage" (answered from it, no
        #: successor), "ignored" (read by neither host, as in 0.5.23).
        self.honoured_by = honoured_by

    def __repr__(self) -> str:
        return f"Deprecation(successor={self.successor!r}, honoured_by={self.honoured_by!r})"


#: The KV pool kind -> the seed's per-kind factory that ``get_kv_pool_cls`` still honours.
LEGACY_KV_POOL_HOOKS: Mapping[str, str] = types.MappingProxyType(
    {"mha": "get_mha_kv_pool_cls", "mla": "get_mla_kv_pool_cls", "dsa": "get_dsa_kv_pool_cls"}
)

#: The seed's capability method -> the ``PlatformCapabilities`` field that replaces it.
CAPABILITY_METHODS: Mapping[str, str] = types.MappingProxyType(
    {"support_cuda_graph": "graph_capture", "support_piecewise_cuda_graph": "piecewise_graph"}
)

#: Every old name, the single source of the mapping docs/platforms/contract.md lists.
DEPRECATED: Mapping[str, Deprecation] = types.MappingProxyType(
    {
        "support_cuda_graph": Deprecation("capabilities.graph_capture", "capabilities"),
        "support_piecewise_cuda_graph": Deprecation("capabilities.piecewise_graph", "capabilities"),
        "supports_fp8": Deprecation(None, "cardcage"),
        "get_mha_kv_pool_cls": Deprecation("get_kv_pool_cls(kind='mha')", "get_kv_pool_cls"),
        "get_mla_kv_pool_cls": Deprecation("get_kv_pool_cls(kind='mla')", "get_kv_pool_cls"),
        "get_dsa_kv_pool_cls": Deprecation("get_kv_pool_cls(kind='dsa')", "get_kv_pool_cls"),
        "get_nsa_kv_pool_cls": Deprecation("get_kv_pool_cls(kind='dsa')", "ignored"),
    }
)

#: Parameters SGLang 0.5.23 passes by keyword although the contract declares them positional
#: (``spec_info.py`` and ``eagle_worker_v2.py`` call these with ``algorithm=``/``phase=``), so
#: an override must spell them the same.
_PASSED_BY_KEYWORD: Mapping[str, tuple[str, ...]] = types.MappingProxyType(
    {
        "get_speculative_worker_cls": ("algorithm",),
        "get_speculative_graph_runner_cls": ("algorithm", "phase"),
    }
)

_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08

_lock = threading.Lock()
_warned: set[tuple[type, str]] = set()
_serving = threading.local()


# -- warnings ---------------------------------------------------------------------------------


def _stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_HERE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _warn_once(owner: type, name: str, message: str) -> None:
    with _lock:
        if (owner, name) in _warned:
            return
        _warned.add((owner, name))
    from .errors import PlatformDeprecationWarning

    warnings.warn(message, PlatformDeprecationWarning, stacklevel=_stacklevel())


def _exempt(owner: type) -> bool:
    return owner.__module__.startswith(_OWN_MODULES)


def warn_deprecated_call(cls: type, name: str) -> None:
    """Warn, once per class, that code called the old name ``name`` on an instance of ``cls``."""
    entry = DEPRECATED[name]
    if entry.successor is None:
        advice = (
            "and SGLang 0.5.23 has no successor: no host asks a platform about fp8 any more "
            "(a platform lists the quantization methods it runs in supported_quantization and "
            "refuses the others in verify_quantization())."
        )
    elif entry.successor.startswith("capabilities."):
        advice = f"(the seed's name): read {entry.successor}, its SGLang 0.5.23 successor."
    else:
        advice = f"(the seed's name): call {entry.successor}, its SGLang 0.5.23 successor."
    _warn_once(cls, f"call:{name}", f"{cls.__name__}.{name}() is deprecated {advice}")


def warn_legacy_use(owner: type, hook: str) -> None:
    """Warn, once per defining class, that ``get_kv_pool_cls`` served a kind from ``hook``.

    Shares its once-only key with the definition-time warning, so one override warns once.
    """
    _warn_once(owner, hook, _definition_message(owner, hook, declares_capabilities=False))


def _definition_message(owner: type, name: str, *, declares_capabilities: bool) -> str:
    entry = DEPRECATED[name]
    where = f"{owner.__name__}.{name}()"
    if entry.honoured_by == "capabilities":
        field = entry.successor
        if declares_capabilities:
            return (
                f"{where} is the seed's name, which SGLang 0.5.23 no longer reads; its successor "
                f"is {field}. {owner.__name__} also declares capabilities, which wins: both "
                f"hosts ignore {name}(). Delete it."
            )
        return (
            f"{where} is the seed's name, which SGLang 0.5.23 no longer reads; its successor is "
            f"{field}. Declare capabilities = PlatformCapabilities("
            f"{CAPABILITY_METHODS[name]}=...) on {owner.__name__} and delete {name}(). Until "
            f"then both hosts read its answer into {field}."
        )
    if entry.honoured_by == "cardcage":
        return (
            f"{where} is the seed's name, and SGLang 0.5.23 has no successor: no host asks a "
            "platform about fp8 any more. List the quantization methods the device runs in "
            "supported_quantization and refuse the others in verify_quantization(). cardcage "
            f"still answers {name}() from this method for code that calls it."
        )
    kind = entry.successor.split("'")[1] if entry.successor else "?"
    if entry.honoured_by == "ignored":
        return (
            f"{where} is an older name of the DSA KV-pool factory that neither SGLang 0.5.23 "
            "nor cardcage reads: this override is ignored. Override get_kv_pool_cls(self, *, "
            f"kind) and answer kind {kind!r}."
        )
    return (
        f"{where} is the seed's name, which SGLang 0.5.23 no longer reads; its successor is "
        f"{entry.successor}. Override get_kv_pool_cls(self, *, kind) instead. Until then "
        f"SRTPlatform.get_kv_pool_cls(kind={kind!r}) is served from this method, under both "
        "hosts."
    )


# -- the seed's capability methods and KV-pool factories ----------------------------------------


class LegacyCapabilities:
    """``capabilities`` of a class that answers through the seed's capability methods.

    On an instance: the declared capabilities (``source``, what the class would have without
    the old methods) with each mapped field replaced by the answer of its method. On the class:
    the declared capabilities, since the methods need an instance.
    """

    def __init__(self, source: Any, methods: Mapping[str, str]) -> None:
        self.source = source
        self.methods = dict(methods)

    def unmapped(self, instance: object, owner: type | None) -> Any:
        """What the class declares, without the old methods' answers."""
        return _value(self.source, instance, owner)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        declared = self.unmapped(instance, owner)
        if instance is None:
            return declared
        from .interface import PlatformCapabilities

        if not isinstance(declared, PlatformCapabilities):
            return declared
        answers = {field: bool(getattr(instance, m)()) for m, field in self.methods.items()}
        return declared.replace(**answers)

    def __repr__(self) -> str:
        methods = ", ".join(f"{m}() -> {f}" for m, f in self.methods.items())
        return f"<capabilities from {methods}>"


def _value(raw: Any, instance: object, owner: type | None) -> Any:
    getter = getattr(type(raw), "__get__", None)
    return raw if getter is None else getter(raw, instance, owner)


def declared_capabilities(instance: object) -> PlatformCapabilities:
    """``instance``'s capabilities as its classes declare them, without the old methods' answers
    (what the deprecated ``support_*()`` aliases return, so an override that calls ``super()``
    never loops back into itself)."""
    cls = type(instance)
    for klass in cls.__mro__:
        if "capabilities" in vars(klass):
            raw = vars(klass)["capabilities"]
            unmapped = getattr(raw, "unmapped", None)
            if callable(unmapped):
                return unmapped(instance, cls)  # type: ignore[no-any-return]
            return _value(raw, instance, cls)  # type: ignore[no-any-return]
    from .interface import PlatformCapabilities

    return PlatformCapabilities()


def legacy_override(cls: type, hook: str, base: type) -> type | None:
    """The class in ``cls``'s MRO that overrides the seed's factory ``hook``, or None when
    ``base``'s deprecated alias answers (or nothing callable does: the SGLang adapter hides the
    alias)."""
    for klass in cls.__mro__:
        if hook in vars(klass):
            raw = vars(klass)[hook]
            if klass is base:
                return None
            if isinstance(raw, (staticmethod, classmethod)) or callable(raw):
                return klass
            return None
    return None


def _serving_set() -> set[tuple[int, str]]:
    active: set[tuple[int, str]] | None = getattr(_serving, "active", None)
    if active is None:
        active = _serving.active = set()
    return active


@contextmanager
def serving_legacy(instance: object, hook: str) -> Iterator[None]:
    """Mark that ``get_kv_pool_cls`` is calling ``instance``'s override of ``hook``."""
    active = _serving_set()
    key = (id(instance), hook)
    active.add(key)
    try:
        yield
    finally:
        active.discard(key)


def is_serving_legacy(instance: object, hook: str) -> bool:
    """True inside ``serving_legacy(instance, hook)``: the override called ``super()``."""
    return (id(instance), hook) in _serving_set()


# -- the class-definition check -----------------------------------------------------------------


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _raw(cls: type, name: str) -> tuple[int, type, Any] | None:
    for index, klass in enumerate(cls.__mro__):
        if name in vars(klass):
            return index, klass, vars(klass)[name]
    return None


class _Shape:
    """What calls a function takes (a plain class, for import time: see ``Deprecation``)."""

    __slots__ = ("keyword_ok", "positional", "required", "varargs", "varkw")

    def __init__(
        self,
        positional: tuple[str, ...],  # parameters that take a positional argument (after self)
        keyword_ok: frozenset[str],  # parameters that take a keyword argument
        required: frozenset[str],  # parameters without a default
        varargs: bool,
        varkw: bool,
    ) -> None:
        self.positional = positional
        self.keyword_ok = keyword_ok
        self.required = required
        self.varargs = varargs
        self.varkw = varkw


def _shape(func: types.FunctionType, *, bound: bool) -> _Shape:
    code = func.__code__
    names = code.co_varnames
    positional = names[: code.co_argcount]
    posonly = code.co_posonlyargcount
    kwonly = names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    defaults = func.__defaults__ or ()
    kwdefaults = func.__kwdefaults__ or {}
    required_positional = positional[: len(positional) - len(defaults)]
    required = {*required_positional, *(n for n in kwonly if n not in kwdefaults)}
    keyword_ok = {*positional[posonly:], *kwonly}
    if bound and positional:
        required.discard(positional[0])
        keyword_ok.discard(positional[0])
        positional = positional[1:]
    return _Shape(
        tuple(positional),
        frozenset(keyword_ok),
        frozenset(required),
        bool(code.co_flags & _CO_VARARGS),
        bool(code.co_flags & _CO_VARKEYWORDS),
    )


def _binds(shape: _Shape, positional: int, keywords: tuple[str, ...]) -> str | None:
    """Why a call with ``positional`` arguments and ``keywords`` cannot bind, or None."""
    if positional > len(shape.positional) and not shape.varargs:
        return (
            f"it takes {len(shape.positional)} positional argument(s) besides self, and the "
            f"runtime passes {positional}"
        )
    filled = set(shape.positional[:positional])
    for name in keywords:
        if name in filled:
            return f"{name!r} would be passed twice"
        if name in shape.keyword_ok:
            filled.add(name)
        elif not shape.varkw:
            return f"it has no parameter named {name!r}"
    missing = sorted(shape.required - filled)
    if missing:
        return f"it requires {', '.join(repr(m) for m in missing)}, which the runtime does not pass"
    return None


def _signature_text(name: str, func: types.FunctionType) -> str:
    """``def name(self, a, b=None, *, kind)`` from the base function (no annotations)."""
    code = func.__code__
    names = code.co_varnames
    positional = list(names[: code.co_argcount])
    kwonly = list(names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])
    defaults = func.__defaults__ or ()
    kwdefaults = func.__kwdefaults__ or {}
    parts = []
    first_default = len(positional) - len(defaults)
    for index, param in enumerate(positional):
        if index >= first_default:
            parts.append(f"{param}={defaults[index - first_default]!r}")
        else:
            parts.append(param)
    if kwonly:
        parts.append("*")
        parts.extend(f"{k}={kwdefaults[k]!r}" if k in kwdefaults else k for k in kwonly)
    return f"def {name}({', '.join(parts)})"


def _call_text(name: str, shape: _Shape, positional: int, keywords: tuple[str, ...]) -> str:
    args = [*shape.positional[:positional], *(f"{k}=..." for k in keywords)]
    return f"{name}({', '.join(args)})"


def _calls(name: str, base: _Shape) -> list[tuple[int, tuple[str, ...]]]:
    """The calls an override of ``name`` must take: what the runtime may pass."""
    required_positional = sum(1 for p in base.positional if p in base.required)
    required_kw = tuple(sorted(n for n in base.required if n not in base.positional))
    all_kw = tuple(sorted(n for n in base.keyword_ok if n not in base.positional))
    calls = [
        (required_positional, required_kw),
        (len(base.positional), all_kw),
    ]
    by_keyword = _PASSED_BY_KEYWORD.get(name)
    if by_keyword:
        calls.append((0, (*by_keyword, *all_kw)))
    return calls


def _check_method(cls: type, name: str, base_func: types.FunctionType) -> None:
    found = _raw(cls, name)
    if found is None:
        return
    _, owner, raw = found
    if owner.__module__.startswith(_OWN_MODULES):
        return  # the base's own method, or a cardcage built-in's

    def fail(problem: str) -> PlatformContractError:
        from .errors import PlatformContractError  # only a class that breaks the contract

        # The contract's signature is spelled out only here: every vendor class is checked as
        # it is defined, in every process of every host, and almost none fails.
        contract = _signature_text(name, base_func)
        return PlatformContractError(
            platform_class=_qualified(cls),
            owner=_qualified(owner),
            member=name,
            problem=problem,
            fix=f"Define it as a method with the contract's signature, {contract}.",
        )

    if isinstance(raw, property):
        raise fail("is a property, but the runtime calls it as a method.")
    bound = True
    func: Any = raw
    if isinstance(raw, staticmethod):
        func, bound = raw.__func__, False
    elif isinstance(raw, classmethod):
        func = raw.__func__
    if not callable(func):
        raise fail(f"is {type(raw).__name__} {raw!r:.60}, not a method.")
    if not isinstance(func, types.FunctionType):
        return  # a callable object or a builtin: nothing to read its parameters from
    shape = _shape(func, bound=bound)
    base_shape = _shape(base_func, bound=True)
    for positional, keywords in _calls(name, base_shape):
        problem = _binds(shape, positional, keywords)
        if problem is not None:
            call = _call_text(name, base_shape, positional, keywords)
            raise fail(f"cannot take the call {call} that the runtime makes: {problem}.")


def _check_capabilities(cls: type) -> None:
    if "capabilities" not in vars(cls):
        return
    raw = vars(cls)["capabilities"]
    from .interface import PlatformCapabilities

    if isinstance(raw, PlatformCapabilities) or hasattr(type(raw), "__get__"):
        return
    from .errors import PlatformContractError

    sglang = hasattr(type(raw), "__struct_fields__")
    problem = (
        "is SGLang's PlatformCapabilities; cardcage's contract takes its own, which the SGLang "
        "adapter converts"
        if sglang
        else f"is {type(raw).__name__} {raw!r:.60}, not a PlatformCapabilities"
    )
    raise PlatformContractError(
        platform_class=_qualified(cls),
        owner=_qualified(cls),
        member="capabilities",
        problem=problem + ".",
        fix="Declare capabilities = PlatformCapabilities(...) from cardcage.platforms.interface.",
    )


def _warn_deprecated_definitions(cls: type, base: type) -> None:
    capabilities = _raw(cls, "capabilities")
    for name in DEPRECATED:
        found = _raw(cls, name)
        if found is None:
            continue
        index, owner, _ = found
        if owner is base or _exempt(owner):
            continue
        declares = (
            capabilities is not None
            and capabilities[0] <= index
            and (not isinstance(capabilities[2], LegacyCapabilities))
        )
        message = _definition_message(owner, name, declares_capabilities=declares)
        _warn_once(owner, name, message)


def _map_capability_methods(cls: type, base: type) -> None:
    """Install ``LegacyCapabilities`` on ``cls`` when it overrides an old capability method
    below its nearest ``capabilities`` declaration."""
    if "capabilities" in vars(cls):
        return
    declared = _raw(cls, "capabilities")
    if declared is None:
        return
    declared_index, _, source = declared
    mapped: dict[str, str] = {}
    for method, field in CAPABILITY_METHODS.items():
        found = _raw(cls, method)
        if found is not None and found[1] is not base and found[0] < declared_index:
            mapped[method] = field
    if not mapped:
        return
    if isinstance(source, LegacyCapabilities):
        mapped = {**source.methods, **mapped}
        source = source.source
    type.__setattr__(cls, "capabilities", LegacyCapabilities(source, mapped))


def check_platform_class(cls: type, base: type) -> None:
    """The class-definition check of ``SRTPlatform`` subclass ``cls`` (see the module doc)."""
    if cls.__module__.startswith(_ADAPTERS_PREFIX):
        return
    for name, member in vars(base).items():
        if isinstance(member, types.FunctionType) and not name.startswith("_"):
            _check_method(cls, name, member)
    _check_capabilities(cls)
    _warn_deprecated_definitions(cls, base)
    _map_capability_methods(cls, base)
