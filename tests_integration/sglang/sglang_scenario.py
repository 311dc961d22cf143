"""What the scenario-sglang tests share: the vendor sites, the probe, the ``cardcage`` CLI.

The nox session ``scenario-sglang`` installs SGLang 0.5.23 (its wheel, ``--no-deps``, plus the
pinned packages its import path needs on CPU), core-hooks, core-platforms, shm-broadcast and the
diffusion runtime into the session's venv, and each vendor (demo-cpu, demo-cuda, the fixture
cc-plat-sglang-native, written against SGLang itself) into its own ``pip install --target`` site
under ``$CC_SCENARIO_SITES``, all from built wheels. Each case picks the sites it wants on
PYTHONPATH, exactly as if only those distributions were installed, and starts fresh interpreters.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).with_name("probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
# The venv's own console script, even when its bin folder is not on PATH.
CARDCAGE = shutil.which("cardcage", path=str(Path(sys.executable).parent)) or "cardcage"
HAS_NVIDIA_DRIVER = Path("/proc/driver/nvidia/version").exists()

NATIVE = "cc-plat-sglang-native"
ALL_VENDORS = ["demo-cpu", "demo-cuda", NATIVE]

needs_sites = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-sglang` (needs the vendor sites)"
)
# demo-cuda activates where there is a GPU; SGLang's fallback is then CUDA, not its base class.
needs_no_gpu = pytest.mark.skipif(
    HAS_NVIDIA_DRIVER, reason="needs a machine without an NVIDIA driver"
)


def env(sites: list[str], extra: dict[str, str]) -> dict[str, str]:
    """This process's environment with only ``sites`` installed and ``extra`` set.

    Every SGLang and cardcage selector, allowlist and opt-in is dropped first, so a case sees
    exactly the variables it names.
    """
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_SGLANG_")) and k != "PYTHONPATH"
    }
    missing = [s for s in sites if not (SITES / s).is_dir()]
    assert not missing, f"no vendor site for {missing}"
    clean["PYTHONPATH"] = os.pathsep.join(str(SITES / s) for s in sites)
    clean.update(extra)
    return clean


def start(sites: list[str], *steps: str, **extra: str) -> dict[str, Any]:
    """Run the probe's ``steps`` in a fresh interpreter; return its report, every step passed.

    The report also carries ``stderr`` (SGLang's INFO lines: which plugins it loaded or skipped).
    One start-up is one SGLang process, whatever reads it: cases that ask for the same sites,
    steps and variables share it (each gets its own copy of the report). Importing SGLang costs
    seconds, and the session has a time budget.
    """
    key = (tuple(sites), steps, tuple(sorted(extra.items())))
    return copy.deepcopy(_start(*key))


@functools.cache
def _start(
    sites: tuple[str, ...], steps: tuple[str, ...], extra: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PROBE), *steps],
        env=env(list(sites), dict(extra)),
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        pytest.fail(f"probe crashed (exit status {done.returncode}):\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    failed = [r for r in report["results"] if not r["ok"]]
    assert done.returncode == 0, f"{failed}\n{done.stderr[-4000:]}"
    report["stderr"] = done.stderr
    return report


def start_srt(sites: list[str], **extra: str) -> dict[str, Any]:
    """SGLang's SRT start-up, all of it: ``import sglang``, selection, ``load_plugins()``, a call
    of the hooked function, then the conformance walk of the selected class."""
    return start(sites, "import", "srt", "srt-load", "srt-call", "srt-conformance", **extra)


def start_diffusion(sites: list[str], **extra: str) -> dict[str, Any]:
    """SGLang's diffusion start-up: selection, both plugin phases, a custom op built and called,
    then the conformance walk of the selected class."""
    return start(sites, "diffusion", "diffusion-load", "diffusion-conformance", **extra)


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    """The result of step ``name`` in a probe report."""
    (found,) = [r for r in report["results"] if r["step"] == name]
    return found  # type: ignore[no-any-return]


def cardcage_json(sites: list[str], *args: str, **extra: str) -> dict[str, Any]:
    """Run ``cardcage ARGS --json`` with only ``sites`` installed; its parsed document."""
    done = subprocess.run(
        [CARDCAGE, *args, "--json"],
        env=env(sites, extra),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"cardcage {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]
