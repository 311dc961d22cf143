"""The SRT runtime's selection policy: the seed's chain, expressed as data for the engine.

Automatic mode falls back, in order, to: CPU (only when ``SGLANG_USE_CPU_ENGINE`` is true), CUDA,
ROCm, XPU, then the base ``SRTPlatform``. ``SGLANG_PLATFORM`` also accepts the built-in aliases
``cpu``, ``cuda``, ``rocm`` and ``xpu``; an accelerator alias on a machine without that hardware is
an error, never a silent fallback.
"""

from __future__ import annotations

from cardcage.hooks.profile import SRT_PROFILE

from .interface import SRTPlatform
from .probes import DEFAULT_PROBES, HardwareProbes
from .selection import BuiltinPlatform, SelectionPolicy

__all__ = ["srt_policy"]


def srt_policy(probes: HardwareProbes = DEFAULT_PROBES) -> SelectionPolicy:
    """The SRT selection policy, with injectable hardware probes."""
    return SelectionPolicy(
        profile=SRT_PROFILE,
        base_class=SRTPlatform,
        builtins=(
            BuiltinPlatform(
                "cpu",
                "cardcage.platforms.cpu:CpuSRTPlatform",
                probes.cpu_engine_requested,
                requirement="SGLANG_USE_CPU_ENGINE=1 on an x86 or ARM host",
            ),
            BuiltinPlatform(
                "cuda",
                "cardcage.platforms.cuda:CudaSRTPlatform",
                probes.cuda,
                probes.cuda,
                requirement="an NVIDIA driver and a CUDA build of torch",
            ),
            BuiltinPlatform(
                "rocm",
                "cardcage.platforms.rocm:RocmSRTPlatform",
                probes.rocm,
                probes.rocm,
                requirement="/dev/kfd and a ROCm build of torch",
            ),
            BuiltinPlatform(
                "xpu",
                "cardcage.platforms.xpu:XpuSRTPlatform",
                probes.xpu,
                probes.xpu,
                requirement="an Intel GPU and torch with XPU support",
            ),
        ),
        default_qualname="cardcage.platforms.interface:SRTPlatform",
        allowlist_filters_automatic=True,
    )
