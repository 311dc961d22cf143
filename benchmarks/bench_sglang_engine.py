"""A cardcage-built plugin inside SGLang 0.5.23's real SRT ``Engine`` (DESIGN.md §7, issue 22).

``bench_sglang_host.py`` measures ``import sglang`` and ``load_plugins()`` and a hook on one op of
SGLang's diffusion runtime, in a venv where SRT's engine cannot run. This benchmark runs the
engine itself: ``nox -s bench-sglang-engine`` builds scenario-sglang-engine's venv (SGLang's
wheel with ``--no-deps``, torch 2.14.1, the real torchvision, transformers, ...), and every sample
is a fresh launcher process running ``sglang.Engine(model_path=..., device="cpu", ...)`` on the
tiny random Llama that ``tests_integration/sglang_engine/engine_scenario.py`` makes (two layers,
64 wide, a word-level tokenizer), which spawns SGLang's scheduler and detokenizer. Nothing of
SGLang is stubbed or patched; only the plugins on PYTHONPATH differ.

1. Start-up to ready: ``import sglang`` plus ``sglang.Engine(...)`` construction, until it
   returns (the scheduler has loaded the model and allocated its KV cache), with demo-cpu
   selected (``packages/demo-cpu``, its site from ``$CC_BENCH_SITES``) against an equivalent
   native SGLang plugin selected (budget 1.05). The native side is the fixture
   ``cc-plat-sglang-native`` (its platform class on SGLang's ``SRTPlatform``, its AROUND hook on
   ``get_device_memory_capacity`` through SGLang's registry) plus a generated distribution whose
   platform adds to the fixture's class exactly what demo-cpu's class adds for an Engine: SGLang's
   own ``CpuDeviceMixin`` (the fixture alone cannot size a KV cache: SGLang asks an out-of-tree
   platform for ``get_device_total_memory()``, and the fixture has none) and the same
   ``init_backend()`` thread set-up. Both sides pass the same Engine arguments. Each launcher
   checks, in itself and (through the probe below) in SGLang's scheduler process, that SGLang
   selected the side's platform and applied its hook, attributed to its distribution, and that
   the hook ran.

2. An AROUND hook's overhead per call on ``sglang.srt.layers.layernorm.RMSNorm.forward_native``,
   measured inside the scheduler process of a running Engine. SGLang 0.5.23's Llama calls its
   ``RMSNorm`` modules through ``BaseFusedOp.forward`` (``sglang.kernels.fused_op``), which
   resolves once per instance and caches in ``_forward_method``: on an out-of-tree platform, an
   op registered with ``register_oot_forward``, else ``forward_<get_dispatch_key_name()>``, else
   ``forward_native``; SGLang's ``SRTPlatform`` answers ``"native"``, so the method every decode
   step calls, ``2 x layers + 1`` times (two per decoder layer, one final norm), is
   ``forward_native``. The bench proves it rather than trusting this reading: every instance's
   cached ``_forward_method`` must be the hooked method, and the hook's counter must grow by
   ``(number of RMSNorm instances) x (extra tokens)`` between a ``generate()`` of N tokens and one
   of N + K. The same hook function reaches the method two ways, each in an Engine of its own on
   the native platform: a cardcage plugin (``register()`` calls
   ``cardcage.hooks.HookRegistry.register``; cardcage hands the hook to SGLang's registry,
   attributed to the plugin) against a native plugin (``sglang.srt.plugins.hook_registry``
   directly). A harness plugin in every Engine (``ccbench-engine-probe``, an AFTER
   hook on ``Scheduler.flush_cache`` through SGLang's registry) takes commands from the launcher:
   ``engine.flush_cache()`` makes SGLang's scheduler run it, between requests. In the scheduler
   it records the last decode step's call of the model's final norm (the real module instance and
   its real input), then times alternating blocks of calls of that instance's bare method and of
   its hooked one, as ``bench_sglang_host.py`` does: the overhead is the fastest hooked block
   minus the fastest bare block, per call, in wall and CPU time (``time.thread_time_ns``). Both
   sides run the same hook function inside SGLang's own wrapper (the probe checks it): cardcage
   hands the hook over unchanged, so the ratio is expected at 1 and its distance from 1 is the
   noise between two processes: these rows carry no budget. What a user pays is the next row,
   the hook's cost per call times the calls of one decode step, as a share of the step.

   As context, ``generate()``'s end-to-end time per token with the cardcage hook applied against
   the same Engine with the hook taken off (the original method back on the class and every
   instance's dispatch cache cleared, so SGLang resolves again), alternating; the generated text
   must be identical both ways, and the hook must not run while off.

Sides alternate ABAB, the order flipping every round; ratios are of medians within one run, with
the spread of the per-round ratio. The start-up row is tens of seconds per sample and noisy on a
shared 2-core machine, with few samples: read its spread. Benchmarks report, they do not gate:
the exit code is 0 when a budget is missed, non-zero only when a check of what was measured
fails.

    python benchmarks/bench_sglang_engine.py [--json PATH] [--quick]
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    ANCHOR_VERSION,
    AROUND_COUNTER_MODULE,
    CARDCAGE_REGISTRY,
    SGLANG_REGISTRY,
    BenchError,
    Result,
    fastest_block_overheads,
    hook_plugin_source,
    parse_args,
    progress,
    quartiles,
    table,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

ROOT = Path(__file__).resolve().parent.parent
#: Where ``make_tiny_llama`` lives: the engine scenario's harness, shared rather than copied.
ENGINE_SCENARIO = ROOT / "tests_integration" / "sglang_engine"
BUDGET = 1.05
DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
HOOKED_OP = "sglang.srt.layers.layernorm.RMSNorm.forward_native"
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
PROBE_TARGET = f"{SCHEDULER_MODULE}.Scheduler.flush_cache"
#: The same on every side: what a small CPU deployment passes (the memory two keep the KV cache
#: small on a shared machine).
ENGINE_ARGS: dict[str, Any] = {
    "device": "cpu",
    "attention_backend": "torch_native",
    "disable_cuda_graph": True,
    "mem_fraction_static": 0.05,
    "max_total_tokens": 512,
    "log_level": "warning",
}
PROMPT = "w1 w2 w3"
ENGINE_TIMEOUT_S = 420


@dataclass(frozen=True)
class Side:
    """One platform plugin: its sites, the name SGLang selects it by, what SGLang must record."""

    label: str
    sites: tuple[str, ...]  # under $CC_BENCH_SITES or the scratch folder
    platform: str
    platform_class: str
    hook_source: tuple[str, str]
    hook_module: str  # where the side's hook counts its calls


DEMO_CPU = Side(
    "demo-cpu",
    ("demo-cpu",),
    "demo_cpu",
    "cardcage_demo_cpu.platform.DemoCpuSRTPlatform",
    ("demo_cpu", "cardcage-demo-cpu"),
    "cardcage_demo_cpu.hooks",
)
NATIVE = Side(
    "native SGLang plugin",
    ("cc-plat-sglang-native", "native-engine"),
    "sglang_native_cpu",
    "ccbench_native_cpu.NativeCpuSRTPlatform",
    ("sglang_native_hooks", "ccbench-native-cpu"),
    "cc_plat_sglang_native.hooks",
)
SIDES = (DEMO_CPU, NATIVE)

#: The fixture's platform with what an Engine needs beyond selection, from SGLang itself: its
#: CPU device operations, and demo-cpu's ``init_backend()`` (one torch thread per usable CPU).
NATIVE_ENGINE_PLATFORM = """
import os

