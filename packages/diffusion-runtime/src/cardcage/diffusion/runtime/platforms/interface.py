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
import pkgutil
from typing import TYPE_CHECKING, Any, ClassVar

from cardcage.platforms.device_mixin import (
    CpuArchEnum,
    DeviceCapability,
    DeviceMixin,
    PlatformEnum,
)
from cardcage.platforms.identity import identity_of
from cardcage.platforms.torch_import import require_torch

if TYPE_CHECKING:
    from collections.abc import Callable

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


_NO_DISTRIBUTED_DEVICE_ID = frozenset(
    {
        PlatformEnum.OOT,
        PlatformEnum.MPS,
        PlatformEnum.MUSA,
        PlatformEnum.NPU,
        PlatformEnum.CPU,
        PlatformEnum.XPU,
    }
)


class AttentionBackendEnum(enum.Enum):
    """The attention implementations a platform may pick in ``get_attn_backend_cls_str()``.

    ``str()`` is the lower-case name (``"torch_sdpa"``), the spelling of server arguments.
    """

    FA2 = enum.auto()
    FA = enum.auto()
    SLIDING_TILE_ATTN = enum.auto()
    TORCH_SDPA = enum.auto()
    TORCH_CUDNN_SDPA = enum.auto()
    DYNAMIC_CUDNN_SDPA = enum.auto()
    SAGE_ATTN = enum.auto()
    SAGE_ATTN_3 = enum.auto()
    SPARGE_ATTN = enum.auto()
    VIDEO_SPARSE_ATTN = enum.auto()
    VIDEO_SPARSE_ATTN_H3 = enum.auto()
    HYBRID_WINDOW_ATTN_H3 = enum.auto()
    SPARSE_VIDEO_GEN_2_ATTN = enum.auto()
    VMOBA_ATTN = enum.auto()
    AITER = enum.auto()
    AITER_SAGE = enum.auto()
    SLA_ATTN = enum.auto()
    SAGE_SLA_ATTN = enum.auto()
    LASER_ATTN = enum.auto()
    BLOCK_SPARSE_ATTN = enum.auto()
    RAIN_FUSION_ATTN = enum.auto()
    SOL_ATTN = enum.auto()
    SUBBLOCK_SPARSE_ATTN = enum.auto()
    CUBE_SPARSE_ATTN = enum.auto()
    FP8_FA_SM120 = enum.auto()
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
        AttentionBackendEnum.VIDEO_SPARSE_ATTN_H3,
        AttentionBackendEnum.HYBRID_WINDOW_ATTN_H3,
        AttentionBackendEnum.SPARSE_VIDEO_GEN_2_ATTN,
        AttentionBackendEnum.VMOBA_ATTN,
        AttentionBackendEnum.SLA_ATTN,
        AttentionBackendEnum.SAGE_SLA_ATTN,
        AttentionBackendEnum.SPARGE_ATTN,
        AttentionBackendEnum.LASER_ATTN,
        AttentionBackendEnum.BLOCK_SPARSE_ATTN,
        AttentionBackendEnum.RAIN_FUSION_ATTN,
        AttentionBackendEnum.SOL_ATTN,
        AttentionBackendEnum.SUBBLOCK_SPARSE_ATTN,
        AttentionBackendEnum.CUBE_SPARSE_ATTN,
    }
)


def _oot_missing(what: str) -> NotImplementedError:
    return NotImplementedError(f"Out-of-tree diffusion platforms must implement {what}")


