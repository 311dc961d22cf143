"""Declared identity: the built-in platform an out-of-tree platform behaves as.

Every external platform sets ``_enum = PlatformEnum.OOT``, and the identity predicates read
``_enum``, so an out-of-tree platform answers ``is_cpu()``, ``is_cuda()``, ``is_rocm()`` and
``is_cuda_alike()`` with False. Where its device really is CPU-like (tensors on the host CPU),
CUDA-alike or ROCm-like, the host's code then takes branches meant for some other device (SGLang
0.5.23's diffusion ``layers/layernorm.py`` imports its Triton kernels unless
``current_platform.is_cpu()``, and those fail to import on a CPU-only machine). A vendor
declares the identity on its class instead of changing ``_enum``::

    class AcmeCpuPlatform(AcmeDeviceMixin, Platform):
        _enum = PlatformEnum.OOT
        behaves_as = PlatformEnum.CPU

Then every identity predicate answers as that built-in's does, in cardcage's runtimes and, through
the adapter (``cardcage.platforms.hosts.sglang.identity``), in SGLang's, while
``is_out_of_tree()`` stays True and ``_enum`` stays ``OOT``: selection, out-of-tree custom-op
dispatch and ``cardcage platform`` still tell the platform from the built-in.

``check_identity`` runs when a ``DeviceMixin`` subclass is defined (``__init_subclass__``) and
raises ``PlatformIdentityError`` for a declaration that cannot hold: a value that is not one of
``BEHAVES_AS`` (a string, another enum's member, ``OOT``), or one that contradicts the class's own
built-in ``_enum`` (``behaves_as = ROCM`` on a class whose ``_enum`` is ``CPU``).

Import-safe and on the first ``current_platform`` path: stdlib only at module scope.
"""

from __future__ import annotations

import enum
from typing import Any

from .device_mixin import PlatformEnum

__all__ = ["BEHAVES_AS", "check_identity", "declared_identity", "identity_of"]

#: What a platform may declare it behaves as: the built-ins whose branches a vendor device can
#: take (its tensors live on the host CPU, or it offers CUDA's or ROCm's programming interface).
BEHAVES_AS: tuple[PlatformEnum, ...] = (PlatformEnum.CPU, PlatformEnum.CUDA, PlatformEnum.ROCM)

# The hosts' adapters: built from a class that passed the check, with the host's own enums.
_ADAPTERS_MODULES = (
    "cardcage.platforms.hosts.sglang.adapter",
    "cardcage.platforms.hosts.vllm.adapter",
)
# _enum values that leave the identity open: every external class, and a mixin defined before
# the class that sets _enum.
_OPEN = (PlatformEnum.OOT, PlatformEnum.UNSPECIFIED)


def declared_identity(obj: Any) -> PlatformEnum | None:
    """The built-in ``obj`` (a platform class or instance) declares it behaves as, or None."""
    declared = getattr(obj, "behaves_as", None)
    return declared if isinstance(declared, PlatformEnum) else None


def identity_of(obj: Any) -> PlatformEnum:
    """The member the identity predicates of ``obj`` answer for: ``behaves_as``, else ``_enum``."""
    declared = declared_identity(obj)
    if declared is not None:
        return declared
    own: PlatformEnum = obj._enum
    return own


def _owner(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return cls


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _distribution(cls: type) -> str | None:
    """The installed distribution that ships ``cls``'s top-level package, when exactly one does."""
    from importlib.metadata import packages_distributions

    found = packages_distributions().get(cls.__module__.partition(".")[0], [])
    return found[0] if len(found) == 1 else None


def _choices() -> str:
    return ", ".join(f"PlatformEnum.{member.name}" for member in BEHAVES_AS)


def check_identity(cls: type) -> None:
    """Raise ``PlatformIdentityError`` when ``cls``'s ``behaves_as`` cannot hold (module doc)."""
    if cls.__module__ in _ADAPTERS_MODULES:
        return  # built from a class that passed this check; its enums are the host's
    declared = getattr(cls, "behaves_as", None)
    if declared is None:
        return
    own = getattr(cls, "_enum", PlatformEnum.UNSPECIFIED)
    if not isinstance(declared, PlatformEnum) or declared not in BEHAVES_AS:
        if isinstance(declared, enum.Enum) and not isinstance(declared, PlatformEnum):
            what = f"{type(declared).__module__}.{type(declared).__qualname__}.{declared.name}"
            problem = f"is {what}, a member of another enum, not cardcage's PlatformEnum."
        else:
            problem = f"is {declared!r}, which is not a built-in platform a class can behave as."
        fix = (
            f"Declare one of {_choices()} (from cardcage.platforms import PlatformEnum), or "
            "remove behaves_as to keep the out-of-tree identity."
        )
    elif own not in _OPEN and own is not declared:
        problem = (
            f"declares PlatformEnum.{declared.name}, but the class's _enum is "
            f"PlatformEnum.{own.name}: a built-in's identity is its _enum, and the two contradict "
            "each other."
        )
        fix = (
            "Set _enum = PlatformEnum.OOT (every external platform is out of tree) and keep "
            f"behaves_as = PlatformEnum.{declared.name}, or remove behaves_as."
        )
    else:
        return
    from .errors import PlatformIdentityError

    raise PlatformIdentityError(
        platform_class=_qualified(cls),
        owner=_qualified(_owner(cls, "behaves_as")),
        distribution=_distribution(cls),
        problem=problem,
        fix=fix,
    )
