"""demo_cuda's vLLM section, without vLLM: what it answers, and what vLLM would be handed.

vLLM is not installed where these run; nothing of it is stubbed. ``rehearsing(Host.VLLM)`` is
how ``cardcage doctor --runtime vllm`` calls plugin code as vLLM would, so ``activate()`` takes
its vLLM branch here exactly as under vLLM's selection (``register()``'s vLLM path is
cardcage's, tested with ``cardcage.platforms.plugin``).
``scenario-vllm`` runs vLLM's own code over the same entry points.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from typing import Any, ClassVar

import pytest

from cardcage.hooks.host import Host, rehearsing
from cardcage.platforms.hosts.vllm.adapter import vendor_qualname
from cardcage_demo_cuda import PLATFORM_QUALNAME, _nvml, activate
from cardcage_demo_cuda.platform import DemoCudaSRTPlatform
from cardcage_demo_cuda.vllm_section import (
    CUDA_ATTENTION_BACKEND,
    CUDA_COMMUNICATOR,
    CUDA_WORKER,
    DemoCudaVllmSection,
)

ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the driver is loaded, NVML reports one GPU and torch is there."""
    monkeypatch.setattr(_nvml, "driver_present", lambda: True)
    monkeypatch.setattr(_nvml, "device_count", lambda: 1)
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return object() if name == "torch" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_the_platform_names_its_vllm_section() -> None:
    module, _, name = DemoCudaSRTPlatform.vllm_section.partition(":")
    assert getattr(importlib.import_module(module), name) is DemoCudaVllmSection


def test_the_section_answers_what_vllm_asks_of_a_cuda_platform() -> None:
    section = DemoCudaVllmSection
    assert section.dispatch_key == "CUDA"
    assert section.device_control_env_var == "CUDA_VISIBLE_DEVICES"
    assert section.ray_device_key == "GPU"
    assert section.get_attn_backend_cls(None, None) == CUDA_ATTENTION_BACKEND
    assert section.get_device_communicator_cls() == CUDA_COMMUNICATOR


class _Base:
    """Where the section sits in vLLM's adapter: before the vLLM base class, whose config step
    it must still run (here a base that records the call, since vLLM is not installed)."""

    seen: ClassVar[list[object]] = []

    @classmethod
    def check_and_update_config(cls, vllm_config: object) -> None:
        cls.seen.append(vllm_config)


class _Adapted(DemoCudaVllmSection, _Base):
    pass


def test_the_sections_config_step_runs_the_bases_then_sets_the_worker() -> None:
    config = types.SimpleNamespace(parallel_config=types.SimpleNamespace(worker_cls="auto"))
    _Adapted.check_and_update_config(config)
    assert _Base.seen[-1] is config  # the base's checks ran
    assert config.parallel_config.worker_cls == CUDA_WORKER
    chosen = types.SimpleNamespace(parallel_config=types.SimpleNamespace(worker_cls="my.Worker"))
    _Adapted.check_and_update_config(chosen)
    assert chosen.parallel_config.worker_cls == "my.Worker", "a user's worker class stays"


def test_under_vllm_activate_answers_the_dotted_adapter_name(one_gpu: None) -> None:
    with rehearsing(Host.VLLM):
        name = activate()
    assert name is not None
    assert name.startswith(ADAPTERS)
    assert "." not in name[len(ADAPTERS) :], "vLLM splits on the last dot"
    assert vendor_qualname(name[len(ADAPTERS) :]) == PLATFORM_QUALNAME


def test_cardcage_doctor_for_vllm_finds_nothing_to_fix_here() -> None:
    """No GPU here: demo_cuda declines, vLLM's own detection decides; no problem to report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_"))}
    done = subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", "doctor", "--runtime", "vllm", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    document = json.loads(done.stdout)
    problems = [f for f in document["findings"] if f["severity"] != "info"]
    if _nvml.device_count():  # a GPU machine: demo_cuda is what vLLM selects
        assert document["startup"][0]["platform"]["plugin"] == "demo_cuda"
    assert problems == [], problems
