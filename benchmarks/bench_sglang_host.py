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
its distribution, so a run that measured the wrong thing fails. Rounds alternate the sides' order
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import ANCHOR_VERSION, BenchError, Result, parse_args, progress, quartiles, table

if TYPE_CHECKING:
    from collections.abc import Sequence

BUDGET = 1.05
TARGET = "sglang.srt.utils.common.get_device_memory_capacity"


@dataclass(frozen=True)
class Side:
    """One plugin under test: its site, the name SGLang selects it by, what SGLang must record."""

    label: str
    site: str
    platform: str
    device_name: str
    source: tuple[str, str]


DEMO_CPU = Side("demo-cpu", "demo-cpu", "demo_cpu", "demo_cpu", ("demo_cpu", "cardcage-demo-cpu"))
NATIVE = Side(
    "native SGLang plugin",
    "cc-plat-sglang-native",
    "sglang_native",
    "sglang_native",
    ("sglang_native_hooks", "cc-plat-sglang-native"),
)
SIDES = (DEMO_CPU, NATIVE)
#: SGLang's sites under ``$CC_BENCH_SITES``: its wheel, and the packages its import path needs.
SGLANG_SITES = ("sglang", "sglang-deps")


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` trades precision for a short run."""

    warmups: int  # per side, not measured: they fill the bytecode cache
    rounds: int  # one fresh process per side per round


FULL = Settings(warmups=2, rounds=15)
QUICK = Settings(warmups=1, rounds=3)

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
import importlib, json, sys, time
for name in {PRELOADED!r}:
    importlib.import_module(name)
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
print(json.dumps({{
    "import_s": imported - start,
    "load_s": loaded - imported,
    "version": sglang.__version__,
    "device_name": current_platform.device_name,
    "applied": {TARGET!r} in HookRegistry._patched,
    "sources": sources,
}}))
"""


def child_env(sites: Path, side: Side, pycache: Path) -> dict[str, str]:
    """This environment without SGLang's or cardcage's selectors, with only ``side``'s site."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_SGLANG_")) and k != "PYTHONPATH"
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(str(sites / name) for name in (side.site, *SGLANG_SITES)),
            "SGLANG_PLATFORM": side.platform,
            "PYTHONPYCACHEPREFIX": str(pycache),
        }
    )
    return env


def run_child(sites: Path, side: Side, pycache: Path) -> dict[str, float]:
    """One fresh interpreter for ``side``: its timings, once it checked it did the right work."""
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
    return {"import_s": report["import_s"], "load_s": report["load_s"]}


def measure(sites: Path, scratch: Path, settings: Settings) -> dict[str, list[dict[str, float]]]:
    """Alternating fresh processes per side, after warm-ups; the samples by side label."""
    caches = {side.label: scratch / f"pycache-{index}" for index, side in enumerate(SIDES)}
    for side in SIDES:
        for _ in range(settings.warmups):
            run_child(sites, side, caches[side.label])
    samples: dict[str, list[dict[str, float]]] = {side.label: [] for side in SIDES}
    for round_index in range(settings.rounds):
        order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            samples[side.label].append(run_child(sites, side, caches[side.label]))
    return samples


def results_of(samples: dict[str, list[dict[str, float]]]) -> list[Result]:
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    sites = Path(os.environ.get("CC_BENCH_SITES", "/nonexistent"))
    print(f"cardcage-built plugin inside sglang {ANCHOR_VERSION} vs a native SGLang plugin")
    print(f"python {sys.version.split()[0]} on {platform.platform()}, {os.cpu_count()} CPUs")
    results: list[Result] = []
    failure = None
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
            results = results_of(measure(sites, Path(tmp), settings))
    except BenchError as exc:
        failure = str(exc)
    print()
    if results:
        print(table(results))
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
