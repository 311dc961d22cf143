"""The demo_cuda device: NVIDIA GPUs through torch.cuda, with NVML where forking matters.

A device mixin is the part of a platform that talks to hardware. This one reuses the built-in
CUDA mixin of cardcage-core-platforms (torch.cuda, imported inside each method) and changes what
an out-of-tree device must change:

* identity: ``_enum = PlatformEnum.OOT``, ``device_name`` (the platform's name) and
  ``device_type`` (the torch device type its tensors live on);
* ``get_device_total_memory`` asks NVML first: the runtime calls it in the launcher process
  while parsing server arguments, before workers exist, and NVML creates no CUDA context there
  (torch would, and torch refuses CUDA in a worker forked after that).

Every method of the seed's device table is spelled out below, even where it only delegates, so a
vendor sees what to replace: [Active] methods are called by the runtime through
``current_platform`` today; [Planned] ones are reserved, implement them so the runtime can move
to them without a new release of your plugin.

Import-safe: stdlib and cardcage only; torch is imported inside the methods that need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cardcage.platforms.cuda import CudaDeviceMixin
from cardcage.platforms.device_mixin import DeviceCapability, PlatformEnum

from . import _nvml

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["DemoCudaDeviceMixin"]


class DemoCudaDeviceMixin(CudaDeviceMixin):
    """NVIDIA GPUs as an out-of-tree device."""

    # -- identity: what selection validates for every external platform ----------------------
    _enum = PlatformEnum.OOT  # required: external platforms are OOT, even for CUDA hardware
    device_name = "demo_cuda"  # your platform's name: logs, `cardcage platform`, is_* checks
    device_type = "cuda"  # the torch device type your tensors live on

    # -- [Active] called by the runtime today -------------------------------------------------
    def get_device_total_memory(self, device_id: int = 0) -> int:
        """[Active] Bytes on the GPU: from NVML (no CUDA context), else from torch.cuda."""
        index = _nvml.nvml_index(device_id)
        info = _nvml.memory_info(index) if index is not None else None
        if info is not None:
            return info[1]
        return super().get_device_total_memory(device_id)

    def get_current_memory_usage(self, device: Any = None) -> float:
        """[Active] Peak bytes torch's caching allocator has handed out on ``device``."""
        return super().get_current_memory_usage(device)

    def is_pin_memory_available(self, device: Any = None) -> bool:
        """[Active] Pinned host memory speeds up host-to-GPU copies; always available."""
        return True

    # -- [Planned] reserved: implement them now ------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        """[Planned] ``torch.device("cuda", local_rank)``."""
        return super().get_device(local_rank)

    def set_device(self, device: Any) -> None:
        """[Planned] ``torch.cuda.set_device``."""
        super().set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        """[Planned] The marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
        return super().get_device_name(device_id)

    def get_device_uuid(self, device_id: int = 0) -> str:
        """[Planned] The GPU's UUID, as torch reports it."""
        return super().get_device_uuid(device_id)

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """[Planned] The SM version, e.g. ``DeviceCapability(9, 0)`` on Hopper."""
        return super().get_device_capability(device_id)

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        """[Planned] ``(free, total)`` from ``torch.cuda.mem_get_info``."""
        return super().get_available_memory(device_id)

    def get_torch_distributed_backend_str(self) -> str:
        """[Planned] nccl."""
        return "nccl"

    def empty_cache(self) -> None:
        """[Planned] Return torch's cached blocks to the driver."""
        super().empty_cache()

    def synchronize(self) -> None:
        """[Planned] Wait for the current stream's work."""
        super().synchronize()

    def get_communicator_class(self) -> type | None:
        """[Planned] None: the runtime's default communicator over nccl."""
        return None

    @classmethod
    def inference_mode(cls) -> AbstractContextManager[Any]:
        """[Planned] ``torch.inference_mode(True)``."""
        return super().inference_mode()

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        """[Planned] random, numpy, torch and every GPU's generator."""
        super().seed_everything(seed)
