"""The diffusion general plugin: registered and applied by the real runtime, it records which
forward each custom op got, in memory and, per worker process, in the evidence file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import cpu_diffusion_support  # noqa: F401 - sorts first; skips without torch or the runtime
import pytest
import torch
from cpu_diffusion_support import clean_diffusion

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import initialize_current_platform
from cardcage.diffusion.runtime.platforms.plugins import (
    HookRegistry,
    HookType,
    apply_plugin_hooks,
    load_plugins,
)
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage_demo_cpu.diffusion import ENTRY_POINT_NAME
from cardcage_demo_cpu.diffusion.evidence import EVIDENCE, read_evidence
from cardcage_demo_cpu.diffusion.hooks import DISPATCH_FORWARD, record_dispatch, register
from cardcage_demo_cpu.diffusion.ops import RMS_NORM

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
SILU = f"{SiluAndMul.__module__}.{SiluAndMul.__qualname__}"
VENDOR_FORWARD = "cardcage_demo_cpu.diffusion.ops.rms_norm_forward"
SILU_FORWARD = "cardcage_demo_cpu.diffusion.ops.silu_and_mul_forward"


def _worker_start_up() -> None:
    """What every diffusion worker does first: backend init, then the two plugin phases."""
    initialize_current_platform()
    load_plugins()
    apply_plugin_hooks()


def test_register_adds_one_around_hook_to_the_diffusion_registry_only() -> None:
    with SRTHookRegistry.sandbox():
        register()
        register()  # the evidence counts each call; the registry holds one hook
        srt = SRTHookRegistry.registrations()
    found = {
        t: [(r.hook_type, r.hook) for r in rs] for t, rs in HookRegistry.registrations().items()
    }
    assert found == {DISPATCH_FORWARD: [(HookType.AROUND, record_dispatch)]}
    assert srt == {}
    assert EVIDENCE.count("register", DISPATCH_FORWARD) == 2


def test_registering_imports_neither_torch_nor_the_layers() -> None:
    code = (
        "import json, sys; from cardcage_demo_cpu.diffusion import hooks; hooks.register(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy') or m.startswith('cardcage.diffusion.runtime.layers'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_the_runtime_runs_the_plugin_when_demo_cpu_is_selected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    _worker_start_up()
    report = apply_plugin_hooks()
    assert ENTRY_POINT_NAME in report.names("executed")
    assert HookRegistry.is_hook_applied(DISPATCH_FORWARD, record_dispatch, HookType.AROUND)


def test_the_applied_hook_records_which_forward_each_op_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    _worker_start_up()
    norm, silu = RMSNorm(8), SiluAndMul()
    norm(torch.ones(1, 8))
    silu(torch.ones(1, 8))
    assert set(EVIDENCE.keys("dispatch")) == {
        f"{RMS_NORM} -> {VENDOR_FORWARD}",
        f"{SILU} -> {SILU_FORWARD}",
    }
    assert EVIDENCE.count("forward", RMS_NORM) == 1
    assert EVIDENCE.count("forward", SILU) == 1


def test_the_plugin_is_skipped_when_another_platform_is_selected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, "cpu")  # the built-in CPU platform
    report = apply_plugin_hooks()
    statuses = {p.name: p.status for p in report.plugins}
    assert statuses[ENTRY_POINT_NAME] == "excluded"
    assert DISPATCH_FORWARD not in HookRegistry.registrations()
    RMSNorm(8)
    assert EVIDENCE.as_dict() == {}


WORKER = """
import os
import torch
from cardcage.diffusion.runtime.platforms import initialize_current_platform
from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks, load_plugins

initialize_current_platform()
load_plugins()
apply_plugin_hooks()
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

op = RMSNorm(8)
for _ in range(3):
    op(torch.ones(2, 8))
print(os.getpid())
"""


def test_each_worker_process_leaves_its_evidence_in_the_file(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence.jsonl"
    env = {
        **os.environ,
        OVERRIDE: ENTRY_POINT_NAME,
        "CARDCAGE_DEMO_CPU_EVIDENCE": str(evidence),
        "CARDCAGE_DEMO_CPU_THREADS": "1",
    }
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    pids = set()
    for worker in workers:
        out, _ = worker.communicate(timeout=300)
        assert worker.returncode == 0
        pids.add(int(out.strip()))
    records = read_evidence(evidence)
    by_pid: dict[int, list[tuple[str, str]]] = {}
    for record in records:
        assert record["platform"] == ENTRY_POINT_NAME
        by_pid.setdefault(record["pid"], []).append((record["event"], record["key"]))
    assert set(by_pid) == pids
    for events in by_pid.values():
        # Once each, in start-up order, although the forward ran three times.
        assert events == [
            ("init_backend", ENTRY_POINT_NAME),
            ("register", DISPATCH_FORWARD),
            ("dispatch", f"{RMS_NORM} -> {VENDOR_FORWARD}"),
            ("forward", RMS_NORM),
        ]
