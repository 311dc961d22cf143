"""A test-only vLLM general plugin: what vLLM's ``current_platform`` is, in each vLLM process.

``vllm_engine_scenario.probe_site`` installs this module as a distribution of its own
(``cc-vllm-engine-probe``, entry point ``vllm.general_plugins: cc_vllm_engine_probe =
vllm_engine_probe:register``) on the engine's PYTHONPATH, so vLLM's own
``load_general_plugins()`` runs ``register()`` in every process vLLM starts, as it runs
demo-cpu's. Each call appends one JSON line to ``$CC_VLLM_ENGINE_PROBE``: the pid, the process's
name, and what vLLM's ``current_platform`` is there (its class, the vendor class cardcage
adapted, the vLLM bases, and the identity predicates vLLM's branches ask). It also records which
names vLLM's own code reads off the platform object (an instance of a subclass of vLLM's
``Platform``) into ``$CC_VLLM_ENGINE_PROBE.platform.<pid>.json``: the platform methods the
release really calls, which ``cardcage deps`` predicts. It observes and changes nothing. Not
part of any package: it is the scenario's harness, not a vendor example.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

REPORT_ENV = "CC_VLLM_ENGINE_PROBE"


#: Names vLLM's code read off the platform object, in this process.
_PLATFORM_NAMES: set[str] = set()


def _record_platform_reads(report: str) -> None:
    """Record each public name a ``vllm.*`` frame reads off a ``Platform`` instance; the value
    read is returned unchanged. Reads by cardcage's adapter or the vendor are not vLLM's."""
    from vllm.platforms.interface import Platform

    if "__getattribute__" in vars(Platform):
        return
    out = Path(f"{report}.platform.{os.getpid()}.json")
    read = object.__getattribute__

    def getattribute(self: Any, name: str) -> Any:
        if not name.startswith("_") and name not in _PLATFORM_NAMES:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("vllm."):
                _PLATFORM_NAMES.add(name)
                out.write_text(json.dumps(sorted(_PLATFORM_NAMES)), encoding="utf-8")
        return read(self, name)

    Platform.__getattribute__ = getattribute  # type: ignore[method-assign]


def register() -> None:
    """vLLM's general-plugin entry point: record this process's platform, once per call."""
    report = os.environ.get(REPORT_ENV)
    if not report:
        return
    _record_platform_reads(report)
    from vllm.platforms import current_platform

    from cardcage.platforms.hosts.vllm.adapter import adapted_class

    cls = type(current_platform)
    vendor = adapted_class(cls)
    line = {
        "pid": os.getpid(),
        "process": multiprocessing.current_process().name,
        "platform": f"{cls.__module__}.{cls.__qualname__}",
        "vendor": f"{vendor.__module__}.{vendor.__qualname__}" if vendor else None,
        "vllm_bases": [
            f"{k.__module__}.{k.__qualname__}"
            for k in cls.__mro__
            if k.__module__.startswith("vllm.")
        ],
        "is_cpu": current_platform.is_cpu(),
        "is_out_of_tree": current_platform.is_out_of_tree(),
        "is_cuda_alike": current_platform.is_cuda_alike(),
    }
    with Path(report).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
