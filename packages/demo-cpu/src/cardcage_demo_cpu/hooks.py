"""The general plugin of cardcage-demo-cpu: observability hooks, on whichever host runs it.

``register`` is the ``sglang.srt.plugins`` and ``vllm.general_plugins`` entry point, declared with
``cardcage.platforms.plugin.hooks_plugin``: the hooks per host below, and nothing else. cardcage
does the rest (DESIGN §8): it registers only the hooks of the host whose loader calls it, under
SGLang and vLLM only when that host selected ``DemoCpuSRTPlatform``, never twice, and under vLLM
with cardcage's failure policy (this distribution's failure aborts start-up with
``PluginLoadError``). Every hook is an AROUND hook that times and counts calls in ``STATS``
(``cardcage.platforms.callstats``).

* Under cardcage: ``cardcage.platforms.current.get_current_platform`` (how often the runtime
  consults the platform, at the cost of two clock reads) and ``cardcage.hooks.snapshot.refresh``
  (every entry-point rescan, logged at INFO with its duration).
* Under SGLang 0.5.23: ``sglang.srt.utils.common.get_device_memory_capacity``, the device memory
  SGLang believes it has, in MiB. SGLang asks an out-of-tree platform's
  ``get_device_total_memory()`` here and sizes the KV cache from the answer, so it is the number
  to check first when a server runs out of memory or leaves it idle; logged at INFO and recorded
  as evidence. It runs on any machine, without a model.
* Under vLLM (0.32 to 0.34): ``vllm.utils.import_utils.resolve_obj_by_qualname``, every class
  vLLM resolves by name (the worker and the attention backend the platform names), logged at
  INFO and recorded as ``resolve`` evidence.
  vLLM's modules import it with ``from ... import``; cardcage rebinds those copies too.

Only what the platform interface cannot do belongs here: device set-up goes in
``init_backend()``, argument defaults in ``apply_server_args_defaults()``. Nothing happens at
import time (``cardcage doctor`` imports this module to check it); targets are resolved when the
host applies the hooks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from cardcage.hooks.host import Host
from cardcage.platforms.callstats import CallStats
from cardcage.platforms.plugin import HookSpec, around, hooks_plugin

from . import PLATFORM_QUALNAME
from .evidence import EVIDENCE

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
    """AROUND SGLang's ``get_device_memory_capacity``: count, time and log the answer (MiB).

    The answer is also ``hook`` evidence (key: the target, value: the MiB), so a launcher can see
    which of SGLang's processes ran the hook and what SGLang was told.
    """
    capacity = STATS.timed(SGLANG_DEVICE_MEMORY, original, *args, **kwargs)
    EVIDENCE.record("hook", SGLANG_DEVICE_MEMORY, capacity)
    logger.info("SGLang sizes device memory at %s MiB", capacity)
    return capacity


def time_vllm_resolve(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND vLLM's ``resolve_obj_by_qualname``: count, time and log what vLLM resolved.

    Each name is also ``resolve`` evidence (key: the name), so a launcher sees, per vLLM process
    and in order, the worker and attention backend vLLM built from its platform's answers.
    """
    resolved = STATS.timed(VLLM_RESOLVE, original, *args, **kwargs)
    qualname = args[0] if args else kwargs.get("qualname")
    EVIDENCE.record("resolve", str(qualname))
    logger.info("vLLM resolved %s", qualname)
    return resolved


def _registered(host: Host, spec: HookSpec) -> None:
    # Evidence that the host got the hook: a launcher reads it from each of the host's processes.
    if host in (Host.SGLANG, Host.VLLM):
        EVIDENCE.record("register", spec.target)


register = hooks_plugin(
    PLATFORM_QUALNAME,
    cardcage=[around(PLATFORM_ACCESS, time_platform_access), around(RESCAN, time_rescan)],
    sglang=[around(SGLANG_DEVICE_MEMORY, time_device_memory_query)],
    vllm=[around(VLLM_RESOLVE, time_vllm_resolve)],
    on_registered=_registered,
)
