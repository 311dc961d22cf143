"""Pieces the benchmark scripts share: result rows, the ratio table, the anchor wheel, CLI.

Each script measures its own subject against its baseline in the same run; this module keeps
how results are recorded and printed identical, so the tables read the same. The two engine
benches (``bench_sglang_engine.py``, ``bench_vllm_engine.py``) also share here how a plugin is
measured inside a host's engine: the timer of its windows in every host process, the block
timer of the kernel and hook rows, the child runner and the rows built from what they report.
Nothing here imports a host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: The SGLang release every ratio is measured against.
ANCHOR_VERSION = "0.5.23"


@dataclass
class Result:
    """One table row. ``ratio`` is value / reference; ``spread`` is its per-round 25-75 % range.

    ``budget`` bounds the ratio; ``limit`` (used instead) bounds the value itself, for counts
    such as "one metadata scan". ``percent``: the ratio is a share, printed as a percentage.
    ``noise``: the same row's ratio between two identical subjects in the same run (an A/A
    pair), for a budget of about 1.0 that a ratio within the run's own noise cannot settle.
    """

    group: str
    name: str
    unit: str
    value: float
    reference: float
    reference_label: str
    ratio: float
    budget: float | None
    spread: tuple[float, float] | None = None
    limit: float | None = None
    percent: bool = False
    noise: float | None = None

    @property
    def verdict(self) -> str:
        """PASS / MISS; MISS~ when a ratio budget lies inside the per-round spread, or the ratio
        is off the budget by no more than the A/A pair's ratio is off 1.0."""
        if self.limit is not None:
            return "PASS" if self.value <= self.limit else "MISS"
        if self.budget is None:
            return "-"
        if self.ratio <= self.budget:
            return "PASS"
        if self.spread is not None and self.spread[0] <= self.budget:
            return "MISS~"
        if self.noise and self.ratio <= self.budget * max(self.noise, 1 / self.noise):
            return "MISS~"
        return "MISS"


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """25th and 75th percentile: how much a ratio moved between rounds."""
    if len(values) < 2:
        return (values[0], values[0])
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q1, q3)


class BenchError(SystemExit):
    """A measurement could not be made (missing wheel, a child that failed, a wrong outcome)."""


def find_anchor_wheel(anchor_dir: Path) -> Path:
    """The sglang wheel that ``pip download --no-deps`` left in ``anchor_dir``."""
    wheels = sorted(anchor_dir.glob(f"sglang-{ANCHOR_VERSION}-*.whl"))
    if not wheels:
        found = ", ".join(p.name for p in anchor_dir.iterdir()) if anchor_dir.is_dir() else None
        raise BenchError(
            f"no sglang-{ANCHOR_VERSION} wheel in {anchor_dir} (found: {found or 'nothing'})"
        )
    return wheels[0]


