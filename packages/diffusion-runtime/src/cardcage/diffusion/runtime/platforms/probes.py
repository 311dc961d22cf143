"""Fork-safe hardware probes for the diffusion built-ins.

Each probe looks for the driver or vendor library first and imports torch only when it is there:
NVML-based CUDA availability (from ``cardcage.platforms.probes``) never initialises the device
runtime, so a launcher can probe and still fork workers.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cardcage.platforms.probes import cuda_available, rocm_available, xpu_available

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_PROBES", "DiffusionProbes"]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _is_macos() -> bool:
    return sys.platform == "darwin"


def mps_available() -> bool:
    """macOS with a torch that has the MPS backend."""
    if not _is_macos() or not _has_module("torch"):
        return False
    try:
        import torch

        return bool(torch.backends.mps.is_available())
    except Exception:
        return False


def _vendor_torch_available(vendor_module: str, device_type: str) -> bool:
    if not (_has_module(vendor_module) and _has_module("torch")):
        return False
    try:
        importlib.import_module(vendor_module)
        import torch

        device = getattr(torch, device_type, None)
        return bool(device is not None and device.is_available())
    except Exception:
        return False


def npu_available() -> bool:
    """``torch_npu`` installed and reporting a device."""
    return _vendor_torch_available("torch_npu", "npu")


def musa_available() -> bool:
    """``torch_musa`` installed and reporting a device."""
    return _vendor_torch_available("torch_musa", "musa")


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class DiffusionProbes:
    """One zero-argument callable per built-in diffusion platform (immutable)."""

    mps: Callable[[], bool] = mps_available
    xpu: Callable[[], bool] = xpu_available
    rocm: Callable[[], bool] = rocm_available
    cuda: Callable[[], bool] = cuda_available
    npu: Callable[[], bool] = npu_available
    musa: Callable[[], bool] = musa_available
    cpu: Callable[[], bool] = _always


DEFAULT_PROBES = DiffusionProbes()
