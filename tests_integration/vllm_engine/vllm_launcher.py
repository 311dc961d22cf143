"""Run vLLM's own offline engine on a local model; write what it generated as JSON.

Usage: ``vllm_launcher.py MODEL_DIR REPORT_JSON LAYOUT`` with LAYOUT ``multiprocess`` (vLLM's
default: this process, an engine-core process and a worker process) or ``single`` (everything in
this process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, which the caller sets, and the ``uni``
executor). The platform is whatever vLLM's own selection picks from the environment; nothing
here names a device. The ``__main__`` guard is what vLLM's spawned processes need.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

#: What every run generates from: two prompts of the tokenizer's own words.
PROMPTS = ["w4 w5", "w7 w8 w9"]
MAX_TOKENS = 8
#: The distribution whose hooks ``in_effect`` reports; unset, demo-cpu's.
DIST_ENV = "CC_VLLM_ENGINE_DIST"


def main(model: str, report: str, layout: str) -> None:
    started = time.perf_counter()
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    imported = time.perf_counter()

    options: dict[str, object] = {}
    if layout == "single":
        options["distributed_executor_backend"] = "uni"
    llm = LLM(
        model=model,
        dtype="float32",
        max_model_len=128,
        enforce_eager=True,
        seed=0,
        **options,
    )
    built = time.perf_counter()
    outputs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, temperature=0))
    generated = time.perf_counter()
    cls = type(current_platform)
    # demo-cpu's in-process counter: in the single-process layout the worker is this process.
    from cardcage.platforms import in_effect
    from cardcage.platforms.hosts.vllm.worker import run_init_backend
    from cardcage_demo_cpu.evidence import EVIDENCE

    # What runs now in this process (in the single layout: vLLM's worker), asked before anything
    # else here could run the platform's init_backend().
    effect = in_effect(os.environ.get(DIST_ENV) or "cardcage-demo-cpu")
    # False: cardcage's worker already ran the platform's init_backend() in this process (it
    # runs it at most once per process); True would mean it ran only now, for this question.
    init_backend_ran_before = not run_init_backend() if layout == "single" else None

    Path(report).write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "prompt_token_ids": [list(o.prompt_token_ids or []) for o in outputs],
                "token_ids": [list(o.outputs[0].token_ids) for o in outputs],
                "texts": [o.outputs[0].text for o in outputs],
                "platform": f"{cls.__module__}.{cls.__qualname__}",
                "init_backend_calls_here": EVIDENCE.count("init_backend", "srt"),
                "in_effect": effect,
                "init_backend_ran_before": init_backend_ran_before,
                # Seconds, for the record (nothing asserts on them): import, LLM(), generate().
                "seconds": {
                    "import": round(imported - started, 2),
                    "llm": round(built - imported, 2),
                    "generate": round(generated - built, 2),
                },
            }
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
