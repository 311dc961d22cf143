"""The built-in ROCm platform: CUDA's device API (torch.cuda on HIP) with its own identity.

Its capabilities are CUDA's, as SGLang 0.5.23 declares them for ROCm.
"""

from __future__ import annotations

from .cuda import CudaDeviceMixin
from .device_mixin import PlatformEnum
from .interface import PlatformCapabilities, SRTPlatform

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
    """AMD GPUs through ROCm/HIP: Triton, decode and piecewise graphs, HiCache kernels, PyNccl
    (RCCL)."""

    capabilities = PlatformCapabilities(
        supports_triton=True,
        graph_capture=True,
        piecewise_graph=True,
        hicache_device_kernels=True,
        supports_pynccl=True,
    )