def run_once(code: str, env: dict[str, str], cwd: Path) -> float:
    """Wall time of one ``python -c code`` in the current interpreter."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, check=False
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchError(f"python -c {code!r} failed:\n{proc.stderr.decode(errors='replace')}")
    return seconds


def format_number(value: float, unit: str) -> str:
    """Three significant figures, so the columns stay narrow and readable."""
    if unit == "scans":
        return f"{value:g}"
    unit_text = {"ns/call": "ns", "ms": "ms"}.get(unit, unit)
    return f"{value:,.3g} {unit_text}" if abs(value) < 1000 else f"{value:,.0f} {unit_text}"


def format_budget(result: Result) -> str:
    if result.limit is not None:
        return f"= {result.limit:g} scan" if result.unit == "scans" else f"<= {result.limit:g}"
    if result.budget is None:
        return "-"
    return f"<= {result.budget:.0%}" if result.percent else f"<= {result.budget:.2f}"


def format_ratio(result: Result) -> str:
    """The ratio and its spread: three decimals, or a percentage for a share."""
    if result.percent:
        value, bound = "{:.2%}", "{:.2%}"
    else:
        value, bound = "{:.3f}", "{:.2f}"
    spread = ""
    if result.spread:
        spread = f" ({bound.format(result.spread[0])}-{bound.format(result.spread[1])})"
    return value.format(result.ratio) + spread


def table(results: Sequence[Result]) -> str:
    """The human-readable table: one row per measurement."""
    header = ("measurement", "value", "reference", "ratio (25-75 %)", "budget", "result")
    rows = [header]
    for r in results:
        rows.append(
            (
                r.name,
                format_number(r.value, r.unit),
                f"{format_number(r.reference, r.unit)} [{r.reference_label}]",
                format_ratio(r),
                format_budget(r),
                r.verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def progress(step: str) -> None:
    """Say on stderr what is being measured, so a half-minute run does not look hung."""
    print(f"... {step}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None, *, anchor: bool = True) -> argparse.Namespace:
    """``--anchor-dir``, ``--json`` and ``--quick``; ``anchor=False`` for a script that runs an
    installed SGLang rather than files of its wheel (it still accepts the flag, hidden, since
    ``nox -s bench`` hands every script the same arguments)."""
    script_doc = getattr(sys.modules.get("__main__"), "__doc__", None)  # the script's, not ours
    parser = argparse.ArgumentParser(
        description=script_doc.split("\n\n")[0] if script_doc else None
    )
    parser.add_argument(
        "--anchor-dir",
        type=Path,
        required=anchor,
        help=(
            f"directory holding the sglang-{ANCHOR_VERSION} wheel (pip download --no-deps)"
            if anchor
            else argparse.SUPPRESS
        ),
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument(
        "--quick", action="store_true", help="few repeats: a smoke run, not numbers to quote"
    )
    return parser.parse_args(argv)


def measure_startup(
    commands: dict[str, str],
    rows: Sequence[tuple[str, float | None]],
    env: dict[str, str],
    cwd: Path,
    rounds: int,
) -> list[Result]:
    """``python -c`` wall times against ``commands["pass"]``: medians over alternating runs.

    A few warm-up runs first fill the bytecode cache; each round rotates the order so drift on
    a shared machine hits every command alike. ``rows`` names the commands to report, each with
    its budget (None: context only).
    """
    labels = list(commands)
    for label in labels * 3:
        run_once(commands[label], env, cwd)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for round_index in range(rounds):
        shift = round_index % len(labels)
        for label in labels[shift:] + labels[:shift]:
            samples[label].append(run_once(commands[label], env, cwd))
    base = samples["pass"]
    reference = statistics.median(base) * 1e3
    results = []
    for label, budget in rows:
        value = statistics.median(samples[label]) * 1e3
        results.append(
            Result(
                group="start-up",
                name=f"python -c '{label}'" if budget else f"python -c '{label}' (context)",
                unit="ms",
                value=value,
                reference=reference,
                reference_label="python -c pass",
                ratio=value / reference,
                budget=budget,
                spread=quartiles([s / b for s, b in zip(samples[label], base, strict=True)]),
            )
        )
    return results


# -- an AROUND hook inside SGLang, as a cardcage plugin and as a native one -------------------

#: The hook both plugins register: one module that counts its calls, so a child can check that
#: the hook ran on every hooked call and on no bare one.
AROUND_COUNTER_MODULE = """
CALLS = [0]


def around(original, *args, **kwargs):
    CALLS[0] += 1
    return original(*args, **kwargs)
"""
#: The registries a plugin's ``register()`` hands that hook to: cardcage's (which passes it on to
#: SGLang's when SGLang runs the plugin) and SGLang's own.
CARDCAGE_REGISTRY = "cardcage.hooks.registry"
SGLANG_REGISTRY = "sglang.srt.plugins.hook_registry"


def hook_plugin_source(registry: str, target: str) -> str:
    """A general plugin module whose ``register()`` puts the counting hook on ``target``."""
    return f"""
from {registry} import HookRegistry, HookType

from ccbench_hook_common import around


