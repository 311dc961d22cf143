"""``DemoCpuDeviceMixin``: real device operations on the host CPU."""

from __future__ import annotations

import importlib.util
import os
import random
from typing import TYPE_CHECKING

import pytest

from cardcage.platforms.device_mixin import CpuArchEnum
from cardcage.platforms.errors import TorchNotInstalledError
from cardcage_demo_cpu import device
from cardcage_demo_cpu.device import cgroup_memory_limit
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

if TYPE_CHECKING:
    from pathlib import Path

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH_INSTALLED, reason="needs PyTorch (the torch extra)")
without_torch = pytest.mark.skipif(
    TORCH_INSTALLED, reason="checks the error raised when torch is absent"
)
PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20


@pytest.fixture
def platform() -> DemoCpuSRTPlatform:
    return DemoCpuSRTPlatform()


def test_total_memory_is_at_most_the_physical_memory(platform: DemoCpuSRTPlatform) -> None:
    assert 0 < platform.get_device_total_memory() <= PHYSICAL


def test_total_memory_honours_the_cgroup_limit(
    platform: DemoCpuSRTPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "cgroup_memory_limit", lambda: 512 * MIB)
    assert platform.get_device_total_memory() == 512 * MIB


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("max\n", None),
        ("1073741824\n", 1 << 30),
        ("9223372036854771712\n", None),  # cgroup v1's "unlimited"
        ("0\n", None),
    ],
)
def test_cgroup_limit_file_is_parsed(tmp_path: Path, content: str, expected: int | None) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text(content)
    assert cgroup_memory_limit((str(limit),)) == expected


def test_cgroup_limit_falls_through_missing_and_garbled_files(tmp_path: Path) -> None:
    garbled = tmp_path / "garbled"
    garbled.write_text("lots\n")
    v1 = tmp_path / "v1"
    v1.write_text("2147483648\n")
    files = (str(tmp_path / "missing"), str(garbled), str(v1))
    assert cgroup_memory_limit(files) == 2 << 30


def test_current_memory_usage_tracks_this_process(platform: DemoCpuSRTPlatform) -> None:
    before = platform.get_current_memory_usage()
    block = bytearray(b"\x01") * (64 * MIB)  # written, so every page is resident
    after = platform.get_current_memory_usage()
    assert block[-1] == 1
    assert 0 < before < after
    assert after - before >= 32 * MIB


def test_available_memory_is_free_and_total(platform: DemoCpuSRTPlatform) -> None:
    free, total = platform.get_available_memory()
    assert total == platform.get_device_total_memory()
    assert 0 < free <= total


def test_descriptive_queries(platform: DemoCpuSRTPlatform) -> None:
    assert platform.get_device_name().startswith("demo_cpu (")
    assert platform.get_device_uuid()
    assert platform.get_device_capability() is None
    assert platform.get_torch_distributed_backend_str() == "gloo"
    assert platform.get_communicator_class() is None
    assert platform.get_cpu_architecture() in set(CpuArchEnum)
    assert repr(platform) == "DemoCpuSRTPlatform(device=demo_cpu)"


def test_housekeeping_operations_succeed(platform: DemoCpuSRTPlatform) -> None:
    platform.set_device("cpu")
    platform.empty_cache()
    platform.synchronize()


def test_seed_everything_makes_random_reproducible(platform: DemoCpuSRTPlatform) -> None:
    state = random.getstate()
    try:
        platform.seed_everything(1234)
        first = random.random()
        platform.seed_everything(1234)
        assert random.random() == first
    finally:
        random.setstate(state)


@without_torch
def test_torch_operations_without_torch_say_what_to_install(
    platform: DemoCpuSRTPlatform,
) -> None:
    with pytest.raises(TorchNotInstalledError, match=r"\[torch\]"):
        platform.get_device(0)
    with pytest.raises(TorchNotInstalledError):
        platform.inference_mode()


@pytest.mark.torch
@needs_torch
def test_get_device_is_the_torch_cpu_device_for_every_rank(platform: DemoCpuSRTPlatform) -> None:
    import torch

    assert platform.get_device(0) == platform.get_device(3) == torch.device("cpu")


@pytest.mark.torch
@needs_torch
def test_tensors_run_under_the_platforms_inference_mode(platform: DemoCpuSRTPlatform) -> None:
    import torch

    weights = torch.ones(4, 4, device=platform.get_device(0))
    with platform.inference_mode():
        assert torch.is_inference_mode_enabled()
        out = weights @ torch.full((4,), 2.0)
    assert out.tolist() == [8.0] * 4
    assert out.is_inference()


@pytest.mark.torch
@needs_torch
def test_seed_everything_seeds_torch(platform: DemoCpuSRTPlatform) -> None:
    import torch

    platform.seed_everything(7)
    first = torch.rand(3)
    platform.seed_everything(7)
    assert torch.equal(torch.rand(3), first)
