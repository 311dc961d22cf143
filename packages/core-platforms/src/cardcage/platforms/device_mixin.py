"""Device identity and device operations: the part of a platform that talks to hardware.

This is the seed's ``sglang.srt.platforms.device_mixin``. A vendor writes
``MyDeviceMixin(DeviceMixin)`` with ``_enum = PlatformEnum.OOT``, a ``device_name`` and a
``device_type``, and overrides the operations its hardware supports. Methods marked Active are
called by the runtime through ``current_platform``; Planned ones are reserved (the runtime still
calls torch directly), so their defaults only matter to code that opts in.

Import-safe: no torch, numpy or runtime import at module scope; ``seed_everything`` and
``inference_mode`` import what they need when called.
"""

from __future__ import annotations

import enum
import platform as _platform
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

__all__ = ["CpuArchEnum", "DeviceCapability", "DeviceMixin", "PlatformEnum"]


class PlatformEnum(enum.Enum):
    """Which family a platform belongs to; every external platform is ``OOT``.

    The values are ``enum.auto()``'s, written out: auto() costs a call per member at import.
    """

    CUDA = 1
    ROCM = 2
    CPU = 3
    XPU = 4
    MUSA = 5
    NPU = 6
    TPU = 7
    MPS = 8
    OOT = 9
    UNSPECIFIED = 10


class CpuArchEnum(enum.Enum):
    X86 = 1
    ARM = 2
    UNSPECIFIED = 3


_X86 = frozenset({"x86_64", "amd64", "i386", "i686"})
_ARM = frozenset({"arm64", "aarch64"})

#: ``device_type`` -> the torch.distributed backend, SGLang 0.5.23's table; anything else: gloo.
_DISTRIBUTED_BACKENDS = {
    "cuda": "nccl",
    "xpu": "xccl",
    "hpu": "hccl",
    "cpu": "gloo",
    "npu": "hccl",
    "musa": "mccl",
}


class DeviceCapability(NamedTuple):
    """A compute capability such as (9, 0); compares as a tuple: ``cap >= (8, 9)``.

    A ``typing.NamedTuple``, as SGLang's is.
    """

    major: int
    minor: int

    def as_version_str(self) -> str:
        return f"{self.major}.{self.minor}"

    def to_int(self) -> int:
        """``major * 10 + minor``; the encoding only works for a one-digit minor."""
        if not 0 <= self.minor < 10:
            raise ValueError(
                f"DeviceCapability{tuple(self)}: to_int() needs 0 <= minor < 10, got {self.minor}"
            )
        return self.major * 10 + self.minor