from cc_plat_sglang_native.platform import NativeSRTPlatform
from sglang.srt.platforms.cpu import CpuDeviceMixin


class NativeCpuSRTPlatform(CpuDeviceMixin, NativeSRTPlatform):
    _enum = NativeSRTPlatform._enum
    device_name = "sglang_native_cpu"
    device_type = "cpu"

    def is_pin_memory_available(self, device=None):
        return False

    def init_backend(self):
        import torch

        torch.set_num_threads(len(os.sched_getaffinity(0)))


def activate():
    if os.environ.get("SGLANG_PLATFORM") == "sglang_native_cpu":
        return "ccbench_native_cpu.NativeCpuSRTPlatform"
    return None
"""


@dataclass(frozen=True)
class HookVariant:
    """One way the same AROUND hook reaches ``HOOKED_OP``: whose registry its plugin calls."""

    label: str
    key: str
    dist: str


IN_SGLANG = HookVariant("cardcage plugin in SGLang", "cardcage", "ccbench-hook-cardcage")
NATIVE_HOOK = HookVariant("native SGLang plugin", "native", "ccbench-hook-native")
HOOK_VARIANTS = (IN_SGLANG, NATIVE_HOOK)
HOOK_PLUGIN = "ccbench_hook"  # the entry-point name of both plugins

# The hook, identical on both sides, and the counter the probe reads.
HOOK_MODULE = AROUND_COUNTER_MODULE
HOOK_PLUGINS = {
    IN_SGLANG.key: hook_plugin_source(CARDCAGE_REGISTRY, HOOKED_OP),
    NATIVE_HOOK.key: hook_plugin_source(SGLANG_REGISTRY, HOOKED_OP),
}

# The harness plugin: an AFTER hook on the scheduler's flush_cache, which SGLang's scheduler runs
# between requests when the launcher calls engine.flush_cache(). It reads one command from
# $CCBENCH_PROBE_IN, writes its answer to $CCBENCH_PROBE_OUT, and returns None (SGLang keeps
# flush_cache's result). Registered only where SGLang imported its scheduler module already.
PROBE_MODULE = f"""
import gc, json, os, sys, time

