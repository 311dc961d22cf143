"""``Platform``: what the diffusion runtime asks of a hardware platform.

The seed's ``sglang.multimodal_gen.runtime.platforms.interface``. A vendor subclasses it, sets
``_enum = PlatformEnum.OOT``, ``device_name``, ``device_type`` and ``dispatch_key``, and overrides
the methods of the Active contract its hardware needs; the defaults below raise a
``NotImplementedError`` that names what to implement.

``PlatformEnum`` is the enum of ``cardcage.platforms``: the selection engine (shared with the SRT
runtime) checks external platforms against its ``OOT`` member, so both runtimes use one enum.
Device operations come from ``cardcage.platforms.DeviceMixin``.

The communicator hooks answer qualified names (strings) for the same reason: the communicator
classes import torch, and ``cardcage.diffusion.runtime.distributed`` resolves the name in the
worker that builds one.

Import-safe: no torch at module scope.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from cardcage.platforms._torch import require_torch
from cardcage.platforms.device_mixin import (
    CpuArchEnum,
    DeviceCapability,
    DeviceMixin,
    PlatformEnum,
)

__all__ = [
    "BASE_DEVICE_COMMUNICATOR",
    "AttentionBackendEnum",
    "CpuArchEnum",
    "DeviceCapability",
    "Platform",
    "PlatformEnum",
    "UnspecifiedPlatform",
]

_GIB = 1 << 30

_COMMUNICATORS = "cardcage.diffusion.runtime.distributed.device_communicators"
BASE_DEVICE_COMMUNICATOR = f"{_COMMUNICATORS}.base_device_communicator.DeviceCommunicatorBase"
"""The base answer of ``get_device_communicator_cls()``: no device-specific communicator."""

_DEVICE_COMMUNICATORS = {
    PlatformEnum.CPU: f"{_COMMUNICATORS}.cpu_communicator.CpuCommunicator",
    PlatformEnum.CUDA: f"{_COMMUNICATORS}.cuda_communicator.CudaCommunicator",
    PlatformEnum.ROCM: f"{_COMMUNICATORS}.cuda_communicator.CudaCommunicator",
}

_DIST_BACKENDS = {
    PlatformEnum.CUDA: "nccl",
    PlatformEnum.ROCM: "nccl",
    PlatformEnum.MUSA: "mccl",
    PlatformEnum.NPU: "hccl",
    PlatformEnum.XPU: "xccl",
    PlatformEnum.MPS: "gloo",
    PlatformEnum.CPU: "gloo",
}


class AttentionBackendEnum(enum.Enum):
    """The attention implementations a platform may pick in ``get_attn_backend_cls_str()``.

    ``str()`` is the lower-case name (``"torch_sdpa"``), the spelling of server arguments.
    """

    FA2 = enum.auto()
    FA = enum.auto()
    SLIDING_TILE_ATTN = enum.auto()
    TORCH_SDPA = enum.auto()
    SAGE_ATTN = enum.auto()
    SAGE_ATTN_3 = enum.auto()
    VIDEO_SPARSE_ATTN = enum.auto()
    VMOBA_ATTN = enum.auto()
    AITER = enum.auto()
    AMX = enum.auto()
    NO_ATTENTION = enum.auto()

    def __str__(self) -> str:
        return self.name.lower()

    @property
    def is_sparse(self) -> bool:
        """Whether the backend attends to a sparse subset of the key positions."""
        return self in _SPARSE_ATTENTION


_SPARSE_ATTENTION = frozenset(
    {
        AttentionBackendEnum.SLIDING_TILE_ATTN,
        AttentionBackendEnum.VIDEO_SPARSE_ATTN,
        AttentionBackendEnum.VMOBA_ATTN,
    }
)


def _oot_missing(what: str) -> NotImplementedError:
    return NotImplementedError(f"Out-of-tree diffusion platforms must implement {what}")


class Platform(DeviceMixin):
    """Base class of every diffusion platform, with the seed's defaults."""

    dispatch_key: str = ""  # the PyTorch dispatcher key, e.g. "CUDA" or "PrivateUse1"
    simple_compile_backend: str = "inductor"
    supported_quantization: tuple[str, ...] = ()
    #: SGLang 0.5.23's counterpart of this base: what ``cardcage.platforms.sglang_adapters``
    #: subclasses when SGLang hosts the platform (DESIGN §8). Not for vendors to change.
    sglang_base_class: ClassVar[str] = "sglang.multimodal_gen.runtime.platforms.interface:Platform"

    # -- lifecycle ----------------------------------------------------------------------------
    def init_backend(self) -> None:
        """One-time backend set-up per worker (custom-op forwards go here); raising aborts."""

    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Apply defaults before argument normalization and validation."""

    # -- dispatch -----------------------------------------------------------------------------
    def get_dispatch_key_name(self) -> str:
        """Selects ``CustomOp.forward_<key>()``; "native" means the portable path."""
        return "native"

    def get_torch_library_dispatch_key(self) -> str:
        """The key for direct ``torch.library`` registrations."""
        if self.dispatch_key:
            return self.dispatch_key
        if self.is_out_of_tree():
            raise NotImplementedError(
                "Out-of-tree diffusion platforms must define dispatch_key (the PyTorch "
                "dispatcher key of the device, e.g. 'PrivateUse1')"
            )
        return "PrivateUse1" if self._enum is PlatformEnum.NPU else "CUDA"

    # -- devices ------------------------------------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        if self.is_out_of_tree():
            raise _oot_missing("get_device()")
        return require_torch("get_device()").device(self.device_type, local_rank)

    def get_local_torch_device(self) -> Any:
        """The device of this worker (``LOCAL_RANK``)."""
        raise _oot_missing("get_local_torch_device()")

    def get_available_gpu_memory(
        self,
        device_id: int | None = None,
        distributed: bool = False,
        empty_cache: bool = True,
        cpu_group: Any = None,
    ) -> float:
        """Free device memory in GiB (the minimum over ``cpu_group`` when ``distributed``)."""
        if (
            self.is_out_of_tree()
            and type(self).get_available_memory is DeviceMixin.get_available_memory
        ):
            raise _oot_missing("get_available_gpu_memory() or get_available_memory()")
        if empty_cache:
            self.empty_cache()
        free = self.get_available_memory(device_id or 0)[0] / _GIB
        if distributed:
            torch = require_torch("get_available_gpu_memory(distributed=True)")
            value = torch.tensor(free, dtype=torch.float32)
            torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MIN, group=cpu_group)
            free = float(value.item())
        return float(free)

    def get_torch_distributed_backend_str(self) -> str:
        backend = _DIST_BACKENDS.get(self._enum)
        if backend is None:
            raise _oot_missing("get_torch_distributed_backend_str()")
        return backend

    def supports_distributed_device_id(self) -> bool:
        """Whether ``init_process_group`` may be given ``device_id=``."""
        return self._enum in (PlatformEnum.CUDA, PlatformEnum.ROCM)

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        """[Compatibility] Qualified name of this device's communicator class.

        Kept as the fallback ``get_all_to_all_communicator_cls()`` uses, for existing platform
        subclasses; new out-of-tree platforms override ``get_all_to_all_communicator_cls()``.
        CPU -> ``CpuCommunicator``, CUDA/ROCm -> ``CudaCommunicator``, anything else the base.
        """
        return _DEVICE_COMMUNICATORS.get(cls._enum, BASE_DEVICE_COMMUNICATOR)

    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        """Qualified name of the ``DeviceCommunicatorBase`` subclass that runs ``all_to_all_4D``.

        It controls that exchange only (the sequence-parallel all-to-all around attention): the
        other collectives, graph capture and synchronization go to ``torch.distributed``
        directly. The default answers ``get_device_communicator_cls()``; an out-of-tree platform
        whose answer is still the base communicator must override this method.
        """
        qualname = cls.get_device_communicator_cls()
        if cls._enum is PlatformEnum.OOT and qualname == BASE_DEVICE_COMMUNICATOR:
            raise NotImplementedError(
                "Out-of-tree diffusion platforms must implement "
                f"get_all_to_all_communicator_cls(): {cls.__module__}.{cls.__qualname__} names "
                "no all-to-all communicator. Override it to return the qualified name of a "
                f"DeviceCommunicatorBase subclass, e.g. '{_DEVICE_COMMUNICATORS[PlatformEnum.CPU]}'"
                " for a gloo process group."
            )
        return qualname

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """The compute capability; None (the default) where the notion does not apply."""
        return None

    def has_device_capability(self, capability: tuple[int, int] | int, device_id: int = 0) -> bool:
        current = self.get_device_capability(device_id)
        if current is None:
            return False
        if isinstance(capability, tuple):
            return tuple(current) >= capability
        return current.to_int() >= capability

    # -- models and compilation ---------------------------------------------------------------
    def get_attn_backend_cls_str(self, selected_backend: Any, head_size: int, dtype: Any) -> str:
        """Qualified name of the attention backend class; "" lets the runtime choose."""
        return ""

    def verify_model_arch(self, model_arch: str) -> None:
        """Raise if this platform cannot run ``model_arch``; every model is accepted here."""

    def optimize_vae(self, vae: Any) -> Any:
        return vae

    def get_compile_backend(self, mode: str | None = None) -> str:
        return self.simple_compile_backend

    def get_compile_options(self, module: Any) -> dict[str, Any] | None:
        return None

    def enable_dit_layerwise_offload_by_default(self) -> bool:
        return True

    def device_shares_host_memory(self) -> bool:
        return False


class UnspecifiedPlatform(Platform):
    """The placeholder platform: no device, every device operation unavailable."""

    _enum = PlatformEnum.UNSPECIFIED
    device_name = ""
    device_type = ""
