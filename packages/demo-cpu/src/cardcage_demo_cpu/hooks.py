"""The general plugin of cardcage-demo-cpu: observability hooks, on whichever host runs it.

``register()`` is the ``sglang.srt.plugins`` entry point of two hosts (DESIGN §8), and it picks
its targets by the host whose loader calls it (``cardcage.hooks.host.plugin_host()``). Every hook
is an AROUND hook that times and counts calls, kept in ``STATS``.

Under cardcage (its loader runs it only when this distribution supplied the selected platform; a
failure aborts start-up):

* ``cardcage.platforms.current.get_current_platform``: how often the runtime consults the
  platform (every ``current_platform`` access goes through it), at no cost beyond two clock reads;
* ``cardcage.hooks.snapshot.refresh``: every entry-point rescan, a start-up cost worth seeing,
  also logged at INFO with its duration.

Under SGLang 0.5.23 (its ``load_plugins()`` runs it; SGLang's rules apply: a failure is logged
and start-up goes on, and hooks are applied when SGLang applies its registry). SGLang runs the
general plugins of every installed platform distribution unless ``SGLANG_PLATFORM`` names one,
so ``register()`` first checks that SGLang selected this distribution's platform
(``selected_by_sglang``) and registers nothing otherwise, as cardcage's loader would decide:

* ``sglang.srt.utils.common.get_device_memory_capacity``: the device memory SGLang believes it
  has, in MiB. For an out-of-tree platform SGLang asks ``get_device_total_memory()`` here and sizes
  the KV cache and its memory fractions from the answer, so this is the number a vendor checks
  first when a server runs out of memory or leaves it idle; the hook logs it at INFO. It runs on
  any machine, without a model, which is why the template uses it.

Under vLLM 0.33 (its ``load_general_plugins()`` runs it, in every process vLLM starts; vLLM has
no hook registry, so cardcage applies each hook the moment it is registered, in deferred mode).
vLLM runs the general plugins of every installed distribution, so ``register()`` first checks
that vLLM selected this distribution's platform (``selected_by_vllm``):

* ``vllm.utils.import_utils.resolve_obj_by_qualname``: every class vLLM resolves by name (the
  platform, the attention backend ``get_attn_backend_cls()`` names, the worker class
  ``check_and_update_config()`` sets), logged at INFO: the answers of the vLLM section
  (``cardcage_demo_cpu.vllm_section``) as vLLM uses them. vLLM's modules import the function
  with ``from ... import``; cardcage rebinds those copies too.

``register()`` is decorated with ``cardcage.hooks.host.general_plugin``: vLLM does not catch a
raising ``register()``, and the decorator gives it cardcage's failure policy there (this
distribution supplies the selected platform, so its failure aborts start-up with
``PluginLoadError``, naming plugin, distribution and fix).

Only what the platform interface cannot do belongs here: device set-up goes in
``init_backend()``, argument defaults in ``apply_server_args_defaults()``.

Import-safe: registering imports nothing; targets are resolved when the hooks are applied.
Nothing happens at import time (``cardcage doctor`` imports this module to check it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cardcage.hooks.host import Host, general_plugin, plugin_host
from cardcage.hooks.registry import HookRegistry, HookType
from cardcage.platforms.host import selected_by_sglang, selected_by_vllm

from . import PLATFORM_QUALNAME

__all__ = [
    "PLATFORM_ACCESS",
    "RESCAN",
    "SGLANG_DEVICE_MEMORY",
    "STATS",
    "VLLM_RESOLVE",
    "CallStats",
    "TargetStats",
    "register",
]

logger = logging.getLogger(__name__)

PLATFORM_ACCESS = "cardcage.platforms.current.get_current_platform"
RESCAN = "cardcage.hooks.snapshot.refresh"
#: The hook target when SGLang 0.5.23 hosts the plugin.
SGLANG_DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
#: The hook target when vLLM 0.33 hosts the plugin.
VLLM_RESOLVE = "vllm.utils.import_utils.resolve_obj_by_qualname"


@dataclass(frozen=True)
class TargetStats:
    """Calls seen on one target: how many, how many raised, and their wall-clock time."""

    calls: int = 0
    errors: int = 0
    total_s: float = 0.0
    max_s: float = 0.0


class CallStats:
    """Thread-safe per-target counters, filled by the hooks and read by anyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_target: dict[str, TargetStats] = {}

    def record(self, target: str, elapsed_s: float, *, failed: bool) -> None:
        with self._lock:
            old = self._by_target.get(target, TargetStats())
            self._by_target[target] = TargetStats(
                calls=old.calls + 1,
                errors=old.errors + int(failed),
                total_s=old.total_s + elapsed_s,
                max_s=max(old.max_s, elapsed_s),
            )

    def get(self, target: str) -> TargetStats:
        with self._lock:
            return self._by_target.get(target, TargetStats())

    def as_dict(self) -> dict[str, TargetStats]:
        with self._lock:
            return dict(self._by_target)

    def reset(self) -> None:
        with self._lock:
            self._by_target.clear()


