"""The vendor's ``init_backend()`` in vLLM's worker, once per process, before the model is built.

vLLM has no ``init_backend``: its worker class (``parallel_config.worker_cls``, which a platform
sets in ``check_and_update_config``) does the device's set-up itself. So when the vendor's class
defines ``init_backend()``, the adapter's ``check_and_update_config`` replaces the worker class
the platform chose (vLLM's ``CPUWorker`` for a CPU-like platform, or the vendor's own) with a
subclass named in this module, ``<Worker>__Q<encoded qualname>``, that vLLM resolves in each
worker process it starts (``WorkerWrapperBase.init_worker``). Its ``init_device()`` calls
``current_platform.init_backend()`` first, then the chosen worker's own ``init_device()``:

* vLLM's worker runs its steps in this order: construct the worker, ``init_device()`` (device,
  distributed environment, random seed, the model runner and its samplers), ``load_model()`` (the
  model and its ops), then the KV cache. The start of ``init_device()`` is the last moment before
  vLLM builds anything that could depend on the backend, and it runs in the worker process only.
  It matches SGLang, which calls ``init_backend()`` when its model-runner module is imported,
  before it sets up the device;
* vLLM's CPU worker replaces ``torch.set_num_threads`` with a function that only warns, inside
  its ``init_device()``: a backend that sets torch's threads must run before that.

``init_backend()`` runs once per process (vLLM's single-process layout builds one worker in the
calling process; a second ``LLM`` there does not run it again). An exception from it propagates
as the vendor raised it, with a note naming the platform class and this call site; vLLM then
reports the worker's failure as it does any other.

Importing this module imports neither vLLM nor a vendor class; resolving a worker imports both.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from typing import Any

from cardcage.hooks.log import get_logger
from cardcage.platforms.hosts._naming import SEPARATOR, attribute_name, vendor_qualname

__all__ = ["is_wrapped", "run_init_backend", "worker_qualname"]

logger = get_logger(__name__)

_lock = threading.Lock()
_ran_in: list[int] = []  # the pid whose init_backend() has run (fork-aware: pids differ)
_workers: dict[str, type] = {}  # chosen worker qualname -> its subclass


def worker_qualname(chosen: str) -> str:
    """The dotted name vLLM resolves to the subclass of the worker class ``chosen`` names."""
    return f"{__name__}.{attribute_name(chosen)}"


def is_wrapped(worker_cls: object) -> bool:
    """True when ``worker_cls`` (vLLM's ``parallel_config.worker_cls``) names one of ours."""
    return isinstance(worker_cls, str) and worker_cls.startswith(f"{__name__}.")


def run_init_backend() -> bool:
    """Call vLLM's ``current_platform.init_backend()`` unless it ran in this process already.

    Returns True when it ran now. vLLM's ``current_platform`` is the adapter's shared instance,
    so the vendor's method runs on the instance vLLM asks everything else.
    """
    with _lock:
        if _ran_in and _ran_in[0] == os.getpid():
            return False
        current_platform = importlib.import_module("vllm.platforms").current_platform
        try:
            current_platform.init_backend()
        except Exception as exc:
            cls = type(current_platform)
            exc.add_note(
                f"raised by {cls.__name__}.init_backend(), which cardcage calls in vLLM's worker "
                f"(process {os.getpid()}) before vLLM sets up the device and builds the model "
                "(cardcage.platforms.hosts.vllm.worker)"
            )
            raise
        _ran_in[:] = [os.getpid()]
        logger.debug("%s.init_backend() ran in vLLM's worker", type(current_platform).__name__)
        _install_kernels(type(current_platform))
        return True


def _install_kernels(adapter: type) -> None:
    """The kernels the vendor's class declares, into vLLM's ops: right after ``init_backend()``,
    before vLLM builds the model (``cardcage.platforms.hosts.vllm.kernels``)."""
    from .adapter import adapted_class

    vendor = adapted_class(adapter)
    if vendor is not None and getattr(vendor, "kernels", None):
        from .kernels import install_for

        install_for(vendor)


def _build(chosen: str) -> type:
    base = pkgutil.resolve_name(chosen)
    if not isinstance(base, type):
        from cardcage.platforms.errors import InvalidPlatformClassError

        raise InvalidPlatformClassError(
            f"vLLM's parallel_config.worker_cls {chosen!r} names {type(base).__name__}, not a "
            "worker class. Set worker_cls to a class in the platform's check_and_update_config."
        )
    parent: Any = base

    def init_device(self: Any, *args: Any, **kwargs: Any) -> Any:
        run_init_backend()
        return parent.init_device(self, *args, **kwargs)

    init_device.__doc__ = "The vendor's init_backend(), once per process, then vLLM's set-up."
    worker = type(
        parent.__name__,
        (parent,),
        {"__module__": __name__, "__doc__": base.__doc__, "init_device": init_device},
    )
    worker.__qualname__ = attribute_name(chosen)
    return worker


def __getattr__(name: str) -> type:
    if SEPARATOR not in name or name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    chosen = vendor_qualname(name)
    with _lock:
        worker = _workers.get(chosen)
        if worker is None:
            worker = _workers[chosen] = _build(chosen)
        return worker
