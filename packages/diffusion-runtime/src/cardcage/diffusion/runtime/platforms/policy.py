"""The diffusion runtime's selection policy: the seed's diffusion chain, as data for the engine.

Automatic mode activates every platform entry point, then probes the built-ins in order MPS, XPU,
ROCm, CUDA, NPU, MUSA, CPU (CPU always matches). ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE`` accepts
the aliases ``cpu``, ``cuda``, ``rocm``, ``mps``, ``npu`` and ``musa`` and selects them without
probing; ``xpu`` is detected automatically only, never by the override.
"""

from __future__ import annotations

from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage.platforms.selection import BuiltinPlatform, SelectionPolicy

from .interface import Platform
from .probes import DEFAULT_PROBES, DiffusionProbes

__all__ = ["BUILTIN_PLATFORM_NAMES", "diffusion_policy"]

_PKG = "cardcage.diffusion.runtime.platforms"

BUILTIN_PLATFORM_NAMES = frozenset({"mps", "xpu", "rocm", "cuda", "npu", "musa", "cpu"})


def diffusion_policy(probes: DiffusionProbes = DEFAULT_PROBES) -> SelectionPolicy:
    """The diffusion selection policy, with injectable hardware probes."""
    return SelectionPolicy(
        profile=DIFFUSION_PROFILE,
        base_class=Platform,
        builtins=(
            BuiltinPlatform(
                "mps", f"{_PKG}.accelerators:MpsPlatform", probes.mps, requirement="macOS with MPS"
            ),
            BuiltinPlatform(
                "xpu",
                f"{_PKG}.accelerators:XpuPlatform",
                probes.xpu,
                explicit_allowed=False,
                requirement="an Intel GPU and torch with XPU support",
            ),
            BuiltinPlatform(
                "rocm",
                f"{_PKG}.cuda:RocmPlatform",
                probes.rocm,
                requirement="/dev/kfd and a ROCm build of torch",
            ),
            BuiltinPlatform(
                "cuda",
                f"{_PKG}.cuda:CudaPlatform",
                probes.cuda,
                requirement="an NVIDIA driver and a CUDA build of torch",
            ),
            BuiltinPlatform(
                "npu",
                f"{_PKG}.accelerators:NpuPlatform",
                probes.npu,
                requirement="torch_npu and an Ascend NPU",
            ),
            BuiltinPlatform(
                "musa",
                f"{_PKG}.accelerators:MusaPlatform",
                probes.musa,
                requirement="torch_musa and a Moore Threads GPU",
            ),
            BuiltinPlatform("cpu", f"{_PKG}.cpu:CpuPlatform", probes.cpu, requirement="nothing"),
        ),
        default_qualname=None,
        allowlist_filters_automatic=False,
    )
