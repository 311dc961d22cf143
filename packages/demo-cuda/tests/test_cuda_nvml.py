"""``cardcage_demo_cuda._nvml``: a cheap driver probe that never raises and maps indices safely."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from gpu_support import NVIDIA_GPU, needs_gpu

from cardcage_demo_cuda import _nvml


def test_without_the_driver_nothing_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_load(*args: object) -> None:
        raise AssertionError("the NVML library must not be loaded without a driver")

    monkeypatch.setattr(_nvml, "driver_present", lambda: False)
    monkeypatch.setattr(_nvml, "_library", no_load)
    assert _nvml.device_count() is None
    assert _nvml.memory_info(0) is None


def test_a_missing_library_means_unknown_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_nvml, "driver_present", lambda: True)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    _nvml._library.cache_clear()
    try:
        assert _nvml.device_count() is None
    finally:
        _nvml._library.cache_clear()


def test_device_nodes_count_only_numbered_gpus(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm", "nvidia-caps"):
        (tmp_path / name).touch()
    assert _nvml.device_nodes(str(tmp_path)) == 3
    assert _nvml.device_nodes(str(tmp_path / "missing")) == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0,1", ["0", "1"]),
        (" 2 , 3 ", ["2", "3"]),
        ("", []),
        ("-1", []),
        ("1,-1,0", ["1"]),
        ("GPU-8a3e,1", ["GPU-8a3e", "1"]),
        ("0,,1", ["0"]),
    ],
)
def test_cuda_visible_devices_is_read_the_way_cuda_reads_it(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", raw)
    assert _nvml.visible_devices() == expected


def test_unset_cuda_visible_devices_shows_everything() -> None:
    assert _nvml.visible_devices() is None


@pytest.mark.parametrize(
    ("gpus", "order", "visible", "device_id", "expected"),
    [
        (1, None, None, 0, 0),  # one GPU: CUDA and NVML agree
        (4, None, None, 1, None),  # CUDA's default order may differ from NVML's
        (4, "PCI_BUS_ID", None, 1, 1),
        (4, "PCI_BUS_ID", "3,2", 0, 3),
        (4, "PCI_BUS_ID", "3,2", 2, None),  # not visible
        (4, "PCI_BUS_ID", "GPU-8a3e", 0, None),  # UUIDs need CUDA to map
        (1, None, None, -1, None),
    ],
)
def test_cuda_indices_map_to_nvml_only_when_unambiguous(
    monkeypatch: pytest.MonkeyPatch,
    gpus: int,
    order: str | None,
    visible: str | None,
    device_id: int,
    expected: int | None,
) -> None:
    monkeypatch.setattr(_nvml, "device_count", lambda: gpus)
    if order is not None:
        monkeypatch.setenv("CUDA_DEVICE_ORDER", order)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _nvml.nvml_index(device_id) == expected


def test_the_real_probe_answers_without_raising() -> None:
    count = _nvml.device_count()
    assert count is None or count >= 0
    assert bool(count) or not NVIDIA_GPU


@needs_gpu
def test_nvml_memory_matches_torch() -> None:
    import torch

    info = _nvml.memory_info(0)
    assert info is not None
    free, total = info
    assert 0 < free <= total
    if _nvml.nvml_index(0) == 0:
        assert total == torch.cuda.get_device_properties(0).total_memory
