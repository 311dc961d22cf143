"""The GPU gate shared by the tests.

Tests that need an NVIDIA GPU carry ``needs_gpu``: they are skipped, with that reason, on
machines without one (cardcage's CI), and run wherever a GPU and a CUDA build of torch are
present.
"""

from __future__ import annotations

import importlib.util

import pytest

from cardcage_demo_cuda import _nvml

__all__ = ["NVIDIA_GPU", "needs_gpu", "without_gpu"]


def _nvidia_gpu_present() -> bool:
    """An NVIDIA GPU the driver reports, and a torch build that can use it."""
    if not _nvml.device_count():
        return False
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


NVIDIA_GPU = _nvidia_gpu_present()
needs_gpu = pytest.mark.skipif(
    not NVIDIA_GPU, reason="needs an NVIDIA GPU and a CUDA build of torch"
)
without_gpu = pytest.mark.skipif(NVIDIA_GPU, reason="checks behaviour on a machine without a GPU")