class DeviceMixin:
    """Identity predicates and device operations with the seed's defaults.

    All operations are instance methods called through the ``current_platform`` singleton,
    except ``inference_mode``, ``seed_everything`` and ``get_cpu_architecture`` (classmethods).
    """

    _enum: PlatformEnum = PlatformEnum.UNSPECIFIED
    device_name: str = "unknown"
    device_type: str = "cpu"
    #: The built-in platform this one behaves as in the identity predicates (``is_cpu()``,
    #: ``is_cuda()``, ``is_rocm()``, ``is_cuda_alike()``, ...), while ``_enum`` stays ``OOT`` and
    #: ``is_out_of_tree()`` True: ``PlatformEnum.CPU``, ``CUDA`` or ``ROCM``; None (the default)
    #: answers from ``_enum``. Checked when the class is defined (``cardcage.platforms.identity``).
    behaves_as: ClassVar[PlatformEnum | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the declared identity as the class is defined (``PlatformIdentityError``)."""
        super().__init_subclass__(**kwargs)
        if cls.behaves_as is not None:
            from .identity import check_identity

            check_identity(cls)

    def _identity(self) -> PlatformEnum:
        """What the identity predicates answer for: ``behaves_as``, else ``_enum``."""
        declared = self.behaves_as
        return self._enum if declared is None else declared

    # -- identity ---------------------------------------------------------------------------
    def is_cuda(self) -> bool:
        return self._identity() is PlatformEnum.CUDA

    def is_rocm(self) -> bool:
        return self._identity() is PlatformEnum.ROCM

    def is_cpu(self) -> bool:
        return self._identity() is PlatformEnum.CPU

    def is_xpu(self) -> bool:
        return self._identity() is PlatformEnum.XPU

    def is_musa(self) -> bool:
        return self._identity() is PlatformEnum.MUSA

    def is_npu(self) -> bool:
        return self._identity() is PlatformEnum.NPU

    def is_tpu(self) -> bool:
        return self._identity() is PlatformEnum.TPU

    def is_mps(self) -> bool:
        return self._identity() is PlatformEnum.MPS

    def is_cuda_alike(self) -> bool:
        """True for platforms with a CUDA-like API: CUDA, ROCm and MUSA."""
        return self._identity() in (PlatformEnum.CUDA, PlatformEnum.ROCM, PlatformEnum.MUSA)

    def is_out_of_tree(self) -> bool:
        """True for every external platform, whatever built-in it behaves as (``_enum`` only)."""
        return self._enum is PlatformEnum.OOT

    # -- Active device operations -------------------------------------------------------------
    def get_device_total_memory(self, device_id: int = 0) -> int:
        """[Active] Total memory of the device, in bytes."""
        raise NotImplementedError

    def get_current_memory_usage(self, device: Any = None) -> float:
        """[Active] Peak memory in use on the device, in bytes."""
        raise NotImplementedError

    def is_pin_memory_available(self, device: Any = None) -> bool:
        """[Active] Whether pinned host memory can be used with the device."""
        return False

    @contextmanager
    def reindex_device_id(self, device_id: int) -> Iterator[int]:
        """[Active] Within the block, make physical device ``device_id`` the process's logical
        device and give its logical id (``with platform.reindex_device_id(3) as local: ...``).
        Nothing to remap by default: the block gets ``device_id`` back."""
        yield device_id

    # -- Planned device operations ------------------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        """[Planned] The ``torch.device`` for a local rank."""
        raise NotImplementedError

    def set_device(self, device: Any) -> None:
        """[Planned] Make ``device`` the current device."""
        raise NotImplementedError

    def get_device_name(self, device_id: int = 0) -> str:
        """[Planned] A human-readable device name."""
        raise NotImplementedError

    def get_device_uuid(self, device_id: int = 0) -> str:
        """[Planned] A unique identifier of the device."""
        raise NotImplementedError

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """[Planned] The compute capability, or None where the notion does not apply."""
        raise NotImplementedError

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        """[Planned] ``(free_bytes, total_bytes)``."""
        raise NotImplementedError

    def get_torch_distributed_backend_str(self) -> str:
        """[Planned] The torch.distributed backend ("nccl", "gloo", "hccl", ...): looked up
        from ``device_type`` (cuda: nccl, xpu: xccl, hpu and npu: hccl, cpu: gloo, musa: mccl),
        gloo for any other type."""
        return _DISTRIBUTED_BACKENDS.get(self.device_type, "gloo")

    def empty_cache(self) -> None:
        """[Planned] Release cached device memory; nothing to do by default."""

    def synchronize(self) -> None:
        """[Planned] Wait for queued device work; nothing to do by default."""

    def get_communicator_class(self) -> type | None:
        """[Planned] A platform-specific communicator class; None means the default."""
        return None

    def verify_quantization(self, quant: str) -> None:
        """[Planned] Raise if the device cannot run quantization ``quant``; accepts all here."""

    @classmethod
    def inference_mode(cls) -> AbstractContextManager[Any]:
        """[Planned] The context manager model execution runs under."""
        from .torch_import import require_torch

        torch = require_torch("inference_mode()")
        return torch.inference_mode(True)  # type: ignore[no-any-return]

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        """[Planned] Seed ``random`` and, where installed, numpy and torch; None does nothing."""
        if seed is None:
            return
        import importlib.util
        import random

        random.seed(seed)
        if importlib.util.find_spec("numpy") is not None:
            import numpy

            numpy.random.seed(seed)
        if importlib.util.find_spec("torch") is not None:
            import torch

            torch.manual_seed(seed)

    @cached_property
    def cpu_arch(self) -> CpuArchEnum:
        """``get_cpu_architecture()``, asked once per instance."""
        return self.get_cpu_architecture()

    @classmethod
    def get_cpu_architecture(cls) -> CpuArchEnum:
        """[Planned] x86 or ARM, from ``platform.machine()``."""
        machine = _platform.machine().lower()
        if machine in _X86:
            return CpuArchEnum.X86
        if machine in _ARM:
            return CpuArchEnum.ARM
        return CpuArchEnum.UNSPECIFIED

    def get_torch_profiler_activity_str(self) -> str:
        """[Planned] The name of the torch profiler activity for this device ("CUDA", ...)."""
        raise NotImplementedError

    def get_torch_profiler_activity(self) -> Any:
        """[Planned] The ``torch.profiler.ProfilerActivity`` for this device."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device_name})"