def register():
    HookRegistry.register({target!r}, around, HookType.AROUND)
"""


def fastest_block_overheads(
    timings: Iterable[Mapping[str, Mapping[str, Sequence[float]]]], clock: str
) -> list[float]:
    """Per process: the fastest hooked block minus the fastest bare block, ns per call.

    The fastest block, not the median: the op's own time varies by microseconds from block to
    block on a shared machine (preemption, another process's cache traffic), ten times the
    wrapper's cost, and that noise only ever adds time; the fastest of many blocks is the one
    it disturbed least, on both sides alike.
    """
    return [min(t[clock]["hooked"]) - min(t[clock]["bare"]) for t in timings]


# -- a plugin inside a host's engine: what bench_sglang_engine.py and bench_vllm_engine.py share --

#: The share of the engine's start-up a plugin's own windows may take, and the kernel path's
#: added time per call (absolute, ns, and as a ratio): DESIGN.md §7.
SHARE_BUDGET = 0.01
KERNEL_ADDED_NS = 1000.0
KERNEL_BUDGET = 1.02
#: The window label of the plugin's device set-up (``init_backend()`` and the kernel install
#: after it), reported beside its loading, not in it.
BACKEND_LABEL = "init_backend"

# The timer of a plugin's windows, installed by a launcher in every process of a host's engine
# (spawned processes re-run the launcher as __mp_main__). ``windows_module`` fills in the host.
# Each outermost window appends one JSON line to $CCBENCH_WINDOWS/window-<pid>.jsonl once its
# clock has stopped: its label, the labels of the windows nested in it, its nanoseconds, and the
# modules it imported with their bytecode's size. The host's own modules first imported inside
# a window are timed apart (``host_ns``, ``host_modules``): the host's own platform imports them
# too, which each bench checks.
_WINDOWS_TEMPLATE = """
import functools
import importlib._bootstrap as _bootstrap
import importlib.metadata as _metadata
import json
import os
import sys
import threading
import time

OURS = frozenset(%(ours)r)
HOST = %(host)r
#: A host module whose import writes this process's modules to modules-<pid>.json.
SNAPSHOT = %(snapshot)r
GROUPS = frozenset(%(groups)r)
#: module -> [(attribute, label)]: functions of ours timed as windows of their own.
WRAPS = %(wraps)r
#: label of a wrapped function that returns a class -> [(method, label)] timed on that class.
CLASS_WRAPS = %(class_wraps)r
_local = threading.local()
_find_and_load = _bootstrap._find_and_load
_load = _metadata.EntryPoint.load


def _enter(label):
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.labels = [label]
        _local.host_ns = 0
        _local.host_modules = set()
        _local.in_host = False
        _local.before = set(sys.modules)
        _local.start = time.perf_counter_ns()
    else:
        _local.labels.append(label)
    _local.depth = depth + 1


def _leave():
    _local.depth -= 1
    if _local.depth == 0:
        ns = time.perf_counter_ns() - _local.start
        _record(ns, set(sys.modules) - _local.before, _local.labels)


def _host_import(name, import_):
    _local.in_host = True
    t0 = time.perf_counter_ns()
    before = set(sys.modules)
    try:
        return _find_and_load(name, import_)
    finally:
        _local.host_modules |= set(sys.modules) - before
        _local.host_ns += time.perf_counter_ns() - t0
        _local.in_host = False


def _bytecode(name):
    cached = getattr(getattr(sys.modules.get(name), "__spec__", None), "cached", None)
    try:
        return os.path.getsize(cached) if cached else 0
    except OSError:
        return 0


def _record(ns, modules, labels):
    import multiprocessing

    line = {
        "pid": os.getpid(),
        "process": multiprocessing.current_process().name,
        "label": labels[0],
        "labels": labels,
        "ns": ns,
        "host_ns": _local.host_ns,
        "host_modules": sorted(_local.host_modules),
        "at": time.time(),
        "modules": {name: _bytecode(name) for name in sorted(modules)},
    }
    path = os.path.join(os.environ["CCBENCH_WINDOWS"], f"window-{os.getpid()}.jsonl")
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\\n")


def _timed(label, function):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        _enter(label)
        try:
            result = function(*args, **kwargs)
        finally:
            _leave()
        for method, inner in CLASS_WRAPS.get(label, ()):
            if isinstance(result, type):
                _wrap(result, method, inner)
        return result

    timed.__ccbench__ = True
    return timed


def _wrap(owner, name, label):
    found = vars(owner).get(name)
    if found is not None and not getattr(found, "__ccbench__", False):
        setattr(owner, name, _timed(label, found))


def _snapshot():
    t0 = time.perf_counter_ns()
    import multiprocessing

    path = os.path.join(os.environ["CCBENCH_WINDOWS"], f"modules-{os.getpid()}.json")
    process = multiprocessing.current_process().name
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"process": process, "modules": sorted(sys.modules)}, out)
    if getattr(_local, "depth", 0):
        _local.host_ns += time.perf_counter_ns() - t0


