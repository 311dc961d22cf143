"""Pieces both benchmark scripts share: result rows, the ratio table, the anchor wheel, CLI.

Each script measures its own subject against SGLang 0.5.23 in the same run; this module only
keeps how results are recorded and printed identical, so the two tables read the same.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The SGLang release every ratio is measured against.
ANCHOR_VERSION = "0.5.23"


@dataclass
class Result:
    """One table row. ``ratio`` is value / reference; ``spread`` is its per-round 25-75 % range.

    ``budget`` bounds the ratio; ``limit`` (used instead) bounds the value itself, for counts
    such as "one metadata scan".
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

    @property
    def verdict(self) -> str:
        """PASS / MISS; MISS~ when a ratio budget lies inside the per-round spread."""
        if self.limit is not None:
            return "PASS" if self.value <= self.limit else "MISS"
        if self.budget is None:
            return "-"
        if self.ratio <= self.budget:
            return "PASS"
        if self.spread is not None and self.spread[0] <= self.budget:
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
    return f"<= {result.budget:.2f}" if result.budget is not None else "-"


def table(results: Sequence[Result]) -> str:
    """The human-readable table: one row per measurement."""
    header = ("measurement", "value", "reference", "ratio (25-75 %)", "budget", "result")
    rows = [header]
    for r in results:
        spread = f" ({r.spread[0]:.2f}-{r.spread[1]:.2f})" if r.spread else ""
        rows.append(
            (
                r.name,
                format_number(r.value, r.unit),
                f"{format_number(r.reference, r.unit)} [{r.reference_label}]",
                f"{r.ratio:.3f}{spread}",
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
