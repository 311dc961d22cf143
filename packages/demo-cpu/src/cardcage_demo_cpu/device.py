"""The demo_cpu device: the host CPU seen as an out-of-tree device.

A device mixin is the part of a platform that talks to hardware. This one reuses the built-in
CPU mixin of cardcage-core-platforms (memory from ``sysconf`` and ``/proc``, torch only for
torch-facing operations) and changes what an out-of-tree device must change:

* identity: ``_enum = PlatformEnum.OOT``, ``device_name`` (the platform's name) and
  ``device_type`` (the torch device type its tensors live on);
* ``get_device_total_memory`` also honours the container's cgroup memory limit, because that,
  not the host's RAM, is what a worker can allocate.

Every method of the seed's device table is spelled out below, even where it only delegates, so a
vendor sees what to replace: [Active] methods are called by the runtime through
``current_platform`` today; [Planned] ones are reserved, implement them so the runtime can move
to them without a new release of your plugin.

Import-safe: stdlib and cardcage only; torch is imported inside the methods that need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cardcage.platforms.cpu import CpuDeviceMixin
from cardcage.platforms.device_mixin import DeviceCapability, PlatformEnum

from .evidence import EVIDENCE

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["DemoCpuDeviceMixin", "cgroup_memory_limit"]

# cgroup v2 first, then v1. v1 reports "no limit" as a huge page-rounded number.
_CGROUP_LIMIT_FILES = (
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
)
_NO_LIMIT_ABOVE = 1 << 60


def cgroup_memory_limit(files: tuple[str, ...] = _CGROUP_LIMIT_FILES) -> int | None:
    """The memory limit of this process's cgroup in bytes, or None when there is none."""
    for path in files:
        try:
            with open(path, encoding="ascii") as handle:
                raw = handle.read().strip()
        except OSError:
            continue
        if raw == "max":
            return None
        try:
            limit = int(raw)
        except ValueError:
            continue
        return limit if 0 < limit < _NO_LIMIT_ABOVE else None
    return None


class DemoCpuDeviceMixin(CpuDeviceMixin):
    """The host CPU as an out-of-tree device."""

    # -- identity: what selection validates for every external platform ----------------------
    _enum = PlatformEnum.OOT  # required: external platforms are OOT, never CPU/CUDA/...
    device_name = "demo_cpu"  # your platform's name: logs, `cardcage platform`, is_* checks
    device_type = "cpu"  # the torch device type your tensors live on ("cuda", "npu", ...)

    # -- [Active] called by the runtime today -------------------------------------------------
    def get_device_total_memory(self, device_id: int = 0) -> int:
        """[Active] Bytes the device can hold: physical RAM, capped by the cgroup limit.

        Recorded as ``device_total_memory`` evidence (key: the device id, value: the bytes), so
        a launcher can see which process asked and what it was told.
        """
        physical = super().get_device_total_memory(device_id)
        limit = cgroup_memory_limit()
        total = physical if limit is None else min(physical, limit)
        EVIDENCE.record("device_total_memory", str(device_id), total)
        return total

    def get_current_memory_usage(self, device: Any = None) -> float:
        """[Active] Bytes in use: this process's resident set size."""
        return super().get_current_memory_usage(device)

    def is_pin_memory_available(self, device: Any = None) -> bool:
        """[Active] Pinning host memory only helps host-to-device copies; there are none here."""
        return False

    # -- [Planned] reserved: implement them now ------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        """[Planned] ``torch.device("cpu")`` for every rank (needs the ``torch`` extra)."""
        return super().get_device(local_rank)

    def set_device(self, device: Any) -> None:
        """[Planned] Nothing to select: one CPU device, shared by every rank."""

    def get_device_name(self, device_id: int = 0) -> str:
        """[Planned] e.g. ``demo_cpu (x86_64: x86_64)``."""
        return f"{self.device_name} {super().get_device_name(device_id).removeprefix('cpu ')}"

    def get_device_uuid(self, device_id: int = 0) -> str:
        """[Planned] A stable identifier; the CPU has none better than its architecture."""
        return super().get_device_uuid(device_id)

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """[Planned] None: compute capability is a GPU notion."""
        return None

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        """[Planned] ``(free, total)``: MemAvailable, capped by the total above."""
        free, _ = super().get_available_memory(device_id)
        total = self.get_device_total_memory(device_id)
        return min(free, total), total

    def get_torch_distributed_backend_str(self) -> str:
        """[Planned] gloo: torch.distributed's CPU backend."""
        return "gloo"

    def empty_cache(self) -> None:
        """[Planned] Run the garbage collector: the CPU allocator keeps no cache of its own."""
        super().empty_cache()

    def synchronize(self) -> None:
        """[Planned] CPU work is synchronous: nothing to wait for."""

    def get_communicator_class(self) -> type | None:
        """[Planned] None: the runtime's default communicator over gloo."""
        return None

    @classmethod
    def inference_mode(cls) -> AbstractContextManager[Any]:
        """[Planned] ``torch.inference_mode(True)`` (needs the ``torch`` extra)."""
        return super().inference_mode()
