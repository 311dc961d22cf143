"""The built-in Intel XPU platform; device queries go through ``torch.xpu`` when called."""

from __future__ import annotations

from typing import Any

from .device_mixin import DeviceCapability, DeviceMixin, PlatformEnum
from .interface import PlatformCapabilities, SRTPlatform
from .torch_import import require_torch

__all__ = ["XpuDeviceMixin", "XpuSRTPlatform"]


class XpuDeviceMixin(DeviceMixin):
    _enum = PlatformEnum.XPU
    device_name = "xpu"
    device_type = "xpu"

    def get_device_total_memory(self, device_id: int = 0) -> int:
        torch = require_torch("get_device_total_memory()")
        return int(torch.xpu.get_device_properties(device_id).total_memory)

    def get_current_memory_usage(self, device: Any = None) -> float:
        return float(require_torch("get_current_memory_usage()").xpu.max_memory_allocated(device))

    def get_device(self, local_rank: int) -> Any:
        return require_torch("get_device()").device("xpu", local_rank)

    def set_device(self, device: Any) -> None:
        require_torch("set_device()").xpu.set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        return str(require_torch("get_device_name()").xpu.get_device_name(device_id))

    def get_device_uuid(self, device_id: int = 0) -> str:
        return str(require_torch("get_device_uuid()").xpu.get_device_properties(device_id).uuid)

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        return None

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        torch = require_torch("get_available_memory()")
        count = torch.xpu.device_count()
        if count == 0:
            return (0, 0)
        if not 0 <= device_id < count:
            raise ValueError(f"Invalid XPU device_id={device_id}. num_gpus={count}")
        free, total = torch.xpu.mem_get_info(device_id)
        return int(free), int(total)

    def get_torch_distributed_backend_str(self) -> str:
        return "xccl"

    def is_pin_memory_available(self, device: Any = None) -> bool:
        return str(device) != "cpu"

    def empty_cache(self) -> None:
        require_torch("empty_cache()").xpu.empty_cache()

    def synchronize(self) -> None:
        require_torch("synchronize()").xpu.synchronize()

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        """Seed ``random``, numpy, torch and every XPU device (lazily, as torch does)."""
        super().seed_everything(seed)
        if seed is not None:
            require_torch("seed_everything()").xpu.manual_seed_all(seed)


class XpuSRTPlatform(XpuDeviceMixin, SRTPlatform):
    """Intel GPUs: Triton, decode and piecewise graphs."""

    capabilities = PlatformCapabilities(
        supports_triton=True,
        graph_capture=True,
        piecewise_graph=True,
    )
