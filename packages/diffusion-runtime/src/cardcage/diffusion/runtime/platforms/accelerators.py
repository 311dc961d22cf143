"""The built-in XPU, MPS, NPU and MUSA platforms; every device query imports torch when called."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.torch_import import require_torch
from cardcage.platforms.xpu import XpuDeviceMixin

from .interface import Platform

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["MpsPlatform", "MusaPlatform", "NpuPlatform", "XpuPlatform"]


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


class _TorchDeviceModule(Platform):
    """Device operations through ``torch.<device_type>`` (npu and musa register theirs)."""

    def _module(self, operation: str) -> Any:
        torch = require_torch(operation)
        return getattr(torch, self.device_type)

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device(self.device_type, _local_rank())

    def set_device(self, device: Any) -> None:
        self._module("set_device()").set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        return str(self._module("get_device_name()").get_device_name(device_id))

    def empty_cache(self) -> None:
        self._module("empty_cache()").empty_cache()

    def synchronize(self) -> None:
        self._module("synchronize()").synchronize()


class XpuPlatform(XpuDeviceMixin, Platform):
    dispatch_key = "XPU"

    def get_dispatch_key_name(self) -> str:
        return "xpu"

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("xpu", _local_rank())


class MpsPlatform(Platform):
    _enum = PlatformEnum.MPS
    device_name = "mps"
    device_type = "mps"
    dispatch_key = "MPS"

    def get_device(self, local_rank: int) -> Any:
        return require_torch("get_device()").device("mps")

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("mps")

    def set_device(self, device: Any) -> None:
        """Nothing to do: there is one MPS device."""

    def get_device_name(self, device_id: int = 0) -> str:
        return "Apple MPS"

    def empty_cache(self) -> None:
        require_torch("empty_cache()").mps.empty_cache()

    def synchronize(self) -> None:
        require_torch("synchronize()").mps.synchronize()

    def device_shares_host_memory(self) -> bool:
        return True

    @classmethod
    def is_amp_supported(cls) -> bool:
        return False

    @classmethod
    def is_float64_supported(cls) -> bool:
        return False


class NpuPlatform(_TorchDeviceModule):
    _enum = PlatformEnum.NPU
    device_name = "npu"
    device_type = "npu"
    dispatch_key = "PrivateUse1"

    def get_dispatch_key_name(self) -> str:
        return "npu"

    @classmethod
    def is_float64_supported(cls) -> bool:
        return False

    @classmethod
    def inference_mode(cls) -> AbstractContextManager[Any]:
        """``torch.no_grad()``: torch_npu does not support ``torch.inference_mode``."""
        return require_torch("inference_mode()").no_grad()  # type: ignore[no-any-return]


class MusaPlatform(_TorchDeviceModule):
    _enum = PlatformEnum.MUSA
    device_name = "musa"
    device_type = "musa"
    dispatch_key = "PrivateUse1"

    def get_dispatch_key_name(self) -> str:
        return "musa"

    @classmethod
    def is_float64_supported(cls) -> bool:
        return False
