"""cardcage-demo-cuda: the reference platform plugin for a real accelerator (NVIDIA GPUs).

This module is what the ``sglang.srt.platforms`` entry point loads on every start-up, on every
machine where the distribution is installed, before any backend is initialised. So it stays
import-safe and fork-safe: ``activate()`` asks the driver, never torch. It

1. returns None unless the kernel shows the NVIDIA driver (``/proc/driver/nvidia`` or
   ``/dev/nvidiactl``: a few ``stat`` calls, so CPU machines pay nothing more);
2. counts GPUs through NVML (``libnvidia-ml.so.1`` via ctypes; it creates no CUDA context, so
   workers forked later stay healthy), or by their ``/dev/nvidia<N>`` nodes where NVML is
   missing, and returns None when there are none or ``CUDA_VISIBLE_DEVICES`` hides them all;
3. returns None, with a warning naming the fix, when torch is not installed (checked with
   ``importlib.util.find_spec``, which does not import it): the device operations need it.

It never imports torch, never touches ``current_platform`` and never raises for "no GPU here".
"""

from __future__ import annotations

import importlib.util
import logging

from cardcage.platforms.host import host_qualname

from . import _nvml

__version__ = "0.1.0"

__all__ = ["ENTRY_POINT_NAME", "PLATFORM_QUALNAME", "activate", "visible_gpu_count"]

#: The entry-point name in pyproject.toml: what users put in ``SGLANG_PLATFORM``.
ENTRY_POINT_NAME = "demo_cuda"

#: What ``activate()`` returns: the platform class, in ``module:Class`` form.
PLATFORM_QUALNAME = "cardcage_demo_cuda.platform:DemoCudaSRTPlatform"

logger = logging.getLogger(__name__)


def visible_gpu_count() -> int:
    """NVIDIA GPUs this process may use, as the driver reports them; 0 without a driver.

    NVML answers when it is there; otherwise (a container with the device nodes but without
    ``libnvidia-ml.so.1``) the ``/dev/nvidia<N>`` nodes are counted.
    """
    if not _nvml.driver_present():
        return 0
    count = _nvml.device_count()
    if count is None:
        count = _nvml.device_nodes()
    if count == 0:
        return 0
    visible = _nvml.visible_devices()
    return count if visible is None else min(count, len(visible))


def activate() -> str | None:
    """Return the platform class's qualified name when an NVIDIA GPU is usable, else None."""
    gpus = visible_gpu_count()
    if gpus == 0:
        logger.debug("%s declines: no visible NVIDIA GPU", ENTRY_POINT_NAME)
        return None
    if importlib.util.find_spec("torch") is None:
        logger.warning(
            "%s declines: %d NVIDIA GPU(s) present but torch is not installed; install "
            "'cardcage-demo-cuda[torch]' (or a CUDA build of torch) to use them",
            ENTRY_POINT_NAME,
            gpus,
        )
        return None
    # The same entry point serves SGLang 0.5.23: there this names the SGLang-native adapter.
    return host_qualname(PLATFORM_QUALNAME)