STATE = {{}}


def _registry_entries(target):
    from sglang.srt.plugins.hook_registry import HookRegistry

    return {{
        "sources": [
            None if s is None else [s.plugin_name, s.dist_name]
            for _, _, s in HookRegistry._hooks.get(target, [])
        ],
        "applied": target in HookRegistry._patched,
    }}


def _norms():
    from sglang.srt.layers.layernorm import RMSNorm

    if "norms" not in STATE:
        STATE["norms"] = [o for o in gc.get_objects() if type(o) is RMSNorm]
    return STATE["norms"]


def _hooked_function():
    from sglang.srt.layers.layernorm import RMSNorm

    return RMSNorm.__dict__["forward_native"]


def _original():
    # SGLang's wrapper (functools.wraps) keeps the method it wraps; read once, while applied.
    if "hooked" not in STATE:
        STATE["hooked"] = _hooked_function()
        STATE["original"] = getattr(STATE["hooked"], "__wrapped__", STATE["hooked"])
    return STATE["original"], STATE["hooked"]


def _report():
    from sglang.srt.platforms import current_platform
    import ccbench_hook_common

    norms = _norms()
    cached = [getattr(n._forward_method, "__func__", n._forward_method) for n in norms]
    original, hooked = _original()
    ours = sys.modules.get("cardcage.hooks.registry")
    return {{
        "pid": os.getpid(),
        "platform": [c.__module__ + "." + c.__qualname__ for c in type(current_platform).__mro__],
        "device_memory": _registry_entries({DEVICE_MEMORY!r}),
        "op": _registry_entries({HOOKED_OP!r}),
        "op_elsewhere": (
            len(ours.HookRegistry.registrations().get({HOOKED_OP!r}, ())) if ours else 0
        ),
        "calls": ccbench_hook_common.CALLS[0],
        "norms": len(norms),
        "dispatch": sorted({{getattr(f, "__qualname__", repr(f)) for f in cached}}),
        "dispatch_hooked": all(f is hooked for f in cached) and hooked is not original,
        # Whose wrapper runs the hook: SGLang's (hook_registry._wrap_fn), on both sides.
        "wrapper": os.path.basename(hooked.__code__.co_filename),
        "wraps_our_hook": any(
            getattr(c.cell_contents, "__module__", None) == "ccbench_hook_common"
            for c in hooked.__closure__ or ()
        ),
    }}


def _set_hook(on):
    from sglang.srt.layers.layernorm import RMSNorm

    original, hooked = _original()
    RMSNorm.forward_native = hooked if on else original
    for norm in _norms():
        norm._forward_method = None  # SGLang resolves its dispatch again on the next call


def _capture(on):
    # Record the last call of each norm, through its cached dispatch, then restore it.
    norms = _norms()
    if on:
        STATE["last"] = []
        for norm in norms:
            method = norm._forward_method

            def recorder(*args, _method=method, _norm=norm, **kwargs):
                STATE["last"].append((_norm, args, kwargs))
                return _method(*args, **kwargs)

            norm._forward_method = recorder
        return {{}}
    for norm in norms:
        norm._forward_method = None
    norm, args, kwargs = STATE["last"][-1]
    STATE["input"] = (norm, tuple(a.clone() if hasattr(a, "clone") else a for a in args), kwargs)
    return {{
        "recorded": len(STATE["last"]),
        "shapes": [list(a.shape) for a in args if hasattr(a, "shape")],
        "dtype": str(args[0].dtype),
        "kwargs": sorted(kwargs),
    }}


def _time(blocks, calls):
    import torch
    import ccbench_hook_common

    norm, args, kwargs = STATE["input"]
    original, hooked_fn = _original()
    bare = original.__get__(norm)
    hooked = hooked_fn.__get__(norm)
    with torch.inference_mode():
        for _ in range(calls):
            bare(*args, **kwargs), hooked(*args, **kwargs)
        a, b = bare(*args, **kwargs), hooked(*args, **kwargs)
        same = all(torch.equal(x, y) for x, y in zip(
            a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)
        ))
        before = ccbench_hook_common.CALLS[0]
        wall = {{"bare": [], "hooked": []}}
        cpu = {{"bare": [], "hooked": []}}
        for block in range(blocks):
            order = (("bare", bare), ("hooked", hooked))
            for kind, call in order if block % 2 == 0 else order[::-1]:
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                for _ in range(calls):
                    call(*args, **kwargs)
                t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                wall[kind].append((t1 - t0) / calls)
                cpu[kind].append((c1 - c0) / calls)
    return {{
        "wall": wall, "cpu": cpu, "same_output": same,
        "hook_calls": ccbench_hook_common.CALLS[0] - before,
    }}