def find_and_load(name, import_):
    top = name.partition(".")[0]
    if top not in OURS:
        if top == HOST and getattr(_local, "depth", 0) and not _local.in_host:
            module = _host_import(name, import_)
        else:
            module = _find_and_load(name, import_)
        if name == SNAPSHOT:
            _snapshot()
        return module
    _enter("import " + name)
    try:
        module = _find_and_load(name, import_)
    finally:
        _leave()
    for attribute, label in WRAPS.get(name, ()):
        _wrap(module, attribute, label)
    return module


def load(self):
    loaded = _load(self)
    if self.group in GROUPS and self.module.partition(".")[0] in OURS and callable(loaded):
        return _timed(f"{self.group}:{self.name}()", loaded)
    return loaded


def install():
    _bootstrap._find_and_load = find_and_load
    _metadata.EntryPoint.load = load
"""


def windows_module(
    host: str,
    groups: Sequence[str],
    wraps: Mapping[str, Sequence[tuple[str, str]]],
    class_wraps: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    snapshot: str = "",
    ours: Sequence[str] = ("cardcage", "cardcage_demo_cpu"),
) -> str:
    """The source of the window timer for ``host``: each outermost import of an ``ours``
    module (through ``importlib._bootstrap._find_and_load``, what every import statement calls
    for a module not yet loaded), each call of an ``ours`` entry point in ``groups`` (wrapped
    where ``EntryPoint.load`` returns it), and the functions ``wraps`` names (module ->
    attribute, label) and ``class_wraps`` (a wrapped function's label -> methods of the class it
    returns). Windows nest; only the outermost is timed, so nothing is counted twice."""
    return _WINDOWS_TEMPLATE % {
        "ours": tuple(ours),
        "host": host,
        "snapshot": snapshot,
        "groups": tuple(groups),
        "wraps": {module: list(pairs) for module, pairs in wraps.items()},
        "class_wraps": {label: list(pairs) for label, pairs in (class_wraps or {}).items()},
    }


#: A child-side module: alternating blocks of calls of the same work done two ways, timed in wall
#: and CPU time (``time.thread_time_ns``), the order flipping every block.
BLOCKS_MODULE = """
import time


def alternate(calls, args, kwargs, blocks, per_block, before_block=None):
    wall = {kind: [] for kind in calls}
    cpu = {kind: [] for kind in calls}
    order = list(calls.items())
    for block in range(blocks):
        for kind, call in order if block % 2 == 0 else order[::-1]:
            if before_block is not None:
                before_block()
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(per_block):
                call(*args, **kwargs)
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            wall[kind].append((t1 - t0) / per_block)
            cpu[kind].append((c1 - c0) / per_block)
    return wall, cpu


