"""The built-in CUDA platform. Every device query imports torch when called, never at import."""

from __future__ import annotations

from typing import Any

from ._torch import require_torch
from .device_mixin import DeviceCapability, DeviceMixin, PlatformEnum
from .interface import SRTPlatform

__all__ = ["CudaDeviceMixin", "CudaSRTPlatform"]


class CudaDeviceMixin(DeviceMixin):
    _enum = PlatformEnum.CUDA
    device_name = "cuda"
    device_type = "cuda"

    def get_device_total_memory(self, device_id: int = 0) -> int:
        torch = require_torch("get_device_total_memory()")
        return int(torch.cuda.get_device_properties(device_id).total_memory)

    def get_current_memory_usage(self, device: Any = None) -> float:
        torch = require_torch("get_current_memory_usage()")
        return float(torch.cuda.max_memory_allocated(device))

    def get_device(self, local_rank: int) -> Any:
        return require_torch("get_device()").device("cuda", local_rank)

    def set_device(self, device: Any) -> None:
        require_torch("set_device()").cuda.set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        return str(require_torch("get_device_name()").cuda.get_device_name(device_id))

    def get_device_uuid(self, device_id: int = 0) -> str:
        props = require_torch("get_device_uuid()").cuda.get_device_properties(device_id)
        return str(getattr(props, "uuid", device_id))

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        major, minor = require_torch("get_device_capability()").cuda.get_device_capability(
            device_id
        )
        return DeviceCapability(int(major), int(minor))

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        free, total = require_torch("get_available_memory()").cuda.mem_get_info(device_id)
        return int(free), int(total)

    def get_torch_distributed_backend_str(self) -> str:
        return "nccl"

    def empty_cache(self) -> None:
        require_torch("empty_cache()").cuda.empty_cache()

    def synchronize(self) -> None:
        require_torch("synchronize()").cuda.synchronize()

    def is_pin_memory_available(self, device: Any = None) -> bool:
        return str(device) != "cpu"

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        super().seed_everything(seed)
        if seed is not None:
            torch = require_torch("seed_everything()")
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)


class CudaSRTPlatform(CudaDeviceMixin, SRTPlatform):
    """NVIDIA GPUs: CUDA graphs, piecewise graphs and fp8."""

    def supports_fp8(self) -> bool:
        return True

    def support_cuda_graph(self) -> bool:
        return True

    def support_piecewise_cuda_graph(self) -> bool:
        return True