def _after_flush(result, scheduler, *args, **kwargs):
    with open(os.environ["CCBENCH_PROBE_IN"], encoding="utf-8") as handle:
        command = json.load(handle)
    op = command["op"]
    try:
        if op == "report":
            answer = _report()
        elif op == "hook":
            _set_hook(command["on"])
            answer = {{}}
        elif op == "capture":
            answer = _capture(command["on"])
        elif op == "time":
            answer = _time(command["blocks"], command["calls"])
        else:
            answer = {{"error": "unknown command " + repr(op)}}
    except Exception as exc:  # the launcher fails loudly with it
        import traceback

        answer = {{"error": traceback.format_exc()}}
    with open(os.environ["CCBENCH_PROBE_OUT"], "w", encoding="utf-8") as out:
        json.dump(answer, out)


def register():
    if {SCHEDULER_MODULE!r} not in sys.modules or "CCBENCH_PROBE_IN" not in os.environ:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register({PROBE_TARGET!r}, _after_flush, HookType.AFTER)
"""

# The launcher: a user's script. Its config (argv[1], JSON) says what to do after start-up.
LAUNCHER = f"""
import json, os, sys, time
from pathlib import Path

SAMPLING = {{"temperature": 0, "ignore_eos": True}}


def probe(engine, command):
    Path(os.environ["CCBENCH_PROBE_IN"]).write_text(json.dumps(command), encoding="utf-8")
    out = Path(os.environ["CCBENCH_PROBE_OUT"])
    out.unlink(missing_ok=True)
    engine.flush_cache()
    if not out.exists():
        raise SystemExit("the probe did not answer " + repr(command) + " in the scheduler")
    answer = json.loads(out.read_text(encoding="utf-8"))
    if "error" in answer:
        raise SystemExit("the probe failed on " + repr(command) + ":\\n" + answer["error"])
    return answer


def generate(engine, tokens):
    out = engine.generate([{PROMPT!r}], {{**SAMPLING, "max_new_tokens": tokens}})
    return out[0]["text"], out[0]["meta_info"]["completion_tokens"]


def launcher_hooks(target):
    from sglang.srt.plugins.hook_registry import HookRegistry

    return {{
        "sources": [
            None if s is None else [s.plugin_name, s.dist_name]
            for _, _, s in HookRegistry._hooks.get(target, [])
        ],
        "applied": target in HookRegistry._patched,
    }}


def main():
    config = json.loads(sys.argv[1])
    start = time.perf_counter()
    import sglang

    imported = time.perf_counter()
    engine = sglang.Engine(model_path=config["model"], **config["engine_args"])
    ready = time.perf_counter()
    report = {{"import_s": imported - start, "engine_s": ready - imported}}
    try:
        from sglang.srt.platforms import current_platform
        import importlib

        report["version"] = sglang.__version__
        report["launcher_platform"] = [
            c.__module__ + "." + c.__qualname__ for c in type(current_platform).__mro__
        ]
        report["launcher_device_memory"] = launcher_hooks({DEVICE_MEMORY!r})
        if config.get("hook_module"):
            hooks = importlib.import_module(config["hook_module"])
            stats = getattr(hooks, "STATS", None)
            report["launcher_hook_calls"] = (
                stats.get({DEVICE_MEMORY!r}).calls if stats is not None else len(hooks.CALLS)
            )
        report["scheduler"] = probe(engine, {{"op": "report"}})
        if config["mode"] == "hook":
            report.update(measure_hook(engine, config))
    finally:
        engine.shutdown()
    print("CCBENCH " + json.dumps(report))


def measure_hook(engine, config):
    n1, n2 = config["tokens"]
    generate(engine, n1)  # warm-up: every norm has resolved its dispatch
    counts = [probe(engine, {{"op": "report"}})]
    texts = []
    for tokens in (n1, n2):
        texts.append(generate(engine, tokens))
        counts.append(probe(engine, {{"op": "report"}}))
    probe(engine, {{"op": "capture", "on": True}})
    generate(engine, n1)
    captured = probe(engine, {{"op": "capture", "on": False}})
    timing = probe(engine, {{"op": "time", "blocks": config["blocks"], "calls": config["calls"]}})
    # End to end, hook on and off in turns, the order flipping each round.
    e2e = {{"on": [], "off": []}}
    e2e_texts = {{"on": set(), "off": set()}}
    off_calls = []
    tokens = config["e2e_tokens"]
    for round_index in range(config["e2e_rounds"]):
        order = ("on", "off") if round_index % 2 == 0 else ("off", "on")
        for state in order:
            probe(engine, {{"op": "hook", "on": state == "on"}})
            before = probe(engine, {{"op": "report"}})["calls"]
            t0 = time.perf_counter()
            text, done = generate(engine, tokens)
            elapsed = time.perf_counter() - t0
            grew = probe(engine, {{"op": "report"}})["calls"] - before
            if state == "off":
                off_calls.append(grew)
            e2e[state].append(elapsed / done)
            e2e_texts[state].add(text)
    probe(engine, {{"op": "hook", "on": True}})
    generate(engine, n1)  # SGLang resolves every norm's dispatch again
    after = probe(engine, {{"op": "report"}})
    return {{
        "counts": [c["calls"] for c in counts],
        "norms": counts[-1]["norms"],
        "dispatch": counts[-1]["dispatch"],
        "dispatch_hooked": counts[-1]["dispatch_hooked"],
        "texts": [t for t, _ in texts],
        "completion_tokens": [n for _, n in texts],
        "captured": captured,
        "timing": timing,
        "e2e": e2e,
        "e2e_texts": {{k: sorted(v) for k, v in e2e_texts.items()}},
        "off_calls": off_calls,
        "dispatch_hooked_again": after["dispatch_hooked"],
    }}


