"""A test-only SGLang general plugin: what SGLang's scheduler built, read from its own objects.

The KV pool and the allocator that serve requests live in SGLang's scheduler process, which the
launcher cannot inspect. ``engine_scenario.probe_site`` installs this module as a distribution
of its own (``cc-engine-probe``, entry point ``sglang.srt.plugins: cc_engine_probe =
engine_probe:register``) on the Engine's PYTHONPATH, so SGLang's own ``load_plugins()`` runs
``register()`` in each of its processes, exactly as it runs demo-cpu's. The plugin registers one
AFTER hook, with SGLang's hook registry, on ``Scheduler.__init__``: once the scheduler has built
its memory pool, the hook writes one JSON line to ``$CC_ENGINE_PROBE`` with the classes of the
scheduler's allocator and of the KV cache behind it, what the selected platform answers, in
that release's own names, to the questions SGLang asks about KV pools and graphs, and what
``cardcage.platforms.in_effect()`` says there of demo-cpu's hooks and kernels.

Once a scheduler is built, the same hook wraps its model runner's class ``forward`` so that each
forward counts demo-cpu's kernel calls (its ``kernel`` evidence) under its forward mode, prefill
(``extend``) and ``decode``, into ``$CC_ENGINE_PROBE.kernels.<pid>.json``.

In every process it runs in, the plugin also records which names SGLang's own code reads off the
selected platform object (an instance of a subclass of SGLang's ``SRTPlatform``), into
``$CC_ENGINE_PROBE.platform.<pid>.json``: the platform methods and attributes the release really
calls, which ``cardcage deps`` predicts from cardcage's release table.

It observes and changes nothing: the hook returns None (SGLang keeps ``__init__``'s result), the
wrapper returns what the model runner returned, and the plugin registers only where SGLang has
already imported its scheduler module (the launcher and the scheduler), so the probe never
imports an SGLang module a process would not import anyway.
Not part of any package: it is the scenario's harness, not a vendor example.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
SCHEDULER_INIT = f"{SCHEDULER_MODULE}.Scheduler.__init__"
MODEL_RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
#: demo-cpu's kernels, as its ``kernel`` evidence names them.
KERNEL_OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding")
#: forward mode -> op -> kernel calls, in this process.
_PHASES: dict[str, dict[str, int]] = {}
#: Where the JSON lines go; unset, the plugin registers nothing.
REPORT_ENV = "CC_ENGINE_PROBE"
#: The distribution whose hooks ``in_effect`` reports; unset, demo-cpu's.
DIST_ENV = "CC_ENGINE_PROBE_DIST"


def _name(obj: object) -> str | None:
    """``module.Qualname`` of a class (or of an object's class); None stays None."""
    if obj is None:
        return None
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _platform_answers() -> dict[str, Any]:
    """What the selected platform answers where this release asks, under the release's names.

    Releases before 0.5.22 ask ``get_mha_kv_pool_cls()`` and ``support_cuda_graph()``; later
    ones ask ``get_kv_pool_cls(kind="mha")`` and read ``capabilities.graph_capture``. Which one
    this release has is read from SGLang's own base class, never from a version number. Every
    release asks ``get_paged_allocator_cls()`` (before 0.5.22 it builds what comes back).
    """
    from sglang.srt.platforms import current_platform
    from sglang.srt.platforms.interface import SRTPlatform

    if hasattr(SRTPlatform, "get_mha_kv_pool_cls"):
        pool_question, pool = "get_mha_kv_pool_cls()", current_platform.get_mha_kv_pool_cls()
    else:
        pool_question, pool = (
            "get_kv_pool_cls(kind='mha')",
            current_platform.get_kv_pool_cls(kind="mha"),
        )
    if hasattr(SRTPlatform, "support_cuda_graph"):
        graph_question, graph = "support_cuda_graph()", current_platform.support_cuda_graph()
    else:
        graph_question = "capabilities.graph_capture"
        graph = current_platform.capabilities.graph_capture
    return {
        "platform": _name(current_platform),
        "kv_pool_question": pool_question,
        "kv_pool_answer": _name(pool),
        "allocator_answer": _name(current_platform.get_paged_allocator_cls()),
        "graph_question": graph_question,
        "graph_answer": graph,
    }


def _in_effect() -> dict[str, Any]:
    """The plugin's hooks (demo-cpu's unless ``$CC_ENGINE_PROBE_DIST`` names another
    distribution) and the installed kernels, as the scheduler's own process sees them."""
    from cardcage.platforms import in_effect

    return in_effect(os.environ.get(DIST_ENV) or "cardcage-demo-cpu")


def _after_scheduler_init(result: None, scheduler: Any, *args: Any, **kwargs: Any) -> None:
    """Write what this scheduler built and what its platform answered, as one JSON line."""
    import sglang

    allocator = scheduler.token_to_kv_pool_allocator
    line = {
        "pid": os.getpid(),
        "sglang": sglang.__version__,
        "allocator": _name(allocator),
        "kv_cache": _name(allocator.get_kvcache()),
        "max_total_num_tokens": scheduler.max_total_num_tokens,
        **_platform_answers(),
        "in_effect": _in_effect(),
    }
    with Path(os.environ[REPORT_ENV]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    runner = sys.modules[MODEL_RUNNER_MODULE].ModelRunner
    original = runner.forward

    def forward(self: Any, forward_batch: Any, *args: Any, **kwargs: Any) -> Any:
        return _count_kernels(original, self, forward_batch, *args, **kwargs)

    runner.forward = forward  # this scheduler's requests, from now on


def _count_kernels(
    original: Any, runner: Any, forward_batch: Any, *args: Any, **kwargs: Any
) -> Any:
    """Run the model runner's forward; add the kernel calls it made to its forward mode's row."""
    from cardcage_demo_cpu.evidence import EVIDENCE

    before = {op: EVIDENCE.count("kernel", op) for op in KERNEL_OPS}
    try:
        return original(runner, forward_batch, *args, **kwargs)
    finally:
        mode = forward_batch.forward_mode
        name = "decode" if mode.is_decode() else "extend" if mode.is_extend() else str(mode)
        row = _PHASES.setdefault(name, dict.fromkeys(KERNEL_OPS, 0))
        for op in KERNEL_OPS:
            row[op] += EVIDENCE.count("kernel", op) - before[op]
        report = Path(f"{os.environ[REPORT_ENV]}.kernels.{os.getpid()}.json")
        report.write_text(json.dumps(_PHASES), encoding="utf-8")


#: Names SGLang's code read off the platform object, in this process.
_PLATFORM_NAMES: set[str] = set()


def _record_platform_reads() -> None:
    """Record each public name an ``sglang.*`` frame reads off an ``SRTPlatform`` instance.

    ``__getattribute__`` on SGLang's base class sees every attribute read on every instance of
    its subclasses (cardcage's adapters define none of their own); the value read is returned
    unchanged. The caller's module decides: reads from cardcage's adapter or the vendor's own
    code are not SGLang's calls.
    """
    interface = sys.modules.get("sglang.srt.platforms.interface")
    base = getattr(interface, "SRTPlatform", None)
    if base is None or "__getattribute__" in vars(base):
        return
    report = Path(f"{os.environ[REPORT_ENV]}.platform.{os.getpid()}.json")
    read = object.__getattribute__

    def getattribute(self: Any, name: str) -> Any:
        if not name.startswith("_") and name not in _PLATFORM_NAMES:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("sglang."):
                _PLATFORM_NAMES.add(name)
                report.write_text(json.dumps(sorted(_PLATFORM_NAMES)), encoding="utf-8")
        return read(self, name)

    base.__getattribute__ = getattribute


def register() -> None:
    """SGLang's general-plugin entry point: hook the scheduler where SGLang has imported it."""
    if not os.environ.get(REPORT_ENV):
        return
    _record_platform_reads()
    if SCHEDULER_MODULE not in sys.modules:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(SCHEDULER_INIT, _after_scheduler_init, HookType.AFTER)
