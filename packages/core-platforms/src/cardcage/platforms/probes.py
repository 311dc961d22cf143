"""Hardware probes for the built-in fallback chain: cheap, fork-safe and injectable.

A probe answers "could this built-in platform run here?" without creating a device context (a
CUDA context in the parent breaks every forked worker) and without importing torch unless the
kernel shows the matching driver: on a machine with no accelerator, selecting a platform costs a
few ``stat`` calls. Tests and embedders pass their own ``HardwareProbes`` to exercise any chain
on any machine.

``HardwareProbes`` is a plain class with ``__slots__`` that writes out its comparison, hash and
``repr``, not a dataclass: it is defined inside the start-up window that
``benchmarks/bench_platforms.py`` budgets (docs/reference/records.md says what it keeps).
"""

from __future__ import annotations

import importlib.util
import os
import platform as _platform
from typing import TYPE_CHECKING

from .envs import SGLANG_USE_CPU_ENGINE

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

__all__ = ["DEFAULT_PROBES", "HardwareProbes"]

_CPU_ENGINE_ARCHES = frozenset({"x86_64", "amd64", "i386", "i686", "arm64", "aarch64"})
_INTEL_VENDOR = "0x8086"
_DRM = "/sys/class/drm"


def _torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def _nvidia_driver_present() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _amd_driver_present() -> bool:
    return os.path.exists("/dev/kfd")


def _intel_gpu_present() -> bool:
    # glob("/sys/class/drm/renderD*/device/vendor") without importing glob and fnmatch.
    try:
        nodes = [name for name in os.listdir(_DRM) if name.startswith("renderD")]
    except OSError:
        return False
    for node in nodes:
        vendor_file = os.path.join(_DRM, node, "device", "vendor")
        try:
            with open(vendor_file, encoding="ascii") as handle:
                if handle.read().strip().lower() == _INTEL_VENDOR:
                    return True
        except OSError:
            continue
    return False


def _torch_cuda(expect_hip: bool) -> bool:
    import torch

    # NVML-based availability does not initialise the CUDA runtime, so forking stays safe.
    previous = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        available = bool(torch.cuda.is_available())
    finally:
        if previous is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = previous
    is_hip = getattr(torch.version, "hip", None) is not None
    return available and is_hip == expect_hip


def cpu_engine_requested() -> bool:
    """``SGLANG_USE_CPU_ENGINE`` is true and the host is x86 or ARM."""
    return SGLANG_USE_CPU_ENGINE.get() and _platform.machine().lower() in _CPU_ENGINE_ARCHES


def cuda_available() -> bool:
    return _nvidia_driver_present() and _torch_installed() and _torch_cuda(expect_hip=False)


def rocm_available() -> bool:
    return _amd_driver_present() and _torch_installed() and _torch_cuda(expect_hip=True)


def xpu_available() -> bool:
    if not (_intel_gpu_present() and _torch_installed()):
        return False
    import torch

    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and xpu.is_available())


class HardwareProbes:
    """One zero-argument callable per built-in platform of the SRT fallback chain (immutable)."""

    __match_args__ = ("cpu_engine_requested", "cuda", "rocm", "xpu")
    __slots__ = __match_args__

    cpu_engine_requested: Callable[[], bool]
    cuda: Callable[[], bool]
    rocm: Callable[[], bool]
    xpu: Callable[[], bool]

    def __init__(
        self,
        cpu_engine_requested: Callable[[], bool] = cpu_engine_requested,
        cuda: Callable[[], bool] = cuda_available,
        rocm: Callable[[], bool] = rocm_available,
        xpu: Callable[[], bool] = xpu_available,
    ) -> None:
        init = object.__setattr__
        init(self, "cpu_engine_requested", cpu_engine_requested)
        init(self, "cuda", cuda)
        init(self, "rocm", rocm)
        init(self, "xpu", xpu)

    def _astuple(self) -> tuple[object, ...]:
        return (self.cpu_engine_requested, self.cuda, self.rocm, self.xpu)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())


DEFAULT_PROBES = HardwareProbes()