#: The counters of this process. ``STATS.get(PLATFORM_ACCESS).calls`` and so on.
STATS = CallStats()


def _timed(target: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    failed = True
    try:
        result = original(*args, **kwargs)
        failed = False
        return result
    finally:
        STATS.record(target, time.perf_counter() - start, failed=failed)


def time_platform_access(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``get_current_platform``: count and time; no logging on this hot path."""
    return _timed(PLATFORM_ACCESS, original, *args, **kwargs)


def time_rescan(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``refresh``: count, time and log each entry-point rescan."""
    start = time.perf_counter()
    result = _timed(RESCAN, original, *args, **kwargs)
    logger.info("entry-point rescan took %.1f ms", (time.perf_counter() - start) * 1e3)
    return result


def time_device_memory_query(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND SGLang's ``get_device_memory_capacity``: count, time and log the answer (MiB)."""
    capacity = _timed(SGLANG_DEVICE_MEMORY, original, *args, **kwargs)
    logger.info("SGLang sizes device memory at %s MiB", capacity)
    return capacity


def time_vllm_resolve(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND vLLM's ``resolve_obj_by_qualname``: count, time and log what vLLM resolved."""
    resolved = _timed(VLLM_RESOLVE, original, *args, **kwargs)
    logger.info("vLLM resolved %s", args[0] if args else kwargs.get("qualname"))
    return resolved


_HOOKS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (PLATFORM_ACCESS, time_platform_access),
    (RESCAN, time_rescan),
)
_SGLANG_HOOKS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (SGLANG_DEVICE_MEMORY, time_device_memory_query),
)
_VLLM_HOOKS: tuple[tuple[str, Callable[..., Any]], ...] = ((VLLM_RESOLVE, time_vllm_resolve),)


@general_plugin
def register() -> None:
    """Register the hooks of the host that runs this plugin (idempotent under cardcage)."""
    host = plugin_host()
    if host is Host.VLLM:
        # vLLM runs every installed distribution's general plugins: only the selected one's hooks.
        if not selected_by_vllm(PLATFORM_QUALNAME):
            logger.info("%s is not vLLM's selected platform: no hooks registered", __package__)
            return
        # vLLM has no registry: cardcage applies each hook as it is registered, attributed to
        # this plugin. vLLM's loader runs once per process: nothing to de-duplicate.
        for target, hook in _VLLM_HOOKS:
            HookRegistry.register(target, hook, HookType.AROUND)
        logger.debug("registered %d observability hooks under vLLM", len(_VLLM_HOOKS))
        return
    if host is Host.SGLANG:
        # SGLang runs the general plugins of every platform distribution unless SGLANG_PLATFORM
        # names one; hooks that belong to this platform stay out when another one was selected.
        if not selected_by_sglang(PLATFORM_QUALNAME):
            logger.info("%s is not SGLang's selected platform: no hooks registered", __package__)
            return
        # cardcage's registry hands each hook to SGLang's, attributed to this plugin; SGLang's
        # load_plugins() runs once per process, so there is nothing to de-duplicate.
        for target, hook in _SGLANG_HOOKS:
            HookRegistry.register(target, hook, HookType.AROUND)
        logger.debug("registered %d observability hooks with SGLang", len(_SGLANG_HOOKS))
        return
    registered = HookRegistry.registrations()
    for target, hook in _HOOKS:
        if any(record.hook is hook for record in registered.get(target, ())):
            continue
        HookRegistry.register(target, hook, HookType.AROUND)
    logger.debug("registered %d observability hooks", len(_HOOKS))
