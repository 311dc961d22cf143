"""Declared identity under vLLM: the built-in's base class and predicates, still out of tree.

A vendor class that declares ``behaves_as`` (``cardcage.platforms.identity``) stays out of tree
(``_enum`` is vLLM's ``PlatformEnum.OOT``, ``is_out_of_tree()`` True), and vLLM's branches that
ask what the platform *is* answer as that built-in's. Under vLLM the declaration does two things:

* **the base class** (``IDENTITY_BASES``): a CPU-like platform's adapter derives from vLLM's
  ``CpuPlatform`` instead of its abstract ``Platform``, so every name the vendor does not
  override answers as vLLM's CPU platform does: ``import_kernels()`` (which loads the kernel
  build this CPU's instruction set runs; the base's imports ``vllm._C``, built for AVX-512, and
  dies with SIGILL on an AVX2-only CPU), ``check_and_update_config()`` (the CPU worker, the
  multiprocessing start method, the KV cache's size), ``get_attn_backend_cls()``, the
  communicator, ``dist_backend``. CUDA-alike and ROCm-like get no built-in base (None): vLLM's
  ``CudaPlatform`` and ``RocmPlatform`` ask NVML and amdsmi about the device, which a vendor's
  device does not answer, and no GPU is at hand to prove otherwise; they get the predicates only.
* **the predicates** (``PREDICATES``): each of vLLM's base predicates that reads ``_enum`` runs,
  as vLLM wrote it, on a view of the base whose ``_enum`` is vLLM's member of the declared name.
  CPU-like: ``is_cpu()`` True, which is what vLLM's GPU-derived worker asks before it reaches for
  the sleep-mode memory pool that only CUDA and XPU have.

The vLLM section may declare ``behaves_as`` itself, for vLLM only (a platform whose SGLang
branches were not audited declares it there); it wins over the platform class's. A predicate or a
name the vendor's classes define stays the vendor's.

Not reached: vLLM code that reads ``current_platform._enum`` itself (vLLM 0.32's quantized linear
kernels are chosen from a table keyed by ``_enum``: an out-of-tree platform gets none).

Importing this module imports neither vLLM nor a vendor class.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

from cardcage.platforms.device_mixin import PlatformEnum

__all__ = ["IDENTITY_BASES", "PREDICATES", "declared_identity", "identity_namespace"]

#: The vLLM class a platform that declares this identity derives from; None: vLLM's ``Platform``.
IDENTITY_BASES: dict[PlatformEnum, str | None] = {
    PlatformEnum.CPU: "vllm.platforms.cpu.CpuPlatform",
    PlatformEnum.CUDA: None,
    PlatformEnum.ROCM: None,
}

#: The predicates of vLLM's ``Platform`` (0.32 to 0.34) that read ``_enum``; a name the base
#: lacks is skipped. ``is_out_of_tree()`` and ``is_unspecified()`` are left out on purpose.
PREDICATES: tuple[str, ...] = (
    "is_cuda",
    "is_rocm",
    "is_tpu",
    "is_xpu",
    "is_cpu",
    "is_cuda_alike",
    "is_sleep_mode_available",
)


def declared_identity(cls: type, section: type | None) -> PlatformEnum | None:
    """The identity vLLM sees: the section's ``behaves_as``, else the class's, else None.

    A section's declaration is checked here, as a class's is when it is defined, and an
    impossible one raises ``PlatformIdentityError`` naming the section.
    """
    from cardcage.platforms.identity import check_identity
    from cardcage.platforms.identity import declared_identity as declared_by

    if section is not None and "behaves_as" in _names(section):
        check_identity(section)
        found = declared_by(section)
        if found is not None:
            return found
    return declared_by(cls)


def _names(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name in vars(klass)}


def _vars_of(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(name)


@functools.cache
def _view(host_base: type, member: enum.Enum) -> type:
    """A subclass of vLLM's ``host_base`` whose ``_enum`` is ``member``; never initialised."""
    return type(f"{host_base.__name__}As{member.name.title()}", (host_base,), {"_enum": member})


def _instance_predicate(host_base: type, member: enum.Enum, name: str) -> Callable[..., bool]:
    probe: list[Any] = []

    def predicate(self: Any) -> bool:
        if not probe:
            probe.append(object.__new__(_view(host_base, member)))
        return bool(getattr(probe[0], name)())

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"{name}() as vLLM's {member.name} platform answers it (behaves_as)."
    return predicate


def _class_predicate(host_base: type, member: enum.Enum, name: str) -> classmethod[Any, Any, bool]:
    def predicate(_owner: type) -> bool:
        return bool(getattr(_view(host_base, member), name)())

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"{name}() as vLLM's {member.name} platform answers it (behaves_as)."
    return classmethod(predicate)


def identity_namespace(
    declared: PlatformEnum | None, host_base: type, host_enum: Any, vendor_names: set[str]
) -> dict[str, Any]:
    """The adapter's predicates for ``declared`` (vLLM's ``host_enum`` member of that name).

    ``vendor_names``: what the vendor's classes and section define; those stay the vendor's.
    Returns {} when nothing is declared.
    """
    if declared is None:
        return {}
    member = host_enum[declared.name]
    namespace: dict[str, Any] = {}
    for name in PREDICATES:
        if name in vendor_names:
            continue
        try:
            raw = _vars_of(host_base, name)
        except AttributeError:
            continue
        if isinstance(raw, classmethod):
            namespace[name] = _class_predicate(host_base, member, name)
        elif callable(raw):
            namespace[name] = _instance_predicate(host_base, member, name)
    return namespace
