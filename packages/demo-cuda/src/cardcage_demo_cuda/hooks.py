"""The general plugin of cardcage-demo-cuda: call statistics, on whichever host runs it.

``register`` (the ``sglang.srt.plugins`` and ``vllm.general_plugins`` entry point) is a
``cardcage.platforms.plugin.hooks_plugin`` declaration and nothing else: per host, AROUND hooks
built by ``STATS.hook()`` (``cardcage.platforms.callstats``) that count and time calls, registered
under SGLang and vLLM only when that host selected ``DemoCudaSRTPlatform``.

* cardcage: ``get_current_platform`` (every platform access) and ``snapshot.refresh`` (every
  entry-point rescan);
* SGLang: ``get_device_memory_capacity``, the MiB SGLang sizes the KV cache from, which it gets
  from this platform's ``get_device_total_memory()`` (the GPU's memory); logged at INFO;
* vLLM 0.33: ``resolve_obj_by_qualname``, every class vLLM resolves by name (the platform, the
  FlashAttention backend, the GPU worker and the CUDA communicator of ``vllm_section``); logged.

Nothing happens at import time (``cardcage doctor`` imports this module to check it).
"""

from __future__ import annotations

import logging
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
SGLANG_DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
VLLM_RESOLVE = "vllm.utils.import_utils.resolve_obj_by_qualname"

#: The counters of this process. ``STATS.get(PLATFORM_ACCESS).calls`` and so on.
STATS = CallStats()


def _log_device_memory(capacity: Any, *args: Any, **kwargs: Any) -> None:
    logger.info("SGLang sizes GPU memory at %s MiB", capacity)


def _log_resolved(resolved: Any, qualname: Any = None, *args: Any, **kwargs: Any) -> None:
    logger.info("vLLM resolved %s", qualname if qualname is not None else kwargs.get("qualname"))


register = hooks_plugin(
    PLATFORM_QUALNAME,
    cardcage=[
        around(PLATFORM_ACCESS, STATS.hook(PLATFORM_ACCESS)),
        around(RESCAN, STATS.hook(RESCAN)),
    ],
    sglang=[
        around(SGLANG_DEVICE_MEMORY, STATS.hook(SGLANG_DEVICE_MEMORY, then=_log_device_memory))
    ],
    vllm=[around(VLLM_RESOLVE, STATS.hook(VLLM_RESOLVE, then=_log_resolved))],
)