def time_kernel_ops(ours, native, x, blocks, per_block):
    # The kernel row: cardcage's op against the native one on the same input, with demo-cpu's
    # kernel counter read around the check call and around the timed blocks.
    import torch
    from cardcage_demo_cpu.evidence import EVIDENCE

    report = {}
    with torch.inference_mode():
        before = EVIDENCE.count("kernel", "rms_norm")
        report["same_output"] = torch.equal(ours(x), native(x))
        report["kernel_calls_check"] = EVIDENCE.count("kernel", "rms_norm") - before
        for _ in range(per_block):
            ours(x), native(x)
        before = EVIDENCE.count("kernel", "rms_norm")
        ops = {"cardcage": ours, "native": native}
        report["wall"], report["cpu"] = alternate(ops, (x,), {}, blocks, per_block)
        report["kernel_calls"] = EVIDENCE.count("kernel", "rms_norm") - before
    return report
"""


def run_child(
    script: Path,
    config: Mapping[str, Any],
    env: Mapping[str, str],
    cwd: Path,
    what: str,
    timeout: float,
) -> dict[str, Any]:
    """One fresh interpreter running ``script`` with ``config`` as JSON: the report it printed on
    its last ``CCBENCH `` line, or a loud failure."""
    try:
        done = subprocess.run(
            [sys.executable, str(script), json.dumps(config)],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{what}: did not finish in {timeout:.0f} s") from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("CCBENCH ")]
    if done.returncode != 0 or not lines:
        raise BenchError(f"{what}: the child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(lines[-1].removeprefix("CCBENCH "))
    return report


def make_model(scenario: Path, module: str, folder: Path) -> Path:
    """An engine scenario's tiny random Llama (``module.make_tiny_llama`` under ``scenario``),
    made in a fresh interpreter of this venv: the scenario's harness, shared rather than copied."""
    code = (
        f"import sys; sys.path.insert(0, {str(scenario)!r}); "
        f"from pathlib import Path; from {module} import make_tiny_llama; "
        f"make_tiny_llama(Path({str(folder)!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"could not make the tiny model:\n{done.stderr[-3000:]}")
    return folder


def alternating_rounds(
    variants: Sequence[Any], rounds: int, what: str, run: Callable[[Any], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``run(variant)`` for each variant in each round, the order flipping every round, so
    drift on a shared machine hits every variant alike; reports keyed by ``variant.key``."""
    samples: dict[str, list[dict[str, Any]]] = {v.key: [] for v in variants}
    for round_index in range(rounds):
        order = variants if round_index % 2 == 0 else tuple(reversed(variants))
        for variant in order:
            progress(f"{what} round {round_index + 1}/{rounds}: {variant.label}")
            samples[variant.key].append(run(variant))
    return samples


def read_windows(folder: Path, ready_at: float) -> list[dict[str, Any]]:
    """Every window the timer recorded in one launch's processes, up to the launcher's ready."""
    lines = []
    for path in sorted(folder.glob("window-*.jsonl")):
        lines += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["at"] <= ready_at]


def window_ms(windows: Iterable[Mapping[str, Any]], backend: bool) -> float:
    """The plugin's loading windows (``backend``: its device set-up) summed over processes,
    less the host's modules imported inside them (the host's own path imports those too)."""
    chosen = [w for w in windows if (w["label"] == BACKEND_LABEL) == backend]
    return sum(w["ns"] - w["host_ns"] for w in chosen) / 1e6


def startup_s(report: Mapping[str, Any]) -> float:
    """A launcher's start-up to ready: the host's import plus its engine's construction."""
    return float(report["import_s"] + report["engine_s"])


def startup_results(
    group: str,
    names: tuple[str, str, str],
    ours: Sequence[Mapping[str, Any]],
    theirs: Sequence[Mapping[str, Any]],
    reference_label: str,
) -> list[Result]:
    """The start-up rows from each launch's report (its windows, its start-up to ready), ``ours``
    and ``theirs`` in round order: the plugin's share (per launch: its windows against that
    launch's start-up; median and spread of the per-launch shares), budget ``SHARE_BUDGET``; its
    device set-up as context; and, as context without budget (DESIGN §7: reported with its
    spread), the whole start-up against the other side's, its spread that of the per-round
    ratio. ``names``: the three rows'."""
    start = [startup_s(r) * 1e3 for r in ours]
    native = [startup_s(r) * 1e3 for r in theirs]
    results = []
    for name, is_backend, budget in ((names[0], False, SHARE_BUDGET), (names[1], True, None)):
        values = [window_ms(r["windows"], is_backend) for r in ours]
        shares = [v / s for v, s in zip(values, start, strict=True)]
        results.append(
            Result(
                group=group,
                name=name,
                unit="ms",
                value=statistics.median(values),
                reference=statistics.median(start),
                reference_label="start-up to ready",
                ratio=statistics.median(shares),
                budget=budget,
                spread=quartiles(shares),
                percent=True,
            )
        )
    results.append(
        Result(
            group=group,
            name=names[2],
            unit="ms",
            value=statistics.median(start),
            reference=statistics.median(native),
            reference_label=reference_label,
            ratio=statistics.median(start) / statistics.median(native),
            budget=None,
            spread=quartiles([m / n for m, n in zip(start, native, strict=True)]),
        )
    )
    return results


def footprint_lines(
    launches: Sequence[Sequence[Mapping[str, Any]]], roles: Callable[[Mapping[str, Any]], str]
) -> tuple[list[str], dict[str, set[str]]]:
    """Per host process (``roles(window)`` names it): the modules the plugin's windows imported
    in the first launch, by top-level package, their bytecode, and the median milliseconds of its
    loading, its device set-up and the host's imports timed apart. Also returns the host modules
    imported apart, per process, for the bench's check against the host's own platform."""
    times: dict[str, dict[str, list[float]]] = {}
    for windows in launches:
        seen: dict[str, dict[str, float]] = {}
        for window in windows:
            stats = seen.setdefault(roles(window), {"load": 0.0, "host": 0.0, "backend": 0.0})
            own = (window["ns"] - window["host_ns"]) / 1e6
            stats["backend" if window["label"] == BACKEND_LABEL else "load"] += own
            stats["host"] += window["host_ns"] / 1e6
        for process, stats in seen.items():
            for key, value in stats.items():
                times.setdefault(process, {}).setdefault(key, []).append(value)
    own_modules: dict[str, dict[str, int]] = {}
    host_modules: dict[str, set[str]] = {}
    for window in launches[0]:
        host = set(window["host_modules"])
        host_modules.setdefault(roles(window), set()).update(host)
        own_modules.setdefault(roles(window), {}).update(
            {name: size for name, size in window["modules"].items() if name not in host}
        )
    lines = []
    for process in sorted(times):
        stats = {key: statistics.median(values) for key, values in times[process].items()}
        mods = own_modules.get(process, {})
        packages = Counter(name.partition(".")[0] for name in mods)
        by_package = ", ".join(f"{top} {count}" for top, count in sorted(packages.items()))
        lines.append(
            f"  {process}: {len(mods)} modules ({by_package}; "
            f"{sum(mods.values()) / 1024:.0f} KiB of bytecode), {stats['load']:.1f} ms loading"
            + (f", {stats['backend']:.1f} ms init_backend() + kernels" if stats["backend"] else "")
            + f"; apart, under the host's own imports: {len(host_modules.get(process, ()))} "
            f"modules, {stats['host']:.0f} ms"
        )
    return lines, host_modules


def check_kernel_row(
    what: str, report: Mapping[str, Any], problems: list[str], blocks: int, calls: int
):
    """Fail loudly unless the kernel row's child proved its work: the host-specific
    ``problems`` found by the bench, and what both hosts' children prove alike (demo-cpu's
    EVIDENCE counts, read in the child): both ops ran the vendor's kernel once each to the same
    output, and once per call in the timed blocks."""
    if not report["same_output"] or report["kernel_calls_check"] != 2:
        problems.append("the two ops do not both run demo-cpu's kernel to the same output")
    if report["kernel_calls"] != 2 * blocks * calls:
        problems.append(f"the kernel ran {report['kernel_calls']} times in the timed blocks")
    if problems:
        raise BenchError(f"{what}: not the expected work: {'; '.join(problems)}")


def repeated(rounds: int, what: str, run: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
    """``run()`` in ``rounds`` fresh processes, each announced."""
    reports = []
    for index in range(rounds):
        progress(f"{what} {index + 1}/{rounds}")
        reports.append(run())
    return reports


def kernel_results(
    group: str, what: str, reference_label: str, reports: Sequence[Mapping[str, Any]]
) -> list[Result]:
    """The kernel path's rows from each process's fastest blocks (``wall``/``cpu`` ->
    ``cardcage``/``native``): added ns per call (limit ``KERNEL_ADDED_NS``), the per-call ratio
    (budget ``KERNEL_BUDGET``) and the CPU time as context."""
    ours = [min(r["wall"]["cardcage"]) for r in reports]
    native = [min(r["wall"]["native"]) for r in reports]
    added = [o - n for o, n in zip(ours, native, strict=True)]
    ratio = statistics.median(ours) / statistics.median(native)
    results = [
        Result(
            group=group,
            name=f"{what}, added/call",
            unit="ns/call",
            value=statistics.median(added),
            reference=statistics.median(native),
            reference_label=reference_label,
            ratio=ratio,
            budget=None,
            limit=KERNEL_ADDED_NS,
        ),
        Result(
            group=group,
            name=f"{what}, per call",
            unit="ns/call",
            value=statistics.median(ours),
            reference=statistics.median(native),
            reference_label=reference_label,
            ratio=ratio,
            budget=KERNEL_BUDGET,
            spread=quartiles([o / n for o, n in zip(ours, native, strict=True)]),
        ),
    ]
    cpu_ours = [min(r["cpu"]["cardcage"]) for r in reports]
    cpu_native = [min(r["cpu"]["native"]) for r in reports]
    cpu_added = statistics.median(o - n for o, n in zip(cpu_ours, cpu_native, strict=True))
    results.append(
        Result(
            group=group,
            name=f"the same, CPU time (context; added {cpu_added:.0f} ns)",
            unit="ns/call",
            value=statistics.median(cpu_ours),
            reference=statistics.median(cpu_native),
            reference_label=reference_label,
            ratio=statistics.median(cpu_ours) / statistics.median(cpu_native),
            budget=None,
            spread=quartiles([o / n for o, n in zip(cpu_ours, cpu_native, strict=True)]),
        )
    )
    return results


def verdicts(results: Sequence[Result]) -> str:
    """One line per budgeted row: within or over, with the numbers."""
    lines = []
    for r in results:
        if r.limit is not None:
            state = "within" if r.verdict == "PASS" else "over"
            lines.append(f"  {state}: {r.name}: {r.value:.0f} ns <= {r.limit:.0f} ns")
            continue
        if r.budget is None:
            continue
        if r.verdict == "PASS":
            state = "within"
        elif r.verdict == "MISS~":
            state = "not settled (the budget lies inside the per-round spread or the A/A noise)"
        else:
            state = "over"
        low, high = r.spread if r.spread else (r.ratio, r.ratio)
        if r.percent:  # a share of the start-up
            numbers = (
                f"{r.ratio:.2%} of {r.reference / 1e3:.1f} s (per launch {low:.2%}-{high:.2%}) "
                f"<= {r.budget:.0%}"
            )
        else:
            numbers = f"{r.ratio:.3f} x (per round {low:.3f}-{high:.3f}) <= {r.budget:.2f} x"
        lines.append(f"  {state}: {r.name}: {numbers}")
    return "\n".join(["verdicts:", *lines])


def write_json(path: Path | None, results: Sequence[Result], failure: str | None, seconds: float):
    """``--json``: the rows, the failure if any, and the run's seconds."""
    if path is not None:
        rows = [asdict(r) for r in results]
        document = {"results": rows, "failure": failure, "seconds": seconds}
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
