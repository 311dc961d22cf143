"""A user's script: SGLang 0.5.23's own ``Engine`` on a local model, then what it saw, as JSON.

Run by ``test_sglang_engine.py`` in a fresh interpreter, as ``python engine_launcher.py MODEL_DIR
REPORT_PATH``, with the platform chosen by the environment (``SGLANG_PLATFORM=demo_cpu``). This
process is SGLang's launcher: ``sglang.Engine`` resolves its server arguments here and spawns the
scheduler and the detokenizer, which import SGLang again, select the platform again and load the
plugins again. Nothing of SGLang is stubbed or patched here; the script only calls SGLang's public
``Engine`` and, afterwards, reads what SGLang's hook registry recorded and which processes it
started.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

PROMPTS = ["w1 w2 w3", "w7 w8"]
# Greedy, and always four tokens: a random model may otherwise stop at its end-of-sequence token.
SAMPLING = {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}
DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"


def _process_title(pid: int) -> str:
    """What ``/proc`` shows as the process's command line: SGLang retitles its subprocesses."""
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return " ".join(part for part in raw.decode(errors="replace").split("\0") if part)


def _hooks_on(target: str) -> list[dict[str, Any]]:
    """SGLang's registry entries for ``target``: hook, type and the source SGLang recorded."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    return [
        {
            "hook": f"{hook.__module__}.{hook.__qualname__}",
            "type": hook_type.name,
            "source": None if source is None else [source.plugin_name, source.dist_name],
            "applied": target in HookRegistry._patched,
        }
        for hook_type, hook, source in HookRegistry._hooks.get(target, [])
    ]


def main(model: str, report_path: str) -> None:
    started = time.perf_counter()
    import psutil
    import sglang
    from sglang.srt.platforms import current_platform
    from sglang.srt.platforms.interface import SRTPlatform

    # No device=: SGLang asks the selected platform for it. No disable_cuda_graph=: demo-cpu's
    # apply_server_args_defaults() sets it. The two memory arguments keep the KV cache small on a
    # shared machine.
    engine = sglang.Engine(model_path=model, mem_fraction_static=0.05, max_total_tokens=512)
    ready = time.perf_counter()
    try:
        first = engine.generate(PROMPTS, SAMPLING)
        second = engine.generate(PROMPTS, SAMPLING)
        generated = time.perf_counter()
        children = {
            child.pid: _process_title(child.pid)
            for child in psutil.Process().children(recursive=True)
        }
        # What SGLang resolved its arguments to (the record itself keeps the caller's input).
        resolved = engine.server_args.resolved_dict()
        platform = current_platform
        from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

        report = {
            "launcher": os.getpid(),
            "children": children,
            "texts": [out["text"] for out in first],
            "texts_again": [out["text"] for out in second],
            "completion_tokens": [out["meta_info"]["completion_tokens"] for out in first],
            "platform": {
                "class": f"{type(platform).__module__}.{type(platform).__qualname__}",
                "is_sglang_platform": isinstance(platform, SRTPlatform),
                "is_demo_cpu": isinstance(platform, DemoCpuSRTPlatform),
                # The classes it is made of: the vendor's own class among them, for any plugin.
                "mro": [f"{k.__module__}.{k.__qualname__}" for k in type(platform).__mro__],
            },
            "server_args": {
                name: resolved.get(name)
                for name in ("device", "disable_cuda_graph", "attention_backend")
            },
            "hooks": _hooks_on(DEVICE_MEMORY),
            "seconds": {"start": ready - started, "generate": generated - ready},
        }
    finally:
        engine.shutdown()
    Path(report_path).write_text(json.dumps(report), encoding="utf-8")


if __name__ == "__main__":  # SGLang spawns its subprocesses: they re-import this file
    main(*sys.argv[1:3])