if __name__ == "__main__":  # SGLang spawns its subprocesses: they re-import this file
    main()
"""


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` trades precision for a short run."""

    warmups: int  # start-up row: Engines not measured, sides in turn (they warm the caches)
    rounds: int  # start-up row: one fresh Engine per side per round
    hook_rounds: int  # hook row: one fresh Engine per variant per round
    hook_blocks: int  # alternating bare / hooked blocks inside each scheduler
    hook_calls: int  # calls per block
    e2e_rounds: int  # generate() hook on / off pairs per hook-row Engine
    e2e_tokens: int  # tokens per timed generate()


# Short blocks (20 calls of a ~25 us op: half a millisecond), many of them: the fastest block is
# then one that no preemption or neighbour's cache traffic touched, on both sides alike.
# Start-up rounds are even: the first Engine of a round measured 3-6 s slower than the second
# (whichever side), so each side must go first equally often or the order decides the ratio.
FULL = Settings(
    warmups=2, rounds=4, hook_rounds=3, hook_blocks=2000, hook_calls=20, e2e_rounds=6, e2e_tokens=48
)
QUICK = Settings(
    warmups=1, rounds=1, hook_rounds=1, hook_blocks=400, hook_calls=20, e2e_rounds=2, e2e_tokens=24
)
#: Tokens of the two generate() calls whose hook counts are compared: N and N + K.
COUNT_TOKENS = (4, 12)


def write_sites(scratch: Path) -> dict[str, Path]:
    """The generated sites: the probe and hook module, each hook plugin, the native platform."""
    from cardcage.hooks.testing import write_distribution

    sites = {name: scratch / name for name in ("probe", "native-engine")}
    write_distribution(
        sites["probe"],
        "ccbench-engine-probe",
        entry_points={"sglang.srt.plugins": {"ccbench_probe": "ccbench_engine_probe:register"}},
        modules={"ccbench_engine_probe": PROBE_MODULE, "ccbench_hook_common": HOOK_MODULE},
    )
    write_distribution(
        sites["native-engine"],
        "ccbench-native-cpu",
        entry_points={
            "sglang.srt.platforms": {"sglang_native_cpu": "ccbench_native_cpu:activate"},
            # The fixture's own hook, under the distribution that supplies the selected platform:
            # SGLang runs no general plugin of a platform distribution it did not select.
            "sglang.srt.plugins": {"sglang_native_hooks": "cc_plat_sglang_native.hooks:register"},
        },
        modules={"ccbench_native_cpu": NATIVE_ENGINE_PLATFORM},
    )
    for variant in HOOK_VARIANTS:
        site = sites[f"hook-{variant.key}"] = scratch / f"hook-{variant.key}"
        write_distribution(
            site,
            variant.dist,
            entry_points={"sglang.srt.plugins": {HOOK_PLUGIN: "ccbench_hook_plugin:register"}},
            modules={"ccbench_hook_plugin": HOOK_PLUGINS[variant.key]},
        )
    return sites


