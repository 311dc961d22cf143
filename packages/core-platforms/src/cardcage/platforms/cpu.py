"""The built-in CPU platform: memory from the OS, torch only for torch-facing operations.

Selected by ``SGLANG_USE_CPU_ENGINE=1`` (or ``SGLANG_PLATFORM=cpu``). Memory queries read
``/proc`` and ``sysconf`` directly, so they work without torch; ``get_device`` and
``inference_mode`` need the ``torch`` extra.
"""

from __future__ import annotations

import gc
import os
import platform as _platform
import sys
from typing import Any

from .device_mixin import DeviceCapability, DeviceMixin, PlatformEnum
from .interface import PlatformCapabilities, SRTPlatform
from .torch_import import require_torch

__all__ = ["CpuDeviceMixin", "CpuSRTPlatform"]


def _meminfo_bytes(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class CpuDeviceMixin(DeviceMixin):
    _enum = PlatformEnum.CPU
    device_name = "cpu"
    device_type = "cpu"

    def get_device_total_memory(self, device_id: int = 0) -> int:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    def get_current_memory_usage(self, device: Any = None) -> float:
        """Resident set size of this process, in bytes."""
        try:
            with open("/proc/self/statm", encoding="ascii") as handle:
                resident_pages = int(handle.read().split()[1])
            return float(resident_pages * os.sysconf("SC_PAGE_SIZE"))
        except OSError:
            import resource  # an extension module: loaded only where /proc is missing

            # ru_maxrss is a peak, in KiB on Linux and bytes on macOS; good enough as a fallback.
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return float(peak if _platform.system() == "Darwin" else peak * 1024)

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        total = self.get_device_total_memory(device_id)
        available = _meminfo_bytes("MemAvailable")
        if available is None:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return available, total

    def get_device(self, local_rank: int) -> Any:
        return require_torch("CpuSRTPlatform.get_device()").device("cpu")

    def set_device(self, device: Any) -> None:
        """Nothing to do: there is one CPU device, and torch's default device stays as it is."""

    def get_device_name(self, device_id: int = 0) -> str:
        machine = _platform.machine()
        processor = _platform.processor() or machine
        return f"cpu ({machine}: {processor})" if machine else f"cpu ({processor})"

    def get_device_uuid(self, device_id: int = 0) -> str:
        return _platform.machine() or "cpu"

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        return None

    def empty_cache(self) -> None:
        gc.collect()

    def synchronize(self) -> None:
        """``torch.cpu.synchronize()`` when this process has imported torch (CPU work is
        synchronous, so it returns at once); nothing to wait for otherwise."""
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.cpu.synchronize()

    def get_torch_distributed_backend_str(self) -> str:
        return "gloo"

    def is_pin_memory_available(self, device: Any = None) -> bool:
        return False


class CpuSRTPlatform(CpuDeviceMixin, SRTPlatform):
    """CPU execution: graphs (the runtime's CPU graph runner compiles instead of capturing), no
    Triton, no pinned memory."""

    capabilities = PlatformCapabilities(graph_capture=True)

    def get_default_attention_backend(self) -> str:
        return "torch_native"
