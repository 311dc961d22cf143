"""The built-in CUDA platform. Every device query imports torch when called, never at import."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _contract
from .device_mixin import DeviceCapability, DeviceMixin, PlatformEnum
from .interface import PlatformCapabilities, SRTPlatform
from .torch_import import require_torch

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["CudaDeviceMixin", "CudaSRTPlatform"]

logger = logging.getLogger(__name__)


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

    @contextmanager
    def reindex_device_id(self, device_id: int) -> Iterator[int]:
        """Within the block, ``CUDA_VISIBLE_DEVICES`` shows only physical device ``device_id``
        (counted in the current ``CUDA_VISIBLE_DEVICES`` when it is set), which becomes logical
        device 0; the variable is restored afterwards, also when the block raises. Warns when
        ``CUDA_DEVICE_ORDER`` is not ``PCI_BUS_ID``, since the ids then depend on CUDA's order.
        """
        if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            logger.warning(
                "CUDA_DEVICE_ORDER is not PCI_BUS_ID, so device ids follow CUDA's own order; "
                "set CUDA_DEVICE_ORDER=PCI_BUS_ID to make them stable."
            )
        original = os.environ.get("CUDA_VISIBLE_DEVICES")
        visible = [d for d in original.split(",") if d.strip()] if original else []
        if visible and not 0 <= device_id < len(visible):
            raise IndexError(
                f"reindex_device_id({device_id}): CUDA_VISIBLE_DEVICES={original!r} lists "
                f"{len(visible)} device(s); ask for one of 0..{len(visible) - 1}."
            )
        chosen = visible[device_id].strip() if visible else str(device_id)
        os.environ["CUDA_VISIBLE_DEVICES"] = chosen
        logger.debug("CUDA_VISIBLE_DEVICES=%s for device %d", chosen, device_id)
        try:
            yield 0
        finally:
            if original is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = original

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        """Seed ``random``, numpy, torch and every CUDA device (torch seeds the devices lazily,
        so this works before CUDA is initialised and on a machine without a GPU)."""
        super().seed_everything(seed)
        if seed is not None:
            require_torch("seed_everything()").cuda.manual_seed_all(seed)


class CudaSRTPlatform(CudaDeviceMixin, SRTPlatform):
    """NVIDIA GPUs: Triton, decode and piecewise graphs, HiCache kernels and PyNccl."""

    capabilities = PlatformCapabilities(
        supports_triton=True,
        graph_capture=True,
        piecewise_graph=True,
        hicache_device_kernels=True,
        supports_pynccl=True,
    )

    def supports_fp8(self) -> bool:
        """Deprecated, with no successor in SGLang 0.5.23; True here, the seed's answer."""
        _contract.warn_deprecated_call(type(self), "supports_fp8")
        return True
