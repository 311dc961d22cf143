"""A cardcage-built plugin inside SGLang 0.5.23 against a native SGLang plugin (DESIGN.md §7).

The budget: SGLang's start-up and ``load_plugins()`` with demo-cpu cost at most 1.05 x the same
with an equivalent plugin written for SGLang itself. Both sides run SGLang's own, installed code
(``nox -s bench`` installs the 0.5.23 wheel with ``--no-deps`` and ``SGLANG_HOST_PINS``); only the
plugin differs:

- demo-cpu (``packages/demo-cpu``, built from the template): its platform class is cardcage's,
  handed to SGLang through cardcage's adapter; its general plugin registers an AROUND hook on
  ``sglang.srt.utils.common.get_device_memory_capacity`` through cardcage's registry;
- the native fixture (``tests_integration/fixtures/platforms/cc-plat-sglang-native``): a platform
  subclassing SGLang's ``SRTPlatform`` and an AROUND hook on the same target, registered through
  ``sglang.srt.plugins.hook_registry`` directly.

Each is installed in its own ``pip install --target`` site under ``$CC_BENCH_SITES``, beside
SGLang's own two sites there (``sglang``: the wheel; ``sglang-deps``: what ``SGLANG_HOST_PINS``
adds to the bench venv), so the other benchmarks' processes see neither; a child puts its
plugin's site and SGLang's on ``PYTHONPATH`` and selects the plugin by name with
``SGLANG_PLATFORM``.
Every sample is a fresh interpreter with a private bytecode cache that imports, before the clock,
the third-party packages SGLang's import path needs (torch, triton, numpy, pydantic, ...: the same
on both sides, and most of SGLang's import time, which would drown the difference in noise), then
times, with ``time.perf_counter()``:

- ``import sglang``, which selects the SRT platform (``sglang.srt.utils.common`` reads
  ``current_platform`` at module scope), then SGLang's ``load_plugins()``: the budgeted row;
- ``load_plugins()`` alone (context): SGLang's loader running each general plugin and applying
  its hook.

Each child checks that SGLang selected the plugin's platform and applied its hook, attributed to
its distribution, so a run that measured the wrong thing fails. It also lists the modules its
window imported, with the size of the bytecode each read; the report prints what only one side
imported (the plugin's import footprint: its modules, cardcage's for demo-cpu) and names any
module outside the plugin's own packages that only one side pulls in.

A second measurement is one AROUND hook's overhead per call on one op of SGLang's own code that a
forward pass calls once per layer: ``RMSNorm.forward`` of SGLang's diffusion runtime
(``sglang.multimodal_gen.runtime.layers.layernorm``) on one 3072-wide float32 token, torch on one
thread. It is one op, not SGLang's decode step: SRT's own ``RMSNorm`` (``sglang.srt.layers``)
does not import in this venv (its import chain needs transformers and torchvision), and the
hook's wrapper does not depend on which op it wraps. The same hook function reaches it three ways:

- a cardcage plugin (its ``register()`` calls ``cardcage.hooks.HookRegistry.register``) that
  SGLang's ``load_plugins()`` runs: cardcage hands the hook to SGLang's registry, attributed to
  the plugin, and SGLang's wrapper runs it (the budgeted row, against the next);
- a native plugin whose ``register()`` calls ``sglang.srt.plugins.hook_registry`` directly;
- cardcage as host: cardcage's registry registers and applies it, with its own wrappers
  (context).

Both plugins are generated distributions with one ``sglang.srt.plugins`` entry point each, in a
site of their own. Each fresh process times blocks of calls of the bare method (bound before any
hook was applied) and of the hooked one, alternating; its overhead is the fastest hooked block
minus the fastest bare block, per call, in wall and in CPU time (``time.thread_time_ns``). The
child checks that the hook ran on every hooked call and no bare one, that the output is
unchanged, that exactly one registry holds it, and its attribution. The op costs tens of
microseconds and a wrapper a few hundred nanoseconds, so these rows are noisy on a shared machine:
read their spread. Rounds alternate the sides' order
so drift on a shared machine hits both alike; the ratio is of medians, with the spread of the
per-round ratio.

Benchmarks report, they do not gate: the exit code is 0 even when a budget is missed or a
measurement fails.

    python benchmarks/bench_sglang_host.py --anchor-dir DIR [--json PATH] [--quick]
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
from collections import Counter
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

BUDGET = 1.05
TARGET = "sglang.srt.utils.common.get_device_memory_capacity"


@dataclass(frozen=True)
class Side:
    """One plugin under test: its site, the name SGLang selects it by, what SGLang must record,
    and the top-level import packages that are its own (for demo-cpu, cardcage's too)."""

    label: str
    site: str
    platform: str
    device_name: str
    source: tuple[str, str]
    packages: tuple[str, ...]


DEMO_CPU = Side(
    "demo-cpu",
    "demo-cpu",
    "demo_cpu",
    "demo_cpu",
    ("demo_cpu", "cardcage-demo-cpu"),
    ("cardcage", "cardcage_demo_cpu"),
)
NATIVE = Side(
    "native SGLang plugin",
    "cc-plat-sglang-native",
    "sglang_native",
    "sglang_native",
    ("sglang_native_hooks", "cc-plat-sglang-native"),
    ("cc_plat_sglang_native",),
)
SIDES = (DEMO_CPU, NATIVE)
#: SGLang's sites under ``$CC_BENCH_SITES``: its wheel, and the packages its import path needs.
SGLANG_SITES = ("sglang", "sglang-deps")

#: The op the per-call row hooks: SGLang's own RMSNorm layer of its diffusion runtime, through its
#: class attribute, as a vendor hooks a layer. SRT's ``sglang.srt.layers.layernorm`` is not used:
#: importing it reaches ``sglang.srt.configs``, which needs transformers and torchvision, and no
#: torchvision imports beside this venv's torch 2.13 CPU build.
HOOKED_OP = "sglang.multimodal_gen.runtime.layers.layernorm.RMSNorm.forward"
#: One token's hidden state: what a norm layer sees per request in a step of a 3072-wide model.
OP_SHAPE = (1, 3072)


@dataclass(frozen=True)
class HookVariant:
    """One way the same AROUND hook reaches ``HOOKED_OP``; ``registry`` says whose wrapper runs."""

    label: str
    key: str
    registry: str  # "sglang": SGLang's wrappers apply it; "cardcage": cardcage's do


IN_SGLANG = HookVariant("cardcage plugin in SGLang", "cardcage-in-sglang", "sglang")
NATIVE_HOOK = HookVariant("native SGLang plugin", "native", "sglang")
CARDCAGE_HOST = HookVariant("cardcage as host", "cardcage-host", "cardcage")
HOOK_VARIANTS = (IN_SGLANG, NATIVE_HOOK, CARDCAGE_HOST)
HOOK_PLUGIN = "ccbench_hook"  # the entry-point name of both plugins
HOOK_DISTS = {IN_SGLANG.key: "ccbench-hook-cardcage", NATIVE_HOOK.key: "ccbench-hook-native"}

# The hook, identical on every side: one module both plugins and the cardcage-host child import.
HOOK_MODULE = AROUND_COUNTER_MODULE
HOOK_PLUGINS = {
    IN_SGLANG.key: hook_plugin_source(CARDCAGE_REGISTRY, HOOKED_OP),
    NATIVE_HOOK.key: hook_plugin_source(SGLANG_REGISTRY, HOOKED_OP),
}


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` trades precision for a short run."""

    warmups: int  # per side, not measured: they fill the bytecode cache
    rounds: int  # one fresh process per side per round
    hook_rounds: int  # one fresh process per hook variant per round
    hook_blocks: int  # alternating bare / hooked blocks in each of those processes
    hook_calls: int  # calls per block


FULL = Settings(warmups=2, rounds=15, hook_rounds=4, hook_blocks=200, hook_calls=20)
QUICK = Settings(warmups=1, rounds=3, hook_rounds=1, hook_blocks=40, hook_calls=20)

#: What both sides import before the clock: SGLANG_HOST_PINS' packages, by import name.
PRELOADED = (
    "torch",
    "triton",
    "numpy",
    "orjson",
    "psutil",
    "pybase64",
    "requests",
    "packaging.version",
    "PIL.Image",
    "starlette.routing",
    "msgspec",
    "pydantic",
    "zmq",
    "tqdm",
    "IPython.display",
    "aiohttp",
)

# The child: the shared third-party imports before the clock, then SGLang's own start-up and
# loader, then the checks.
CHILD = f"""
import importlib, json, os, sys, time
for name in {PRELOADED!r}:
    importlib.import_module(name)
preloaded = set(sys.modules)
start = time.perf_counter()
import sglang  # selects the SRT platform
imported = time.perf_counter()
from sglang.srt.plugins import load_plugins
load_plugins()
loaded = time.perf_counter()
from sglang.srt.platforms import current_platform
from sglang.srt.plugins.hook_registry import HookRegistry
sources = [
    None if source is None else [source.plugin_name, source.dist_name]
    for _, _, source in HookRegistry._hooks.get({TARGET!r}, [])
]
window = {{}}  # every module the window imported -> the size of the bytecode it read, or 0
for name in set(sys.modules) - preloaded:
    cached = getattr(getattr(sys.modules[name], "__spec__", None), "cached", None)
    try:
        window[name] = os.path.getsize(cached) if cached else 0
    except OSError:
        window[name] = 0
print(json.dumps({{
    "imported": window,
    "import_s": imported - start,
    "load_s": loaded - imported,
    "version": sglang.__version__,
    "device_name": current_platform.device_name,
    "applied": {TARGET!r} in HookRegistry._patched,
    "sources": sources,
}}))
"""


# The per-call child: SGLang's RMSNorm on one token, bare and with the AROUND hook applied by the
# variant's registry, in alternating blocks of calls; then the checks that the hook ran on every
# hooked call, never on a bare one, and is attributed to the plugin that registered it.
HOOK_CHILD = f"""
import importlib, json, sys, time
config = json.loads(sys.argv[1])
for name in {PRELOADED!r}:
    importlib.import_module(name)
import torch
torch.set_num_threads(1)  # one core of a shared machine: no thread pool waking per call
from sglang.multimodal_gen.runtime.layers.layernorm import RMSNorm
from ccbench_hook_common import CALLS, around
TARGET = {HOOKED_OP!r}
norm = RMSNorm({OP_SHAPE[-1]})
x = torch.randn(*{OP_SHAPE!r}, generator=torch.Generator().manual_seed(0))
bare = norm.forward  # bound before any hook is applied: SGLang's own method
variant = config["variant"]
if variant == "cardcage-host":
    from cardcage.hooks import HookRegistry, HookSource, HookType
    HookRegistry.register(
        TARGET, around, HookType.AROUND, source=HookSource({HOOK_PLUGIN!r}, "ccbench-hook-host")
    )
    HookRegistry.apply(strict=True)
    sources = [
        [r.source.plugin_name, r.source.dist_name]
        for r in HookRegistry.registrations().get(TARGET, ())
    ]
    applied = TARGET in HookRegistry.applied_targets()
    other = sys.modules.get("sglang.srt.plugins.hook_registry")
    elsewhere = len(other.HookRegistry._hooks.get(TARGET, [])) if other else 0
else:
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry
    load_plugins()  # SGLang's loader runs the plugin's register() and applies its registry
    sources = [
        None if s is None else [s.plugin_name, s.dist_name]
        for _, _, s in HookRegistry._hooks.get(TARGET, [])
    ]
    applied = TARGET in HookRegistry._patched
    ours = sys.modules.get("cardcage.hooks.registry")
    elsewhere = len(ours.HookRegistry.registrations().get(TARGET, ())) if ours else 0
hooked = norm.forward
calls = config["calls"]
for _ in range(calls):
    bare(x), hooked(x)
same = bool(torch.equal(bare(x), hooked(x)))
CALLS[0] = 0
wall = {{"bare": [], "hooked": []}}
cpu = {{"bare": [], "hooked": []}}
for block in range(config["blocks"]):
    order = (("bare", bare), ("hooked", hooked))
    for kind, call in order if block % 2 == 0 else order[::-1]:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(calls):
            call(x)
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        wall[kind].append((t1 - t0) / calls)
        cpu[kind].append((c1 - c0) / calls)
print(json.dumps({{
    "wall": wall, "cpu": cpu, "hook_calls": CALLS[0], "same_output": same,
    "applied": applied, "sources": sources, "elsewhere": elsewhere,
    "distinct": hooked.__func__ is not bare.__func__,
}}))
"""


def write_hook_sites(root: Path) -> dict[str, Path]:
    """A site per hook variant: the shared hook module and, for SGLang's loader, the plugin.

    Both plugins are one distribution with one ``sglang.srt.plugins`` entry point whose
    ``register()`` registers the same hook function: one through cardcage's registry, one through
    SGLang's. The cardcage-host site holds the hook module only: that child registers it itself.
    """
    from cardcage.hooks.testing import write_distribution

    sites = {}
    for variant in HOOK_VARIANTS:
        site = root / f"hook-{variant.key}"
        modules = {"ccbench_hook_common": HOOK_MODULE}
        plugin = HOOK_PLUGINS.get(variant.key)
        if plugin is None:
            site.mkdir(parents=True)
            (site / "ccbench_hook_common.py").write_text(HOOK_MODULE, encoding="utf-8")
        else:
            write_distribution(
                site,
                HOOK_DISTS[variant.key],
                entry_points={"sglang.srt.plugins": {HOOK_PLUGIN: "ccbench_hook_plugin:register"}},
                modules={**modules, "ccbench_hook_plugin": plugin},
            )
        sites[variant.key] = site
    return sites


def run_hook_child(
    sites: Path, site: Path, variant: HookVariant, settings: Settings, pycache: Path
) -> dict[str, Any]:
    """One fresh interpreter timing ``variant``; its per-block samples, once checked."""
    env = base_env(pycache)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *(str(sites / n) for n in SGLANG_SITES)])
    config = {"variant": variant.key, "blocks": settings.hook_blocks, "calls": settings.hook_calls}
    done = subprocess.run(
        [sys.executable, "-c", HOOK_CHILD, json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BenchError(f"hook row, {variant.label}: the child failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    dist = HOOK_DISTS.get(variant.key, "ccbench-hook-host")
    expected = {
        "hook_calls": settings.hook_blocks * settings.hook_calls,  # hooked blocks only
        "same_output": True,
        "applied": True,
        "sources": [[HOOK_PLUGIN, dist]],
        "elsewhere": 0,  # SGLang's wrapper xor cardcage's: never both
        "distinct": True,
    }
    wrong = {k: report[k] for k, v in expected.items() if report[k] != v}
    if wrong:
        raise BenchError(f"hook row, {variant.label}: not the expected work: {wrong}")
    return report


def measure_hooks(
    sites: Path, scratch: Path, settings: Settings
) -> dict[str, list[dict[str, Any]]]:
    """Rounds of one fresh process per variant, the order rotated each round."""
    hook_sites = write_hook_sites(scratch / "hook-sites")
    cache = scratch / "pycache-hooks"
    # One short run fills the bytecode cache with SGLang's and cardcage's modules; the variants
    # differ only in two small plugin modules, compiled in their first round.
    run_hook_child(sites, hook_sites[IN_SGLANG.key], IN_SGLANG, QUICK, cache)
    samples: dict[str, list[dict[str, Any]]] = {v.key: [] for v in HOOK_VARIANTS}
    for round_index in range(settings.hook_rounds):
        shift = round_index % len(HOOK_VARIANTS)
        for variant in HOOK_VARIANTS[shift:] + HOOK_VARIANTS[:shift]:
            report = run_hook_child(sites, hook_sites[variant.key], variant, settings, cache)
            samples[variant.key].append(report)
    return samples


def overheads(reports: list[dict[str, Any]], clock: str) -> list[float]:
    """Per process: the fastest hooked block minus the fastest bare block, ns per call."""
    return fastest_block_overheads(reports, clock)


def hook_results(samples: dict[str, list[dict[str, Any]]]) -> list[Result]:
    """cardcage / native per-call overhead, per clock; the host row is context."""
    name = f"AROUND hook on SGLang's diffusion RMSNorm.forward {OP_SHAPE}, overhead/call"
    rows = [
        (IN_SGLANG, "wall", BUDGET),
        (CARDCAGE_HOST, "wall", None),
        (IN_SGLANG, "cpu", None),
        (CARDCAGE_HOST, "cpu", None),
    ]
    results = []
    for variant, clock, budget in rows:
        mine = overheads(samples[variant.key], clock)
        native = overheads(samples[NATIVE_HOOK.key], clock)
        value, reference = statistics.median(mine), statistics.median(native)
        # A round whose native overhead drowned in the op's noise (<= 0) has no ratio.
        per_round = [m / n for m, n in zip(mine, native, strict=True) if n > 0]
        suffix = "" if clock == "wall" else ", CPU time"
        results.append(
            Result(
                group="sglang host",
                name=f"{name}: {variant.label}{suffix}{'' if budget else ' (context)'}",
                unit="ns/call",
                value=value,
                reference=reference,
                reference_label=NATIVE_HOOK.label,
                ratio=value / reference if reference > 0 else float("nan"),
                budget=budget,
                spread=quartiles(per_round) if per_round else None,
            )
        )
    return results


def hook_context(samples: dict[str, list[dict[str, Any]]]) -> str:
    """The bare and hooked per-call times behind the overheads, so a reader sees their scale."""
    lines = [f"per call of {HOOKED_OP} on {OP_SHAPE} float32 (fastest block, CPU time):"]
    for variant in HOOK_VARIANTS:
        reports = samples[variant.key]
        bare = statistics.median(min(r["cpu"]["bare"]) for r in reports)
        hooked = statistics.median(min(r["cpu"]["hooked"]) for r in reports)
        lines.append(
            f"  {variant.label} ({variant.registry}'s wrapper): bare {bare / 1e3:.1f} us, "
            f"hooked {hooked / 1e3:.1f} us"
        )
    return "\n".join(lines)


def base_env(pycache: Path) -> dict[str, str]:
    """This environment without SGLang's or cardcage's selectors, caching bytecode in ``pycache``.

    ``PYTHONDONTWRITEBYTECODE`` is dropped: with it set (as on CI machines) the private cache
    stays empty, and every measured process would compile each module it imports from source,
    SGLang's and the plugin's alike. A deployed wheel runs from bytecode, so the warm-ups fill the
    cache and the samples read it. (Left in, it made demo-cpu's side compile its 36 modules in
    every sample: 1.15 x where the same run from bytecode measures about 1.1 x.)
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_SGLANG_"))
        and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def child_env(sites: Path, side: Side, pycache: Path) -> dict[str, str]:
    """:func:`base_env` with only ``side``'s site and SGLang's on the path, ``side`` selected."""
    env = base_env(pycache)
    env["PYTHONPATH"] = os.pathsep.join(str(sites / name) for name in (side.site, *SGLANG_SITES))
    env["SGLANG_PLATFORM"] = side.platform
    return env


def run_child(sites: Path, side: Side, pycache: Path) -> dict[str, Any]:
    """One fresh interpreter for ``side``: its timings and the modules its window imported (name
    -> bytes of bytecode read), once it checked it did the right work."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=child_env(sites, side, pycache),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BenchError(f"{side.label}: the child failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {
        "version": ANCHOR_VERSION,
        "device_name": side.device_name,
        "applied": True,
        "sources": [list(side.source)],
    }
    wrong = {k: report[k] for k, v in expected.items() if report[k] != v}
    if wrong:
        raise BenchError(f"{side.label}: SGLang did not do the expected work: {wrong}")
    return {k: report[k] for k in ("import_s", "load_s", "imported")}


def measure(sites: Path, scratch: Path, settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Alternating fresh processes per side, after warm-ups; the samples by side label."""
    caches = {side.label: scratch / f"pycache-{index}" for index, side in enumerate(SIDES)}
    for side in SIDES:
        for _ in range(settings.warmups):
            run_child(sites, side, caches[side.label])
    samples: dict[str, list[dict[str, Any]]] = {side.label: [] for side in SIDES}
    for round_index in range(settings.rounds):
        order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            samples[side.label].append(run_child(sites, side, caches[side.label]))
    return samples


def results_of(samples: dict[str, list[dict[str, Any]]]) -> list[Result]:
    ours, theirs = samples[DEMO_CPU.label], samples[NATIVE.label]
    rows = [
        ("import sglang (selects the platform) + load_plugins()", ("import_s", "load_s"), BUDGET),
        ("load_plugins() alone (context)", ("load_s",), None),
    ]
    results = []
    for name, keys, budget in rows:
        mine = [sum(s[k] for k in keys) * 1e3 for s in ours]
        native = [sum(s[k] for k in keys) * 1e3 for s in theirs]
        value, reference = statistics.median(mine), statistics.median(native)
        results.append(
            Result(
                group="sglang host",
                name=name,
                unit="ms",
                value=value,
                reference=reference,
                reference_label=NATIVE.label,
                ratio=value / reference,
                budget=budget,
                spread=quartiles([m / n for m, n in zip(mine, native, strict=True)]),
            )
        )
    return results


def footprint(samples: dict[str, list[dict[str, Any]]]) -> str:
    """What each side's window imported that the other's did not: the plugin's import footprint.

    The timed window is the same SGLang code on both sides, so the modules only one side imports
    are what its plugin costs to import; anything beyond the plugin's own packages (a standard
    library or third-party module only one side pulls in) is named, since a vendor pays for it.
    """
    imported = {side.label: samples[side.label][0]["imported"] for side in SIDES}
    lines = ["modules the timed window imported (first sample of each side):"]
    for side, other in ((DEMO_CPU, NATIVE), (NATIVE, DEMO_CPU)):
        mine, theirs = imported[side.label], imported[other.label]
        only = sorted(set(mine) - set(theirs))
        packages = Counter(name.partition(".")[0] for name in only)
        kib = sum(mine[name] for name in only) / 1024
        by_package = ", ".join(f"{top} {count}" for top, count in sorted(packages.items()))
        lines.append(
            f"  {side.label}: {len(mine)}, of which {len(only)} only on this side "
            f"({by_package or 'none'}; {kib:.0f} KiB of bytecode)"
        )
        foreign = [name for name in only if name.partition(".")[0] not in side.packages]
        if foreign:
            lines.append(f"    not the plugin's own: {', '.join(foreign)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    sites = Path(os.environ.get("CC_BENCH_SITES", "/nonexistent"))
    print(f"cardcage-built plugin inside sglang {ANCHOR_VERSION} vs a native SGLang plugin")
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} CPUs")
    results: list[Result] = []
    failure = None
    context = ""
    try:
        wanted = [*(side.site for side in SIDES), *SGLANG_SITES]
        missing = [name for name in wanted if not (sites / name).is_dir()]
        if missing:
            raise BenchError(f"no vendor site for {missing} under CC_BENCH_SITES={sites}")
        progress(
            f"import sglang + load_plugins(): {settings.rounds} rounds of {len(SIDES)} fresh "
            "processes"
        )
        with tempfile.TemporaryDirectory(prefix="cardcage-bench-host-") as tmp:
            startup_samples = measure(sites, Path(tmp), settings)
            results = results_of(startup_samples)
            context = footprint(startup_samples)
            progress(
                f"AROUND hook per call: {settings.hook_rounds} rounds of {len(HOOK_VARIANTS)} "
                f"fresh processes, {settings.hook_blocks} blocks of {settings.hook_calls} calls"
            )
            hook_samples = measure_hooks(sites, Path(tmp), settings)
            results += hook_results(hook_samples)
            context += "\n\n" + hook_context(hook_samples)
    except BenchError as exc:
        failure = str(exc)
    print()
    if results:
        print(table(results))
    if context:
        print(f"\n{context}")
    print(
        "\nvalue: SGLang with demo-cpu; reference: SGLang with the native plugin. ratio = value / "
        "reference;\n(25-75 %) is the spread of the per-round ratio. Every sample is a fresh "
        "process; the third-party\npackages SGLang imports are imported before the clock. Both "
        "run SGLang's installed code."
    )
    if failure:
        print(f"\nNOT MEASURED: {failure}")
    elapsed = time.perf_counter() - started
    missed = [r.name for r in results if r.verdict.startswith("MISS")]
    verdict = "budget missed: " + ", ".join(missed) if missed else "within budget"
    print(f"\n{verdict if results else 'nothing measured'} ({elapsed:.0f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "results": [asdict(r) for r in results],
                    "failure": failure,
                    "seconds": elapsed,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
