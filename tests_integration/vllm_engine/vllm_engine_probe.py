"""A test-only vLLM general plugin: what vLLM's ``current_platform`` is, in each vLLM process.

``vllm_engine_scenario.probe_site`` installs this module as a distribution of its own
(``cc-vllm-engine-probe``, entry point ``vllm.general_plugins: cc_vllm_engine_probe =
vllm_engine_probe:register``) on the engine's PYTHONPATH, so vLLM's own
``load_general_plugins()`` runs ``register()`` in every process vLLM starts, as it runs
demo-cpu's. Each call appends one JSON line to ``$CC_VLLM_ENGINE_PROBE``: the pid, the process's
name, and what vLLM's ``current_platform`` is there (its class, the vendor class cardcage
adapted, the vLLM bases, and the identity predicates vLLM's branches ask). It observes and
changes nothing. Not part of any package: it is the scenario's harness, not a vendor example.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

REPORT_ENV = "CC_VLLM_ENGINE_PROBE"


def register() -> None:
    """vLLM's general-plugin entry point: record this process's platform, once per call."""
    report = os.environ.get(REPORT_ENV)
    if not report:
        return
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
