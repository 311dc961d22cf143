"""demo_cuda's kernels, in the op table's signatures (``cardcage.platforms.kernels.OPS``).

``DemoCudaSRTPlatform.kernels`` names them by op; a host that selects the platform installs them
into its own ops right after ``init_backend()`` (SGLang: its SRT ``RMSNorm`` and ``SiluAndMul``
through ``register_oot_forward``; vLLM: ``CustomOp.register_oot`` under vLLM's class names).
They receive tensors and scalars only, never a host's op object, so the same functions serve
every host.

Where a CUDA vendor puts its Triton or CUDA kernels: these are written with torch's own fused
ops (``torch.nn.functional.rms_norm`` launches one kernel on the GPU, no ``x**2`` temporary), so
the demo runs on any device torch supports and its tests run on the CPU. A real vendor replaces
each body with its kernel's launch and keeps the signature; the op table says what each must
compute and within which tolerance per dtype.

Imported only where a host installs the kernels, with torch present.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]


def rms_norm(x: Any, weight: Any, eps: float) -> Any:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dimension, in float32."""
    out = torch.nn.functional.rms_norm(
        x.to(torch.float32), (x.shape[-1],), weight.to(torch.float32), eps
    )
    return out.to(x.dtype)


def fused_add_rms_norm(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    """``(rms_norm(x + residual), x + residual)``, the sum taken in float32; inputs untouched."""
    summed = x.to(torch.float32) + residual.to(torch.float32)
    out = torch.nn.functional.rms_norm(summed, (x.shape[-1],), weight.to(torch.float32), eps)
    return out.to(x.dtype), summed.to(x.dtype)


def silu_and_mul(x: Any) -> Any:
    """``silu(x[..., :d]) * x[..., d:]`` into one new tensor, ``d`` half the last dimension."""
    d = x.shape[-1] // 2
    # SiLU's backward reads its input, not its output: multiplying the output in place is safe.
    return torch.nn.functional.silu(x[..., :d]).mul_(x[..., d:])
