"""``DemoCudaDeviceMixin``: NVML for the fork-sensitive Active query, torch.cuda for the rest."""

from __future__ import annotations

import pytest
from gpu_support import needs_gpu

from cardcage.platforms.cuda import CudaDeviceMixin
from cardcage_demo_cuda import _nvml
from cardcage_demo_cuda.platform import DemoCudaSRTPlatform

MIB = 1 << 20


@pytest.fixture
def platform() -> DemoCudaSRTPlatform:
    return DemoCudaSRTPlatform()


def test_total_memory_comes_from_nvml_when_it_can_map_the_device(
    platform: DemoCudaSRTPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    def torch_path(self: object, device_id: int = 0) -> int:
        raise AssertionError("torch must not be asked when NVML answers")

    monkeypatch.setattr(CudaDeviceMixin, "get_device_total_memory", torch_path)
    monkeypatch.setattr(_nvml, "nvml_index", lambda device_id: 3)
    monkeypatch.setattr(_nvml, "memory_info", lambda index: (1 * MIB, 80_000 * MIB))
    assert platform.get_device_total_memory(1) == 80_000 * MIB


@pytest.mark.parametrize("index", [None, 0])
def test_total_memory_falls_back_to_torch(
    platform: DemoCudaSRTPlatform, monkeypatch: pytest.MonkeyPatch, index: int | None
) -> None:
    monkeypatch.setattr(CudaDeviceMixin, "get_device_total_memory", lambda self, d=0: 42)
    monkeypatch.setattr(_nvml, "nvml_index", lambda device_id: index)
    monkeypatch.setattr(_nvml, "memory_info", lambda i: None)
    assert platform.get_device_total_memory() == 42


@needs_gpu
def test_total_memory_agrees_with_torch(platform: DemoCudaSRTPlatform) -> None:
    import torch

    assert platform.get_device_total_memory(0) == torch.cuda.get_device_properties(0).total_memory


@needs_gpu
def test_memory_usage_grows_with_an_allocation(platform: DemoCudaSRTPlatform) -> None:
    import torch

    device = platform.get_device(0)
    platform.set_device(device)
    block = torch.empty(256 * MIB, dtype=torch.uint8, device=device)
    platform.synchronize()
    assert platform.get_current_memory_usage(device) >= 256 * MIB
    free, total = platform.get_available_memory(0)
    assert 0 < free < total
    del block
    platform.empty_cache()


@needs_gpu
def test_descriptive_queries_on_the_real_gpu(platform: DemoCudaSRTPlatform) -> None:
    assert platform.get_device_name(0)
    assert platform.get_device_uuid(0)
    assert platform.get_device(0).type == "cuda"


@needs_gpu
def test_tensors_run_under_the_platforms_inference_mode(platform: DemoCudaSRTPlatform) -> None:
    import torch

    weights = torch.ones(4, 4, device=platform.get_device(0))
    with platform.inference_mode():
        out = weights @ torch.full((4,), 2.0, device=weights.device)
    assert out.cpu().tolist() == [8.0] * 4


@needs_gpu
def test_seed_everything_seeds_the_gpu(platform: DemoCudaSRTPlatform) -> None:
    import torch

    platform.seed_everything(7)
    first = torch.rand(3, device="cuda")
    platform.seed_everything(7)
    assert torch.equal(torch.rand(3, device="cuda"), first)
