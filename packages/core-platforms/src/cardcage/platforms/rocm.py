"""The built-in ROCm platform: CUDA's device API (torch.cuda on HIP) with its own identity.

Its capability flags stay False, as in SGLang: they are consulted only for out-of-tree
platforms, and claiming graph support on AMD here would change nothing but mislead readers.
"""

from __future__ import annotations

from .cuda import CudaDeviceMixin
from .device_mixin import PlatformEnum
from .interface import SRTPlatform

__all__ = ["RocmDeviceMixin", "RocmSRTPlatform"]


class RocmDeviceMixin(CudaDeviceMixin):
    _enum = PlatformEnum.ROCM
    device_name = "rocm"
    device_type = "cuda"  # torch exposes HIP devices as "cuda"

    def get_torch_distributed_backend_str(self) -> str:
        return "nccl"  # RCCL answers to the nccl backend name

    def get_dispatch_key_name(self) -> str:
        return "hip"


class RocmSRTPlatform(RocmDeviceMixin, SRTPlatform):
    """AMD GPUs through ROCm/HIP."""

    def supports_fp8(self) -> bool:
        return False

    def support_cuda_graph(self) -> bool:
        return False

    def support_piecewise_cuda_graph(self) -> bool:
        return False
