"""The built-in CPU platform: always available, the last resort of automatic selection."""

from __future__ import annotations

from typing import Any

from cardcage.platforms.cpu import CpuDeviceMixin
from cardcage.platforms.torch_import import require_torch

from .interface import Platform

__all__ = ["CpuPlatform"]


class CpuPlatform(CpuDeviceMixin, Platform):
    """CPU execution on torch; memory queries read the OS, torch is imported when needed."""

    device_name = "cpu"
    device_type = "cpu"
    dispatch_key = "CPU"

    def get_device(self, local_rank: int) -> Any:
        return require_torch("CpuPlatform.get_device()").device("cpu")

    def get_local_torch_device(self) -> Any:
        return require_torch("CpuPlatform.get_local_torch_device()").device("cpu")

    def get_available_gpu_memory(
        self,
        device_id: int | None = None,
        distributed: bool = False,
        empty_cache: bool = True,
        cpu_group: Any = None,
    ) -> float:
        return super().get_available_gpu_memory(0, distributed, empty_cache, cpu_group)

    def enable_dit_layerwise_offload_by_default(self) -> bool:
        return False

    def device_shares_host_memory(self) -> bool:
        return True