def run_engine(
    paths: Sequence[Path], platform_name: str, config: dict[str, Any], scratch: Path, what: str
) -> dict[str, Any]:
    """One fresh launcher with ``paths`` on PYTHONPATH: its report, or a loud failure."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_SGLANG_", "CCBENCH_"))
        and k != "PYTHONPATH"
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(str(p) for p in paths),
            "SGLANG_PLATFORM": platform_name,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "CCBENCH_PROBE_IN": str(scratch / "probe-in.json"),
            "CCBENCH_PROBE_OUT": str(scratch / "probe-out.json"),
        }
    )
    launcher = scratch / "ccbench_launcher.py"
    if not launcher.exists():
        launcher.write_text(LAUNCHER, encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, str(launcher), json.dumps(config)],
            env=env,
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=ENGINE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{what}: the Engine did not finish in {ENGINE_TIMEOUT_S} s") from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("CCBENCH ")]
    if done.returncode != 0 or not lines:
        raise BenchError(f"{what}: the launcher failed ({done.returncode}):\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(lines[-1].removeprefix("CCBENCH "))
    return report


def check(what: str, report: dict[str, Any], expected: dict[str, Any]) -> None:
    """Fail loudly unless every ``expected`` entry matches the report (dotted keys go deeper)."""
    wrong = {}
    for key, value in expected.items():
        found: Any = report
        for part in key.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if found != value:
            wrong[key] = found
    if wrong:
        raise BenchError(f"{what}: not the expected work: {wrong} (expected {expected})")


def run_startup(
    sites: Path, generated: dict[str, Path], side: Side, model: Path, scratch: Path
) -> dict[str, float]:
    """One Engine start-up for ``side``: its timings, once checked."""
    paths = [*(sites / s if (sites / s).is_dir() else generated[s] for s in side.sites)]
    config = {
        "mode": "startup",
        "model": str(model),
        "engine_args": ENGINE_ARGS,
        "hook_module": side.hook_module,
    }
    report = run_engine(
        [*paths, generated["probe"]], side.platform, config, scratch, f"start-up, {side.label}"
    )
    source = [list(side.hook_source)]
    # An instance of the side's class (demo-cpu's reaches SGLang through cardcage's adapter, a
    # subclass of it and of SGLang's SRTPlatform), in the launcher and in the scheduler.
    for where in ("launcher_platform", "scheduler_platform"):
        found = report[where] if where in report else report["scheduler"]["platform"]
        report[where] = side.platform_class in found and "SRTPlatform" in str(found)
    check(
        f"start-up, {side.label}",
        report,
        {
            "version": ANCHOR_VERSION,
            "launcher_platform": True,
            "launcher_device_memory.sources": source,
            "launcher_device_memory.applied": True,
            "scheduler_platform": True,
            "scheduler.device_memory.sources": source,
            "scheduler.device_memory.applied": True,
        },
    )
    # SGLang sizes device memory in the launcher: the side's hook ran there.
    if not report.get("launcher_hook_calls"):
        raise BenchError(f"start-up, {side.label}: the side's hook never ran in the launcher")
    if report["scheduler"]["pid"] == os.getpid():
        raise BenchError(f"start-up, {side.label}: the probe ran outside SGLang's scheduler")
    return {"import_s": report["import_s"], "engine_s": report["engine_s"]}


def measure_startup(
    sites: Path, generated: dict[str, Path], model: Path, scratch: Path, settings: Settings
) -> dict[str, list[dict[str, float]]]:
    for index in range(settings.warmups):
        side = SIDES[(index + 1) % len(SIDES)]  # the native side first: demo-cpu starts round 1
        progress(f"start-up warm-up {index + 1}/{settings.warmups}: {side.label}")
        run_startup(sites, generated, side, model, scratch)
    samples: dict[str, list[dict[str, float]]] = {side.label: [] for side in SIDES}
    for round_index in range(settings.rounds):
        order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            progress(f"start-up round {round_index + 1}/{settings.rounds}: {side.label}")
            samples[side.label].append(run_startup(sites, generated, side, model, scratch))
    return samples


def run_hook_engine(
    sites: Path,
    generated: dict[str, Path],
    variant: HookVariant,
    model: Path,
    scratch: Path,
    settings: Settings,
) -> dict[str, Any]:
    """One Engine on the native platform with ``variant``'s hook plugin; its report, checked."""
    paths = [
        generated[f"hook-{variant.key}"],
        generated["probe"],
        *(sites / s if (sites / s).is_dir() else generated[s] for s in NATIVE.sites),
    ]
    config = {
        "mode": "hook",
        "model": str(model),
        "engine_args": ENGINE_ARGS,
        "tokens": COUNT_TOKENS,
        "blocks": settings.hook_blocks,
        "calls": settings.hook_calls,
        "e2e_rounds": settings.e2e_rounds,
        "e2e_tokens": settings.e2e_tokens,
    }
    what = f"hook row, {variant.label}"
    report = run_engine(paths, NATIVE.platform, config, scratch, what)
    norms = report["norms"]
    report["scheduler_platform"] = NATIVE.platform_class in report["scheduler"]["platform"]
    check(
        what,
        report,
        {
            "scheduler_platform": True,
            "scheduler.op.sources": [[HOOK_PLUGIN, variant.dist]],
            "scheduler.op.applied": True,
            "scheduler.op_elsewhere": 0,  # SGLang's wrapper only: cardcage keeps no copy
            "scheduler.wrapper": "hook_registry.py",
            "scheduler.wraps_our_hook": True,
            "norms": 2 * 2 + 1,  # two per decoder layer of the tiny Llama, and the final norm
            "dispatch_hooked": True,  # every instance's cached dispatch is the hooked method
            "dispatch_hooked_again": True,
            "completion_tokens": list(COUNT_TOKENS),
            "timing.same_output": True,
            "timing.hook_calls": settings.hook_blocks * settings.hook_calls,
            "off_calls": [0] * settings.e2e_rounds,  # the hook never ran while off
        },
    )
    counts = report["counts"]
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    extra = (COUNT_TOKENS[1] - COUNT_TOKENS[0]) * norms
    if second - first != extra:
        raise BenchError(
            f"{what}: the hook's counter grew by {first} for {COUNT_TOKENS[0]} tokens and "
            f"{second} for {COUNT_TOKENS[1]}: not {norms} per decode step"
        )
    for state in ("on", "off"):
        if len(report["e2e_texts"][state]) != 1:
            raise BenchError(f"{what}: generate() gave different texts with the hook {state}")
    if report["e2e_texts"]["on"] != report["e2e_texts"]["off"]:
        raise BenchError(f"{what}: generate()'s text differs with and without the hook")
    report["per_step"] = extra // (COUNT_TOKENS[1] - COUNT_TOKENS[0])
    return report


