"""The built-in CUDA and ROCm platforms; device queries import torch when called."""

from __future__ import annotations

import os
from typing import Any

from cardcage.platforms._torch import require_torch
from cardcage.platforms.cuda import CudaDeviceMixin
from cardcage.platforms.rocm import RocmDeviceMixin

from .interface import Platform

__all__ = ["CudaPlatform", "RocmPlatform"]


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


class CudaPlatform(CudaDeviceMixin, Platform):
    dispatch_key = "CUDA"

    def get_dispatch_key_name(self) -> str:
        return "cuda"

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("cuda", _local_rank())


class RocmPlatform(RocmDeviceMixin, Platform):
    dispatch_key = "CUDA"  # HIP devices register under torch's CUDA key

    def get_dispatch_key_name(self) -> str:
        return "hip"

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("cuda", _local_rank())
