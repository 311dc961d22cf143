"""``activate()``: returns the platform only where an NVIDIA GPU is usable; never imports torch."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
from gpu_support import NVIDIA_GPU, without_gpu

import cardcage_demo_cuda
from cardcage_demo_cuda import ENTRY_POINT_NAME, PLATFORM_QUALNAME, _nvml, activate

RESERVED = {"cpu", "cuda", "rocm", "xpu"}


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


@pytest.mark.parametrize("count", [None, 0])
def test_activate_declines_when_the_driver_reports_no_gpu(gpus: Any, count: int | None) -> None:
    gpus(count)
    assert activate() is None


def test_without_the_driver_nvml_is_never_consulted(monkeypatch: pytest.MonkeyPatch) -> None:
    def nvml(*args: object) -> None:
        raise AssertionError("NVML must not be loaded on a machine without the NVIDIA driver")

    monkeypatch.setattr(_nvml, "driver_present", lambda: False)
    monkeypatch.setattr(_nvml, "device_count", nvml)
    assert activate() is None


def test_device_nodes_stand_in_when_nvml_is_missing(
    gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus(None)
    monkeypatch.setattr(_nvml, "device_nodes", lambda: 2)
    assert activate() == PLATFORM_QUALNAME


def test_activate_returns_the_platform_when_a_gpu_is_present(gpus: Any) -> None:
    gpus(2)
    assert activate() == PLATFORM_QUALNAME


@pytest.mark.parametrize("visible", ["", "-1", "-1,0", " "])
def test_activate_declines_when_cuda_visible_devices_hides_every_gpu(
    gpus: Any, monkeypatch: pytest.MonkeyPatch, visible: str
) -> None:
    gpus(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
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
    assert "cardcage-demo-cuda[torch]" in caplog.text


def test_activate_returns_a_str_naming_a_module_of_this_package() -> None:
    module, _, cls = PLATFORM_QUALNAME.partition(":")
    assert module.startswith(f"{cardcage_demo_cuda.__name__}.")
    assert cls.isidentifier()


def test_entry_points_use_the_documented_names_and_no_reserved_alias() -> None:
    eps = importlib.metadata.distribution("cardcage-demo-cuda").entry_points
    found = {(ep.group, ep.name): ep.value for ep in eps}
    assert found == {
        ("sglang.srt.platforms", ENTRY_POINT_NAME): "cardcage_demo_cuda:activate",
        ("sglang.srt.plugins", ENTRY_POINT_NAME): "cardcage_demo_cuda.hooks:register",
        ("sglang.multimodal_gen.platforms", ENTRY_POINT_NAME): (
            "cardcage_demo_cuda.diffusion:activate"
        ),
        ("sglang.multimodal_gen.plugins", ENTRY_POINT_NAME): (
            "cardcage_demo_cuda.diffusion.hooks:register"
        ),
        # The vLLM section: the same activate() and register(), in vLLM's groups.
        ("vllm.platform_plugins", ENTRY_POINT_NAME): "cardcage_demo_cuda:activate",
        ("vllm.general_plugins", ENTRY_POINT_NAME): "cardcage_demo_cuda.hooks:register",
        # Its variables, for `cardcage env` and `cardcage doctor`.
        ("cardcage.env_registries", ENTRY_POINT_NAME): "cardcage_demo_cuda.envs:ENV_VARS",
    }
    assert ENTRY_POINT_NAME not in RESERVED


def test_activate_imports_no_torch_and_creates_no_cuda_context() -> None:
    """Real probe, fresh interpreter: on a GPU host it activates, still without torch."""
    code = (
        "import json, sys; import cardcage_demo_cuda as p; q = p.activate(); "
        "print(json.dumps([q, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'pynvml', 'sglang') or m.startswith(('cardcage.platforms', "
        "'cardcage_demo_cuda.')))]))"
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
    }
