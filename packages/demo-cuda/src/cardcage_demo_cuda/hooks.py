"""The general plugin of cardcage-demo-cuda: observability hooks, on whichever host runs it.

``register`` (the ``sglang.srt.plugins`` and ``vllm.general_plugins`` entry point) is a
``cardcage.platforms.plugin.hooks_plugin`` declaration: per host, AROUND hooks that time and
count calls in ``STATS`` (``cardcage.platforms.callstats``), registered under SGLang and vLLM
only when that host selected ``DemoCudaSRTPlatform``.

* cardcage: ``get_current_platform`` (every platform access) and ``snapshot.refresh`` (every
  entry-point rescan, logged at INFO);
* SGLang: ``get_device_memory_capacity``, the MiB SGLang sizes the KV cache from, which it gets
  from this platform's ``get_device_total_memory()`` (the GPU's memory, through NVML or torch);
* vLLM 0.33: ``resolve_obj_by_qualname``, every class vLLM resolves by name: the platform, the
  FlashAttention backend, the GPU worker and the CUDA communicator of ``vllm_section``.

Nothing happens at import time (``cardcage doctor`` imports this module to check it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from cardcage.platforms.callstats import CallStats
from cardcage.platforms.plugin import around, hooks_plugin

from . import PLATFORM_QUALNAME

__all__ = [
    "PLATFORM_ACCESS",
    "RESCAN",
    "SGLANG_DEVICE_MEMORY",
    "STATS",
    "VLLM_RESOLVE",
    "register",
]

logger = logging.getLogger(__name__)

PLATFORM_ACCESS = "cardcage.platforms.current.get_current_platform"
RESCAN = "cardcage.hooks.snapshot.refresh"
#: The hook target when SGLang hosts the plugin.
SGLANG_DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
#: The hook target when vLLM 0.33 hosts the plugin.
VLLM_RESOLVE = "vllm.utils.import_utils.resolve_obj_by_qualname"

#: The counters of this process. ``STATS.get(PLATFORM_ACCESS).calls`` and so on.
STATS = CallStats()


def time_platform_access(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``get_current_platform``: count and time; no logging on this hot path."""
    return STATS.timed(PLATFORM_ACCESS, original, *args, **kwargs)


def time_rescan(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``refresh``: count, time and log each entry-point rescan."""
    start = time.perf_counter()
    result = STATS.timed(RESCAN, original, *args, **kwargs)
    logger.info("entry-point rescan took %.1f ms", (time.perf_counter() - start) * 1e3)
    return result


def time_device_memory_query(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND SGLang's ``get_device_memory_capacity``: count, time and log the answer (MiB)."""
    capacity = STATS.timed(SGLANG_DEVICE_MEMORY, original, *args, **kwargs)
    logger.info("SGLang sizes device memory at %s MiB", capacity)
    return capacity


def time_vllm_resolve(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND vLLM's ``resolve_obj_by_qualname``: count, time and log what vLLM resolved."""
    resolved = STATS.timed(VLLM_RESOLVE, original, *args, **kwargs)
    logger.info("vLLM resolved %s", args[0] if args else kwargs.get("qualname"))
    return resolved


register = hooks_plugin(
    PLATFORM_QUALNAME,
    cardcage=[around(PLATFORM_ACCESS, time_platform_access), around(RESCAN, time_rescan)],
    sglang=[around(SGLANG_DEVICE_MEMORY, time_device_memory_query)],
    vllm=[around(VLLM_RESOLVE, time_vllm_resolve)],
)