def measure_hooks(
    sites: Path, generated: dict[str, Path], model: Path, scratch: Path, settings: Settings
) -> dict[str, list[dict[str, Any]]]:
    samples: dict[str, list[dict[str, Any]]] = {v.key: [] for v in HOOK_VARIANTS}
    for round_index in range(settings.hook_rounds):
        order = HOOK_VARIANTS if round_index % 2 == 0 else tuple(reversed(HOOK_VARIANTS))
        for variant in order:
            progress(f"hook round {round_index + 1}/{settings.hook_rounds}: {variant.label}")
            samples[variant.key].append(
                run_hook_engine(sites, generated, variant, model, scratch, settings)
            )
    return samples


def startup_results(samples: dict[str, list[dict[str, float]]]) -> list[Result]:
    ours, theirs = samples[DEMO_CPU.label], samples[NATIVE.label]
    rows = [
        ("Engine start-up to ready: import sglang + sglang.Engine(...)", ("import_s", "engine_s")),
    ]
    results = []
    for name, keys in rows:
        mine = [sum(s[k] for k in keys) * 1e3 for s in ours]
        native = [sum(s[k] for k in keys) * 1e3 for s in theirs]
        value, reference = statistics.median(mine), statistics.median(native)
        results.append(
            Result(
                group="sglang engine",
                name=name,
                unit="ms",
                value=value,
                reference=reference,
                reference_label=NATIVE.label,
                ratio=value / reference,
                budget=BUDGET,
                spread=quartiles([m / n for m, n in zip(mine, native, strict=True)]),
            )
        )
    return results


def overheads(reports: list[dict[str, Any]], clock: str) -> list[float]:
    """Per Engine: the fastest hooked block minus the fastest bare block, ns per call."""
    return fastest_block_overheads([r["timing"] for r in reports], clock)


def hook_results(samples: dict[str, list[dict[str, Any]]]) -> list[Result]:
    # No budget on the per-call rows: both sides run the same hook function inside SGLang's own
    # wrapper (cardcage hands it over unchanged), so their ratio is 1 by construction and what it
    # shows is this method's noise between two Engines (0.76 and 1.94 in two full runs on the
    # 2-vCPU VM). What a user pays is the per-step row below.
    name = "AROUND hook on SRT RMSNorm.forward_native in the scheduler, overhead/call (context)"
    results = []
    for clock, budget in (("wall", None), ("cpu", None)):
        mine = overheads(samples[IN_SGLANG.key], clock)
        native = overheads(samples[NATIVE_HOOK.key], clock)
        value, reference = statistics.median(mine), statistics.median(native)
        per_round = [m / n for m, n in zip(mine, native, strict=True) if n > 0]
        suffix = "" if clock == "wall" else ", CPU time"
        results.append(
            Result(
                group="sglang engine",
                name=f"{name}{suffix}",
                unit="ns/call",
                value=value,
                reference=reference,
                reference_label=NATIVE_HOOK.label,
                ratio=value / reference if reference > 0 else float("nan"),
                budget=budget,
                spread=quartiles(per_round) if per_round else None,
            )
        )
    # Context: generate() per token with the cardcage hook on against off, in the same Engines.
    on = [statistics.median(r["e2e"]["on"]) * 1e3 for r in samples[IN_SGLANG.key]]
    off = [statistics.median(r["e2e"]["off"]) * 1e3 for r in samples[IN_SGLANG.key]]
    # What the hook adds to one decode step: its measured cost per call times the calls a step
    # makes, against the step's own time with the hook off.
    per_step = samples[IN_SGLANG.key][0]["per_step"]
    added_ms = statistics.median(overheads(samples[IN_SGLANG.key], "wall")) * per_step / 1e6
    results.append(
        Result(
            group="sglang engine",
            name=f"the hook's cost per decode step ({per_step} calls), share of the step",
            unit="ms",
            value=added_ms,
            reference=statistics.median(off),
            reference_label="decode step, hook off",
            ratio=added_ms / statistics.median(off),
            budget=None,
            spread=None,
        )
    )
    pairs = [
        a / b
        for r in samples[IN_SGLANG.key]
        for a, b in zip(r["e2e"]["on"], r["e2e"]["off"], strict=True)
    ]
    results.append(
        Result(
            group="sglang engine",
            name="generate() per token, cardcage hook on (context)",
            unit="ms",
            value=statistics.median(on),
            reference=statistics.median(off),
            reference_label="hook off",
            ratio=statistics.median(on) / statistics.median(off),
            budget=None,
            spread=quartiles(pairs),
        )
    )
    return results


