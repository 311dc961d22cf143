"""The diffusion ``activate()``: the SRT half's GPU probe, import-safe; no torch needed."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
from gpu_support import NVIDIA_GPU, without_gpu

import cardcage_demo_cuda
from cardcage_demo_cuda import _nvml
from cardcage_demo_cuda.diffusion import ENTRY_POINT_NAME, PLATFORM_QUALNAME, activate

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Pretend the driver is loaded, NVML reports ``n`` GPUs (None: no NVML) and torch is there."""
    monkeypatch.setattr(_nvml, "driver_present", lambda: True)
    monkeypatch.setattr(_nvml, "device_nodes", lambda: 0)
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return object() if name == "torch" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    def set_count(n: int | None) -> None:
        monkeypatch.setattr(_nvml, "device_count", lambda: n)

    return set_count


@without_gpu
def test_activate_declines_on_a_machine_without_an_nvidia_gpu() -> None:
    assert activate() is None


@without_gpu
def test_naming_demo_cuda_does_not_conjure_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The runtime turns this None into "activate() returned None (hardware not available ...)".
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    assert activate() is None


@pytest.mark.parametrize("count", [None, 0])
def test_activate_declines_when_the_driver_reports_no_gpu(gpus: Any, count: int | None) -> None:
    gpus(count)
    assert activate() is None


def test_activate_returns_the_diffusion_platform_when_a_gpu_is_present(gpus: Any) -> None:
    gpus(2)
    assert activate() == PLATFORM_QUALNAME


def test_activate_declines_when_cuda_visible_devices_hides_every_gpu(
    gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert activate() is None


def test_activate_declines_with_the_fix_when_torch_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_nvml, "driver_present", lambda: True)
    monkeypatch.setattr(_nvml, "device_count", lambda: 1)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch" else real_find_spec(name, *a),
    )
    with caplog.at_level(logging.WARNING, logger="cardcage_demo_cuda"):
        assert activate() is None
    assert "cardcage-demo-cuda[diffusion]" in caplog.text


def test_the_diffusion_and_srt_halves_name_different_classes() -> None:
    module, _, cls = PLATFORM_QUALNAME.partition(":")
    assert module == "cardcage_demo_cuda.diffusion.platform"
    assert cls.isidentifier()
    assert PLATFORM_QUALNAME != cardcage_demo_cuda.PLATFORM_QUALNAME


def test_activate_imports_no_torch_and_no_runtime() -> None:
    """Real probe, fresh interpreter: on a GPU host it activates, still without torch."""
    code = (
        "import json, sys; import cardcage_demo_cuda.diffusion as d; q = d.activate(); "
        "print(json.dumps([q, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'pynvml', 'sglang') or m.startswith(('cardcage.diffusion', "
        "'cardcage.platforms', 'cardcage_demo_cuda.')))]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    qualname, imported = json.loads(out)
    assert qualname == (PLATFORM_QUALNAME if NVIDIA_GPU else None)
    # The host check (cardcage.platforms.host, with the rooms' index) is the only platform-side
    # code it may import
    # (a set: a renamed copy of this template sorts its own modules elsewhere).
    assert set(imported) == {
        "cardcage.platforms",
        "cardcage.platforms.host",
        "cardcage.platforms.hosts",  # the rooms' index; no host's room
        "cardcage_demo_cuda._nvml",
        "cardcage_demo_cuda.diffusion",
    }


def test_the_hook_plugin_module_imports_without_the_diffusion_runtime() -> None:
    """``cardcage doctor`` imports every plugin module, also where the runtime is absent."""
    code = (
        "import json, sys; import cardcage_demo_cuda.diffusion.hooks; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' "
        "or m.startswith('cardcage.diffusion'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_cardcage_doctor_accepts_the_installed_package() -> None:
    """Both halves pass the doctor's checks, with or without the diffusion runtime installed."""
    run = subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", "doctor", "--strict"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
