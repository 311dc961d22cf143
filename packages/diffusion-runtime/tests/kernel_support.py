"""Kernels in the op table's signatures for ``test_kernels.py``, importable by dotted path (as a
vendor's are: ``kernel_support:rms_norm``); each call is counted by op."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

CALLS: Counter[str] = Counter()


def _normalised(x32: Any, weight: Any, eps: float) -> Any:
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.to(torch.float32)


def rms_norm(x: Any, weight: Any, eps: float) -> Any:
    CALLS["rms_norm"] += 1
    return _normalised(x.to(torch.float32), weight, eps).to(x.dtype)


def fused_add_rms_norm(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    CALLS["fused_add_rms_norm"] += 1
    summed = x.to(torch.float32) + residual.to(torch.float32)
    return _normalised(summed, weight, eps).to(x.dtype), summed.to(x.dtype)


def silu_and_mul(x: Any) -> Any:
    CALLS["silu_and_mul"] += 1
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


def rotary_embedding(
    positions: Any, query: Any, key: Any, cos_sin_cache: Any, head_size: int, is_neox_style: bool
) -> tuple[Any, Any]:
    CALLS["rotary_embedding"] += 1
    return query, key