class Platform(DeviceMixin):
    """Base class of every diffusion platform, with the seed's defaults."""

    dispatch_key: str = ""  # the PyTorch dispatcher key, e.g. "CUDA" or "PrivateUse1"
    #: Kept because SGLang's base has it: nothing in either runtime reads it.
    device: Any = None
    simple_compile_backend: str = "inductor"
    supported_quantization: tuple[str, ...] = ()
    #: SGLang 0.5.23's counterpart of this base: what ``cardcage.platforms.hosts.sglang.adapter``
    #: subclasses when SGLang hosts the platform (DESIGN §8). Not for vendors to change.
    sglang_base_class: ClassVar[str] = "sglang.multimodal_gen.runtime.platforms.interface:Platform"

    # -- lifecycle ----------------------------------------------------------------------------
    def init_backend(self) -> None:
        """One-time backend set-up per worker (custom-op forwards go here); raising aborts."""

    def install_kernels(self) -> None:
        """Install the kernels this platform's class declares (its ``kernels`` mapping, op name
        to dotted path: ``cardcage.platforms.kernels``) into the diffusion ops.

        The runtime calls it right after ``init_backend()`` (cardcage's in
        ``initialize_current_platform()``, SGLang's through cardcage's adapter): a vendor
        declares kernels and never calls this.
        """
        from cardcage.diffusion.runtime.layers.kernels import install_for

        install_for(self)

    @classmethod
    def kernel_targets(cls, op: str) -> list[dict[str, str]]:
        """Where a kernel this class declares for ``op`` runs: each runtime's diffusion op class
        and mechanism, per range of releases (data; ``cardcage hooks`` and ``doctor`` list it)."""
        from cardcage.diffusion.runtime.layers.kernels import kernel_targets

        return kernel_targets(op)

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

    # -- identity and capabilities ------------------------------------------------------------
    # The predicates say what the platform *is* (its ``behaves_as``, else its ``_enum``), never
    # what torch can see.
    @classmethod
    def is_cuda_static(cls) -> bool:
        """``is_cuda()`` without an instance."""
        return identity_of(cls) is PlatformEnum.CUDA

    @classmethod
    def is_rocm_static(cls) -> bool:
        """``is_rocm()`` without an instance."""
        return identity_of(cls) is PlatformEnum.ROCM

    def is_hip(self) -> bool:
        """Another spelling of ``is_rocm()``."""
        return self.is_rocm()

    def is_hpu(self) -> bool:
        """False: no platform of this runtime is an HPU (``PlatformEnum`` has no such member)."""
        return False

    def is_device_type(self, device_type: str | None) -> bool:
        """Whether ``device_type`` (``torch.device.type``) is this platform's ``device_type``."""
        return device_type == self.device_type

    @classmethod
    def _cuda_capability(cls) -> tuple[int, int] | None:
        if identity_of(cls) is not PlatformEnum.CUDA:
            return None
        major, minor = require_torch("the CUDA architecture checks").cuda.get_device_capability()
        return int(major), int(minor)

    @classmethod
    def is_blackwell(cls) -> bool:
        """The built-in CUDA platform on a compute capability 10.x device (current device)."""
        capability = cls._cuda_capability()
        return capability is not None and capability[0] == 10

    @classmethod
    def is_hopper(cls) -> bool:
        """The built-in CUDA platform on a compute capability 9.0 device (current device)."""
        return cls._cuda_capability() == (9, 0)

    @classmethod
    def is_sm120(cls) -> bool:
        """The built-in CUDA platform on a compute capability 12.x device (current device)."""
        capability = cls._cuda_capability()
        return capability is not None and capability[0] == 12

    @classmethod
    def is_gfx1151(cls) -> bool:
        """The built-in ROCm platform on a gfx1151 (Strix Halo) GPU; False everywhere else."""
        return False

    @classmethod
    def is_amp_supported(cls) -> bool:
        """Whether ``torch.autocast`` works on the device."""
        return True

    @classmethod
    def is_float64_supported(cls) -> bool:
        """Whether the device computes in float64."""
        return True

    # -- quantisation ops ---------------------------------------------------------------------
    @classmethod
    def get_modelopt_fp4_quantize_op(cls) -> Callable[..., Any] | None:
        """The function that quantizes activations to ModelOpt NVFP4; None: not on this
        device (the runtime then does not run NVFP4 checkpoints' quantized path)."""
        return None

    @classmethod
    def get_modelopt_fp4_gemm_op(cls) -> tuple[Callable[..., Any] | None, str | None]:
        """``(gemm, backend)``: the NVFP4 matrix multiply and the backend name to pass it;
        ``(None, None)``: none on this device."""
        return None, None

    @classmethod
    def get_modelopt_flashinfer_fp4_backend(cls) -> str:
        """The FlashInfer FP4 GEMM backend to request; ``"auto"`` lets FlashInfer choose."""
        return "auto"

    # -- devices ------------------------------------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        if self.is_out_of_tree():
            raise _oot_missing("get_device()")
        return require_torch("get_device()").device(self.device_type, local_rank)

    def get_local_torch_device(self) -> Any:
        """The device of this worker (``LOCAL_RANK``)."""
        raise _oot_missing("get_local_torch_device()")

    def set_device(self, device: Any) -> None:
        """Make ``device`` current through torch's module for its type
        (``torch.get_device_module(device)``, a registered PrivateUse1 module included)."""
        require_torch("set_device()").get_device_module(device).set_device(device)

    def tensor_on_device(self, t: Any) -> bool:
        """Whether tensor ``t`` lives on this platform's kind of device."""
        return self.is_device_type(t.device.type)

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
        """Whether ``init_process_group`` may be given ``device_id=``: not for out-of-tree
        platforms (override it when the backend binds a group to a device), MPS, MUSA, NPU, CPU
        or XPU."""
        return self._enum not in _NO_DISTRIBUTED_DEVICE_ID

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
    def get_attn_backend_cls_str(
        self, selected_backend: AttentionBackendEnum | None, head_size: int, dtype: Any
    ) -> str:
        """Qualified name of the attention backend class for ``selected_backend`` (None: the
        user chose none), ``head_size`` and ``dtype``; "" lets the runtime choose."""
        return ""

    def get_attn_backend(self, *args: Any, **kwargs: Any) -> Any:
        """The class ``get_attn_backend_cls_str(*args, **kwargs)`` names, imported.

        ``ValueError`` when the answer is "" (the runtime chooses: there is no class to import).
        """
        qualname = self.get_attn_backend_cls_str(*args, **kwargs)
        if not qualname:
            raise ValueError(
                f"{type(self).__qualname__}.get_attn_backend_cls_str() answered '' (the runtime "
                "chooses the attention backend), so there is no class to import"
            )
        return pkgutil.resolve_name(qualname)

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