def hook_context(samples: dict[str, list[dict[str, Any]]]) -> str:
    first = samples[IN_SGLANG.key][0]
    captured = first["captured"]
    lines = [
        f"hooked: {HOOKED_OP}; SGLang's dispatch cached {first['dispatch']} on all "
        f"{first['norms']} RMSNorm instances; the hook ran {first['per_step']} times per decode "
        "step",
        f"timed on the last decode step's call: shapes {captured['shapes']} {captured['dtype']}"
        f"{', kwargs ' + str(captured['kwargs']) if captured['kwargs'] else ''} (fastest block):",
    ]
    for variant in HOOK_VARIANTS:
        reports = samples[variant.key]
        bare = statistics.median(min(r["timing"]["cpu"]["bare"]) for r in reports)
        hooked = statistics.median(min(r["timing"]["cpu"]["hooked"]) for r in reports)
        lines.append(
            f"  {variant.label}: bare {bare / 1e3:.2f} us, hooked {hooked / 1e3:.2f} us (CPU time)"
        )
    return "\n".join(lines)


def startup_context(samples: dict[str, list[dict[str, float]]]) -> str:
    lines = ["start-up samples, s (import sglang + Engine(...)):"]
    for side in SIDES:
        values = [s["import_s"] + s["engine_s"] for s in samples[side.label]]
        lines.append(f"  {side.label}: " + ", ".join(f"{v:.1f}" for v in values))
    return "\n".join(lines)


def make_model(folder: Path) -> Path:
    """The engine scenario's tiny random Llama, made in a fresh interpreter of this venv."""
    code = (
        f"import sys; sys.path.insert(0, {str(ENGINE_SCENARIO)!r}); "
        "from pathlib import Path; from engine_scenario import make_tiny_llama; "
        f"make_tiny_llama(Path({str(folder)!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"could not make the tiny model:\n{done.stderr[-3000:]}")
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv, anchor=False)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    sites = Path(os.environ.get("CC_BENCH_SITES", "/nonexistent"))
    print(f"cardcage-built plugin inside sglang {ANCHOR_VERSION}'s SRT Engine vs native plugins")
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} CPUs")
    results: list[Result] = []
    context: list[str] = []
    failure = None
    try:
        missing = [s for s in ("demo-cpu", "cc-plat-sglang-native") if not (sites / s).is_dir()]
        if missing:
            raise BenchError(f"no vendor site for {missing} under CC_BENCH_SITES={sites}")
        with tempfile.TemporaryDirectory(prefix="cardcage-bench-engine-") as tmp:
            scratch = Path(tmp)
            generated = write_sites(scratch / "sites")
            model = make_model(scratch / "tiny-llama")
            progress(
                f"Engine start-up: {settings.rounds} rounds of {len(SIDES)} fresh Engines "
                f"after {settings.warmups} warm-up Engine(s)"
            )
            startup = measure_startup(sites, generated, model, scratch, settings)
            results += startup_results(startup)
            context.append(startup_context(startup))
            progress(
                f"AROUND hook in the scheduler: {settings.hook_rounds} rounds of "
                f"{len(HOOK_VARIANTS)} Engines, {settings.hook_blocks} blocks of "
                f"{settings.hook_calls} calls, {settings.e2e_rounds} generate() pairs"
            )
            hooks = measure_hooks(sites, generated, model, scratch, settings)
            results += hook_results(hooks)
            context.append(hook_context(hooks))
    except BenchError as exc:
        failure = str(exc)
    print()
    if results:
        print(table(results))
    for text in context:
        print(f"\n{text}")
    print(
        "\nstart-up: value = demo-cpu selected, reference = the native SGLang plugin selected.\n"
        "hook: value = cardcage plugin, reference = native plugin, each in its own Engine on the\n"
        "native platform. ratio = value / reference; (25-75 %) is the per-round ratio's spread."
    )
    elapsed = time.perf_counter() - started
    if failure:
        print(f"\nNOT MEASURED: {failure}")
    else:
        missed = [r.name for r in results if r.verdict.startswith("MISS")]
        verdict = "budget missed: " + ", ".join(missed) if missed else "within budget"
        print(f"\n{verdict} ({elapsed:.0f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"results": [asdict(r) for r in results], "failure": failure, "seconds": elapsed},
                indent=2,
            ),
            encoding="utf-8",
        )
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
