"""The diffusion half of cardcage-demo-cuda: NVIDIA GPUs as an out-of-tree diffusion platform.

SRT and diffusion need separate platform classes and separate entry points. This module is what
the ``sglang.multimodal_gen.platforms`` entry point loads on every diffusion start-up, on every
machine where the distribution is installed, in the launcher, before anything is initialised. So
it stays import-safe and fork-safe, exactly like the SRT half's ``activate()``, whose probe it
reuses: the NVIDIA driver, then NVML (no CUDA context) or the ``/dev/nvidia<N>`` nodes, then
``CUDA_VISIBLE_DEVICES``, then whether torch is installed (``find_spec``, which does not import
it). It returns None when any of them says no, never raises for "no GPU here", never imports
torch or the diffusion runtime, and never touches ``current_platform``.

The probe decides in both selection modes. With ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE=demo_cuda``
the runtime loads only this entry point, and a None is a start-up error ("installed but
activate() returned None (hardware not available on this machine?)"): an explicit request for
absent hardware must fail, never fall back silently.
"""

from __future__ import annotations

import importlib.util
import logging

from cardcage.platforms.host import host_qualname
from cardcage_demo_cuda import ENTRY_POINT_NAME, visible_gpu_count

__all__ = ["ENTRY_POINT_NAME", "PLATFORM_QUALNAME", "activate"]

#: What ``activate()`` returns: the diffusion platform class, in ``module:Class`` form.
PLATFORM_QUALNAME = "cardcage_demo_cuda.diffusion.platform:DemoCudaPlatform"

logger = logging.getLogger(__name__)


def activate() -> str | None:
    """Return the diffusion platform class's qualified name when an NVIDIA GPU is usable."""
    gpus = visible_gpu_count()
    if gpus == 0:
        logger.debug("diffusion platform %s declines: no visible NVIDIA GPU", ENTRY_POINT_NAME)
        return None
    if importlib.util.find_spec("torch") is None:
        logger.warning(
            "diffusion platform %s declines: %d NVIDIA GPU(s) present but torch is not "
            "installed; install 'cardcage-demo-cuda[diffusion]' with a CUDA build of torch",
            ENTRY_POINT_NAME,
            gpus,
        )
        return None
    # Under SGLang 0.5.23's diffusion selection this names the SGLang-native adapter.
    return host_qualname(PLATFORM_QUALNAME)
