"""SGLang's identity predicates, answered as the built-in a vendor's class behaves as.

A vendor class that declares ``behaves_as`` (``cardcage.platforms.identity``) is out of tree
(``_enum = OOT``) but behaves as a built-in (CPU, CUDA or ROCm). The adapter keeps SGLang's
``PlatformEnum.OOT`` as its ``_enum`` and SGLang's ``is_out_of_tree()``, so SGLang's selection
checks and its out-of-tree custom-op dispatch still see an external platform; every identity
predicate of SGLang's base (``PREDICATES``: ``is_cpu()``, ``is_cuda()``, ``is_rocm()``,
``is_cuda_alike()``, ``is_hip()``, the ``*_static`` classmethods, ...) answers instead as it
would on a class of SGLang's whose ``_enum`` is SGLang's member of the declared name: SGLang's
own predicate runs, on a view of the base with that ``_enum`` (``view``), so its own rules hold
(SRT's ``is_cuda_alike()`` includes SAIL, the diffusion ``is_xpu()`` asks torch, and so on).

A predicate the vendor's classes define stays the vendor's. What this does not reach: SGLang
code that reads ``current_platform._enum`` itself, and SGLang's module-level functions that ask
torch or the environment rather than the platform (``sglang.srt.utils.common.is_cpu()`` reads
``SGLANG_USE_CPU_ENGINE``).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["PREDICATES", "host_member", "identity_namespace", "view"]

#: The identity predicates of SGLang's platform bases (SRT and diffusion, 0.5.23) that read the
#: platform's ``_enum``; a name the host base lacks is skipped.
PREDICATES: tuple[str, ...] = (
    "is_cuda",
    "is_rocm",
    "is_hip",
    "is_cpu",
    "is_xpu",
    "is_musa",
    "is_npu",
    "is_tpu",
    "is_mps",
    "is_sail",
    "is_cuda_alike",
    "is_cuda_static",
    "is_rocm_static",
)


def host_member(declared: enum.Enum, host_base: type) -> enum.Enum:
    """SGLang's ``PlatformEnum`` member named as ``declared`` (the enum of ``host_base._enum``)."""
    host_enum: type[enum.Enum] = type(vars_of(host_base, "_enum"))
    return host_enum[declared.name]


def vars_of(cls: type, name: str) -> Any:
    """``name`` as stored in the first class dict of ``cls``'s MRO that has it."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(name)


@functools.cache
def view(host_base: type, member: enum.Enum) -> type:
    """A class of SGLang's ``host_base`` whose ``_enum`` is ``member``: the built-in's identity.

    Never instantiated through ``__init__``: the adapter's predicates ask an instance made with
    ``object.__new__``, so no platform set-up runs. SGLang's bases define no
    ``__init_subclass__``, so creating it runs none of SGLang's code.
    """
    return type(f"{host_base.__name__}As{member.name.title()}", (host_base,), {"_enum": member})


def _instance_predicate(host_base: type, member: enum.Enum, name: str) -> Callable[..., bool]:
    probe: list[Any] = []

    def predicate(self: Any) -> bool:
        if not probe:
            probe.append(object.__new__(view(host_base, member)))
        return bool(getattr(probe[0], name)())

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"{name}() as SGLang's {member.name} platform answers it (behaves_as)."
    return predicate


def _class_predicate(host_base: type, member: enum.Enum, name: str) -> classmethod[Any, Any, bool]:
    def predicate(_owner: type) -> bool:
        return bool(getattr(view(host_base, member), name)())

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"{name}() as SGLang's {member.name} platform answers it (behaves_as)."
    return classmethod(predicate)


def identity_namespace(cls: type, host_base: type, vendor_names: set[str]) -> dict[str, Any]:
    """The adapter's identity predicates for the vendor class ``cls``; {} when it declares none.

    ``vendor_names`` are the names the vendor's classes define: those stay the vendor's.
    """
    from cardcage.platforms.identity import declared_identity

    declared = declared_identity(cls)
    if declared is None:
        return {}
    member = host_member(declared, host_base)
    namespace: dict[str, Any] = {}
    for name in PREDICATES:
        if name in vendor_names:
            continue
        try:
            raw = vars_of(host_base, name)
        except AttributeError:
            continue
        if isinstance(raw, classmethod):
            namespace[name] = _class_predicate(host_base, member, name)
        elif callable(raw):
            namespace[name] = _instance_predicate(host_base, member, name)
    return namespace
