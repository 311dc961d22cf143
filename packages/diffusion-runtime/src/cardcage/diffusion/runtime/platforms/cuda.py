"""The built-in CUDA and ROCm platforms; device queries import torch when called."""

from __future__ import annotations

import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

from cardcage.platforms.cuda import CudaDeviceMixin
from cardcage.platforms.rocm import RocmDeviceMixin
from cardcage.platforms.torch_import import require_torch

from .interface import Platform

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FP4_GEMM_BACKEND_ENV", "CudaPlatform", "RocmPlatform"]

logger = logging.getLogger(__name__)

#: The variable SGLang 0.5.23 reads to choose FlashInfer's FP4 GEMM backend (the same here).
FP4_GEMM_BACKEND_ENV = "SGLANG_DIFFUSION_FLASHINFER_FP4_GEMM_BACKEND"

# Spellings the variable accepts -> FlashInfer's backend names.
_FP4_GEMM_BACKENDS = {
    "auto": "auto",
    "cudnn": "cudnn",
    "cutlass": "cutlass",
    "trtllm": "trtllm",
    "flashinfer_cudnn": "cudnn",
    "flashinfer_cutlass": "cutlass",
    "flashinfer_trtllm": "trtllm",
}


def _flashinfer_op(name: str) -> Callable[..., Any] | None:
    """``flashinfer.<name>``, or None when FlashInfer (an optional extra) cannot provide it."""
    try:
        module = importlib.import_module("flashinfer")
    except ImportError:
        return None
    op = getattr(module, name, None)
    return op if callable(op) else None


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


class CudaPlatform(CudaDeviceMixin, Platform):
    dispatch_key = "CUDA"

    def get_dispatch_key_name(self) -> str:
        return "cuda"

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("cuda", _local_rank())

    # FlashInfer is optional: without it, no NVFP4 ops (as in SGLang 0.5.23).
    @classmethod
    def get_modelopt_fp4_quantize_op(cls) -> Callable[..., Any] | None:
        return _flashinfer_op("fp4_quantize")

    @classmethod
    def get_modelopt_flashinfer_fp4_backend(cls) -> str:
        """``$SGLANG_DIFFUSION_FLASHINFER_FP4_GEMM_BACKEND`` (auto, cudnn, cutlass, trtllm, or
        those with a ``flashinfer_`` prefix; any case); unset or unknown: ``trtllm``, or
        ``auto`` on compute capability 12.x, where FlashInfer has no trtllm FP4 kernel."""
        default = "auto" if cls.is_sm120() else "trtllm"
        requested = os.environ.get(FP4_GEMM_BACKEND_ENV)
        if not requested:
            return default
        backend = _FP4_GEMM_BACKENDS.get(requested.strip().lower())
        if backend is None:
            logger.warning(
                "%s=%r is not one of %s; using %r",
                FP4_GEMM_BACKEND_ENV,
                requested,
                ", ".join(sorted(_FP4_GEMM_BACKENDS)),
                default,
            )
            return default
        return backend

    @classmethod
    def get_modelopt_fp4_gemm_op(cls) -> tuple[Callable[..., Any] | None, str | None]:
        mm_fp4 = _flashinfer_op("mm_fp4")
        if mm_fp4 is None:
            if os.environ.get(FP4_GEMM_BACKEND_ENV):
                logger.warning(
                    "%s is set but flashinfer.mm_fp4 cannot be imported: no NVFP4 GEMM",
                    FP4_GEMM_BACKEND_ENV,
                )
            return None, None
        return mm_fp4, cls.get_modelopt_flashinfer_fp4_backend()


class RocmPlatform(RocmDeviceMixin, Platform):
    dispatch_key = "CUDA"  # HIP devices register under torch's CUDA key

    def get_dispatch_key_name(self) -> str:
        return "hip"

    @classmethod
    def is_gfx1151(cls) -> bool:
        """A gfx1151 (Strix Halo) GPU as device 0, from its GCN architecture name."""
        torch = require_torch("is_gfx1151()")
        if not torch.cuda.is_available():
            return False
        arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")
        return str(arch).startswith("gfx1151")

    def get_local_torch_device(self) -> Any:
        return require_torch("get_local_torch_device()").device("cuda", _local_rank())
